"""``kvtrace record --hooks vllm`` on bad input: one clear line each, the program's own
output and exit code unchanged, whatever was recorded kept."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from engine_runs import PY, driver, env_for, need_engines
from free_ports import free_port, free_port_run
from test_hooks_bad_input import kv_lines, kvtrace_record, same_output

VN = "vllm/distributed/kv_transfer/kv_connector/v1/nixl"


def test_program_that_never_imports_vllms_connector(tmp_path):
    prog = [sys.executable, "-c", "import sys; print('serving'); sys.stderr.write('own error\\n'); raise SystemExit(4)"]
    out, p = kvtrace_record(tmp_path, "vllm", prog)
    assert p.returncode == 4
    assert p.stdout == "serving\n"
    assert "own error\n" in p.stderr
    lines = kv_lines(p.stderr)
    assert len(lines) == 1 and "never imported vLLM's NIXL connector" in lines[0], p.stderr
    assert (out / "manifest.json").exists()


def fake_vllm(site, version: str) -> None:
    """A connector package laid out like vLLM 0.34's, from a release whose classes differ:
    the connector is there, its worker and scheduler classes are not."""
    pkg = site / VN
    pkg.mkdir(parents=True)
    parts = VN.split("/")
    for i in range(1, len(parts) + 1):
        (site.joinpath(*parts[:i]) / "__init__.py").write_text("")
    (site / "vllm" / "version.py").write_text(f"__version__ = {version!r}\n")
    (pkg / "connector.py").write_text("class NixlBaseConnector:\n    pass\n\n\nNixlConnector = NixlBaseConnector\n")


def test_vllm_version_outside_the_supported_range_warns_once(tmp_path):
    fake_vllm(tmp_path / "site", "0.33.1")
    prog = textwrap.dedent(f"""
        import subprocess, sys
        from vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector import NixlConnector
        print('connector', NixlConnector.__name__)
        if sys.argv[1:] == ['parent']:  # a second process of the engine: still one line
            subprocess.run([sys.executable, __file__], check=True)
        raise SystemExit(6 if sys.argv[1:] == ['parent'] else 0)
    """)
    (tmp_path / "prog.py").write_text(prog)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out, p = kvtrace_record(tmp_path, "vllm", [sys.executable, str(tmp_path / "prog.py"), "parent"], env=env)
    assert p.returncode == 6
    assert p.stdout == "connector NixlBaseConnector\nconnector NixlBaseConnector\n"
    lines = kv_lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "vLLM's NIXL connector 0.33.1 is not a supported version (supported: 0.34.0)" in lines[0]
    for missing in ("NixlBaseConnectorWorker.register_kv_caches", "NixlPullConnectorScheduler.request_finished",
                    "NixlPullConnectorWorker.start_load_kv"):
        assert missing in lines[0]
    man = json.loads((out / "manifest.json").read_text())
    assert man["hooks_vllm"]["version"] == "0.33.1" and not man["hooks_vllm"]["supported"]


@pytest.mark.slow
def test_vllm_connector_raising_during_setup(tmp_path):
    """vLLM's worker asks NIXL for a backend that does not exist and registering its KV cache
    raises: the program fails exactly as it does unrecorded; kvtrace adds one line and keeps
    the trace (the agent made before the failure)."""
    need_engines()
    args = [PY, driver("vllm_pd.py"), "--role", "prefill", "--nixl-backend", "NO_SUCH_BACKEND", "--timeout", "5",
            "--side-port", str(free_port()), "--dist-port", str(free_port_run(12))]
    # the same program unrecorded, at the same time (ports of its own): ~20 s of imports each
    mine = args[:-4] + ["--side-port", str(free_port()), "--dist-port", str(free_port_run(12)), "--xchg", str(tmp_path / "x1")]
    plain_run = subprocess.Popen(mine, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env_for(), cwd=str(tmp_path))
    out, p = kvtrace_record(tmp_path, "vllm", args + ["--xchg", str(tmp_path / "x2")], env=env_for())
    plain_out, _ = plain_run.communicate(timeout=300)
    plain = subprocess.CompletedProcess(mine, plain_run.returncode, plain_out, "")
    assert p.returncode == plain.returncode != 0
    assert same_output(p.stdout) == same_output(plain.stdout)
    lines = kv_lines(p.stderr)
    assert len(lines) == 1, p.stderr[-3000:]
    assert "vLLM's NIXL connector raised during set-up" in lines[0] and "NO_SUCH_BACKEND" in lines[0]
    assert "kept" in lines[0]
    man = json.loads((out / "manifest.json").read_text())
    assert man["shards"], "the agent created before the failure is recorded"
    assert man["hooks_vllm"]["version"] == "0.34.0" and man["hooks_vllm"]["supported"]
