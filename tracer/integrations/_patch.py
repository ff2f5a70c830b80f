"""Apply an engine's hook table when its connector module is imported.

A meta-path finder wraps the loader of the engine's trigger module; right after the
module executes, every row of the table is resolved (module, class, attribute) and
replaced by a wrapper calling the row's handler. A row that does not resolve is
reported, never guessed. Handlers never break the engine: one that raises is reported
once (the fact it records is then missing) and the engine's call goes on unchanged.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading

from .table import Engine, Hook

_watched: dict[str, tuple[Engine, frozenset[str]]] = {}
_applied: set[str] = set()
_lock = threading.Lock()
_reported: set[tuple[str, str]] = set()
_off: dict[str, frozenset[str]] = {}
_deferred: dict[str, list] = {}   # module -> lazy rows to hook when it is imported


def enabled(engine: str, group: str) -> bool:
    """Is ``group`` of ``engine``'s facts recorded (not switched off with -GROUP)?"""
    return group not in _off.get(engine, frozenset())


def say(text: str) -> None:
    """One line on stderr, prefixed so it is told apart from the program's own output."""
    print(f"kvtrace: {text}", file=sys.stderr, flush=True)


def say_once(key: tuple[str, str], text: str) -> None:
    with _lock:
        if key in _reported:
            return
        _reported.add(key)
    say(text)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, name):
        self._loader, self._name = loader, name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply_all(self._name)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if (fullname not in _watched or fullname in _applied) and fullname not in _deferred:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, fullname)
        return spec


def watch(engine: Engine, off: frozenset[str]) -> None:
    """Apply ``engine``'s hooks (minus groups ``off``) when its trigger module is imported."""
    _watched[engine.trigger] = (engine, off)
    _off[engine.name] = off
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    if engine.trigger in sys.modules:
        _apply_all(engine.trigger)


def _apply_all(trigger: str) -> None:
    with _lock:
        rows = _deferred.pop(trigger, [])
    for engine, h, label, fn in rows:   # lazy rows whose module the engine just imported
        try:
            owner = getattr(sys.modules[h.module], h.cls) if h.cls else sys.modules[h.module]
            setattr(owner, h.attr, _wrap(engine, h, label, _raw_attr(owner, h.attr), fn))
        except (KeyError, AttributeError):
            say_once((engine.name, label), f"{engine.title}: could not hook {label}; "
                     f"what it reports is missing from the trace")
    with _lock:
        if trigger not in _watched or trigger in _applied:
            return
        _applied.add(trigger)
    engine, off = _watched[trigger]
    try:
        apply(engine, off)
    except Exception as e:  # never break the program for a trace
        say(f"could not hook {engine.title} ({type(e).__name__}: {e}); only NIXL calls are recorded")


def version_of(engine: Engine) -> str | None:
    try:
        return str(getattr(importlib.import_module(engine.version_module), engine.version_attr))
    except Exception:
        return None


def apply(engine: Engine, off: frozenset[str]) -> dict:
    """Wrap every hook point of ``engine``; returns what was hooked and what was not."""
    handlers = importlib.import_module(f"{__package__}.{engine.handlers}")
    version = version_of(engine)
    hooked, missing, deferred = [], [], []
    for h in engine.hooks:
        label = f"{h.cls}.{h.attr}" if h.cls else h.attr
        if h.group in off and h.group in ("messages", "request", "trigger"):
            continue  # rows that record only this group; handlers check the others per fact
        if h.lazy and h.module not in sys.modules:
            fn = _handler(handlers, h.handler)
            with _lock:
                _deferred.setdefault(h.module, []).append((engine, h, label, fn))
            if not any(isinstance(f, _Finder) for f in sys.meta_path):
                sys.meta_path.insert(0, _Finder())
            deferred.append(label)
            continue
        try:
            owner = importlib.import_module(h.module)
            if h.cls is not None:
                owner = getattr(owner, h.cls)
            raw = _raw_attr(owner, h.attr)
            fn = _handler(handlers, h.handler)
        except (ImportError, AttributeError):
            missing.append(label)
            continue
        setattr(owner, h.attr, _wrap(engine, h, label, raw, fn))
        hooked.append(label)
    info = {"engine": engine.name, "version": version, "supported": version in engine.supported,
            "hooked": hooked, "missing": missing, "off": sorted(off),
            "when_imported": deferred}   # lazy rows: hooked if the program imports their module
    report(engine, info)
    return info


def _handler(handlers, name: str):
    """A row's handler: a function of the engine's handler module, or ``module.function`` for
    one of another module of this package (an engine's handlers split by concern)."""
    if "." in name:
        mod, _, fn = name.rpartition(".")
        return getattr(importlib.import_module(f"{__package__}.{mod}"), fn)
    return getattr(handlers, name)


def _raw_attr(owner, attr):
    """The attribute as defined (a classmethod/staticmethod object stays one), searching the MRO."""
    for k in getattr(owner, "__mro__", (owner,)):
        d = getattr(k, "__dict__", {})
        if attr in d:
            return d[attr]
    raise AttributeError(attr)


#: KVTRACE_HOOK_TIMES=FILE: every handler's calls and thread CPU time, by hook point, written
#: to FILE.<pid> at exit (bench/hook_costs.py); unset, handlers run untimed
_TIMES_FILE = os.environ.get("KVTRACE_HOOK_TIMES")
_times: dict[str, list] = {}


def _timed(label: str, handler):
    import atexit
    import json
    import time
    if not _times:
        def _write():
            try:
                with open(f"{_TIMES_FILE}.{os.getpid()}", "w") as f:
                    json.dump(_times, f)
            except OSError as e:   # a path that cannot be written: say so, once, at exit
                say(f"could not write the hook times to {_TIMES_FILE}.{os.getpid()}: {e.strerror}")
        atexit.register(_write)
    cell = _times.setdefault(label, [0, 0])
    clock = time.thread_time_ns

    def timed(*a, **kw):
        t0 = clock()
        try:
            return handler(*a, **kw)
        finally:
            cell[0] += 1
            cell[1] += clock() - t0
    return timed


def _results(engine: Engine, h: Hook):
    """The results an ``after`` row's handler acts on (its filter), or None: every result."""
    if h.results is None or h.when != "after":
        return None
    try:
        handlers = importlib.import_module(f"{__package__}.{engine.handlers}")
        return frozenset(getattr(handlers, h.results)())
    except Exception:   # the engine's values could not be read: the handler sees every result
        return None


def _wrap(engine: Engine, h: Hook, label: str, raw, handler):
    if _TIMES_FILE:
        handler = _timed(label, handler)
    results = _results(engine, h)
    kind = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
    fn = raw.__func__ if kind is not None else raw

    def guard(*a, **kw):
        try:
            handler(*a, **kw)
        except Exception as e:
            say_once((engine.name, label), f"{engine.title}: recording at {label} failed "
                     f"({type(e).__name__}: {e}); that fact is missing from the trace")

    if h.when == "before":
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            guard(*a, **kw)
            return fn(*a, **kw)
    elif h.when == "after" and results is not None:
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            out = fn(*a, **kw)
            try:
                act = out in results
            except TypeError:   # an unhashable result: not one of those values
                act = False
            if act:
                guard(out, *a, **kw)
            return out
    elif h.when == "after":
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            out = fn(*a, **kw)
            guard(out, *a, **kw)
            return out
    else:  # around: the handler calls the engine itself and must return its result
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            return handler(fn, *a, **kw)
    wrapper._kvtrace_hooked = fn
    return kind(wrapper) if kind is not None else wrapper


ENV_LAUNCHED = "KVTRACE_HOOKS_LAUNCHER"


def report(engine: Engine, info: dict) -> None:
    """Keep what was hooked in the manifest; say at once what an unsupported version lost."""
    from ..autotrace import ENV_DIR
    import os
    d = os.environ.get(ENV_DIR)
    if d:
        try:
            from .. import manifest
            manifest.update(d, **{f"hooks_{engine.name}": info})
        except Exception:
            pass
    # under ``kvtrace record`` the launcher says it once for all processes, at the end
    if (not info["supported"] or info["missing"]) and not os.environ.get(ENV_LAUNCHED):
        say_once((engine.name, "version"), unsupported_line(engine, info))


def unsupported_line(engine: Engine, info: dict) -> str:
    v = info.get("version") or "of unknown version"
    head = (f"{engine.title} {v} is not a supported version (supported: {', '.join(engine.supported)})"
            if not info["supported"] else f"{engine.title} {v}")
    miss = info.get("missing") or []
    tail = (f"; could not hook {', '.join(miss)}: the trace lacks what they record" if miss
            else "; every hook point was found, but its meaning is untested on this version")
    return head + tail
