"""A trace is input people share: hostile traces are refused or neutralised.

Path traversal and symbolic links in a trace directory, HTML/script and Rich markup in
request names, agent names and messages, SQL in the TUI's filter text and in `kvtrace
sql`. Each hostile case has a plain twin that works, so the refusals are not blanket.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from kvtrace.tracer import TraceError, open_trace
from kvtrace.tracer.builder import TraceBuilder

KVTRACE = [sys.executable, "-m", "kvtrace"]
SCRIPT = "<script>alert('x')</script>"
MARKUP = "[bold red]boom[/][link=file:///etc/passwd]x[/link][/]"
HOSTILE_REQ = f"r1{SCRIPT}{MARKUP}"


def _cli(*args, timeout=120):
    return subprocess.run(KVTRACE + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def _one_line_refusal(r):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


def build_hostile(path, req: str = HOSTILE_REQ, agent: str = f"decode{MARKUP}",
                  shard: str = "decode[bold red]") -> str:
    """An early-free trace whose request names, one agent and shard name and messages are hostile."""
    b = TraceBuilder(str(path))
    p, d = b.agent("prefill", shard="prefill"), b.agent(agent, shard=shard)
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    p.req_start(req); d.req_start(req)
    d.alloc(req, "kv", [5, 6]); p.alloc(req, "kv", [1, 2]); p.write(req, "kv", [1, 2])
    msg = f"{req}_kv_0_1_0{SCRIPT}".encode()
    x = p.post(req, d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=msg, deliver="later")
    p.free(req, "kv", [1, 2])                     # early free: a finding that names the request
    p.alloc("r2", "kv", [1, 2]); p.write("r2", "kv", [1, 2])
    x.deliver()
    d.notif_recv(p, msg, request=req); p.done(x, req)
    d.read(req, "kv", [5, 6]); d.free(req, "kv", [5, 6])
    return b.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return build_hostile(tmp_path_factory.mktemp("hostile") / "h.kvtrace")


# ----------------------------------------------------------------------------- paths
def _small(path) -> str:
    return build_hostile(path, req="r1", agent="decode", shard="decode")


@pytest.mark.parametrize("name", ["../../outside", "/etc", "a/../../b", "..", ".hidden", "_index", "x\x00y", 7])
def test_manifest_shard_names_are_confined_to_the_trace(tmp_path, name):
    path = _small(tmp_path / "t.kvtrace")
    open_trace(path)                                            # the twin opens
    man_path = os.path.join(path, "manifest.json")
    with open(man_path) as f:
        man = json.load(f)
    man["shards"].append(name)
    with open(man_path, "w") as f:
        json.dump(man, f)
    with pytest.raises(TraceError, match="shard"):
        open_trace(path)
    assert "shard" in _one_line_refusal(_cli("info", path))


def test_symlinked_shard_folder_is_not_followed(tmp_path):
    outside = _small(tmp_path / "outside.kvtrace")
    path = _small(tmp_path / "t.kvtrace")
    os.symlink(os.path.join(outside, "decode"), os.path.join(path, "elsewhere"))
    t = open_trace(path)
    assert {s.name for s in t.shards} == {"prefill", "decode"}  # the link is no shard


@pytest.mark.parametrize("target", ["manifest.json", "decode/events.arrows", "decode/shard.json"])
def test_symlinked_trace_files_are_refused(tmp_path, target):
    outside = _small(tmp_path / "outside.kvtrace")
    path = _small(tmp_path / "t.kvtrace")
    victim = os.path.join(path, target)
    os.replace(victim, victim + ".orig")
    os.symlink(os.path.join(outside, target), victim)
    assert "symbolic link" in _one_line_refusal(_cli("check", path))


# ----------------------------------------------------------------------------- output
def test_html_report_escapes_trace_strings(tmp_path, hostile):
    out = tmp_path / "r.html"
    r = _cli("report", hostile, "-o", out)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    text = out.read_text()
    assert "<script>" not in text                               # no markup from the trace survives
    assert "&lt;script&gt;" in text and "r1&lt;script&gt;" in text   # ... it is shown as text


@pytest.mark.parametrize("cmd", [["check"], ["info"], ["check", "--format", "csv"],
                                 ["sql", "select request, msg from events where request is not null"]])
def test_terminal_output_shows_markup_as_text(hostile, cmd):
    r = _cli(cmd[0], hostile, *cmd[1:])
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    # not a terminal: Rich prints no styles, so markup read as markup would vanish
    assert ("[bold red]" if cmd == ["info"] else "[/link]") in r.stdout, r.stdout


# ----------------------------------------------------------------------------- sql
@pytest.mark.parametrize("query,why", [
    ("select * from read_csv('/etc/passwd')", "disabled by configuration"),
    ("select 1; drop view events", "one query at a time"),
    ("copy events to '/tmp/kvtrace-leak.csv'", "read-only"),
    ("attach '/tmp/kvtrace-x.db'", "read-only"),
    ("SET enable_external_access = true", "read-only"),
    ("select * from read_parquet('/etc/../etc/passwd')", "disabled by configuration"),
])
def test_sql_is_read_only_and_sandboxed(hostile, query, why):
    assert why in _one_line_refusal(_cli("sql", hostile, query))
    assert not os.path.exists("/tmp/kvtrace-leak.csv")


def test_sql_csv_of_list_columns_and_query_after_options(hostile):
    r = _cli("sql", hostile, "--format", "csv", "select seq, slots, checksums, msg from events order by seq")
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()
    assert rows[0] == "seq,slots,checksums,msg" and any('"[5, 6]"' in row for row in rows)


# ----------------------------------------------------------------------------- descriptor lists
def _rewrite_descs(trace: str, shard: str, change) -> None:
    """Rewrite one shard's descs stream with ``change(columns: dict of lists)`` applied."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    path = os.path.join(trace, shard, "descs.arrows")
    with pa.memory_map(path) as src:
        t = ipc.open_stream(src).read_all()
    cols = {n: t.column(n).to_pylist() for n in t.schema.names}
    change(cols)
    t = pa.table({n: pa.array(v, t.schema.field(n).type) for n, v in cols.items()}, schema=t.schema)
    with ipc.new_stream(path, t.schema) as w:
        w.write_table(t)


def test_descriptor_index_without_its_list_is_refused(tmp_path):
    """A dst_idx with no dst_dlist (one flipped bit in a real trace, found by the fuzzer:
    replay's writer then failed on a None index) names no entry of any list: every command
    refuses the trace in one line, and validate reports it."""
    trace = _small(tmp_path / "t.kvtrace")

    def stray_index(c):
        c["dst_idx"][0] = 3
    _rewrite_descs(trace, "prefill", stray_index)
    for cmd in (["check", trace], ["info", trace],
                ["replay", trace, "--scheduler", "random", "--seed", "1", "-o", tmp_path / "r.kvtrace"]):
        assert "hold one of dst_idx and dst_dlist without the other" in _one_line_refusal(_cli(*cmd))
    r = _cli("validate", trace)
    assert r.returncode != 0 and "hold one of dst_idx and dst_dlist without the other" in r.stdout + r.stderr


def test_posting_that_mixes_listed_and_plain_descriptors_is_refused_by_replay(tmp_path):
    """Each row consistent, but one posting's descriptors half from a prepared list and half
    not: no NIXL call posts that, and replay's output (one list per posting) cannot say it:
    replay refuses in one line naming the transfer; the checks read each row as it is."""
    trace = _small(tmp_path / "t.kvtrace")

    def half_listed(c):
        c["dst_dlist"][0], c["dst_idx"][0] = 9, 0
    _rewrite_descs(trace, "prefill", half_listed)
    out = _one_line_refusal(_cli("replay", trace, "--scheduler", "random", "--seed", "1", "-o", tmp_path / "r.kvtrace"))
    assert "mixes descriptors of different dst lists" in out
    assert _cli("check", trace).returncode in (0, 1)


def _one_huge_descriptor(path, length: int) -> str:
    """One transfer of one descriptor ``length`` bytes long, its post's bytes agreeing."""
    b = TraceBuilder(str(path))
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    p.req_start("r1"); d.req_start("r1")
    d.alloc("r1", "kv", [5]); p.alloc("r1", "kv", [1]); p.write("r1", "kv", [1])
    x = p.post("r1", d, descs=[(p.pools["kv"].addr(0, 1), d.pools["kv"].addr(0, 5), length)], msg=b"m")
    d.notif_recv(p, b"m", request="r1"); p.done(x, "r1"); p.release(x)
    b.close()
    return str(path)


def test_a_descriptor_whose_end_passes_2_64_is_refused_in_one_line(tmp_path):
    """Address plus length past 2^64, with the post's bytes saying the same (so nothing
    marks the rows as damaged): the analysis cannot compute the end and says so in one
    line; the fuzz corpus's case of it now has rows the post disagrees with, and is cut
    instead. Its twin of a plain length checks."""
    err = _one_line_refusal(_cli("check", _one_huge_descriptor(tmp_path / "huge.kvtrace", 2**64 - 1)))
    assert "out of range for the analysis" in err and "2^64" in err
    r = _cli("check", _one_huge_descriptor(tmp_path / "plain.kvtrace", 64))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
