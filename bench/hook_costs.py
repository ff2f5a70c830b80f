"""What the connector hooks cost the engine, per hook point: SGLang's real connector (CPU, DRAM,
tests/engines/sglang_pd.py, prefill and decode processes) recorded with ``--hooks sglang:-content
--ring 30s``, every handler timed (KVTRACE_HOOK_TIMES: calls and thread CPU per hook point, per
process); then the poll hooks' wrapper alone, with its result filter (table.py ``results``) and
without, on a stand-in poll, interleaved.

    .venv/bin/python bench/hook_costs.py [--requests 384]

Needs .venv-engines (scripts/setup_engines.sh). The per-call times include two thread-CPU clock
reads (~0.3-1 us each on this kind of machine): they rank the hook points, the poll wrapper's
own cost is the second table.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("KVTRACE_ENGINES_VENV") or os.path.join(ROOT, ".venv-engines")
PY = os.path.join(VENV, "bin", "python")


def per_hook(requests: int) -> None:
    tmp = tempfile.mkdtemp(prefix="kvtrace-hooks-")
    try:
        env = dict(os.environ, KVTRACE_HOOK_TIMES=os.path.join(tmp, "times"), PYTHONPATH=ROOT)
        cmd = [PY, "-m", "kvtrace", "record", "--hooks", "sglang:-content", "--ring", "30s", "-o",
               os.path.join(tmp, "t.kvtrace"), "--", PY, os.path.join(ROOT, "tests", "engines", "sglang_pd.py"),
               "--memory", "dram", "--slots", "512", "--page-tokens", "64", "--requests", str(requests),
               "--max-pages", "48", "--wave", "8", "--index-k", "tokens"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"the driver failed (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
        print(f"SGLang connector, {requests} requests, hooks sglang:-content, ring 30s: handler CPU per hook point")
        for f in sorted(glob.glob(os.path.join(tmp, "times.*"))):
            d = {k: v for k, v in json.load(open(f)).items() if v[0]}
            side = "prefill" if any(k.startswith("NixlKVSender") for k in d) else "decode"
            setup = sum(v[1] for k, v in d.items() if k.endswith("__init__") or "register_buffer" in k)
            total = sum(v[1] for v in d.values()) - setup
            print(f"  {side}: {total / 1e3 / requests:.1f} us a request (setup {setup / 1e6:.1f} ms once)")
            for k, (n, t) in sorted(d.items(), key=lambda x: -x[1][1]):
                print(f"    {k:42s} {n:7d} calls {t / 1e3 / n:7.1f} us a call {t / 1e3 / requests:7.1f} us a request")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_POLL_BENCH = r'''
import dataclasses, sys, time
from kvtrace.tracer.integrations import _patch, sglang as handlers
from kvtrace.tracer.integrations.table import SGLANG
from sglang.srt.disaggregation.base.conn import KVPoll
rows = {(h.cls, h.attr): h for h in SGLANG.hooks}
class Poll:
    def poll(self):
        return KVPoll.Transferring      # the common answer: nothing to record
print("poll hook wrapper, ns per poll (best of 5 x 200,000, interleaved):")
for cls in ("NixlKVSender", "NixlKVReceiver"):
    h = rows[(cls, "poll")]
    fn, handler = Poll.__dict__["poll"], getattr(handlers, h.handler)
    arms = {"engine alone": fn,
            "hooked, no filter": _patch._wrap(SGLANG, dataclasses.replace(h, results=None), cls, fn, handler),
            "hooked, filter": _patch._wrap(SGLANG, h, cls, fn, handler)}
    best, obj = {}, Poll()
    for rep in range(5):
        for name, w in (arms.items() if rep % 2 == 0 else reversed(arms.items())):
            t0 = time.perf_counter_ns()
            for _ in range(200000):
                w(obj)
            best[name] = min(best.get(name, 1e9), (time.perf_counter_ns() - t0) / 200000)
    base = best["engine alone"]
    print(f"  {cls}.poll: " + ", ".join(f"{k} {v:.0f}" for k, v in best.items())
          + f"; the hook adds {best['hooked, no filter'] - base:.0f} -> {best['hooked, filter'] - base:.0f} ns")
'''


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=384)
    a = p.parse_args(argv)
    if not os.path.exists(PY):
        sys.exit(f"no engines environment at {VENV}: run scripts/setup_engines.sh")
    per_hook(a.requests)
    subprocess.run([PY, "-c", _POLL_BENCH], env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    print(f"(load average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
