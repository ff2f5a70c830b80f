"""The NIXL tap's own Python per posting, NIXL left out: the tap over a stand-in binding
whose calls return at once, against that stand-in called directly.

    .venv/bin/python bench/tap_python.py [--postings 20000] [--reps 5] [--descs 48] [--scope]

One tap (tracer/agent_tap.py) into a --ring 300s recorder, two prepped lists of --descs
uniform 4 KiB entries; each posting is what the reference engine's prefill asks of the
binding: makeXferReq (int32 indices), postXferReq, getXferStatus (done at once),
releaseXferReq, then one getNotifs handing back its message. ``--scope``: inside a request
scope (no tag parsing at the post). Prints thread CPU per posting and call, best of --reps.
What bench/tap_calls.py measures on NIXL's UCX loopback beyond this is the tap's share of
NIXL's and the recorder's surroundings (caches, the flush thread), not its Python.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import types


class _Binding:
    """Stands in for NIXL's binding object: every call returns at once."""
    n = 0x5600_0000_0000

    def prepXferDlist(self, agent, *args):
        _Binding.n += 16
        return _Binding.n

    def makeXferReq(self, *args):
        _Binding.n += 16
        return _Binding.n

    def postXferReq(self, handle, notif=b"", *args):
        return 1          # in progress

    def getXferStatus(self, handle):
        return 0          # done

    def releaseXferReq(self, handle):
        return 0

    def getNotifs(self, notif_map, *args):
        return {"decode": [b"1018_kv_0_1_0"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--postings", type=int, default=20000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--descs", type=int, default=48)
    p.add_argument("--scope", action="store_true")
    a = p.parse_args(argv)
    import numpy as np
    from kvtrace.tracer import agent_tap
    from kvtrace.tracer.ring import open_recorder
    from kvtrace.tracer.tags import make_parser

    mod = types.ModuleType("kvtrace_bench_binding")   # the tap reads its status values from the binding's module
    mod.NIXL_IN_PROG, mod.NIXL_SUCCESS, mod.NIXL_WRITE, mod.NIXL_INIT_AGENT = 1, 0, 7, "NIXL_INIT_AGENT"
    sys.modules[mod.__name__] = mod
    _Binding.__module__ = mod.__name__
    K = a.descs
    tmp = tempfile.mkdtemp(prefix="kvtrace-tap-")
    rec = open_recorder(os.path.join(tmp, "t.kvtrace"), "prefill", ring="300s")
    try:
        inner = _Binding()
        tap = agent_tap.BindingTap(inner, "prefill", rec, make_parser("auto"))
        strided = np.array([[1 << 30, 4096, 0, 4096, K]], np.int64)    # addr, len, dev, stride, count
        ldl = tap.prepXferDlist("NIXL_INIT_AGENT", "DRAM_SEG", strided)
        rdl = tap.prepXferDlist("decode", "DRAM_SEG", strided + [[1 << 31, 0, 0, 0, 0]])
        idx = np.arange(K, dtype=np.int32)
        T = time.thread_time_ns

        def run(b, n: int) -> list[float]:
            ph = [0] * 5
            for _ in range(n):
                t0 = T()
                h = b.makeXferReq(7, ldl, idx, rdl, idx, b"1018_kv_0_1_0", [], False)
                t1 = T()
                b.postXferReq(h, b"")
                t2 = T()
                b.getXferStatus(h)
                t3 = T()
                b.releaseXferReq(h)
                t4 = T()
                b.getNotifs({}, [])
                t5 = T()
                for k, (x, y) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5))):
                    ph[k] += y - x
            return [x / n / 1e3 for x in ph]

        got: dict[str, list[list[float]]] = {"binding": [], "tap": []}
        with rec.request("1018") if a.scope else contextlib.nullcontext():
            run(tap, 1000)
            for r in range(a.reps):
                order = (("binding", inner), ("tap", tap))
                for name, b in (order if r % 2 == 0 else order[::-1]):
                    got[name].append(run(b, a.postings))
        best = {k: min(v, key=sum) for k, v in got.items()}
        names = ("makeXferReq", "postXferReq", "getXferStatus", "releaseXferReq", "getNotifs")
        print(f"per posting ({K} descriptors{', in a request scope' if a.scope else ''}), thread CPU, "
              f"best of {a.reps} x {a.postings} (by total; each phase includes the timer's own cost: "
              "the binding's line is mostly that):")
        for k, v in best.items():
            print(f"  {k:8s} total {sum(v):6.2f} us: " + ", ".join(f"{n} {x:.2f}" for n, x in zip(names, v)))
        print(f"  the tap's Python {sum(best['tap']) - sum(best['binding']):.2f} us a posting "
              f"(load average {os.getloadavg()[0]:.1f})")
    finally:
        rec.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
