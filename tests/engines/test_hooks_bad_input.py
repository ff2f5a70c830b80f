"""``kvtrace record --hooks`` on bad input: one clear line each, the program's own output
and exit code unchanged, whatever was recorded kept."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from engine_runs import PY, SGL_DRIVER, env_for, need_engines
from free_ports import free_port


def kvtrace_record(tmp_path, hooks, prog, env=None, cwd=None):
    out = tmp_path / "t.kvtrace"
    cmd = [sys.executable, "-m", "kvtrace", "record", "--hooks", hooks, "-o", str(out), "--"] + prog
    return out, subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=cwd or str(tmp_path))


def same_output(text: str) -> str:
    """The program's output with what differs run to run (log timestamps, agent uuids) masked."""
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "<time>", text)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)


def kv_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("kvtrace") and "shard(s)" not in ln]


def test_program_that_never_imports_the_connector(tmp_path):
    prog = [sys.executable, "-c", "print('hello from the program'); raise SystemExit(3)"]
    out, p = kvtrace_record(tmp_path, "sglang", prog)
    assert p.returncode == 3
    assert p.stdout == "hello from the program\n"
    lines = kv_lines(p.stderr)
    assert len(lines) == 1 and "never imported SGLang's NIXL connector" in lines[0], p.stderr
    assert (out / "manifest.json").exists()


def test_unknown_hooks_name_is_a_usage_error(tmp_path):
    out, p = kvtrace_record(tmp_path, "tensorrt", [sys.executable, "-c", "print(1)"])
    assert p.returncode == 2
    assert p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "unknown engine 'tensorrt'" in p.stderr
    _, p = kvtrace_record(tmp_path, "sglang:-colour", [sys.executable, "-c", "print(1)"])
    assert p.returncode == 2 and "bad hook group" in p.stderr


FAKE_CONN = '''
class NixlKVManager:
    def __init__(self, *a):
        pass

    def register_buffer_to_engine(self):
        pass


class TransferInfo:
    pass
'''


def test_unsupported_version_warns_once_naming_what_could_not_be_hooked(tmp_path):
    """A connector module of another release (here a stand-in laid out like SGLang's, with
    most classes gone): one warning for the whole run, the program unchanged."""
    pkg = tmp_path / "site" / "sglang"
    for d in ("srt/disaggregation/nixl", "srt/disaggregation/common"):
        (pkg / d).mkdir(parents=True)
    for d in ("", "srt", "srt/disaggregation", "srt/disaggregation/nixl", "srt/disaggregation/common"):
        (pkg / d / "__init__.py").write_text("")
    (pkg / "version.py").write_text("__version__ = '0.4.9'\n")
    (pkg / "srt/disaggregation/nixl/conn.py").write_text(FAKE_CONN)
    prog = textwrap.dedent("""
        import subprocess, sys
        import sglang.srt.disaggregation.nixl.conn as c
        print('imported', c.NixlKVManager.__name__)
        if sys.argv[1:] == ['parent']:  # a child process imports it too: still one warning
            subprocess.run([sys.executable, __file__], check=True)
        raise SystemExit(5 if sys.argv[1:] == ['parent'] else 0)
    """)
    (tmp_path / "prog.py").write_text(prog)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out, p = kvtrace_record(tmp_path, "sglang", [sys.executable, str(tmp_path / "prog.py"), "parent"], env=env)
    assert p.returncode == 5
    assert p.stdout == "imported NixlKVManager\nimported NixlKVManager\n"
    lines = kv_lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "0.4.9 is not a supported version (supported: 0.5.21, 0.5.23)" in lines[0]
    for missing in ("NixlKVSender.send", "NixlKVReceiver.send_metadata", "FastQueue.get"):
        assert missing in lines[0]
    man = json.loads((out / "manifest.json").read_text())
    assert man["hooks_sglang"]["version"] == "0.4.9" and not man["hooks_sglang"]["supported"]


@pytest.mark.slow
def test_connector_raising_during_setup(tmp_path):
    """SGLang's NixlKVManager raises in __init__ (a NIXL backend that does not exist): the
    program fails exactly as it does unrecorded; kvtrace adds one line; the trace stays."""
    need_engines()
    args = [PY, SGL_DRIVER, "--role", "prefill", "--port", str(free_port()), "--timeout", "5"]
    env = env_for(SGLANG_DISAGGREGATION_NIXL_BACKEND="NO_SUCH_BACKEND")
    plain = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    out, p = kvtrace_record(tmp_path, "sglang", args, env=env)
    assert p.returncode == plain.returncode != 0
    assert same_output(p.stdout) == same_output(plain.stdout)
    lines = [ln for ln in kv_lines(p.stderr) if "NixlKVManager" in ln]
    assert len(lines) == 1 and "raised during set-up" in lines[0] and "kept" in lines[0], p.stderr[-3000:]
    man = json.loads((out / "manifest.json").read_text())
    assert man["shards"], "the agent created before the failure is recorded"
    assert man["hooks_sglang"]["version"] == "0.5.21"


def test_enable_from_python_hooks_in_process(tmp_path):
    """The same from Python: enable() in the serving process, before or after the import."""
    site = tmp_path / "site"
    pkg = site / "sglang"
    for d in ("srt/disaggregation/nixl",):
        (pkg / d).mkdir(parents=True)
    for d in ("", "srt", "srt/disaggregation", "srt/disaggregation/nixl"):
        (pkg / d / "__init__.py").write_text("")
    (pkg / "version.py").write_text("__version__ = '0.4.9'\n")
    (pkg / "srt/disaggregation/nixl/conn.py").write_text(FAKE_CONN)
    prog = textwrap.dedent(f"""
        from kvtrace.tracer.integrations import enable
        enable({str(tmp_path / 'api.kvtrace')!r}, "sglang")
        import sglang.srt.disaggregation.nixl.conn as c
        print('wrapped' if hasattr(c.NixlKVManager.register_buffer_to_engine, '_kvtrace_hooked') else 'plain')
    """)
    env = dict(os.environ, PYTHONPATH=str(site))
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "wrapped\n"
    lines = kv_lines(p.stderr)
    assert len(lines) == 1 and "0.4.9 is not a supported version" in lines[0]
    man = json.loads((tmp_path / "api.kvtrace" / "manifest.json").read_text())
    assert "NixlKVManager.register_buffer_to_engine" in man["hooks_sglang"]["hooked"]
