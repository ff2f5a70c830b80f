"""The benchmark's premise: the synthetic generator writes a valid, clean trace (zero
findings) and its planted early-free twin is found, on the requests it planted."""
from __future__ import annotations

from kvtrace.analysis.session import TraceSession


def test_synthetic_clean_and_planted(tmp_path, validate_trace, gen_synthetic):
    gen = gen_synthetic
    clean, bug = str(tmp_path / "c.kvtrace"), str(tmp_path / "b.kvtrace")
    c = gen.build(clean, 20_000)
    gen.build(bug, 20_000, bug="early-free")
    validate_trace(clean)
    with TraceSession(clean) as s:
        assert s.query("select count(*) n from events").column("n")[0].as_py() == c["events"]
        assert s.findings() == []
    with TraceSession(bug) as s:
        found = s.findings()
    planted = {f"r{i}" for i in range(0, c["requests"], 97)}
    assert {f.check for f in found} == {"src_free_before_done"}
    assert {f.request for f in found} == planted
