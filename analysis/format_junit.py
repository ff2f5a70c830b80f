"""``kvtrace check --format junit``: one JUnit test case per check, so CI dashboards show
which hazards a trace has.

A check with new findings at or above the gate's severity is a failed test case (every
finding in the failure text); a check that could not run is skipped (with why); a check
that ran clean passes. Accepted findings (the baseline) are listed in ``system-out``, and
so is what a check left uncompared (``partial``: it compared only part of its input).
The layout is the common JUnit XML one (testsuites/testsuite/testcase with failure,
skipped, system-out) that Jenkins, GitLab and GitHub reporters read.
"""
from __future__ import annotations

import collections
import os
import xml.etree.ElementTree as ET

_RANK = {"warning": 0, "error": 1}


def _line(f) -> str:
    where = ", ".join(x for x in (f.agent and f"agent {f.agent}", f.request and f"request {f.request}",
                                   f.pool and f"pool {f.pool}", f.layer is not None and f"layer {f.layer}",
                                   f.slot is not None and f"slot {f.slot}") if x)
    return f"[{f.severity}] {f.message} ({where}; x{f.count})" if where else f"[{f.severity}] {f.message} (x{f.count})"


def write(file, trace: str, checks: list[str], skipped: list[tuple[str, str]], findings: list, accepted: list,
          fail_on: str = "error", partial: dict[str, str] | None = None) -> None:
    """Write the JUnit XML of one trace's check run to ``file``."""
    by = collections.defaultdict(list)
    for f in findings:
        by[f.check].append(f)
    old = collections.defaultdict(list)
    for f in accepted:
        old[f.check].append(f)
    why = dict(skipped)
    name = os.path.basename(os.path.normpath(trace))
    bar = _RANK[fail_on]
    suite = ET.Element("testsuite", name=f"kvtrace check {name}")
    n = failures = skips = 0
    for c in checks:
        n += 1
        case = ET.SubElement(suite, "testcase", classname=f"kvtrace.{name}", name=c, time="0")
        if c in why:
            skips += 1
            ET.SubElement(case, "skipped", message=why[c])
            continue
        bad = [f for f in by.get(c, []) if _RANK.get(f.severity, 1) >= bar]
        if bad:
            failures += 1
            worst = "error" if any(f.severity == "error" for f in bad) else "warning"
            fail = ET.SubElement(case, "failure", message=f"{len(bad)} finding(s): {bad[0].message}", type=worst)
            fail.text = "\n".join(_line(f) for f in by[c])
        elif by.get(c):
            out = ET.SubElement(case, "system-out")
            out.text = "below the gate:\n" + "\n".join(_line(f) for f in by[c])
        said = []
        if old.get(c):
            said.append("accepted (baseline):\n" + "\n".join(_line(f) for f in old[c]))
        if (partial or {}).get(c):
            said.append("compared in part only: " + partial[c])
        if said:
            out = case.find("system-out")
            if out is None:
                out = ET.SubElement(case, "system-out")
            out.text = "\n".join(([out.text] if out.text else []) + said)
    suite.set("tests", str(n))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skips))
    root = ET.Element("testsuites", name="kvtrace", tests=str(n), failures=str(failures), errors="0")
    root.append(suite)
    ET.indent(root)
    file.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    file.write(ET.tostring(root, encoding="unicode"))
    file.write("\n")
