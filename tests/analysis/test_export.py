"""Exports checked structurally: every flow has both ends, per-track times are
monotonic, the protobuf parses back with the perfetto package's protos, Parquet
round-trips to the trace's rows, and bad input gets one line and a non-zero exit."""
from __future__ import annotations

import bisect
import collections
import json

import pytest

from kvtrace.analysis.export_chrome import write_chrome_json
from kvtrace.analysis.export_model import build_timeline
from kvtrace.analysis.export_perfetto import write_perfetto
from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main
from kvtrace.tracer.builder import TraceBuilder
from kvtrace.tracer.reader import open_trace


def pd_trace(path, n_requests=3, abort_last=True, early_free=False):
    """Prefill pushes two chunks per request into decode; requests overlap in time;
    the last request is aborted by decode before its data arrives. ``early_free``:
    prefill frees r0's kv source slots before its transfers complete (a hazard)."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=16)
        side.pool("index_k", layers=1, slot_bytes=32, num_slots=8, dtype="fp8_e4m3+scales")
    reqs = [f"r{i}" for i in range(n_requests)]
    posts = []
    for i, r in enumerate(reqs):
        s = [2 * i, 2 * i + 1]
        d.req_start(r)
        d.alloc(r, "kv", s)
        d.alloc(r, "index_k", [i])
        d.msg_send(p, f"dst-{r}", request=r)
        p.msg_recv(d, f"dst-{r}", request=r)
        p.req_start(r)
        p.alloc(r, "kv", s)
        p.alloc(r, "index_k", [i])
        p.write(r, "kv", s)
        p.write(r, "index_k", [i])
        x0 = p.post(r, d, src=("kv", s[:1]), dst=("kv", s[:1]), msg=f"{r}_kv_0_0".encode(), deliver="later")
        x1 = p.post(r, d, src=("kv", s[1:]), dst=("kv", s[1:]), msg=f"{r}_kv_1_1".encode(), deliver="later")
        x2 = p.post(r, d, src=("index_k", [i]), dst=("index_k", [i]), msg=f"{r}_state".encode(), deliver="later")
        posts.append((r, s, (x0, x1, x2)))
    if early_free:
        p.free("r0", "kv", posts[0][1])
    for k, (r, s, xs) in enumerate(posts):
        last = abort_last and k == len(posts) - 1
        if last:
            d.req_abort(r)
            d.free(r, "kv", s)
            d.free(r, "index_k", [k])
        for x in xs:
            x.deliver()
            p.done(x)
        if not last:
            for tag in (f"{r}_kv_0_0", f"{r}_kv_1_1", f"{r}_state"):
                d.notif_recv(p, tag.encode())
            d.read(r, "kv", s)
            d.read(r, "index_k", [k])
            d.free(r, "kv", s)
            d.free(r, "index_k", [k])
            d.req_done(r)
        if not (early_free and k == 0):
            p.free(r, "kv", s)
        p.free(r, "index_k", [k])
        p.req_done(r)
    p.notif_send(d, b"bye")
    d.notif_recv(p, b"bye")
    return b.close()


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return pd_trace(str(tmp_path_factory.mktemp("exp") / "pd.kvtrace"))


@pytest.fixture(scope="module")
def timeline(trace):
    with TraceSession(trace) as s:
        return build_timeline(s)


def test_builder_trace_is_valid(trace, validate_trace):
    validate_trace(trace)


def test_timeline_flows_cover_notifications_messages_and_reads(timeline):
    kinds = collections.Counter((timeline.slices[a].cat, timeline.slices[b].cat) for a, b in timeline.flows.values())
    # 2 completed requests x 3 posts -> notif_recv; 3 msgs; bye; reads: 2 reqs x (2 kv layers + 1 index_k)
    assert kinds[("xfer", "notif_recv")] == 6
    assert kinds[("msg_send", "msg_recv")] == 3
    assert kinds[("notif_send", "notif_recv")] == 1
    assert kinds[("xfer", "read")] == 2 * (2 + 1) + 2 * 2   # kv: 2 chunks x 2 layers, index_k: 1
    # the aborted request's posts have no notification flow: no arrow points nowhere
    aborted = [i for i, s in enumerate(timeline.slices) if s.cat == "xfer" and s.args["request"] == "r2"]
    assert aborted and all(not timeline.slices[i].flows_out for i in aborted)


def check_chrome(doc: dict) -> dict:
    """Structural checks of a Chrome JSON export; returns counts for scenario asserts."""
    ev = doc["traceEvents"]
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    # every flow id has exactly one start and one end, each inside a slice of its thread
    ends = collections.defaultdict(dict)
    for e in ev:
        if e["ph"] in ("s", "f"):
            assert e["ph"] not in ends[e["id"]]
            ends[e["id"]][e["ph"]] = e
    assert all(set(v) == {"s", "f"} for v in ends.values())
    xs = collections.defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            xs[(e["pid"], e["tid"])].append(e)
    # per-track timestamps are monotonic; transfer lanes (tid 100..999) never overlap
    for (pid, tid), lst in xs.items():
        ts = [x["ts"] for x in lst]
        assert ts == sorted(ts)
        if 100 <= tid < 1000:
            assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-9 for a, b in zip(lst, lst[1:]))
    for v in ends.values():
        for e in v.values():
            lst = xs[(e["pid"], e["tid"])]
            k = bisect.bisect_right([x["ts"] for x in lst], e["ts"])
            assert any(x["ts"] <= e["ts"] <= x["ts"] + x["dur"] for x in lst[max(0, k - 64):k]), e
    b = collections.Counter(e["id"] for e in ev if e["ph"] == "b")
    assert b == collections.Counter(e["id"] for e in ev if e["ph"] == "e")   # async pairs
    counters = collections.defaultdict(list)
    for e in ev:
        if e["ph"] == "C":
            counters[(e["pid"], e["name"])].append(e["args"]["occupied"])
    return {"procs": procs, "flows": len(ends), "requests": len(b), "counters": counters}


def check_perfetto(path) -> dict:
    """Parse a Perfetto export back with the perfetto package's protos and check it."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    t = Trace()
    t.ParseFromString(open(path, "rb").read())
    described = {p.track_descriptor.uuid: p.track_descriptor for p in t.packet if p.HasField("track_descriptor")}
    procs = {d.process.process_name for d in described.values() if d.HasField("process")}
    started, ended = collections.Counter(), collections.Counter()
    last_ts, depth, begins = {}, collections.Counter(), collections.Counter()
    for p in t.packet:
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        assert te.track_uuid in described
        assert p.timestamp >= last_ts.get(te.track_uuid, 0), "timestamps go back on a track"
        last_ts[te.track_uuid] = p.timestamp
        started.update(te.flow_ids)
        ended.update(te.terminating_flow_ids)
        if te.type == TrackEvent.TYPE_SLICE_BEGIN:
            depth[te.track_uuid] += 1
            begins[te.categories[0]] += 1
        elif te.type == TrackEvent.TYPE_SLICE_END:
            depth[te.track_uuid] -= 1
            assert depth[te.track_uuid] >= 0
    # every flow has both ends, each exactly once; every slice is closed
    assert started == ended and all(c == 1 for c in started.values())
    assert all(v == 0 for v in depth.values())
    return {"packets": len(t.packet), "procs": procs, "flows": len(started), "begins": begins}


def test_chrome_json_structure(timeline, tmp_path):
    out = tmp_path / "t.json"
    write_chrome_json(timeline, str(out))
    got = check_chrome(json.loads(out.read_text()))
    assert got["procs"] == {"prefill", "decode"}
    assert got["flows"] == len(timeline.flows) == 20
    assert got["requests"] == 6   # one async slice per request per side
    # slot occupancy counters per pool and agent, back to zero at the end
    assert len(got["counters"]) == 4 and all(v[-1] == 0 and max(v) > 0 for v in got["counters"].values())


def test_perfetto_protobuf_parses_back(timeline, tmp_path):
    out = tmp_path / "t.pftrace"
    n = write_perfetto(timeline, str(out))
    got = check_perfetto(out)
    assert got["packets"] == n and got["procs"] == {"prefill", "decode"}
    assert got["flows"] == len(timeline.flows) == 20
    assert got["begins"]["xfer"] == 9 and got["begins"]["request"] == 6


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_engine_trace_exports(tmp_path):
    """A reference-engine recording (prepped lists, chunked sends, aborts) exports with
    every completed notifying transfer pointing at its notification, and reads reached."""
    from kvtrace.tracer.engine.cli import record
    from kvtrace.tracer.engine.workload import load

    tr = str(tmp_path / "e.kvtrace")
    record(load("small"), [], tr)
    with TraceSession(tr) as s:
        tl = build_timeline(s)
        notifying = s.query("SELECT count(*) AS n FROM events WHERE kind = 'notif_recv'").column("n")[0].as_py()
    pairs = collections.Counter((tl.slices[a].cat, tl.slices[b].cat) for a, b in tl.flows.values())
    assert pairs[("xfer", "notif_recv")] + pairs[("notif_send", "notif_recv")] == notifying > 0
    assert pairs[("xfer", "read")] > 0 and pairs[("msg_send", "msg_recv")] > 0
    write_chrome_json(tl, str(tmp_path / "e.json"))
    assert check_chrome(json.loads((tmp_path / "e.json").read_text()))["flows"] == len(tl.flows)
    write_perfetto(tl, str(tmp_path / "e.pftrace"))
    assert check_perfetto(tmp_path / "e.pftrace")["flows"] == len(tl.flows)


def test_parquet_round_trips_with_duckdb_and_pyarrow(trace, tmp_path):
    import duckdb
    import pyarrow.dataset as ds

    out = tmp_path / "pq"
    assert main(["export", trace, "--format", "parquet", "-o", str(out)]) == 0
    tr = open_trace(trace)
    for t in ("events", "descs", "dlists", "layouts"):
        want = tr.table(t)
        keys = [("shard", "ascending")] + [(c, "ascending") for c in want.column_names[1:3]
                                           if not str(want.schema.field(c).type).startswith("list")]
        want = want.sort_by(keys)
        got = duckdb.sql(f"SELECT * FROM read_parquet('{out}/{t}/*/*.parquet', hive_partitioning=true)").to_arrow_table()
        got = got.select(want.column_names).sort_by(keys)
        assert got.to_pylist() == want.to_pylist(), t
        dset = ds.dataset(str(out / t), format="parquet", partitioning="hive").to_table()
        assert dset.num_rows == want.num_rows
        assert set(dset.column("shard").to_pylist()) <= {"prefill", "decode"}
    assert json.loads((out / "manifest.json").read_text())["export"]["rows"]["events"] == tr.table("events").num_rows


def test_parquet_readable_by_polars(trace, tmp_path):
    pl = pytest.importorskip("polars")
    out = tmp_path / "pq"
    assert main(["export", trace, "-f", "parquet", "-o", str(out)]) == 0
    df = pl.read_parquet(str(out / "events" / "**" / "*.parquet"), hive_partitioning=True)
    assert df.height == open_trace(trace).table("events").num_rows
    assert set(df["shard"].unique().to_list()) == {"prefill", "decode"}


def test_findings_become_instants_with_their_explanation(tmp_path):
    """A finding is an instant on its agent's findings track, in both formats; the
    clean twin of the trace has none."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    # no abort here: decode freeing an aborted request's slots under in-flight writes is
    # itself a hazard (write_after_free), so the twins differ only in the early free
    bad = pd_trace(str(tmp_path / "bad.kvtrace"), abort_last=False, early_free=True)
    with TraceSession(bad) as s:
        expected = {f.check for f in s.findings()}
    assert "src_free_before_done" in expected
    for tr, want in ((bad, expected), (pd_trace(str(tmp_path / "clean.kvtrace"), abort_last=False), set())):
        assert main(["export", tr, "-f", "chrome-json", "-o", str(tmp_path / "t.json")]) == 0
        ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
        inst = [e for e in ev if e["ph"] == "i" and e["cat"] == "finding"]
        assert {e["args"]["check"] for e in inst} == want
        assert all(e["args"]["message"] for e in inst)
        assert main(["export", tr, "-o", str(tmp_path / "t.pftrace")]) == 0
        t = Trace()
        t.ParseFromString((tmp_path / "t.pftrace").read_bytes())
        got = set()
        for p in t.packet:
            te = p.track_event
            if p.HasField("track_event") and te.type == TrackEvent.TYPE_INSTANT and "finding" in te.categories:
                ann = {a.name: a.string_value for a in te.debug_annotations}
                assert ann["message"]
                got.add(ann["check"])
        assert got == want


@pytest.mark.parametrize("argv_tail, needle", [
    (["--format", "svg"], "unknown format"),
    (["-o", "/nonexistent-dir/x.json", "-f", "chrome-json"], "does not exist"),
    (["-o", "{trace}/manifest.json/x.pftrace"], "does not exist"),
    (["-o", "{tmp}", "-f", "perfetto"], "is a directory"),
    (["-o", "/proc/kvtrace-export-test.json", "-f", "chrome-json"], "cannot write"),   # unwritable even as root
    (["-o", "/proc/kvtrace-export-test", "-f", "parquet"], "cannot create"),
])
def test_bad_output_or_format_one_line(trace, tmp_path, capsys, argv_tail, needle):
    argv = ["export", trace] + [a.format(trace=trace, tmp=tmp_path) for a in argv_tail]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_missing_trace_one_line(tmp_path, capsys):
    assert main(["export", str(tmp_path / "nope.kvtrace"), "-o", str(tmp_path / "x.pftrace")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no such trace" in err and len(err.splitlines()) == 1


def test_parquet_refuses_non_empty_dir(trace, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    assert main(["export", trace, "-f", "parquet", "-o", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
