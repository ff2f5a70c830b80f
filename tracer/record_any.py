"""``kvtrace record -o DIR -- CMD``: run any NIXL program unmodified, every agent traced.

The launcher creates the trace directory, then runs CMD with ``autotrace/_site`` first on
PYTHONPATH and ``KVTRACE_TRACE_DIR`` set; the injected ``sitecustomize`` patches NIXL's
``nixl_agent`` in that process and, since the environment is inherited, in every Python
child it starts (multiprocessing spawn included). Each process that creates an agent
writes its own shard ``<prog>-<pid>`` and lists it in the manifest; the launcher marks the
trace complete when CMD exits. CMD's stdin/stdout/stderr are CMD's own and its exit code
is returned unchanged.

CMD runs in the recording interpreter's environment: a bare ``python``/``python3`` is
that interpreter (``sys.executable``), and its ``bin`` folder (a venv's) comes first on
PATH, so ``.venv/bin/kvtrace record -- python prog.py`` traces without activating the
venv. What cannot be traced is said before the run (another interpreter that cannot load
kvtrace; ``-E``/``-I``/``-S``, which skip PYTHONPATH or sitecustomize) and after it (no
agent traced).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys


def _prog_name(cmd: list[str]) -> str:
    """'prog' for ``python prog.py``, ``python -m pkg.prog`` or ``./prog``."""
    exe = os.path.basename(cmd[0])
    if exe.startswith("python"):
        args = cmd[1:]
        for i, a in enumerate(args):
            if a == "-m" and i + 1 < len(args):
                return args[i + 1].rsplit(".", 1)[-1]
            if a == "-c":
                return "python-c"
            if not a.startswith("-"):
                return os.path.splitext(os.path.basename(a))[0] or "python"
        return "python"
    return os.path.splitext(exe)[0] or "proc"


def _prepare_dir(out: str, force: bool) -> None:
    from ..errors import UsageError
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise UsageError(f"{out} exists and is not a directory")
        if os.listdir(out):
            if not force:
                raise UsageError(f"{out} already exists; pass --force to overwrite it")
            if not os.path.exists(os.path.join(out, "manifest.json")):
                raise UsageError(f"{out} is not a trace directory; refusing to delete it")
            shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)


_BARE_PYTHON = ("python", "python3", f"python3.{sys.version_info.minor}")


def resolve_command(cmd: list[str]) -> list[str]:
    """``cmd`` with a bare ``python``/``python3`` replaced by the recording interpreter."""
    if cmd and cmd[0] in _BARE_PYTHON:
        return [sys.executable] + cmd[1:]
    return cmd


def untraceable(cmd: list[str], env: dict) -> str | None:
    """Why ``cmd``'s Python would run untraced, or None when it will be traced (or is no
    Python at all: its Python children are checked by their own sitecustomize)."""
    exe = shutil.which(cmd[0], path=env.get("PATH")) if os.sep not in cmd[0] else cmd[0]
    if exe is None:
        return None  # Popen reports it
    if not os.path.basename(exe).startswith("python"):
        return None
    flags = [a for a in cmd[1:] if a.startswith("-") and not a.startswith("--")][:8]
    for a in flags:
        if a in ("-c", "-m"):
            break
        if any(f in a[1:] for f in "EIS") and not a.startswith(("-W", "-X")):
            return f"{cmd[0]} {a} ignores PYTHONPATH or sitecustomize, which is how kvtrace traces it"
    if os.path.abspath(exe) == os.path.abspath(sys.executable):  # not realpath: venvs share one binary
        return None
    probe = subprocess.run([exe, "-c", "import kvtrace.tracer.autotrace"], env=env, capture_output=True,
                           timeout=60)
    if probe.returncode != 0:
        return (f"{exe} is not the Python kvtrace runs in ({sys.executable}) and cannot load kvtrace; "
                f"run the program with {sys.executable}, or install kvtrace in that environment")
    return None


def child_env(trace_dir: str, request_tag: str | None, prog: str, base: dict | None = None,
              ring: str | None = None, hooks: str | None = None) -> dict:
    """The environment that makes a Python process trace its NIXL agents into ``trace_dir``:
    the recording interpreter's ``bin`` first on PATH, PYTHONPATH with the tracer's site."""
    from . import autotrace
    env = dict(os.environ if base is None else base)
    bindir = os.path.dirname(sys.executable)
    path = env.get("PATH", "").split(os.pathsep) if env.get("PATH") else []
    if bindir and (not path or path[0] != bindir):
        env["PATH"] = os.pathsep.join([bindir] + [p for p in path if p != bindir])
    if sys.prefix != sys.base_prefix:  # a venv: as if activated
        env["VIRTUAL_ENV"] = sys.prefix
    site = os.path.join(os.path.dirname(os.path.abspath(autotrace.__file__)), "_site")
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[autotrace.ENV_DIR] = os.path.abspath(trace_dir)
    env[autotrace.ENV_TAG] = request_tag or "auto"
    env[autotrace.ENV_PROG] = prog
    if ring:
        from .ring import ENV_RING
        env[ENV_RING] = ring
    if hooks:
        from .integrations import ENV_HOOKS
        from .integrations._patch import ENV_LAUNCHED
        env[ENV_HOOKS] = hooks
        env[ENV_LAUNCHED] = "1"
    return env


def run_program(args, cmd: list[str]) -> int:
    """Run ``cmd`` traced into ``args.output``; returns cmd's exit code (128+N for signal N)."""
    from ..errors import UsageError
    from . import manifest
    from .tags import make_parser
    try:
        make_parser(args.request_tag)
    except ValueError as e:
        raise UsageError(str(e)) from None
    hooks = getattr(args, "hooks", None)
    if hooks:
        from .integrations import HookSpecError, parse
        try:
            parse(hooks)
        except HookSpecError as e:
            raise UsageError(str(e)) from None
    out = args.output
    _prepare_dir(out, bool(getattr(args, "force", False)))
    cmd = resolve_command(cmd)
    prog = _prog_name(cmd)
    ring = getattr(args, "ring", None)
    env = child_env(out, args.request_tag, prog, ring=ring, hooks=hooks)
    why = untraceable(cmd, env)
    if why:
        print(f"kvtrace record: warning: this program will not be traced: {why}", file=sys.stderr)
    manifest.update(out, tool="kvtrace", command=list(cmd), mode="program",
                    request_tag=args.request_tag or "auto", **({"ring": ring} if ring else {}))
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        manifest.finish(out, exit_code=None, error=str(e))
        raise UsageError(f"cannot run {cmd[0]}: {e.strerror or e}") from None
    # a terminal's Ctrl-C reaches the child by itself; a SIGTERM/SIGHUP sent to the
    # launcher alone is passed on, so the program ends as it would have without kvtrace
    forward = {sig: signal.signal(sig, lambda s, _f: proc.send_signal(s)) for sig in (signal.SIGTERM, signal.SIGHUP)}
    if ring:  # `kvtrace dump LAUNCHER_PID`: the launcher triggers every process of the session
        from .ring_dump import TriggerLog
        log = TriggerLog(out)
        forward[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda s, _f: log.append("signal SIGUSR1 (launcher)"))
    try:
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:  # the child got the same SIGINT; wait for it to finish
                continue
    finally:
        for sig, old in forward.items():
            signal.signal(sig, old)
    man = manifest.read(out)
    manifest.finish(out, exit_code=rc)
    lines = []
    if hooks:
        from .integrations.summary import hook_lines
        lines = hook_lines(out, hooks)
    if ring:
        dumps = man.get("dumps") or []
        print(f"kvtrace record: ring {ring}: {len(dumps)} dump(s)" + "".join(f"\n  {d}" for d in dumps), file=sys.stderr)
    else:  # a program that never imported the engine's connector gets that line, not a second one
        _summary(out, man.get("shards", []), say_empty=not lines)
    for line in lines:
        print(f"kvtrace record: {line}", file=sys.stderr)
    return rc if rc >= 0 else 128 - rc


def _summary(out: str, shards: list[str], say_empty: bool = True) -> None:
    import json
    events, unclosed = 0, []
    for s in shards:
        try:
            with open(os.path.join(out, s, "shard.json")) as f:
                info = json.load(f)
        except (OSError, ValueError):
            unclosed.append(s)
            continue
        events += int(info.get("events") or 0)
        if not info.get("closed"):
            unclosed.append(s)
    note = f"; not closed: {', '.join(unclosed)}" if unclosed else ""
    print(f"kvtrace record: {len(shards)} shard(s), {events} events -> {out}{note}", file=sys.stderr)
    if not shards and say_empty:
        print("kvtrace record: no NIXL agent was traced: the program created none, or its Python could "
              "not load kvtrace (see any 'not traced' message above)", file=sys.stderr)

