"""Attribution against the reference engine's own provenance, every corrupted page: the
engine fills pages with provenance-tagged bytes and its verifier decodes whose bytes each
corrupted page holds; kvtrace, from the recorded checksums alone, must name the same
(request, pool, layer, page) — or never-written memory — for every one of them."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("nixl._api")

from kvtrace.analysis.attribution import attribute  # noqa: E402
from kvtrace.analysis.session import TraceSession  # noqa: E402
from kvtrace.kernels.provenance import decode  # noqa: E402
from kvtrace.tracer.engine import verify  # noqa: E402
from kvtrace.tracer.engine.cli import record  # noqa: E402
from kvtrace.tracer.engine.workload import load  # noqa: E402

_HOLDS = re.compile(r"(?:request (\S+)'s|its own) (\S+) layer (\d+) page (\d+)")


def _spy(monkeypatch) -> list:
    """Keep every Verifier the engine creates (decode's holds the corrupted pages), and for
    each corrupted page the provenance of its first bytes: the last writer of a slot fills
    it from the start, so they name the write that left the slot this way even where the
    verifier's majority vote over the used bytes names older bytes behind a partly filled page."""
    made = []
    init, check = verify.Verifier.__init__, verify.Verifier.check

    def spy_init(self, *a, **kw):
        init(self, *a, **kw)
        self.first = {}
        made.append(self)

    def spy_check(self, key, pool, layer, slots, pages, writers, used, rows):
        before = len(self.corrupted)
        bad = check(self, key, pool, layer, slots, pages, writers, used, rows)
        for c in self.corrupted[before:]:
            i = list(slots).index(c.slot)
            pv = decode(rows[i][:16])
            self.first[(c.request, c.pool, c.layer, c.page, c.slot)] = (
                "poison" if pv.kind == "poison" else
                (self._tags.get(pv.request_tag), self._pools.get(pv.pool_tag), pv.layer, pv.page))
        return bad
    monkeypatch.setattr(verify.Verifier, "__init__", spy_init)
    monkeypatch.setattr(verify.Verifier, "check", spy_check)
    return made


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("workload,bug", [("small", "early-src-free"), ("small", "notify-first-handle"),
                                          ("small-aborts", "abort-free-inflight"),
                                          ("small-mixed", "uniform-slot-count"), ("small", None)])
def test_every_corrupted_page_names_the_engines_provenance(tmp_path, monkeypatch, workload, bug):
    made = _spy(monkeypatch)
    out = str(tmp_path / "t.kvtrace")
    record(load(workload), [bug] if bug else [], out)
    truth = [c for v in made for c in v.corrupted]
    first = {k: v for m in made for k, v in m.first.items()}
    with TraceSession(out) as s:
        rows = attribute(s)
    if bug is None:
        assert truth == [] and rows == []
        return
    assert truth and len(rows) == len(truth)
    by_read = {(a.request, a.pool, a.layer, a.page, a.slot): a for a in rows}
    for c in truth:
        key = (c.request, c.pool, c.layer, c.page, c.slot)
        a = by_read[key]
        said = "poison" if a.kind == "poison" else (
            a.origin["request"], a.origin["pool"], a.origin["layer"], a.origin["page"])
        assert said == first[key], (c.holds, a.message)   # the slot's leading bytes: exact
        if c.holds.startswith("poison"):
            continue
        m = _HOLDS.match(c.holds)
        assert m and a.kind == "write", (c.holds, a.message)
        want = (m.group(1) or c.request, m.group(2), int(m.group(3)), int(m.group(4)))
        got = (a.origin["request"], a.origin["pool"], a.origin["layer"], a.origin["page"])
        if "(mixed" in c.holds:   # a partly filled page over older bytes: the verifier names the
            assert got[1:] == want[1:], (c.holds, a.message)   # majority, the checksum the last writer
        else:
            assert got == want, (c.holds, a.message)
