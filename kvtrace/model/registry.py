"""The derived objects of a trace model and the order they are built in.

Every derived object is either one ``sql/<name>.sql`` file (one CREATE statement, named
after the file) or a Python builder registered with :func:`derived.builder`. Both declare what
they read: a SQL file by a header line ``-- requires: a, b``, a builder by its
``requires`` argument. An object no check reads says so (a SQL header line ``-- on demand:
why``, a builder's ``on_demand``): a plain derive() skips it, asking for it by name builds
it. A table whose joins outgrow the memory cap on large traces can be built in pieces (a
header line ``-- pieces: xfers.xfer by a, b``: its query reads ranges ``$lo <= xfer < $hi``;
TraceModel._piece_params picks the ranges from the cap and the sizes of ``a, b``). The
build order is a topological sort of those declarations, so adding an object is
adding a file, never editing a list. The base tables (``events``, ``descs``, ``dlists``,
``layouts``, and ``recorded_events``) are always present.
"""
from __future__ import annotations

import importlib.resources
import re

from ..tracer.schema import TABLES
from . import builders  # noqa: F401  (its @builder functions register themselves)
from .derived import PY_BUILDERS, Derived, RegistryError

BASE = frozenset(TABLES) | {"recorded_events"}   # trace.py: every event, cut or not
_REQUIRES = re.compile(r"^--\s*requires:(.*)$", re.MULTILINE)
#: a header line "-- on demand: why": built only when asked for by name (see Derived.on_demand)
_ON_DEMAND = re.compile(r"^--\s*on demand:", re.MULTILINE)
#: a header line "-- pieces: t.c by a, b [/ n]": the table's query takes $lo and $hi, a range
#: of column c of table t, and is built in ranges sized by the rows of a, b (divided by n:
#: its joins hold about 1/n of them; see Derived.pieces)
_PIECES = re.compile(r"^--\s*pieces:(.*)$", re.MULTILINE)
_PIECES_FORM = re.compile(r"^\s*(\w+)\.(\w+)\s+by\s+(\w+(?:\s*,\s*\w+)*)\s*(?:/\s*(\d+)\s*)?$")
_CREATE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+)?(TABLE|VIEW|MACRO)\s+(\w+)",
                     re.IGNORECASE | re.MULTILINE)


def parse_sql(name: str, text: str) -> Derived:
    """A SQL object from its file: the header's ``-- requires:`` and exactly one CREATE of ``name``."""
    req = _REQUIRES.findall(text)
    if len(req) != 1:
        raise RegistryError(f"sql/{name}.sql: needs exactly one '-- requires:' header line (found {len(req)})")
    creates = _CREATE.findall(text)
    if [c[1].lower() for c in creates] != [name.lower()]:
        made = ", ".join(c[1] for c in creates) or "nothing"
        raise RegistryError(f"sql/{name}.sql: must create exactly one object named {name} (creates {made})")
    requires = tuple(r.strip() for r in req[0].split(",") if r.strip())
    pieces = _PIECES.findall(text)
    key, split, div = None, (), 1
    if pieces:
        m = _PIECES_FORM.match(pieces[0]) if len(pieces) == 1 else None
        if m is not None:
            key, split = (m.group(1), m.group(2)), tuple(t.strip() for t in m.group(3).split(","))
            div = int(m.group(4) or 1)
        if m is None or not {key[0], *split} <= set(requires) or div < 1 or creates[0][0].upper() != "TABLE":
            raise RegistryError(f"sql/{name}.sql: needs one header line '-- pieces: TABLE.COLUMN by TABLE, ... [/ N]' "
                                "naming tables it requires, and must create a TABLE")
    return Derived(name, requires, sql=text, on_demand=bool(_ON_DEMAND.search(text)),
                   piece_key=key, pieces=split, pieces_divisor=div)


#: the SELECT of a "CREATE [OR REPLACE] TABLE name AS" file (TraceModel writes it straight to
#: Parquet past the memory share)
_CTAS = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(\w+)\s+AS\s", re.IGNORECASE | re.MULTILINE)


def table_query(d: Derived) -> str | None:
    """The query whose rows a SQL object's CREATE TABLE ... AS stores (None: a view, a
    macro or a Python builder)."""
    m = _CTAS.search(d.sql or "")
    if m is None or m.group(1).lower() != d.name.lower():
        return None
    return d.sql[m.end():].strip().rstrip(";")


_ALL: dict[str, Derived] | None = None


def registry() -> dict[str, Derived]:
    """Every derived object by name: the SQL files of ``kvtrace.model.sql`` and the builders."""
    global _ALL
    if _ALL is None:
        out: dict[str, Derived] = {}
        files = importlib.resources.files("kvtrace.model.sql")
        for f in sorted(files.iterdir(), key=lambda p: p.name):
            if f.name.endswith(".sql"):
                name = f.name[:-4]
                out[name] = parse_sql(name, f.read_text())
        for name, d in PY_BUILDERS.items():
            if name in out:
                raise RegistryError(f"derived object {name!r} is both sql/{name}.sql and a Python builder")
            out[name] = d
        build_order(out, sorted(out))   # fail at first use on a cycle or a missing name
        _ALL = out
    return _ALL


_COMMENT = re.compile(r"--[^\n]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def reads(sql: str, objs: dict[str, Derived] | None = None) -> frozenset[str]:
    """The derived objects and base tables a SQL text (a check, a query) names: every
    identifier outside comments that is one. A superset of what it reads (a column
    called like an object counts too), never less, so building these first is enough."""
    objs = registry() if objs is None else objs
    words = {w.lower() for w in _WORD.findall(_COMMENT.sub(" ", sql))}
    return frozenset(n for n in (*objs, *BASE, "recorded_descs") if n.lower() in words)


def on_demand(objs: dict[str, Derived]) -> set[str]:
    """The objects built only when asked for: declared so, or requiring such an object."""
    memo: dict[str, bool] = {}

    def lazy(n: str) -> bool:
        if n not in memo:
            memo[n] = False          # a cycle is reported by build_order, not here
            d = objs.get(n)
            memo[n] = bool(d) and (d.on_demand or any(lazy(r) for r in d.requires if r not in BASE))
        return memo[n]
    return {n for n in objs if lazy(n)}


def build_order(objs: dict[str, Derived], targets=None) -> list[str]:
    """The objects needed for ``targets`` (default: every object not built on demand),
    dependencies first.

    Raises:
        RegistryError: an object requires a name nothing provides, or requirements form a cycle.
    """
    order: list[str] = []
    state: dict[str, int] = {}       # 1: on the current path, 2: placed

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2 or name in BASE:
            return
        if state.get(name) == 1:
            cyc = path[path.index(name):] + [name]
            raise RegistryError("derived objects require each other in a cycle: " + " -> ".join(cyc))
        d = objs.get(name)
        if d is None:
            who = f"{path[-1]} requires" if path else "asked for"
            raise RegistryError(f"{who} {name!r}, which no sql/*.sql file or builder provides")
        state[name] = 1
        for r in d.requires:
            visit(r, path + [name])
        state[name] = 2
        order.append(name)

    if targets is None:
        lazy = on_demand(objs)
        targets = [n for n in sorted(objs) if n not in lazy]
    for t in targets:
        visit(t, [])
    return order
