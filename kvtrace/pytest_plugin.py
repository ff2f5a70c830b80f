"""kvtrace as a CI gate in pytest: record a test's NIXL traffic, fail it on findings.

    pytest --kvtrace traces/                    # every test: traces/<test>.kvtrace, checked
    pytest --kvtrace traces/ --kvtrace-fail-on warning --kvtrace-baseline kvtrace-baseline.json

    def test_transfer(kvtrace_record):          # one test, without the option
        ...                                     # NIXL agents created here are traced
        kvtrace_record.fail_on = "warning"      # optional: this test's gate

While a test runs (from its setup to the end of its call), every ``nixl_agent`` the test
process creates is kvtrace's TracedAgent writing to the test's own trace; the test's code
may add hooks through ``kvtrace_record.recorder`` (or ``KVHooks(agent)``). After the call
the trace is closed and checked (``kvtrace check``); findings at or above the gate's
severity, less those a baseline accepts, fail the test with the findings in the failure
message. Agents created before the test (module-scoped fixtures) and child processes are
not traced. Without ``--kvtrace`` and without the fixture the plugin does nothing: it
patches nothing and records nothing (it is registered for every pytest run through the
``pytest11`` entry point). See docs/ci.md.
"""
from __future__ import annotations

import os
import re

import pytest

_KEY = pytest.StashKey()
_SEV = {"warning": 0, "error": 1}


def pytest_addoption(parser) -> None:
    g = parser.getgroup("kvtrace", "kvtrace: record NIXL traffic per test and gate on findings")
    g.addoption("--kvtrace", metavar="DIR", default=None,
                help="record every test's NIXL traffic into DIR/<test>.kvtrace and fail a test on findings")
    g.addoption("--kvtrace-fail-on", choices=("warning", "error"), default="error",
                help="lowest severity that fails a test (default: error)")
    g.addoption("--kvtrace-baseline", metavar="FILE", default=None,
                help="accepted findings (kvtrace check --write-baseline); only new ones fail")


class Recording:
    """One test's trace: ``path``, ``recorder`` (for hooks), ``fail_on``; ``findings()``."""

    def __init__(self, path: str, nodeid: str, fail_on: str, baseline: str | None):
        from kvtrace.tracer import manifest
        from kvtrace.tracer.autotrace import install
        from kvtrace.tracer.process_recorder import use_recorder
        from kvtrace.tracer.recorder import Recorder
        if os.path.exists(os.path.join(path, "manifest.json")):
            import shutil
            shutil.rmtree(path)             # a re-run of the same test
        self.path, self.fail_on, self.baseline = path, fail_on, baseline
        manifest.update(path, tool="kvtrace pytest", test=nodeid)
        manifest.expect_shards(path, ["test"])
        self.recorder = Recorder(path, "test")
        install()                           # nixl_agent -> TracedAgent (untraced outside a recording)
        use_recorder(self.recorder)
        self.open = True

    def close(self) -> None:
        if not self.open:
            return
        from kvtrace.tracer import manifest
        from kvtrace.tracer.process_recorder import use_recorder
        use_recorder(None)
        self.recorder.close()
        manifest.finish(self.path)
        self.open = False

    def findings(self) -> tuple[list, list]:
        """Close the trace and check it: (findings that count, findings the baseline accepts)."""
        self.close()
        from kvtrace.analysis.session import TraceSession
        with TraceSession(self.path) as s:
            found = s.findings()
        if self.baseline:
            from kvtrace.analysis.baseline import load
            return load(self.baseline).split(found)
        return found, []

    def failure(self) -> str | None:
        """The failure message when findings reach the gate, else None."""
        new, accepted = self.findings()
        bar = _SEV[self.fail_on]
        bad = [f for f in new if _SEV.get(f.severity, 1) >= bar]
        if not bad:
            return None
        lines = [f"kvtrace: {len(bad)} finding(s) at or above {self.fail_on} in {self.path}"
                 + (f" ({len(accepted)} accepted by the baseline)" if accepted else "") + ":"]
        for f in bad[:20]:
            where = ", ".join(x for x in (f.request and f"request {f.request}", f.pool and f"pool {f.pool}",
                                          f.layer is not None and f"layer {f.layer}") if x)
            lines.append(f"  [{f.severity}] {f.check}: {f.message}" + (f" ({where})" if where else ""))
        if len(bad) > 20:
            lines.append(f"  ... and {len(bad) - 20} more")
        lines.append(f"  inspect: kvtrace check {self.path}   |   kvtrace tui {self.path}")
        return "\n".join(lines)


def _name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:150]


def _start(item, directory: str) -> Recording:
    r = item.stash.get(_KEY, None)
    if r is None:
        c = item.config
        r = Recording(os.path.join(directory, _name(item.nodeid) + ".kvtrace"), item.nodeid,
                      c.getoption("kvtrace_fail_on"), c.getoption("kvtrace_baseline"))
        item.stash[_KEY] = r
    return r


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    directory = item.config.getoption("kvtrace", None)
    if directory:                           # before the fixtures: agents they make are traced
        _start(item, directory)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    r = item.stash.get(_KEY, None)
    if r is None:
        return (yield)
    try:
        res = yield
    except BaseException:
        r.close()                           # the test failed on its own: keep its failure
        raise
    msg = r.failure()
    if msg:
        pytest.fail(msg, pytrace=False)
    return res


def pytest_runtest_teardown(item) -> None:
    r = item.stash.get(_KEY, None)
    if r is not None:
        r.close()


@pytest.fixture
def kvtrace_record(request, tmp_path) -> Recording:
    """Record this test's NIXL traffic (under --kvtrace DIR, else tmp_path) and fail the
    test on findings; yields the Recording (``.recorder`` for hooks, ``.path``, ``.fail_on``)."""
    directory = request.config.getoption("kvtrace", None) or str(tmp_path)
    r = _start(request.node, directory)
    yield r
    r.close()
