"""Do two recordings hold the same rows? (old vs new recorder code on the same workload)

    .venv/bin/python bench/ab_rows.py A.kvtrace B.kvtrace [--unordered]

Reads every shard's four tables (events, descs, dlists, layouts: the recorded streams, not
the derived views) and compares them row by row after replacing what differs between two
runs of the same program: times (``t_ns`` dropped), addresses (``addr``, ``src_addr``,
``dst_addr``, pointers in control messages) as (registered region, offset), hex handles in
``detail`` by their rank of first appearance, random agent names (UUIDs), ports and
process ids by their rank; shards named by process id are matched by what they did. ``--unordered``: compare each table as a
multiset with ``seq`` and ``thread`` dropped (a multi-threaded engine such as SGLang
interleaves its threads differently in every run); ``xfer`` ids are then left out too
(numbered in posting order). Exit 0 when every table is equal, 1 otherwise (first
differences printed). A seeded reference-engine run is deterministic: compare it ordered.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import glob
import os
import re
import sys

import pyarrow.ipc as ipc

TABLES = ("events", "descs", "dlists", "layouts")
ADDR_COLS = ("addr", "src_addr", "dst_addr")
_HANDLE = re.compile(r"0x[0-9a-f]+")
_PID = re.compile(r"-(\d{3,})\b")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PORT = re.compile(r"(?<=\d):(\d{4,5})\b")   # host:port of a control-message peer (a free port per run)
_PTR = re.compile(rb"\b\d{11,}\b")   # raw pointers inside control messages (JSON)


def _rank(mapping: dict, value):
    if value is None:
        return None
    return mapping.setdefault(value, len(mapping))


def _tables(shard: str) -> dict[str, list[dict]]:
    out = {}
    for t in TABLES:
        path = os.path.join(shard, t + ".arrows")
        if os.path.exists(path):
            with ipc.open_stream(path) as r:
                out[t] = r.read_all().to_pylist()
    return out


def load(trace: str, unordered: bool) -> dict[str, list]:
    shards = sorted(d for d in glob.glob(os.path.join(trace, "*")) if os.path.isdir(d)
                    and os.path.exists(os.path.join(d, "events.arrows")))
    data = {s: _tables(s) for s in shards}
    # shards in a run-independent order: named ones by name; ones named by process id
    # (record -- CMD) by what they did (postings first, then size)
    def order(s):
        ev = data[s].get("events", [])
        return (bool(_PID.search(os.path.basename(s))), -sum(r["kind"] == "xfer_post" for r in ev), -len(ev),
                os.path.basename(s))
    shards.sort(key=order)
    # an address as (registered region, offset): regions in shard and layout order
    regions = sorted({(r["addr"], r["nbytes"]) for s in shards for r in data[s].get("layouts", [])}
                     | {(r["addr"], r["nbytes"]) for s in shards for r in data[s].get("events", [])
                        if r["kind"] == "register"})
    base_rank: dict = {}
    for s in shards:
        for r in data[s].get("layouts", []) + [r for r in data[s].get("events", []) if r["kind"] == "register"]:
            _rank(base_rank, r["addr"])
    starts = [a for a, _ in regions]
    other: dict = {}

    def addr(a):
        if a is None:
            return None
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and a < regions[i][0] + regions[i][1]:
            return f"R{base_rank[regions[i][0]]}+{a - regions[i][0]}"
        return f"X{_rank(other, a)}"
    names: dict = {}

    def name(text):
        if not isinstance(text, str):
            return text
        text = _UUID.sub(lambda m: f"U{_rank(names, m.group(0))}", text)
        text = _PORT.sub(lambda m: f":PORT{_rank(names, m.group(1))}", text)
        return _PID.sub(lambda m: f"-P{_rank(names, m.group(1))}", text)

    out = {}
    for i, shard in enumerate(shards):
        key = os.path.basename(shard) if not _PID.search(os.path.basename(shard)) else f"shard{i}"
        for t, rows in data[shard].items():
            handles: dict = {}
            norm = []
            for row in rows:
                row.pop("t_ns", None)
                if unordered:
                    for c in ("seq", "thread", "xfer", "from_seq"):
                        row.pop(c, None)
                for c in ADDR_COLS:
                    if c in row:
                        row[c] = addr(row[c])
                for c in ("agent", "peer", "src_agent", "dst_agent", "remote_agent"):
                    if c in row:
                        row[c] = name(row[c])
                if isinstance(row.get("msg"), bytes):
                    m = _PTR.sub(lambda g: addr(int(g.group(0))).encode(), row["msg"])
                    row["msg"] = name(m.decode("utf-8", "replace"))
                if isinstance(row.get("detail"), str):
                    row["detail"] = name(_HANDLE.sub(lambda m: f"H{_rank(handles, m.group(0))}", row["detail"]))
                norm.append(tuple(sorted((k, repr(v)) for k, v in row.items())))
            out[f"{key}/{t}"] = sorted(norm) if unordered else norm
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--unordered", action="store_true")
    a = p.parse_args(argv)
    A, B = load(a.a, a.unordered), load(a.b, a.unordered)
    bad = 0
    for k in sorted(set(A) | set(B)):
        x, y = A.get(k), B.get(k)
        if x == y:
            print(f"  {k}: {len(x)} rows equal")
            continue
        bad += 1
        if x is None or y is None:
            print(f"  {k}: only in {'B' if x is None else 'A'}")
            continue
        cx, cy = collections.Counter(x), collections.Counter(y)
        print(f"  {k}: DIFFER ({len(x)} vs {len(y)} rows); only in A: {sum((cx - cy).values())}, only in B: "
              f"{sum((cy - cx).values())}")
        for r in list((cx - cy).elements())[:2]:
            print("    A:", dict(r))
        for r in list((cy - cx).elements())[:2]:
            print("    B:", dict(r))
    if not A:
        print("no shards found", file=sys.stderr)
        return 2
    print("equal" if not bad else f"{bad} table(s) differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
