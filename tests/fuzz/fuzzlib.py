"""The format fuzzer's parts: random valid traces (TraceBuilder), mutations of a trace
directory, and running one command on it bounded in time.

A *case* is JSON data, so a found case is kept as a file in ``corpus/`` and replayed
by every run: ``{"trace": {...build params}, "mutations": [{...}, ...]}``.

Outcome of one command on one case (``run_bounded``):
  ok        exit 0 or 1 (1: findings / failing replay)
  refused   exit 2 with exactly one line on stderr, no traceback
  traceback an exception escaped the CLI (or a refusal of several lines)
  hang      the call did not finish within its time bound
"""
from __future__ import annotations

import io
import json
import multiprocessing
import os
import random
import shutil
import sys
import traceback

import pyarrow as pa
import pyarrow.ipc as ipc

from kvtrace.tracer.builder import TraceBuilder

TABLE_FILES = ("events", "descs", "dlists", "layouts")
BIG = [2**63 - 1, -2**63, 2**62, 2**40, -1]
COMMANDS = {
    "info": lambda t, out: ["info", t],
    "check": lambda t, out: ["check", t],
    "replay": lambda t, out: ["replay", t, "--scheduler", "random", "--seed", "1", "-o", os.path.join(out, "r.kvtrace")],
    "export": lambda t, out: ["export", t, "--format", "perfetto", "-o", os.path.join(out, "x.pftrace"), "--force"],
    "report": lambda t, out: ["report", t, "-o", os.path.join(out, "r.html")],
    "tui": None,   # the Textual pilot (run_tui)
}


# ------------------------------------------------------------------ valid traces
def build(path: str, p: dict) -> str:
    """A valid PD trace from parameters: ``requests`` requests of ``pages`` pages each over
    ``layers`` layers; ``early_free`` frees a source before its transfer is done; ``msgs``
    adds control messages; ``shards`` = 1 puts both agents in one shard; ``cycle`` adds two
    messages each received before the other is sent (a cycle in happens-before, which no
    real run can record: tools must say so, not loop)."""
    rng = random.Random(p.get("seed", 0))
    b = TraceBuilder(path)
    one = p.get("shards", 2) == 1
    pre = b.agent("prefill", shard="main" if one else None)
    dec = b.agent("decode", shard="main" if one else None)
    layers, pages, slots = p.get("layers", 1), p.get("pages", 2), p.get("slots", 8)
    for side in (pre, dec):
        side.pool("kv", layers=layers, slot_bytes=64, num_slots=slots)
    free_p, free_d = list(range(slots)), list(range(slots))
    if p.get("cycle"):
        pre.msg_recv(dec, "c1", b"after c0")
        pre.msg_send(dec, "c0", b"after c1")
        dec.msg_recv(pre, "c0", b"after c1")
        dec.msg_send(pre, "c1", b"after c0")
    for i in range(p.get("requests", 2)):
        r = f"r{i}"
        if len(free_p) < pages or len(free_d) < pages:
            break
        ps = [free_p.pop(rng.randrange(len(free_p))) for _ in range(pages)]
        ds = [free_d.pop(rng.randrange(len(free_d))) for _ in range(pages)]
        pre.req_start(r); dec.req_start(r)
        dec.alloc(r, "kv", ds)
        if p.get("msgs", True):
            dec.msg_send(pre, f"m{i}", json.dumps(ds).encode(), request=r)
            pre.msg_recv(dec, f"m{i}", json.dumps(ds).encode(), request=r)
        pre.alloc(r, "kv", ps); pre.write(r, "kv", ps)
        msg = f"{r}_kv_0_1_0".encode()
        x = pre.post(r, dec, src=("kv", ps), dst=("kv", ds), msg=msg, deliver="later")
        if p.get("early_free") and i == 0:
            pre.free(r, "kv", ps)
            free_p.extend(ps)
        x.deliver()
        dec.notif_recv(pre, msg, request=r); pre.done(x, r); pre.release(x, r)
        dec.read(r, "kv", ds)
        if not (p.get("early_free") and i == 0):
            pre.free(r, "kv", ps)
            free_p.extend(ps)
        dec.free(r, "kv", ds); free_d.extend(ds)
        pre.req_done(r); dec.req_done(r)
    return b.close()


# ------------------------------------------------------------------ mutations
def _files(trace: str) -> list[str]:
    out = []
    for root, _dirs, names in os.walk(trace):
        if "_index" in root:
            continue
        out += [os.path.relpath(os.path.join(root, n), trace) for n in sorted(names) if not n.startswith(".")]
    return sorted(out)


def _read_table(path: str) -> pa.Table:
    with open(path, "rb") as f:
        return ipc.open_stream(f).read_all()


def _write_table(path: str, t: pa.Table) -> None:
    with open(path, "wb") as f, ipc.new_stream(f, t.schema) as w:
        w.write_table(t)


def _pick_stream(trace: str, m: dict) -> str | None:
    streams = [f for f in _files(trace) if f.endswith(".arrows")]
    if not streams:
        return None
    return os.path.join(trace, streams[m["file"] % len(streams)])


def mutate(trace: str, m: dict) -> None:
    """Apply one mutation (JSON data) to the trace directory in place."""
    kind = m["kind"]
    files = _files(trace)
    if kind in ("flip", "truncate") and files:
        path = os.path.join(trace, files[m["file"] % len(files)])
        data = bytearray(open(path, "rb").read())
        if not data:
            return
        pos = m["pos"] % len(data)
        if kind == "flip":
            data[pos] ^= (m.get("bits", 1) & 0xFF) or 1
        else:
            data = data[:pos]
        open(path, "wb").write(bytes(data))
        return
    if kind == "manifest":
        path = os.path.join(trace, "manifest.json")
        man = json.load(open(path))
        man[m["key"]] = m["value"]
        json.dump(man, open(path, "w"))
        return
    if kind == "shard_json":
        sh = [f for f in files if f.endswith("shard.json")]
        if sh:
            path = os.path.join(trace, sh[m["file"] % len(sh)])
            json.dump(m["value"], open(path, "w"))
        return
    path = _pick_stream(trace, m)
    if path is None:
        return
    t = _read_table(path)
    if t.num_rows == 0 or not t.column_names:
        return
    col = t.column_names[m["col"] % len(t.column_names)]
    i = t.column_names.index(col)
    if kind == "wrong_type":   # the column as strings, or as int64 of its lengths
        c = t.column(i)
        if m.get("as") == "int" and not pa.types.is_integer(c.type):
            new = pa.array([None if v is None else (len(v) if hasattr(v, "__len__") else 0) for v in c.to_pylist()],
                           pa.int64())
        else:
            new = pa.array([None if v is None else str(v) for v in c.to_pylist()], pa.string())
        t = t.set_column(i, col, new)
    elif kind == "huge":       # one integer cell (or list element) set to an extreme value
        c = t.column(i)
        row = m["row"] % t.num_rows
        vals = c.to_pylist()
        big = BIG[m["big"] % len(BIG)]
        if pa.types.is_integer(c.type):
            if pa.types.is_unsigned_integer(c.type):
                big = abs(big) if big != -2**63 else 2**64 - 1
            vals[row] = big
            try:
                t = t.set_column(i, col, pa.array(vals, c.type))
            except (pa.ArrowInvalid, OverflowError):
                t = t.set_column(i, col, pa.array(vals, pa.int64() if big < 0 else pa.uint64()))
        elif pa.types.is_list(c.type) and vals[row]:
            vals[row] = [abs(big)] * len(vals[row])
            t = t.set_column(i, col, pa.array(vals, pa.list_(pa.uint64())))
        else:
            return
    elif kind == "dup_seq":    # seq (or the table's first integer column) repeated
        if "seq" in t.column_names:
            i, col = t.column_names.index("seq"), "seq"
        vals = t.column(i).to_pylist()
        a, b = m["row"] % len(vals), m["row2"] % len(vals)
        vals[a] = vals[b]
        t = t.set_column(i, col, pa.array(vals, t.column(i).type))
    elif kind == "drop_col":
        t = t.remove_column(i)
    elif kind == "null_col":
        t = t.set_column(i, col, pa.nulls(t.num_rows, t.column(i).type))
    else:
        raise ValueError(kind)
    _write_table(path, t)


def make_case(root: str, case: dict) -> str:
    """Build the case's trace under ``root`` and apply its mutations; returns its path."""
    path = os.path.join(root, "case.kvtrace")
    if os.path.exists(path):
        shutil.rmtree(path)
    build(path, case["trace"])
    for m in case["mutations"]:
        try:
            mutate(path, m)
        except (OSError, ValueError, KeyError, IndexError, pa.ArrowException):
            pass  # a mutation that does not apply to this trace leaves it as it is
    return path


# ------------------------------------------------------------------ bounded runs
def _child(argv, out_path, err_path, q):
    sys.stdout = open(out_path, "w")
    sys.stderr = open(err_path, "w")
    try:
        if argv[0] == "tui":
            rc = _tui(argv[1])
        else:
            from kvtrace.cli import main
            rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    except BaseException:
        traceback.print_exc()
        rc = 99
    sys.stdout.flush()
    sys.stderr.flush()
    q.put(rc)


def _tui(trace: str) -> int:
    """The TUI as `kvtrace tui` opens it, driven by the pilot through every panel."""
    import asyncio

    from kvtrace.errors import KvtraceError
    try:
        from kvtrace.analysis.session import TraceSession
        from kvtrace.tui.app import KvtraceApp
        from kvtrace.tui.source import TimelineSource
        session = TraceSession(trace)
        source = TimelineSource(session)
    except KvtraceError as e:
        print(f"kvtrace tui: {e}", file=sys.stderr)
        return 2

    async def drive():
        app = KvtraceApp(source)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(100):
                if app.findings is not None:
                    break
                await pilot.pause(0.05)
            for key in ("j", "j", "t", "s", "f", "enter", "n", "G", "e"):
                await pilot.press(key)
            await pilot.pause(0.1)
    asyncio.run(drive())
    return 0


def run_bounded(cmd: str, trace: str, workdir: str, timeout: float = 60.0) -> tuple[str, str]:
    """Run command ``cmd`` of COMMANDS on ``trace`` in a forked child; (outcome, stderr)."""
    os.makedirs(workdir, exist_ok=True)
    argv = ["tui", trace] if cmd == "tui" else COMMANDS[cmd](trace, workdir)
    out, err = os.path.join(workdir, "stdout"), os.path.join(workdir, "stderr")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(argv, out, err, q))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        return "hang", ""
    stderr = open(err).read() if os.path.exists(err) else ""
    rc = q.get() if not q.empty() else p.exitcode
    if rc in (0, 1) and "Traceback" not in stderr:
        return "ok", stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(("E1", "W1", "I1"))]
    if rc == 2 and "Traceback" not in stderr and len(lines) <= 1:
        return "refused", stderr
    return "traceback", stderr


def case_id(case: dict) -> str:
    return json.dumps(case, sort_keys=True, separators=(",", ":"))
