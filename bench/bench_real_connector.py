"""Recording cost on SGLang's real NIXL connector: the same transfers with and without kvtrace.

Runs tests/engines/sglang_pd.py (SGLang 0.5.21's connector, prefill and decode as two
processes over NIXL/UCX on DRAM, index-K sized by tokens: a clean transfer) once per
(page size, mode), the modes interleaved per size (order alternating), all in one run:

  plain     the driver alone
  traced    kvtrace record --hooks sglang (NIXL calls + layouts, pages, checksums, messages)
  no-sums   kvtrace record --hooks sglang:-content (everything but the page checksums)
  sync      traced, but page checksums hashed inside send() as before tracer/async_sums.py (with --sync)
  ring      kvtrace record --hooks sglang --ring SPEC (with --ring: the flight recorder, in memory)
  ring-no-sums  the same without page checksums (with --ring)
  ring@0.2ms, ring-no-sums@0.2ms  the two ring modes with the recorder's flush thread at a
            0.2 ms GIL switch interval (KVTRACE_BACKGROUND_SWITCH_S, tracer/gil.py) (with --ab)

Prints, per page size (bytes of one kv page of one layer), the transfer throughput
(bytes of all pages and layers / time from the first chunk queued to the last Success,
per wave of requests, summed), each mode's ratio to plain, and the added median latency
per request (first chunk queued to Success, prefill side). With --reps N every cell runs N
times (all modes of a size interleaved in each rep, the order rotating) and the medians are
shown. A second table says what the page checksums cost in the traced runs: the wall time
SGLang's send() spent hashing (inside the timed window, prefill side; the sync mode), the
recorder's hashing thread spent (prefill, overlapped with the transfers; the default) and the first
Success poll spent (decode side), from KVTRACE_CHECKSUM_LOG (tracer/integrations/_memory.py); a
third the CPU seconds of each whole run (steadier than wall time on a loaded machine). Targets: traced ≥ 95% of plain throughput from 256 KiB pages on (issue 22); ring
≥ 98% (issue 20).

    .venv/bin/python bench/bench_real_connector.py [--sizes 16K,64K,256K,1M,2M] [--requests 24]
        [--reps 3] [--ring 30s] [--sync] [--base-tree OLD_CHECKOUT]

Needs .venv-engines (scripts/setup_engines.sh). Results: bench/results/real_connector.json, and a new
section on top of bench/results/real_connector.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("KVTRACE_ENGINES_VENV") or os.path.join(ROOT, ".venv-engines")
PY = os.path.join(VENV, "bin", "python")
DRIVER = os.path.join(ROOT, "tests", "engines", "sglang_pd.py")
KV_TOKEN_BYTES = 1152
# mode -> (hooks, records into a ring, extra environment)
MODES = {"plain": (None, False, {}), "traced": ("sglang", False, {}), "no-sums": ("sglang:-content", False, {}),
         "sync": ("sglang", False, {"KVTRACE_SYNC_CHECKSUMS": "1"}),
         "ring": ("sglang", True, {}), "ring-no-sums": ("sglang:-content", True, {}),
         "ring@0.2ms": ("sglang", True, {"KVTRACE_BACKGROUND_SWITCH_S": "0.0002"}),
         "ring-no-sums@0.2ms": ("sglang:-content", True, {"KVTRACE_BACKGROUND_SWITCH_S": "0.0002"})}
SWAP = os.path.join(ROOT, "bench", "ring_store_swap")
# with --base-ring-store PATH: the ring modes again with tracer/ring_store.py from PATH (old code)
BASE = {"ring-base": ("sglang", True, {}), "ring-no-sums-base": ("sglang:-content", True, {})}
SUMMED = ("traced", "sync", "ring", "ring@0.2ms", "ring-base")
AB = ("ring@0.2ms", "ring-no-sums@0.2ms")


def size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * mult)


def run_once(tmp: str, page_bytes: int, mode: str, a) -> dict:
    tokens = max(1, page_bytes // KV_TOKEN_BYTES)
    rep = os.path.join(tmp, f"{mode}-{page_bytes}.json")
    prog = [PY, DRIVER, "--index-k", "tokens", "--page-tokens", str(tokens), "--slots", str(a.slots),
            "--requests", str(a.requests), "--max-pages", str(a.max_pages), "--wave", str(a.wave),
            "--report", rep]
    hooks, in_ring, extra = MODES[mode] if mode in MODES else BASE[mode]
    if mode in BASE and a.base_tree:   # the whole of kvtrace from the other checkout
        extra = dict(extra, PYTHONPATH=os.pathsep.join(x for x in (a.base_farm, os.environ.get("PYTHONPATH")) if x))
    elif mode in BASE:
        extra = dict(extra, KVTRACE_BENCH_RING_STORE=a.base_ring_store,
                     PYTHONPATH=os.pathsep.join(x for x in (SWAP, os.environ.get("PYTHONPATH")) if x))
    ring = ["--ring", a.ring] if in_ring else []
    cmd = prog if hooks is None else [PY, "-m", "kvtrace", "record", "--hooks", hooks, *ring, "--force",
                                      "-o", os.path.join(tmp, f"{mode}-{page_bytes}.kvtrace"), "--"] + prog
    log = os.path.join(tmp, f"{mode}-{page_bytes}.sums.jsonl")
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, KVTRACE_CHECKSUM_LOG=log, **extra)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=900, env=env)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)   # every process of the run was waited for
    cpu_s = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    if p.returncode != 0 or not os.path.exists(rep + ".prefill"):
        raise SystemExit(f"{mode} {page_bytes}: driver failed (rc {p.returncode}): {p.stderr[-1500:]}")
    with open(rep + ".prefill") as f:
        t = json.load(f)["timing"]
    with open(rep) as f:
        loop_cpu = t.get("loop_cpu_s", float("nan")) + json.load(f).get("loop_cpu_s", float("nan"))
    # bytes, wall s, cpu s of the hashing: in send() (sync), on the hashing thread (off send()), at the poll
    sums = {"send": [0, 0.0, 0.0], "thread": [0, 0.0, 0.0], "poll": [0, 0.0, 0.0]}
    where = {"record_writes": "send", "sender_send": "send", "hashed_in_background": "thread"}
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                e = json.loads(line)
                side = sums[where.get(e["by"], "poll")]
                side[0] += e["bytes"]
                side[1] += e["wall_s"]
                side[2] += e["cpu_s"]
    return {"page_bytes": tokens * KV_TOKEN_BYTES, "mode": mode, "bytes": t["bytes"], "busy_s": t["busy_s"],
            "gbps": t["bytes"] / t["busy_s"] / 1e9, "lat_ms": statistics.median(t["latency_s"]) * 1e3,
            "sums": sums, "cpu_s": cpu_s, "loop_cpu_s": loop_cpu}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="16K,64K,256K,1M,2M")
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--max-pages", type=int, default=8)
    p.add_argument("--wave", type=int, default=4)
    p.add_argument("--slots", type=int, default=48)
    p.add_argument("--reps", type=int, default=1, help="runs per cell (medians shown)")
    p.add_argument("--ring", nargs="?", const="30s", default=None, metavar="SPEC",
                   help="add the ring column: recording with --ring SPEC (default 30s)")
    p.add_argument("--sync", action="store_true",
                   help="add the sync column: page checksums hashed inside send() (KVTRACE_SYNC_CHECKSUMS=1)")
    p.add_argument("--ab", action="store_true",
                   help="with --ring: add ring@0.2ms and ring-no-sums@0.2ms (the flush thread at a 0.2 ms "
                        "GIL switch interval: tracer/gil.py, off by default)")
    p.add_argument("--base-ring-store", metavar="PATH",
                   help="with --ring: add ring-base and ring-no-sums-base, the ring modes with "
                        "tracer/ring_store.py taken from PATH (another checkout's: old vs new in one run)")
    p.add_argument("--base-tree", metavar="PATH",
                   help="with --ring: add ring-base and ring-no-sums-base, the ring modes with all of kvtrace "
                        "taken from the checkout at PATH (e.g. `git worktree add /tmp/old main`: old vs new in one run)")
    p.add_argument("--only", metavar="MODES",
                   help="run only these modes (comma-separated; plain is always run: the ratios' base)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "real_connector"))
    a = p.parse_args(argv)
    if not os.path.exists(PY):
        print(f"bench_real_connector: {PY} missing: run scripts/setup_engines.sh", file=sys.stderr)
        return 2
    modes = [m for m in MODES if (a.ring or not MODES[m][1]) and (a.sync or m != "sync") and (a.ab or m not in AB)]
    if a.base_ring_store and a.base_tree:
        p.error("--base-ring-store and --base-tree: give one")
    if a.base_ring_store:
        if not (a.ring and os.path.isfile(a.base_ring_store)):
            p.error(f"--base-ring-store needs --ring and a file, not {a.base_ring_store!r}")
        modes += list(BASE)
    if a.base_tree:
        if not (a.ring and os.path.isfile(os.path.join(a.base_tree, "kvtrace", "__init__.py"))):
            p.error(f"--base-tree needs --ring and a kvtrace checkout, not {a.base_tree!r}")
        modes += list(BASE)
    if a.only:
        want = {m.strip() for m in a.only.split(",")} | {"plain"}
        unknown = want - set(modes)
        if unknown:
            p.error(f"--only: {', '.join(sorted(unknown))} not among this run's modes ({', '.join(modes)})")
        modes = [m for m in modes if m in want]
    try:
        sizes = [size(x) for x in a.sizes.split(",")]
    except (ValueError, IndexError):
        p.error(f"--sizes: page sizes like 16K,256K,2M, not {a.sizes!r}")
    if a.reps < 1 or min(sizes) < KV_TOKEN_BYTES:
        p.error(f"--reps must be >= 1 and page sizes >= {KV_TOKEN_BYTES} B (one token)")
    rows = []
    t0, load0 = time.time(), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kvtrace-bench-") as tmp:
        if a.base_tree:
            a.base_farm = _farm(a.base_tree, os.path.join(tmp, "base"))
        for rep in range(a.reps):
            for i, s in enumerate(sizes):
                k = (rep + i) % len(modes)   # rotate the order: no mode always runs first or last
                for mode in modes[k:] + modes[:k]:
                    r = run_once(tmp, s, mode, a)
                    r["rep"] = rep
                    rows.append(r)
                    print(f"  rep {rep} {mode:>8} page {r['page_bytes']:>8} B: {r['gbps']:.3f} GB/s, "
                          f"{r['lat_ms']:.1f} ms/request", file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    lines = ["SGLang 0.5.21 NIXL connector, DRAM over UCX, two processes, "
             f"{a.requests} requests x 2..{a.max_pages} pages, {a.wave} in flight; "
             "kv 2 layers + index-K 2 layers per page",
             f"{'page':>9} {'plain GB/s':>11}" + "".join(f" {m + ' GB/s':>13} {'ratio':>6}" for m in modes[1:])
             + f" {'plain ms':>9}" + "".join(f" {'+' + m + ' ms':>11}" for m in modes[1:])]
    med = {}
    for pb in sorted({r["page_bytes"] for r in rows}):
        for m in modes:
            cell = [r for r in rows if r["page_bytes"] == pb and r["mode"] == m]
            med[m] = (statistics.median(r["gbps"] for r in cell), statistics.median(r["lat_ms"] for r in cell))
        pl = med["plain"]
        lines.append(f"{_kib(pb):>9} {pl[0]:>11.3f}" + "".join(f" {med[m][0]:>13.3f} {med[m][0] / pl[0]:>6.2f}"
                                                           for m in modes[1:])
                     + f" {pl[1]:>9.1f}" + "".join(f" {med[m][1] - pl[1]:>+11.1f}" for m in modes[1:]))
    lines += _cost_table(rows, [m for m in modes if m in SUMMED])
    lines += _cpu_table(rows, modes)
    kvh = "C extension" if _native_kvh64() else "numpy (no C extension built)"
    lines.append(f"({a.reps} run(s) per cell, medians; modes interleaved; kvh64 on the CPU: {kvh}; "
                 f"{time.time() - t0:.0f} s in all; load average {load0[0]:.1f} at the start, "
                 f"{load1[0]:.1f} at the end)")
    print("\n".join(lines))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    old = open(a.out + ".txt").read() if os.path.exists(a.out + ".txt") else ""
    with open(a.out + ".txt", "w") as f:   # a new section on top; earlier runs stay below
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0))
        f.write(f"## {stamp}: $ {' '.join(['.venv/bin/python', 'bench/bench_real_connector.py'] + sys.argv[1:])}\n"
                + "\n".join(lines) + "\n\n" + old)
    with open(a.out + ".json", "w") as f:
        json.dump({"args": vars(a), "load": [load0, load1], "rows": rows}, f, indent=1)
    return 0


def _cost_table(rows, modes) -> list[str]:
    """Where the checksummed modes' time goes (medians over reps)."""
    out = [f"page checksums (kvh64 of every page of every layer) in the {'/'.join(modes)} runs: hashing wall"
           " time in send() (prefill, inside the timed window: sync), on the recorder's hashing thread"
           " (prefill, off send()), and at the first Success poll (decode)",
           f"{'page':>9} {'mode':>7} {'busy s':>7} {'send() hash s':>14} {'share':>6} {'thread hash s':>14}"
           f" {'poll hash s':>12} {'hash GB/s wall':>15} {'GB/s cpu':>9}"]
    kinds = ("send", "thread", "poll")
    for pb in sorted({r["page_bytes"] for r in rows}):
        for m in modes:
            cell = [r for r in rows if r["page_bytes"] == pb and r["mode"] == m]
            busy = statistics.median(r["busy_s"] for r in cell)
            send, thread, poll = (statistics.median(r["sums"][k][1] for r in cell) for k in kinds)
            hashed = sum(r["sums"][k][0] for r in cell for k in kinds)
            wall = sum(r["sums"][k][1] for r in cell for k in kinds)
            cpu = sum(r["sums"][k][2] for r in cell for k in kinds)
            out.append(f"{_kib(pb):>9} {m:>7} {busy:>7.2f} {send:>14.2f} {send / busy:>6.0%} {thread:>14.2f}"
                       f" {poll:>12.2f} {hashed / max(wall, 1e-9) / 1e9:>15.2f} {hashed / max(cpu, 1e-9) / 1e9:>9.2f}")
    return out


def _cpu_table(rows, modes) -> list[str]:
    """CPU seconds of whole runs (every process, start-up included): steadier than wall time
    on a loaded machine, the added seconds are what recording costs in CPU."""
    out = ["CPU seconds of each whole run (all processes, imports included; medians), and what each mode adds",
           f"{'page':>9} {'plain CPU s':>12}" + "".join(f" {'+' + m + ' s':>11}" for m in modes[1:])]
    for pb in sorted({r["page_bytes"] for r in rows}):
        med = {m: statistics.median(r["cpu_s"] for r in rows if r["page_bytes"] == pb and r["mode"] == m)
               for m in modes}
        out.append(f"{_kib(pb):>9} {med['plain']:>12.1f}" + "".join(f" {med[m] - med['plain']:>+11.1f}"
                                                                   for m in modes[1:]))
    # the waves only (both processes, every thread, from the first wave to the last's Success):
    # what recording adds to the serving loop, without start-up's ~17 s of imports and its noise
    out += ["CPU seconds of the transfer loop (prefill + decode processes, all threads, first wave to last; "
            "medians; per-rep values after |), and what each mode adds",
            f"{'page':>9} {'plain CPU s':>12}" + "".join(f" {'+' + m + ' s':>11} {'x':>5}" for m in modes[1:])]
    for pb in sorted({r["page_bytes"] for r in rows}):
        cells = {m: [r["loop_cpu_s"] for r in rows if r["page_bytes"] == pb and r["mode"] == m] for m in modes}
        med = {m: statistics.median(v) for m, v in cells.items()}
        out.append(f"{_kib(pb):>9} {med['plain']:>12.3f}"
                   + "".join(f" {med[m] - med['plain']:>+11.3f} {med[m] / med['plain']:>5.2f}" for m in modes[1:])
                   + "  | " + " ".join(f"{m} " + " ".join(f"{v:.3f}" for v in cells[m]) for m in modes))
    return out


def _farm(tree: str, where: str) -> str:
    """A directory that, first on PYTHONPATH, makes ``import kvtrace`` load the checkout at
    ``tree`` (its subpackages linked where setup.py maps them); its kernels get this
    checkout's built kvh64 extension when the other has none (the same C hash either way)."""
    pkg = os.path.join(where, "kvtrace")
    os.makedirs(pkg)
    for e in os.listdir(os.path.join(tree, "kvtrace")):
        os.symlink(os.path.join(tree, "kvtrace", e), os.path.join(pkg, e))
    for sub in ("tracer", "analysis", "replay", "tui"):
        os.symlink(os.path.join(tree, sub), os.path.join(pkg, sub))
    kern = os.path.join(pkg, "kernels")
    os.makedirs(kern)
    for e in os.listdir(os.path.join(tree, "kernels")):
        os.symlink(os.path.join(tree, "kernels", e), os.path.join(kern, e))
    for e in os.listdir(os.path.join(ROOT, "kernels")):
        if e.startswith("_kvh64") and e.endswith(".so") and not os.path.exists(os.path.join(kern, e)):
            os.symlink(os.path.join(ROOT, "kernels", e), os.path.join(kern, e))
    return where


def _native_kvh64() -> bool:
    """Whether the engines' Python hashes pages with the C extension (what traced runs use)."""
    p = subprocess.run([PY, "-c", "from kvtrace.kernels import checksum; print(checksum.NATIVE)"],
                       capture_output=True, text=True)
    return p.stdout.strip() == "True"


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


if __name__ == "__main__":
    sys.exit(main())
