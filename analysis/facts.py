"""Facts: named counts over a trace that hypotheses need (``sql/fact_<name>.sql``).

A fact file starts with a header::

    -- fact: prepped_transfers
    -- counts: what the number counts
    -- absent: why a hypothesis that needs it cannot be judged when it is zero
    -- requires: derived objects of the model it reads

and ends in one SELECT of one row with one column ``n``. A hypothesis lists the facts it
needs; a zero fact makes it untestable, with the fact's ``absent`` sentence as the reason.
"""
from __future__ import annotations

import dataclasses
import functools
from .sql_header import names, read_header, sql_files

@dataclasses.dataclass(frozen=True)
class Fact:
    name: str
    counts: str
    absent: str
    requires: tuple[str, ...]
    sql: str


def parse_fact(text: str) -> Fact:
    meta = read_header(text, ("fact", "counts", "absent", "requires"))
    req = names(meta.get("requires", ""))
    return Fact(meta["fact"], meta.get("counts", ""), meta.get("absent", f"no {meta['fact']} in the trace"), req, text)


@functools.lru_cache(maxsize=1)
def facts() -> dict[str, Fact]:
    """Every fact, by name."""
    return {f.name: f for f in map(parse_fact, sql_files("fact_"))}


def measure(model, names) -> dict[str, int]:
    """The count of each fact in ``names`` over ``model`` (a TraceModel/TraceSession)."""
    cat = facts()
    names = list(dict.fromkeys(names))
    base = {"events", "descs", "dlists", "layouts"}
    model.derive(sorted({r for n in names for r in cat[n].requires} - base))
    out = {}
    for n in names:
        row = model.query(cat[n].sql).to_pylist()
        out[n] = int((row[0]["n"] if row else 0) or 0)
    return out
