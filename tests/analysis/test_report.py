"""The HTML report's structure: one self-contained file whose plots are embedded PNG
images, whose findings table lists the checks' findings (and says so when there are
none), and bad input handled with one line."""
from __future__ import annotations

import base64
import html.parser

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main
from kvtrace.tracer.builder import TraceBuilder


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.links, self.scripts = [], [], []
        self.tables: dict = {}
        self._table, self._row, self._cell = None, None, None
        self.verdict = ""
        self._in_verdict = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
        if tag in ("link", "a") and a.get("href"):
            self.links.append(a["href"])
        if tag == "script":
            self.scripts.append(a)
        if tag == "table":
            self._table = a.get("id")
            self.tables[self._table] = []
        if tag == "tr" and self._table:
            self._row = []
            self.tables[self._table].append(self._row)
        if tag in ("td", "th") and self._row is not None:
            self._row.append("")
            self._cell = True
        if a.get("id") == "verdict":
            self._in_verdict = True

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        if tag in ("td", "th"):
            self._cell = None
        if tag == "div":
            self._in_verdict = False

    def handle_data(self, data):
        if self._cell and self._row is not None:
            self._row[-1] += data
        if self._in_verdict:
            self.verdict += data


def parse(path) -> _Page:
    p = _Page()
    p.feed(open(path, encoding="utf-8").read())
    return p


def transfer_trace(path, early_free: bool):
    """One request pushed prefill → decode. With ``early_free`` prefill frees (and
    reuses) its source slots before the transfer completes — src_free_before_done."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for r, ps, ds in (("r1", [1, 2], [5, 6]), ("r2", [3], [7])):
        d.req_start(r)
        p.req_start(r)
        d.alloc(r, "kv", ds)
        d.msg_send(p, f"dst-{r}", request=r)   # decode tells prefill its pages: the HB edge
        p.msg_recv(d, f"dst-{r}", request=r)
        p.alloc(r, "kv", ps)
        p.write(r, "kv", ps)
        x = p.post(r, d, src=("kv", ps), dst=("kv", ds), msg=f"{r}_kv".encode(), deliver="later")
        if early_free and r == "r1":
            p.free(r, "kv", ps)
            p.alloc("r9", "kv", ps)
            p.write("r9", "kv", ps)
        x.deliver()
        p.done(x)
        d.notif_recv(p, f"{r}_kv".encode())
        d.read(r, "kv", ds)
        d.free(r, "kv", ds)
        if not (early_free and r == "r1"):
            p.free(r, "kv", ps)
        p.req_done(r)
        d.req_done(r)
    if early_free:
        p.free("r9", "kv", [1, 2])
    return b.close()


def test_report_is_self_contained_with_embedded_plots(tmp_path):
    tr = transfer_trace(str(tmp_path / "clean.kvtrace"), early_free=False)
    out = tmp_path / "r.html"
    assert main(["report", tr, "-o", str(out)]) == 0
    page = parse(out)
    ids = {i.get("id") for i in page.imgs}
    assert {"plot-occupancy", "plot-distributions", "plot-throughput", "plot-findings"} <= ids
    for img in page.imgs:
        assert img["src"].startswith("data:image/png;base64,")
        raw = base64.b64decode(img["src"].split(",", 1)[1])
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 2000   # a real rendered figure
        assert img.get("alt")
    assert not page.scripts and not [h for h in page.links if "://" in h]   # nothing fetched
    summary = {r[0]: r[1] for r in page.tables["summary"] if len(r) == 2}
    assert summary["events"] != "0" and "prefill" in summary["agents"]
    stats = {r[0]: r[1] for r in page.tables["transfer-stats"]}
    assert stats["completed transfers"] == "2"
    assert page.verdict.strip().lower().startswith("verdict:")


def _finding_rows(page):
    return [r for r in page.tables["findings"][1:] if len(r) == 10]


def test_findings_table_lists_the_findings_and_clean_twin_has_none(tmp_path):
    bad = transfer_trace(str(tmp_path / "bad.kvtrace"), early_free=True)
    clean = transfer_trace(str(tmp_path / "clean.kvtrace"), early_free=False)
    for tr, name in ((bad, "bad.html"), (clean, "clean.html")):
        assert main(["report", tr, "-o", str(tmp_path / name)]) == 0
    with TraceSession(bad) as s:
        expected = list(s.findings())
    page = parse(tmp_path / "bad.html")
    rows = _finding_rows(page)
    assert expected and len(rows) == len(expected)
    assert "src_free_before_done" in {r[1] for r in rows}
    assert all(r[8].strip() for r in rows)   # each finding explains itself
    assert "root cause" in page.verdict and "src_free_before_done" in page.verdict
    cpage = parse(tmp_path / "clean.html")
    assert _finding_rows(cpage) == [] and "no findings" in cpage.tables["findings"][-1][0]


def test_report_bad_input_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.kvtrace"), "-o", str(tmp_path / "r.html")]) == 2
    assert "no such trace" in capsys.readouterr().err
    tr = transfer_trace(str(tmp_path / "t.kvtrace"), early_free=False)
    assert main(["report", tr, "-o", str(tmp_path / "no" / "such" / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not exist" in err and len(err.splitlines()) == 1
    assert main(["report", tr, "-o", "/proc/kvtrace-report-test.html"]) == 2   # unwritable even as root
    err = capsys.readouterr().err.strip()
    assert "cannot write" in err and len(err.splitlines()) == 1


def test_a_name_the_font_cannot_draw_prints_no_matplotlib_warning(recwarn):
    """Agent and pool names come from the trace: an emoji or a tab in one is drawn as a
    box, and matplotlib's "Glyph ... missing" warning (its own file and line) stays out of
    the user's terminal."""
    from kvtrace.analysis.report_plots import occupancy_png

    key = ("pre\U0001F4A5fill\t", "kv")
    assert base64.b64decode(occupancy_png({key: [(0.0, 1), (1.0, 2)]}, {key: 4}))[:4] == b"\x89PNG"
    assert not [w for w in recwarn if "Glyph" in str(w.message)], [str(w.message) for w in recwarn]
