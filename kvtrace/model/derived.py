"""A derived object's declaration (name, what it requires, how it is built) and the
registration of Python builders; registry.py collects these with the SQL files."""
from __future__ import annotations

import dataclasses
from typing import Callable


class RegistryError(Exception):
    """The derived objects' declarations are inconsistent (a programming error, not bad input)."""


@dataclasses.dataclass(frozen=True)
class Derived:
    """One derived object: its name, what it reads, and how it is built."""

    name: str
    requires: tuple[str, ...]
    sql: str | None = None                      #: the file's text (SQL objects)
    build: Callable | None = None               #: build(model) (Python objects)
    #: built only when asked for by name (and so is whatever requires it), never by a
    #: plain derive(): e.g. the timeline, which only a viewer needs
    on_demand: bool = False
    #: a Python builder whose work runs in a thread beside the SQL objects built after it:
    #: build(model, ask) returns the table (``ask``: a named-query runner on a cursor of
    #: its own), which the model creates once something needs it or derive() ends
    background: bool = False
    #: a SQL table that can be built in pieces (a header line ``-- pieces: t.c by a, b [/ n]``):
    #: its query reads the rows with ``$lo <= c < $hi`` of table ``t`` (null: unbounded) and
    #: what belongs to them; built in one piece (both null) unless the rows of ``a, b`` (its
    #: hash joins' build sides) outgrow a share of the cap (TraceModel._piece_params)
    piece_key: tuple[str, str] | None = None
    #: the tables whose size decides the number of pieces (``a, b`` above)
    pieces: tuple[str, ...] = ()
    #: the share of those tables' bytes the query's joins hold at once is 1 / this (a header
    #: ``-- pieces: t.c by a / n``: e.g. one side of a self-join, some of its columns)
    pieces_divisor: int = 1


#: the Python-built objects by name (builders.py registers them)
PY_BUILDERS: dict[str, Derived] = {}


def builder(name: str, requires: tuple[str, ...] = (), on_demand: bool = False, background: bool = False):
    """Register ``fn(model)`` as the builder of derived object ``name``; it must create
    ``name`` in the model's database (a table or a registered Arrow table). With
    ``background``, ``fn(model, ask)`` returns the table instead (see Derived.background)."""
    def deco(fn):
        if name in PY_BUILDERS:
            raise RegistryError(f"derived object {name!r} registered twice")
        PY_BUILDERS[name] = Derived(name, tuple(requires), build=fn, on_demand=on_demand, background=background)
        return fn
    return deco
