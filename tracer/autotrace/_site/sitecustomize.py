"""Injected by ``kvtrace record -- CMD`` through PYTHONPATH: trace every NIXL agent.

Then runs the sitecustomize this one shadows, if the interpreter has one.
"""
import os
import sys


def _kvtrace_start():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from kvtrace.tracer.autotrace import install
        from kvtrace.tracer.autotrace._shadow import install as keep_pypi_kernels
        keep_pypi_kernels()
        install()
        if os.environ.get("KVTRACE_HOOKS"):
            from kvtrace.tracer.integrations import install as install_hooks
            install_hooks()
    except Exception as e:  # e.g. an interpreter without kvtrace: run untraced, say so once
        print(f"kvtrace: this process ({sys.executable}) is not traced: it cannot load kvtrace's tracer "
              f"({type(e).__name__}: {e}); run it with the Python kvtrace is installed in", file=sys.stderr)
    import importlib.machinery
    import importlib.util
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


_kvtrace_start()
del _kvtrace_start
