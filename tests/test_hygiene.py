"""The repository stands alone: nothing reads files beside the checkout (the format
contract and its validator live here), and product text never speaks of one
investigation's notes ("the seeds'") as if every user had them."""
from __future__ import annotations

import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("kvtrace", "tracer", "analysis", "replay", "tui", "kernels", "docs", "scripts")
SUFFIXES = {".py", ".sql", ".md", ".toml", ".sh", ".tcss", ".html"}


def _files(roots):
    for root in roots:
        p = REPO / root
        if p.is_file():
            yield p
        elif p.is_dir():
            yield from (f for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file())


def _hits(needles, roots):
    out = []
    for f in _files(roots):
        text = f.read_text(errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if any(x in line for x in needles):
                out.append(f"{f.relative_to(REPO)}:{n}: {line.strip()}")
    return out


#: the sibling folder a checkout must not read (spelled in parts so this file is no hit itself)
BESIDE = "../" + "shared"


def test_nothing_reads_beside_the_checkout():
    hits = _hits((BESIDE, "shared/tools", "shared-tools", "KVTRACE_VALIDATOR"),
                 PRODUCT + ("tests", "bench", "README.md", "pyproject.toml"))
    hits = [h for h in hits if not h.startswith("tests/test_hygiene.py")]
    assert not hits, "\n".join(hits)


def test_product_text_has_no_investigation_notes():
    hits = _hits(("seeds'", "the seeds "), PRODUCT + ("README.md",))
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("needle", [BESIDE, "seeds'"])
def test_the_scan_sees_a_planted_line(tmp_path, monkeypatch, needle):
    """The scans above would pass vacuously if they read nothing."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text(f"see {needle} here\n")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert len(_hits((needle,), ("docs",))) == 1
