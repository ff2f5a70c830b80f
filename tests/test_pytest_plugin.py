"""The pytest plugin as a CI gate: a deliberately buggy test fails with the findings in
its failure message, its fixed twin passes; --kvtrace and the kvtrace_record fixture
alike; a baseline accepts known findings; without either the plugin is inert.

Each case runs pytest in a subprocess on a small test file that drives
tests/tracer/programs/engine_like.py (two real NIXL agents; --early-free plants the bug
of ai-dynamo/dynamo#826: source pages freed before the WRITE reading them is done)."""
import importlib.metadata
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("nixl._api")

PROGRAM = os.path.join(os.path.dirname(__file__), "tracer", "programs", "engine_like.py")

INNER = '''
import runpy, sys

PROGRAM = {program!r}


def _run(monkeypatch, *args):
    mod = runpy.run_path(PROGRAM, run_name="engine_like")
    monkeypatch.setattr(sys, "argv", ["engine_like.py", *args])
    assert mod["main"]() == 0


# 1 MiB pages over TCP: UCX answers PROC at post, so the early free is always recorded
# before the transfer is done (tiny pages over shared memory could finish inside the post)
SIZE = ("--requests", "3", "--page-bytes", str(1 << 20))


def test_buggy({fixture}monkeypatch):
    _run(monkeypatch, "--early-free", *SIZE)


def test_fixed({fixture}monkeypatch):
    _run(monkeypatch, *SIZE)


def test_no_nixl_at_all():
    assert 1 + 1 == 2
'''

INERT = '''
import sys

def test_nothing_patched():
    import nixl._api
    assert nixl._api.nixl_agent.__name__ != "TracedAgent"
    assert "kvtrace.tracer.recorder" not in sys.modules
'''


def _pytest(tmp_path, body, *args):
    (tmp_path / "test_inner.py").write_text(body)
    plugin = [] if any(e.name == "kvtrace" for e in importlib.metadata.entry_points(group="pytest11")) \
        else ["-p", "kvtrace.pytest_plugin"]     # an install without the entry point yet
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                        *plugin, "test_inner.py", *args], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                       env={**os.environ, "UCX_TLS": "tcp"})
    return r.returncode, r.stdout + r.stderr


def _failed(out):
    return {line.split("::")[1].split()[0] for line in out.splitlines() if line.startswith("FAILED")}


@pytest.mark.timeout(300)
def test_option_fails_the_buggy_test_and_passes_its_fixed_twin(tmp_path):
    rc, out = _pytest(tmp_path, INNER.format(program=PROGRAM, fixture=""), "--kvtrace", "traces", "-rf")
    assert rc == 1 and _failed(out) == {"test_buggy"}, out
    assert "src_free_before_done" in out and "kvtrace: " in out and "finding(s) at or above error" in out
    assert "2 passed" in out
    traces = sorted(os.listdir(tmp_path / "traces"))
    assert any("test_buggy" in t for t in traces) and any("test_fixed" in t for t in traces)


@pytest.mark.timeout(300)
def test_fixture_gates_one_test_and_a_baseline_accepts_known_findings(tmp_path):
    rc, out = _pytest(tmp_path, INNER.format(program=PROGRAM, fixture="kvtrace_record, "), "-rf")
    assert rc == 1 and _failed(out) == {"test_buggy"}, out
    assert "src_free_before_done" in out
    # accept what the buggy run found: then the same test passes
    trace = re.search(r"at or above error in (\S+\.kvtrace)", out).group(1)   # the fixture's tmp_path
    base = tmp_path / "baseline.json"
    r = subprocess.run([sys.executable, "-m", "kvtrace", "check", trace, "--write-baseline", str(base)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(base.read_text())["accepted"]
    rc, out = _pytest(tmp_path, INNER.format(program=PROGRAM, fixture="kvtrace_record, "),
                      "--kvtrace-baseline", str(base))
    assert rc == 0, out


@pytest.mark.timeout(120)
def test_plugin_is_inert_without_the_option_or_the_fixture(tmp_path):
    rc, out = _pytest(tmp_path, INERT)
    assert rc == 0, out
    assert not list(tmp_path.rglob("*.kvtrace"))
