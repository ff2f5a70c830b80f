"""CPU time of other ways to compute slot_life_ids, holdings and holding_list (issue 17), each
against the current SQL on one model, alternately, with their rows compared (same multiset).

    python bench/ab_lifechain.py TRACE [--repeat 3] [--threads 2] [--memory 300MB]

The model derives what the chain reads (slot_ev, agent_ids, id_names; then slot_life_ids and
holdings for the later objects); each variant builds a scratch table. One line per variant: the
median and minimum cpu-s (this process's CPU time over all its threads) and whether its rows
equal the current object's. A record of what was tried, none of it in the model: see
bench/results/checks.txt (2026-12-05, helper lifechain)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))

from bench_checks import load  # noqa: E402

from kvtrace.analysis.session import TraceSession  # noqa: E402
from kvtrace.model.registry import registry, table_query  # noqa: E402

# slot_life_ids' input (its FROM), to time the windows apart from the slot_ev scan
LIFE_INPUT = """SELECT e.sidx, e.seq, a.aid, e.kind = 'alloc' AS alloc, e.request, e.pool, e.slot, e.page, e.shared,
       e.sk, e.hk FROM slot_ev e LEFT JOIN agent_ids a ON a.agent = e.agent WHERE e.kind IN ('alloc', 'free')"""
_SUM = "sum(CASE WHEN alloc THEN 1 ELSE -1 END)"
LIFE_SQL = {
    # one lead instead of two (free_seq: the next row's seq where it is a free)
    "one lead": f"""SELECT sidx, seq, aid, alloc, request, pool, slot, page, shared, sk, hk,
        {_SUM} OVER (PARTITION BY sk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS cnt_after,
        {_SUM} OVER (PARTITION BY hk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS req_cnt_after,
        lead(CASE WHEN NOT alloc THEN seq END) OVER (PARTITION BY hk ORDER BY seq) AS free_seq FROM ({LIFE_INPUT})""",
    # hk's windows partitioned by (sk, hk): does DuckDB share the sk partitioning? (no)
    "sk,hk partition": f"""SELECT sidx, seq, aid, alloc, request, pool, slot, page, shared, sk, hk,
        {_SUM} OVER (PARTITION BY sk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS cnt_after,
        {_SUM} OVER (PARTITION BY sk, hk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS req_cnt_after,
        lead(CASE WHEN NOT alloc THEN seq END) OVER (PARTITION BY sk, hk ORDER BY seq) AS free_seq
        FROM ({LIFE_INPUT})""",
}
_W = "PARTITION BY sk ORDER BY seq"
HOLD_SQL = {
    # gen without its row_number window: the non-shared starts, plus each slot's first start
    "gen by min": None,   # made from the current SQL below
    # release and generation as windows over slot_life_ids' one sort by (sk, seq), no ASOF join
    "one window": f"""WITH w AS (
        SELECT *,
          min(CASE WHEN NOT alloc AND cnt_after <= 0 THEN seq END) OVER ({_W} RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS release_seq,
          max(CASE WHEN alloc AND cnt_after = 1 AND NOT coalesce(shared, false) THEN seq END) OVER ({_W} RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS g1,
          min(CASE WHEN alloc AND cnt_after = 1 THEN seq END) OVER ({_W} RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS first
        FROM slot_life_ids)
      SELECT n.shards[sidx + 1] AS shard, sidx, n.agents[aid] AS agent, pool, slot, request, sk, hk, seq AS alloc_seq,
             page, shared, free_seq, release_seq, greatest(g1, CASE WHEN first <= seq THEN first END) AS gen_seq
      FROM w, id_names n WHERE alloc""",
}
_GEN_OLD = """    SELECT sk, seq AS gen_seq FROM (
        SELECT sk, seq, shared, row_number() OVER (PARTITION BY sk ORDER BY seq) AS k
        FROM slot_life_ids WHERE alloc AND cnt_after = 1)
    WHERE NOT coalesce(shared, false) OR k = 1"""
_GEN_NEW = """    SELECT sk, seq AS gen_seq FROM slot_life_ids WHERE alloc AND cnt_after = 1 AND NOT coalesce(shared, false)
    UNION ALL SELECT sk, min(seq) FROM slot_life_ids WHERE alloc AND cnt_after = 1 GROUP BY sk"""
_HL = "list_sort(list({'a': alloc_seq, 'f': free_seq, 'r': release_seq, 'g': gen_seq, 'p': page})) AS hl"
LIST_SQL = {
    # one 8-byte group key (changes the meaning if two holdings' hk collide: not kept)
    "group by hk": f"""SELECT any_value(shard) AS shard, any_value(agent) AS agent, any_value(pool) AS pool,
        any_value(slot) AS slot, any_value(request) AS request, hk, {_HL} FROM holdings GROUP BY hk""",
    "group by sidx": f"""SELECT any_value(shard) AS shard, agent, pool, slot, request, hk, {_HL}
        FROM holdings GROUP BY sidx, agent, pool, slot, request, hk""",
}


def _starts(k: np.ndarray) -> np.ndarray:
    s = np.empty(len(k), bool)
    s[:1] = True
    np.not_equal(k[1:], k[:-1], out=s[1:])
    return s


def _run_sum(d: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running sums of d restarting where starts is set."""
    cs = np.cumsum(d)
    idx = np.flatnonzero(starts)
    return cs - np.repeat(cs[idx] - d[idx], np.diff(np.append(idx, len(d))))


def life_numpy(con, name: str) -> None:
    """slot_life_ids' three window columns by two numpy sorts instead of DuckDB's two window
    sorts (the input fetched as Arrow, the result created from Arrow)."""
    tb = con.sql(LIFE_INPUT).to_arrow_table()
    sk, hk, seq = (tb.column(c).to_numpy() for c in ("sk", "hk", "seq"))
    al = tb.column("alloc").to_numpy(zero_copy_only=False)
    d = np.where(al, 1, -1).astype(np.int64)
    n = len(d)
    o = np.lexsort((seq, hk))
    st = _starts(hk[o])
    req, fs, ok = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, bool)
    req[o] = _run_sum(d[o], st)
    nxt_free = np.zeros(n, bool)
    nxt_free[:-1] = ~st[1:] & ~al[o][1:]
    ok[o] = nxt_free
    fs[o[:-1]] = seq[o][1:]
    fs[o[-1:]] = 0
    o = np.lexsort((seq, sk))
    cnt = np.empty(n, np.int64)
    cnt[o] = _run_sum(d[o], _starts(sk[o]))
    tb = (tb.append_column("cnt_after", pa.array(cnt)).append_column("req_cnt_after", pa.array(req))
          .append_column("free_seq", pa.array(fs, mask=~ok)))
    con.from_arrow(tb).create(name)


def _timed(con, build) -> float:
    con.execute("DROP TABLE IF EXISTS ab_x")
    c = time.process_time()
    build()
    return time.process_time() - c


def _same(con, a: str, b: str) -> bool:
    q = "SELECT count(*) FROM (SELECT * FROM {} EXCEPT ALL SELECT * FROM {})"   # our own table names
    return con.execute(q.format(a, b)).fetchone()[0] == 0 and con.execute(q.format(b, a)).fetchone()[0] == 0


def compare(con, obj: str, variants: dict, repeat: int) -> None:
    cur = table_query(registry()[obj])
    builds = {"current": lambda: con.execute(f"CREATE TABLE ab_x AS {cur}")}
    for k, q in variants.items():
        builds[k] = (lambda q=q: con.execute(f"CREATE TABLE ab_x AS {q}")) if isinstance(q, str) else (lambda f=q: f(con, "ab_x"))
    times = {k: [] for k in builds}
    for _ in range(repeat):
        for k, b in builds.items():
            times[k].append(_timed(con, b))
    con.execute("DROP TABLE IF EXISTS ab_cur")
    con.execute(f"CREATE TABLE ab_cur AS {cur}")
    for k, b in builds.items():
        _timed(con, b)
        same = _same(con, "ab_x", "ab_cur")
        print(f"{obj:<14} {k:<16} median {statistics.median(times[k]):5.2f} min {min(times[k]):5.2f} cpu-s  "
              f"rows {'same' if same else 'DIFFERENT'}  (load {load()})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default=None)
    a = ap.parse_args()
    kw = {"memory_limit": a.memory} if a.memory else {}
    with TraceSession(a.trace, threads=a.threads, keep_derived=False, **kw) as s:
        s.derive(["slot_ev", "agent_ids", "id_names"])
        c = time.process_time()
        s.con.execute(f"CREATE TEMP TABLE ab_in AS {LIFE_INPUT}")
        print(f"slot_life_ids' input alone (slot_ev scan, agent join): {time.process_time() - c:.2f} cpu-s")
        s.con.execute("DROP TABLE ab_in")
        compare(s.con, "slot_life_ids", {**LIFE_SQL, "numpy windows": life_numpy}, a.repeat)
        s.derive(["slot_life_ids"])
        hold = table_query(registry()["holdings"])
        assert _GEN_OLD in hold, "holdings.sql changed: update _GEN_OLD"
        compare(s.con, "holdings", {**HOLD_SQL, "gen by min": hold.replace(_GEN_OLD, _GEN_NEW)}, a.repeat)
        s.derive(["holdings"])
        compare(s.con, "holding_list", LIST_SQL, a.repeat)


if __name__ == "__main__":
    main()
