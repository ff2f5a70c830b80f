"""Headless-Chromium check of `kvtrace report` (manual, not CI: needs a browser).

    apt-get install chromium-headless-shell
    .venv/bin/python bench/screenshot_report.py [TRACE] [OUT.png]

Renders the report of TRACE (default: a built trace with an early source free) in
headless Chromium, saves a screenshot, and checks that the page really drew: the
screenshot is not blank, and the four embedded plots decoded (the browser reports each
<img>'s natural width through the page title).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from kvtrace.analysis.report import write_report
from kvtrace.analysis.session import TraceSession

_PROBE = """<script>window.onload=()=>{const i=[...document.images];
document.title='imgs:'+i.length+':decoded:'+i.filter(x=>x.naturalWidth>100).length;}</script>"""


def main() -> int:
    browser = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if not browser:
        print("no headless Chromium found (apt-get install chromium-headless-shell)")
        return 2
    tmp = tempfile.mkdtemp()
    trace = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None
    if trace is None:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "analysis"))
        from test_export import pd_trace
        trace = pd_trace(os.path.join(tmp, "demo.kvtrace"), n_requests=6, early_free=True)
    shot = sys.argv[2] if len(sys.argv) > 2 else os.path.join(tmp, "report.png")
    page = os.path.join(tmp, "report.html")
    with TraceSession(trace) as s:
        data = write_report(s, page, trace)
    # a probe copy: same page plus a script that reports decoded images (the report itself has none)
    probe = page.replace(".html", ".probe.html")
    with open(page) as f, open(probe, "w") as g:
        g.write(f.read().replace("</body>", _PROBE + "</body>"))
    base = [browser, "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    subprocess.run(base + [f"--screenshot={shot}", "--window-size=1200,2400", "file://" + page],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run(base + ["--dump-dom", "file://" + probe], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    title = dom.split("<title>")[1].split("</title>")[0]
    import matplotlib.image as mpimg
    img = mpimg.imread(shot)
    inked = float((img[..., :3].mean(axis=2) < 0.9).mean())
    print(f"report: {len(data['findings'])} findings; browser title {title!r}; screenshot {shot}: "
          f"{img.shape[1]}x{img.shape[0]} px, {inked:.1%} of pixels inked")
    ok = title.endswith("decoded:4") and title.startswith("imgs:4") and inked > 0.02
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
