"""What a check could not compare (``sql/coverage_<check>.sql``).

A check that compares recorded values with predicted ones (checksum_mismatch: a read's
checksum with what the data flow says it holds) finds nothing among the items it cannot
predict. "Nothing found" then says nothing about those items, so the check's state must
not read "holds" for them. A coverage file counts, for one check, the items it compared
and those it left out, with why::

    -- coverage: checksum_mismatch
    -- items: what one item is (plural noun phrase)
    -- left_out: why the left-out items cannot be compared (continued on "--   " lines)
    -- requires: derived objects it reads

and ends in one SELECT of one row with the columns ``compared`` and ``left_out``.
The session applies it (:func:`apply`): every item left out → the check is skipped with
that reason; some → the check's state is "unknown" and a note says how many.
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


def parse_coverage(text: str) -> Coverage:
    meta = read_header(text, ("coverage", "items", "left_out", "requires"), continued=("left_out",))
    return Coverage(meta["coverage"], meta.get("items", "items"), meta.get("left_out", ""),
                    names(meta.get("requires", "")), text)


@functools.lru_cache(maxsize=1)
def coverages() -> dict[str, Coverage]:
    """Every coverage file, by the check it is for."""
    return {c.check: c for c in map(parse_coverage, sql_files("coverage_"))}


def measure(model, check: str) -> tuple[int, int] | None:
    """(compared, left out) for ``check`` over ``model``; None when it has no coverage file."""
    cov = coverages().get(check)
    if cov is None:
        return None
    model.derive(list(cov.requires))
    row = model.query(cov.sql).to_pylist()
    r = row[0] if row else {}
    return int(r.get("compared") or 0), int(r.get("left_out") or 0)


def apply(model, ran: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """For the checks that ``ran``: those that compared nothing (check → why, to be listed
    as skipped) and those that compared only part (check → note text)."""
    skipped, partial = {}, {}
    for check in ran:
        got = measure(model, check)
        if got is None or not got[1]:
            continue
        compared, left = got
        cov = coverages()[check]
        if not compared:
            skipped[check] = f"none of its {left:,} {cov.items} could be compared: {cov.left_out}"
        else:
            partial[check] = (f"{check} compared {compared:,} of {compared + left:,} {cov.items}; "
                              f"not the other {left:,}: {cov.left_out}")
    return skipped, partial
