"""The import rule: every kvtrace module imports only from its own room or the rooms
below it, and no two modules import each other (directly or round a loop).

Rooms, bottom to top (an arrow points at what a room may import):

    errors                                   the leaf: domain errors only
    kernels    -> errors                     checksum kernels (CPU / Triton)
    format     -> kernels, errors            trace schema, reader, writer (Recorder), manifest, builder
    record     -> format                     NIXL agent taps, hooks, autotrace, integrations, record -- CMD
    engine     -> record                     the reference PD engine (a traced program)
    model      -> format                     what a trace means: index, happens-before, derived views
    analysis, replay, tui -> model           siblings: none imports another
    cli        -> everything                 kvtrace/cli.py and every ``cli_*`` module

Every import counts, also one inside a function (a lazy import is still a dependency).
"""
from __future__ import annotations

import ast
import pathlib
import tomllib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

#: module prefix -> room; the longest matching prefix wins. A module whose own name
#: starts with ``cli_`` is in the cli room wherever it lives.
ROOM_OF = {
    "kvtrace": "package",                       # kvtrace/__init__.py: the version only
    "kvtrace.errors": "errors",
    "kvtrace.kernels": "kernels",
    "kvtrace.tracer": "format",
    "kvtrace.tracer.agent": "record",
    "kvtrace.tracer.agent_descs": "record",
    "kvtrace.tracer.agent_tap": "record",
    "kvtrace.tracer.hooks": "record",
    "kvtrace.tracer.tags": "record",
    "kvtrace.tracer.process_recorder": "record",
    "kvtrace.tracer.autotrace": "record",
    "kvtrace.tracer.record_any": "record",
    "kvtrace.tracer.integrations": "record",    # serving-engine patches (sglang, ...)
    "kvtrace.tracer.engine": "engine",
    "kvtrace.model": "model",
    "kvtrace.analysis": "analysis",
    "kvtrace.replay": "replay",
    "kvtrace.tui": "tui",
    "kvtrace.cli": "cli",
    "kvtrace.pytest_plugin": "cli",           # pytest --kvtrace: records, checks (an entry point like cli)
    "kvtrace.__main__": "cli",
}

_BASE = {"package", "errors"}
#: room -> the rooms it may import (besides itself)
ALLOWED = {
    "package": set(),
    "errors": {"package"},
    "kernels": _BASE,
    "format": _BASE | {"kernels"},
    "record": _BASE | {"kernels", "format"},
    "engine": _BASE | {"kernels", "format", "record"},
    "model": _BASE | {"kernels", "format"},
    "analysis": _BASE | {"kernels", "format", "model"},
    "replay": _BASE | {"kernels", "format", "model"},
    "tui": _BASE | {"kernels", "format", "model"},
    "cli": set(ROOM_OF.values()),
}


def room_of(module: str) -> str:
    if module.rsplit(".", 1)[-1].startswith("cli_"):
        return "cli"
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        room = ROOM_OF.get(".".join(parts[:n]))
        if room is not None:
            return room
    raise KeyError(module)


def package_dirs() -> dict[str, pathlib.Path]:
    """Every installed package -> its folder, as pyproject.toml maps them (a package not
    in package-dir sits in its parent's folder, as setuptools places it)."""
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    where = conf.get("package-dir", {})
    out = {}
    for pkg in sorted(conf["packages"], key=lambda p: p.count(".")):
        parent, _, last = pkg.rpartition(".")
        out[pkg] = REPO / where[pkg] if pkg in where else out[parent] / last
    return out


def modules() -> dict[str, pathlib.Path]:
    """Every kvtrace module of the installed packages -> its file."""
    out = {}
    for pkg, folder in package_dirs().items():
        for path in sorted(folder.glob("*.py")):
            out[pkg if path.stem == "__init__" else f"{pkg}.{path.stem}"] = path
    return out


def imports(name: str, source: str, known: set[str], is_package: bool) -> set[str]:
    """The kvtrace modules ``source`` (module ``name``) imports, anywhere in its body."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "kvtrace")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "kvtrace":
                continue
            for a in node.names:              # ``from pkg import module`` imports the module
                out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    out.discard(name)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p.read_text(), set(mods), p.name == "__init__.py") for m, p in mods.items()}


def back_edges(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, deps in sorted(g.items()):
        src = room_of(m)
        for d in sorted(deps):
            dst = room_of(d)
            if dst != src and dst not in ALLOWED[src]:
                bad.append(f"{m} ({src}) imports {d} ({dst})")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_room():
    mods = modules()
    for m in mods:
        assert room_of(m) in ALLOWED, m
    # the scan sees every package (a package the scan missed would pass vacuously)
    assert {"kvtrace.cli", "kvtrace.errors", "kvtrace.tracer.reader", "kvtrace.analysis.findings",
            "kvtrace.replay.api", "kvtrace.tui.app", "kvtrace.tracer.engine.runner"} <= set(mods)
    py = {p.resolve() for p in REPO.glob("[a-z]*/**/*.py") if "_site" not in p.parts
          and p.parts[len(REPO.parts)] not in ("tests", "bench", "scripts", "docs")}
    assert py == {p.resolve() for p in mods.values()}, sorted(map(str, py ^ {p.resolve() for p in mods.values()}))


def test_imports_point_one_way():
    bad = back_edges(graph())
    assert not bad, ("imports against the room order (move the import up to a cli_* module or pass "
                     "the dependency in; a new package whose room is not its folder's goes into "
                     "ROOM_OF here):\n" + "\n".join(bad))


def test_no_import_cycles():
    loops = cycles(graph())
    assert not loops, "modules importing each other: " + "; ".join(" <-> ".join(c) for c in loops)


def test_every_import_resolves_to_a_module():
    """A rule over names that do not exist would pass vacuously: every kvtrace import
    must name a module (or package) in the repository."""
    g = graph()
    compiled = {"kvtrace.kernels._kvh64"}   # C extensions built by setup.py (kernels/_kvh64.c)
    assert (REPO / "kernels" / "_kvh64.c").exists()
    missing = sorted({d for deps in g.values() for d in deps if d not in g and d != "kvtrace.model"
                      and not d.startswith("kvtrace.model.") and d not in compiled})
    assert not missing, missing


@pytest.mark.parametrize("name,source,offender", [
    ("kvtrace.analysis.render", "from kvtrace.cli import UserError", "kvtrace.cli"),
    ("kvtrace.analysis.sweep", "def f():\n    from kvtrace.tracer.engine.cli import record", "kvtrace.tracer.engine.cli"),
    ("kvtrace.replay.output", "from ..analysis import session", "kvtrace.analysis.session"),
    ("kvtrace.tracer.reader", "from ..model import index", "kvtrace.model.index"),
    ("kvtrace.tui.app", "from kvtrace.analysis.findings import Finding", "kvtrace.analysis.findings"),
])
def test_rule_catches_a_back_edge(name, source, offender):
    known = set(modules()) | {offender}
    g = {name: imports(name, source, known, False), offender: set()}
    assert back_edges(g) == [f"{name} ({room_of(name)}) imports {offender} ({room_of(offender)})"]


@pytest.mark.parametrize("name,source", [
    ("kvtrace.analysis.cli_check", "from kvtrace.tracer.reader import open_trace\nfrom ..tui import app"),
    ("kvtrace.replay.output", "from ..tracer.recorder import Recorder\nfrom kvtrace.errors import UsageError"),
    ("kvtrace.tui.app", "from kvtrace.model import session"),
])
def test_rule_allows_downward_imports(name, source):
    known = set(modules()) | {"kvtrace.model.session"}
    g = {name: imports(name, source, known, False)}
    assert back_edges(g) == []


def test_cycle_finder_sees_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
