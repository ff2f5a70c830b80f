"""What a check could not compare (``sql/coverage_<check>.sql``).

A check that compares recorded values with predicted ones (checksum_mismatch: a read's
checksum with what the data flow says it holds) finds nothing among the items it cannot
predict. "Nothing found" then says nothing about those items, so the check's state must
not read "holds" for them. A coverage file counts, for one check, the items it compared
and those it left out, with why::

    -- coverage: checksum_mismatch
    -- items: what one item is (plural noun phrase)
    -- left_out: why the left-out items cannot be compared (continued on "--   " lines)
    -- unmapped: why items are left out where the hooks are there but no layout maps their
    --   ends (optional; the SELECT then also returns ``unmapped``, how many of the left-out
    --   items that applies to)
    -- requires: derived objects it reads

and ends in one SELECT of one row with the columns ``compared`` and ``left_out`` (and
``unmapped``). The session applies it (:func:`apply`): every item left out → the check is
skipped with that reason; some → the check's state is "unknown" and a note says how many.
The reason given is the one that applies: ``left_out``'s, ``unmapped``'s, or both with the
count of each.
"""
from __future__ import annotations

import dataclasses
import functools

from .sql_header import names, read_header, sql_files


@dataclasses.dataclass(frozen=True)
class Coverage:
    check: str
    items: str
    left_out: str
    requires: tuple[str, ...]
    sql: str
    unmapped: str = ""


def parse_coverage(text: str) -> Coverage:
    meta = read_header(text, ("coverage", "items", "left_out", "unmapped", "requires"),
                       continued=("left_out", "unmapped"))
    return Coverage(meta["coverage"], meta.get("items", "items"), meta.get("left_out", ""),
                    names(meta.get("requires", "")), text, meta.get("unmapped", ""))


@functools.lru_cache(maxsize=1)
def coverages() -> dict[str, Coverage]:
    """Every coverage file, by the check it is for."""
    return {c.check: c for c in map(parse_coverage, sql_files("coverage_"))}


def measure(model, check: str) -> tuple[int, int, int] | None:
    """(compared, left out, left out for want of a layout) for ``check`` over ``model``; None
    when it has no coverage file."""
    cov = coverages().get(check)
    if cov is None:
        return None
    model.derive(list(cov.requires))
    row = model.query(cov.sql).to_pylist()
    r = row[0] if row else {}
    return int(r.get("compared") or 0), int(r.get("left_out") or 0), int(r.get("unmapped") or 0)


def _why(cov: Coverage, left: int, unmapped: int) -> str:
    """The reason the ``left`` items were left out, ``unmapped`` of them for want of a layout."""
    if not unmapped or not cov.unmapped:
        return cov.left_out
    if unmapped >= left:
        return cov.unmapped
    return f"{cov.left_out}; and {unmapped:,} of them because {cov.unmapped}"


def apply(model, ran: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """For the checks that ``ran``: those that compared nothing (check → why, to be listed
    as skipped) and those that compared only part (check → note text)."""
    skipped, partial = {}, {}
    for check in ran:
        got = measure(model, check)
        if got is None or not got[1]:
            continue
        compared, left, unmapped = got
        cov = coverages()[check]
        why = _why(cov, left, unmapped)
        if not compared:
            skipped[check] = f"none of its {left:,} {cov.items} could be compared: {why}"
        else:
            partial[check] = (f"{check} compared {compared:,} of {compared + left:,} {cov.items}; "
                              f"not the other {left:,}: {why}")
    return skipped, partial
