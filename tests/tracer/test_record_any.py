"""`kvtrace record -- CMD`: unmodified NIXL programs (tests/tracer/programs/) recorded."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("nixl._api")

from kvtrace.tracer import open_trace  # noqa: E402

PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")


def _env():
    env = dict(os.environ)
    env.pop("KVTRACE_TRACE_DIR", None)
    env["NIXL_LOG_LEVEL"] = "WARN"  # NIXL's INFO lines carry timestamps; outputs must compare equal
    return env


def run_plain(prog, *args):
    return subprocess.run([sys.executable, os.path.join(PROGRAMS, prog), *args], capture_output=True,
                          text=True, env=_env(), timeout=120)


def record(out, prog, *args, tag=None, extra=()):
    cmd = [sys.executable, "-m", "kvtrace", "record", "-o", str(out), *extra]
    if tag:
        cmd += ["--request-tag", tag]
    cmd += ["--", sys.executable, os.path.join(PROGRAMS, prog), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=120)


def events(trace, kind=None):
    return [e for e in trace.table("events").to_pylist() if kind is None or e["kind"] == kind]


@pytest.mark.timeout(120)
def test_two_agents_in_one_process(tmp_path, validate_trace):
    plain = run_plain("two_agents.py")
    traced = record(tmp_path / "t.kvtrace", "two_agents.py")
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout  # the program's output is unchanged
    validate_trace(tmp_path / "t.kvtrace")
    t = open_trace(str(tmp_path / "t.kvtrace"))
    assert t.manifest["complete"] and t.manifest["exit_code"] == 0
    assert len(t.shards) == 1 and t.shards[0].name.startswith("two_agents-")
    assert {(e["agent"], e["nbytes"]) for e in events(t, "register")} == {("prefill", 2048), ("decode", 2048)}
    dl = t.table("dlists").to_pylist()
    assert sorted({(d["dlist"], d["agent"], d["remote_agent"]) for d in dl}) == \
        [(0, "prefill", None), (1, "decode", "decode")] and len(dl) == 16
    posts = events(t, "xfer_post")
    assert [(e["agent"], e["request"]) for e in posts] == [("prefill", "42"), ("prefill", "42"), ("decode", "req-7")]
    ops = [(d["xfer"], d["op"], d["src_agent"], d["dst_agent"]) for d in t.table("descs").to_pylist()]
    assert ops == [(0, "WRITE", "prefill", "decode")] * 3 + [(1, "WRITE", "prefill", "decode")] * 3 + \
        [(2, "READ", "prefill", "decode")]
    assert len(events(t, "xfer_done")) == 3 and len(events(t, "xfer_release")) == 2
    assert [(e["agent"], e["msg"]) for e in events(t, "notif_recv")] == [
        ("decode", b"42_kv_0_1_0"), ("decode", b"42_kv_0_1_0"), ("prefill", b"req-7:1"), ("prefill", b"42_aux")]
    assert [(e["agent"], e["request"]) for e in events(t, "notif_send")] == [("decode", "42")]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_processes_with_listener_metadata_exchange(tmp_path, validate_trace):
    plain = run_plain("pd_two_procs.py")
    traced = record(tmp_path / "p.kvtrace", "pd_two_procs.py")
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    validate_trace(tmp_path / "p.kvtrace")
    t = open_trace(str(tmp_path / "p.kvtrace"))
    assert len(t.shards) == 2 and all(s.name.startswith("pd_two_procs-") for s in t.shards)
    ev = events(t)
    by_agent = {}
    for e in ev:
        by_agent.setdefault(e["agent"], set()).add(e["shard"])
    assert len(by_agent["prefill"]) == len(by_agent["decode"]) == 1 and by_agent["prefill"] != by_agent["decode"]
    p_shard, d_shard = by_agent["prefill"].pop(), by_agent["decode"].pop()
    kinds = lambda shard: sorted(e["kind"] for e in ev if e["shard"] == shard)  # noqa: E731
    assert kinds(p_shard) == ["notif_recv", "notif_recv", "register", "xfer_done", "xfer_post", "xfer_release"]
    assert kinds(d_shard) == ["notif_recv", "notif_send", "register", "xfer_done", "xfer_post", "xfer_release"]
    descs = t.table("descs").to_pylist()
    assert [(d["shard"], d["op"], d["src_agent"], d["dst_agent"]) for d in descs if d["op"] == "WRITE"] == \
        [(p_shard, "WRITE", "prefill", "decode")] * 3
    assert [(d["shard"], d["src_agent"], d["dst_agent"]) for d in descs if d["op"] == "READ"] == \
        [(d_shard, "prefill", "decode")]
    # the cross-shard pairs happens-before is built from: post -> notification on the other side
    post = [e for e in ev if e["kind"] == "xfer_post" and e["shard"] == p_shard][0]
    recv = [e for e in ev if e["kind"] == "notif_recv" and e["shard"] == d_shard]
    assert post["msg"] == recv[0]["msg"] == b"7_kv_0_1_0" and recv[0]["peer"] == "prefill"
    assert {e["request"] for e in ev if e["msg"] in (b"8:2", b"7_aux", b"7_kv_0_1_0")} == {"8", "7"}


@pytest.mark.timeout(120)
def test_import_nixl_package_custom_tag_and_exit_code(tmp_path, validate_trace):
    traced = record(tmp_path / "n.kvtrace", "via_nixl_pkg.py", "3", tag=r"job=(?P<request>\w+)")
    assert traced.returncode == 3
    assert "moved True" in traced.stdout
    validate_trace(tmp_path / "n.kvtrace")
    t = open_trace(str(tmp_path / "n.kvtrace"))
    assert t.manifest["exit_code"] == 3
    assert [(e["kind"], e["request"]) for e in events(t) if e["kind"] in ("xfer_post", "notif_send")] == \
        [("xfer_post", "alpha"), ("notif_send", "beta")]
    assert sorted(e["request"] for e in events(t, "notif_recv")) == ["alpha", "beta"]


@pytest.mark.timeout(120)
def test_kill_9_keeps_what_was_flushed(tmp_path, validate_trace):
    traced = record(tmp_path / "k.kvtrace", "via_nixl_pkg.py", "0", "--kill")
    assert traced.returncode == 128 + 9
    assert "not closed" in traced.stderr
    validate_trace(tmp_path / "k.kvtrace")
    t = open_trace(str(tmp_path / "k.kvtrace"))
    assert sorted(e["kind"] for e in events(t)) == sorted(
        ["register", "register", "xfer_post", "xfer_done", "notif_send", "notif_recv", "notif_recv"])


@pytest.mark.parametrize("argv, message", [
    (["--request-tag", "(unclosed", "--", sys.executable, "-c", "pass"], "regular expression"),
    (["--request-tag", r"\d+", "--", sys.executable, "-c", "pass"], "named group"),
    (["--", "/nonexistent/program"], "cannot run"),
])
def test_bad_input_one_line(tmp_path, argv, message):
    r = subprocess.run([sys.executable, "-m", "kvtrace", "record", "-o", str(tmp_path / "b.kvtrace"), *argv],
                       capture_output=True, text=True, env=_env(), timeout=60)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_existing_output_needs_force(tmp_path):
    out = tmp_path / "x.kvtrace"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"format": "kvtrace"}))
    args = ["record", "-o", str(out), "--", sys.executable, "-c", "print('hi')"]
    r = subprocess.run([sys.executable, "-m", "kvtrace", *args], capture_output=True, text=True, env=_env())
    assert r.returncode == 2 and "--force" in r.stderr
    r = subprocess.run([sys.executable, "-m", "kvtrace", *args[:3], "--force", *args[3:]], capture_output=True,
                       text=True, env=_env())
    assert r.returncode == 0 and r.stdout == "hi\n"
    assert json.loads((out / "manifest.json").read_text())["shards"] == []  # no agent, no shard


@pytest.mark.timeout(120)
def test_fork_child_gets_own_shard_and_user_sitecustomize_still_runs(tmp_path, validate_trace):
    """Regression: a fork child inherits the parent's recorder object; it must open its own
    shard (and close it, although fork children leave through os._exit)."""
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('user sitecustomize ran')\n")
    env = _env()
    env["PYTHONPATH"] = str(site)
    plain = subprocess.run([sys.executable, os.path.join(PROGRAMS, "forked.py")], capture_output=True,
                           text=True, env=env, timeout=60)
    out = tmp_path / "f.kvtrace"
    traced = subprocess.run([sys.executable, "-m", "kvtrace", "record", "-o", str(out), "--", sys.executable,
                             os.path.join(PROGRAMS, "forked.py")], capture_output=True, text=True, env=env,
                            timeout=60)
    assert traced.returncode == plain.returncode == 0
    # the launcher's interpreter runs the user's sitecustomize too, hence one extra line
    assert traced.stdout == "user sitecustomize ran\n" + plain.stdout
    validate_trace(out)
    t = open_trace(str(out))
    assert len(t.shards) == 2 and all(s.closed for s in t.shards)
    agents = {}
    for e in events(t):
        agents.setdefault(e["shard"], set()).add(e["agent"])
    assert sorted(map(sorted, agents.values())) == [["child"], ["parent"]]


@pytest.mark.timeout(60)
def test_sigterm_to_launcher_reaches_the_program(tmp_path):
    import signal
    prog = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(5)))\n"
            "print('ready', flush=True)\ntime.sleep(30)\n")
    p = subprocess.Popen([sys.executable, "-m", "kvtrace", "record", "-o", str(tmp_path / "s.kvtrace"), "--",
                          sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True, env=_env())
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 5 and p.stdout.read() == "got TERM\n"


@pytest.mark.timeout(120)
def test_failure_reported_by_check_xfer_state_is_an_xfer_error(tmp_path, validate_trace):
    """ERR path through check_xfer_state: NIXL raises while the transfer is in flight
    (peer destroyed mid-transfer, UCX over TCP so the 4 MiB WRITE is still running)."""
    env = _env()
    env["UCX_TLS"] = "tcp"
    out = tmp_path / "err.kvtrace"
    r = subprocess.run([sys.executable, "-m", "kvtrace", "record", "-o", str(out), "--", sys.executable,
                        os.path.join(PROGRAMS, "err_inflight.py")], capture_output=True, text=True, env=env,
                       timeout=100)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if " UCX " not in ln]  # UCX logs its own errors to stdout
    assert lines[0] == "post PROC"
    validate_trace(out)
    ev = [(e["kind"], e["xfer"], e["status"], e["request"]) for e in events(open_trace(str(out)))
          if e["kind"].startswith("xfer")]
    if lines[1] == "state DONE":  # the transfer beat the teardown: then the trace must say DONE
        assert ev[:2] == [("xfer_post", 0, None, "11"), ("xfer_done", 0, "DONE", "11")]
    else:
        assert lines[1] == "failed nixlRemoteDisconnectError"
        assert ev[:2] == [("xfer_post", 0, None, "11"), ("xfer_error", 0, "ERR", "11")]


@pytest.mark.timeout(120)
def test_bare_python_runs_in_the_recording_environment(tmp_path):
    """`.venv/bin/kvtrace record -- python prog.py` with the venv not activated (PATH
    without its bin): the child is the recording interpreter, and is traced."""
    kvtrace = os.path.join(os.path.dirname(sys.executable), "kvtrace")
    env = _env()
    env["PATH"] = "/usr/bin:/bin"
    env.pop("VIRTUAL_ENV", None)
    r = subprocess.run([kvtrace, "record", "-o", str(tmp_path / "b.kvtrace"), "--", "python",
                        os.path.join(PROGRAMS, "two_agents.py")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "not traced" not in r.stderr and "warning" not in r.stderr
    assert len(open_trace(str(tmp_path / "b.kvtrace")).shards) == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["isolated", "other-python"])
def test_a_child_that_cannot_be_traced_is_named(tmp_path, how):
    if how == "isolated":
        cmd = [sys.executable, "-I", os.path.join(PROGRAMS, "two_agents.py")]
        expect = "-I ignores PYTHONPATH or sitecustomize"
    else:
        other = "/usr/bin/python3"
        if not os.path.exists(other) or subprocess.run([other, "-c", "import kvtrace.tracer.autotrace"], cwd=tmp_path,
                                                       capture_output=True).returncode == 0:
            pytest.skip("needs a Python without kvtrace at /usr/bin/python3")
        cmd = [other, "-c", "print('hello')"]
        expect = "is not the Python kvtrace runs in"
    r = subprocess.run([sys.executable, "-m", "kvtrace", "record", "-o", str(tmp_path / "u.kvtrace"), "--", *cmd],
                       capture_output=True, text=True, env=_env(), timeout=120, cwd=tmp_path)
    assert "warning: this program will not be traced" in r.stderr and expect in r.stderr, r.stderr
    assert "no NIXL agent was traced" in r.stderr
