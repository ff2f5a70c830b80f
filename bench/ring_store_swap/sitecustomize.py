"""Benchmark-only: with $KVTRACE_BENCH_RING_STORE set to another checkout's
tracer/ring_store.py, the flight recorder's RingStore comes from that file (the rest of
kvtrace from this checkout), so ``bench_real_connector.py --base-ring-store`` compares two ring
stores in one interleaved run. Put on PYTHONPATH by that benchmark only; kvtrace's own injected
sitecustomize runs first and then this one (it chains to the one it shadows)."""
import importlib.util
import os
import sys


def _swap(path: str) -> None:
    name = "kvtrace.tracer.ring_store"
    import kvtrace.tracer   # noqa: F401  (the package its relative imports resolve in)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    ring = sys.modules.get("kvtrace.tracer.ring")
    if ring is not None:          # imported already: rebind the one name it took
        ring.RingStore = mod.RingStore
    print(f"kvtrace bench: ring store from {path}", file=sys.stderr)


if os.environ.get("KVTRACE_BENCH_RING_STORE"):
    _swap(os.environ["KVTRACE_BENCH_RING_STORE"])
