"""The flight recorder (``--ring``) with the engines' own connectors: a ring recording under
``--hooks`` dumps a window that validates and checks like a full recording, and the
engines' failure paths (vLLM's expired-lease read, SGLang's KV checksum mismatch) dump it."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from engine_runs import SGLANG_NEW, VENV, check, driver, findings, need_engines, record

SGL = driver("sglang_pd.py")
VLLM = driver("vllm_pd.py")


def _dump(run, n: int = 1) -> str:
    from kvtrace.tracer.ring_dump import dump_path
    return dump_path(run.trace, n)


def _validate(trace: str) -> None:
    p = subprocess.run([sys.executable, "-m", "kvtrace", "validate", trace], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


def _manifest(trace: str) -> dict:
    with open(os.path.join(trace, "manifest.json")) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.parametrize("index_k,bug", [("tokens", False), ("bytes", True)])
def test_sglang_hooks_ring_dump_validates_and_checks_like_the_run(tmp_path, index_k, bug):
    """SGLang 0.5.21's connector under ``--hooks sglang --ring 30s``; decode calls the ring
    hook after its verifier. Both processes dump the same window; it validates, and check
    finds exactly what the verifier saw: nothing on the clean geometry, the misaddressed
    index-K pages on the buggy one."""
    need_engines()
    run = record(tmp_path, SGL, ["--index-k", index_k, "--ring-trigger", "test: decode verified", "--linger", "4"],
                 hooks="sglang", ring="30s")
    assert run.rc == 0, run.stderr[-3000:]
    assert run.report["ring_triggered"], "the driver's decode process records no ring"
    dump = _dump(run)
    man = _manifest(dump)
    assert man["complete"] and len(man["shards"]) == 2, man
    assert man["trigger"]["reason"] == "test: decode verified"
    _validate(dump)
    res = check(dump)
    if not bug:
        assert run.report["misaddressed"] == []
        assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    else:
        bad = run.report["misaddressed"]
        assert bad
        got = {(f["request"], s) for f in findings(res, "layer_offset_mismatch") for s in f["slots"]}
        assert got == {(str(m["room"]), m["slot"]) for m in bad}
        assert {f["check"] for f in findings(res)} == {"layer_offset_mismatch"}


@pytest.mark.slow
def test_vllm_expired_lease_read_dumps_the_ring(tmp_path):
    """vLLM 0.34's prefill learning that decode read blocks whose lease had expired
    (``NixlKVConnectorStats.record_notification_after_expiry``) dumps the ring recording."""
    need_engines()
    run = record(tmp_path, VLLM, ["--lease", "2", "--decode-delay", "6"], hooks="vllm", ring="30s")
    assert run.rc == 0, run.stderr[-3000:]
    dump = _dump(run)
    assert os.path.isdir(dump), run.stderr[-3000:]
    man = _manifest(dump)
    assert "lease had expired" in man["trigger"]["reason"], man["trigger"]
    assert not os.path.exists(_dump(run, 2))      # one incident, one dump (bursts are merged)
    _validate(dump)


@pytest.mark.slow
def test_vllm_clean_ring_recording_never_dumps(tmp_path):
    """Clean twin: the same connector under ``--ring`` with no failure writes no dump."""
    need_engines()
    run = record(tmp_path, VLLM, [], hooks="vllm", ring="30s")
    assert run.rc == 0, run.stderr[-3000:]
    assert not os.path.exists(_dump(run))


def _method_args(path: str, cls: str, name: str) -> list[str] | None:
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return [a.arg for a in item.args.args]
    return None


@pytest.mark.parametrize("release", ["0.5.21", "0.5.23"])
def test_sglang_checksum_mismatch_hook_matches_the_release(release):
    """SGLang's decode scheduler (not importable in the connector-only engines venv: it pulls
    the OpenAI server stack) reports a KV checksum mismatch through
    ``SchedulerDisaggregationDecodeMixin._handle_kv_checksum_mismatch(self, req, msg)`` in
    both supported releases: the hook row's target and the handler's arguments."""
    from kvtrace.tracer.integrations.table import SGLANG
    root = os.path.join(VENV, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}", "site-packages")
    base = root if release == "0.5.21" else SGLANG_NEW
    need_engines(base)
    row = next(h for h in SGLANG.hooks if h.handler == "checksum_mismatch")
    path = os.path.join(base, *row.module.split(".")) + ".py"
    assert _method_args(path, row.cls, row.attr) == ["self", "req", "msg"]


def test_lazy_hook_fires_when_the_engine_imports_its_module(tmp_path, monkeypatch):
    """A lazy row (SGLang's scheduler mismatch path) is not imported to be hooked; when the
    program imports the module, the real method's call runs the handler first, which dumps
    a ring recording (the engine's own behaviour, here raising, goes on unchanged)."""
    from kvtrace.tracer.integrations import _patch
    from kvtrace.tracer.integrations.table import Engine, Hook
    from kvtrace.tracer.ring import RingRecorder
    from kvtrace.tracer.ring_dump import dump_path
    mod = "kvt_lazy_scheduler"
    (tmp_path / f"{mod}.py").write_text(
        "class DecodeMixin:\n"
        "    def _handle_kv_checksum_mismatch(self, req, msg):\n"
        "        raise RuntimeError(msg)   # what SGLang does in CI\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eng = Engine(name="sglang", title="test", trigger="kvt_lazy_absent", version_module="kvt_lazy_absent",
                 version_attr="v", supported=(), handlers="sglang",
                 hooks=(Hook(mod, "DecodeMixin", "_handle_kv_checksum_mismatch", "before", "checksum_mismatch",
                             "trigger", lazy=True),))
    info = _patch.apply(eng, frozenset())
    assert info["when_imported"] == ["DecodeMixin._handle_kv_checksum_mismatch"] and not info["missing"]
    assert mod not in sys.modules
    session = str(tmp_path / "s.kvtrace")
    rec = RingRecorder(session, "decode", ring="30s", signals=False)
    try:
        import importlib
        m = importlib.import_module(mod)
        req = type("Req", (), {"bootstrap_room": 42})()
        with pytest.raises(RuntimeError, match="expected=0x1 got=0x2"):
            m.DecodeMixin()._handle_kv_checksum_mismatch(req, "KV checksum mismatch req=r expected=0x1 got=0x2")
        rec.flush()
        dump = dump_path(session, 1)
        assert _manifest(dump)["trigger"]["reason"].startswith("SGLang: KV checksum mismatch, request 42")
    finally:
        rec.close()
        sys.modules.pop(mod, None)


def test_lazy_hook_without_a_ring_changes_nothing(tmp_path, monkeypatch):
    """Clean twin: with no ring recording the hooked method behaves as before, no dump."""
    from kvtrace.tracer.integrations import _patch
    from kvtrace.tracer.integrations.table import Engine, Hook
    mod = "kvt_lazy_scheduler2"
    (tmp_path / f"{mod}.py").write_text(
        "class DecodeMixin:\n"
        "    def _handle_kv_checksum_mismatch(self, req, msg):\n"
        "        return ('aborted', msg)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eng = Engine(name="sglang", title="test", trigger="kvt_lazy_absent2", version_module="kvt_lazy_absent2",
                 version_attr="v", supported=(), handlers="sglang",
                 hooks=(Hook(mod, "DecodeMixin", "_handle_kv_checksum_mismatch", "before", "checksum_mismatch",
                             "trigger", lazy=True),))
    _patch.apply(eng, frozenset())
    try:
        import importlib
        m = importlib.import_module(mod)
        assert getattr(m.DecodeMixin._handle_kv_checksum_mismatch, "_kvtrace_hooked", None) is not None
        req = type("Req", (), {"bootstrap_room": 7})()
        assert m.DecodeMixin()._handle_kv_checksum_mismatch(req, "m") == ("aborted", "m")
        assert list(tmp_path.glob("*.dump*")) == []
    finally:
        sys.modules.pop(mod, None)
