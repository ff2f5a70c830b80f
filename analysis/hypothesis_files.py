"""Hypothesis files: an investigation declared as data (``hypotheses/<name>.toml``, or a
file of the user's). See hypotheses/pd-corruption.toml for the format.

Loading checks every name a file uses (checks, facts) so a typo is one line at the
command line, not a hypothesis silently judged on nothing.
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import os
import string
import tomllib

from ..errors import UsageError
from .facts import facts
from .findings import catalog


@dataclasses.dataclass(frozen=True)
class HypothesisSpec:
    name: str
    description: str
    evidence: tuple[str, ...]   #: checks whose findings support it (and whose silence refutes it)
    needs: tuple[str, ...]      #: facts the trace must have for that silence to count
    ruled_out: str              #: sentence template: {fact}, {checks}


@dataclasses.dataclass(frozen=True)
class HypothesisFile:
    name: str
    description: str
    relevant_when: str | None   #: a fact; non-zero makes the file apply unasked
    hypotheses: tuple[HypothesisSpec, ...]
    source: str


def _builtin_dir():
    return importlib.resources.files("kvtrace.analysis").joinpath("hypotheses")


def builtin_names() -> list[str]:
    """Names of the hypothesis files shipped with kvtrace."""
    return sorted(f.name[:-5] for f in _builtin_dir().iterdir() if f.name.endswith(".toml"))


def load(name_or_path: str) -> HypothesisFile:
    """A shipped file by name, or a TOML file by path. Raises UsageError with one line."""
    if os.path.isfile(name_or_path):
        where = name_or_path
        with open(name_or_path, "rb") as f:
            raw = f.read()
    elif name_or_path in builtin_names():
        where = f"hypotheses/{name_or_path}.toml"
        raw = _builtin_dir().joinpath(name_or_path + ".toml").read_bytes()
    else:
        raise UsageError(f"--hypotheses {name_or_path}: no such file or shipped name "
                         f"(shipped: {', '.join(builtin_names()) or 'none'})")
    try:
        doc = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{where}: not a TOML file ({e})") from None
    return parse(doc, where)


def parse(doc: dict, where: str) -> HypothesisFile:
    def need(d, key, typ, ctx):
        v = d.get(key)
        if not isinstance(v, typ):
            raise UsageError(f"{where}: {ctx}{key} must be a {typ.__name__}")
        return v

    known_checks, known_facts = catalog(), facts()

    def names(values, known, what, ctx):
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise UsageError(f"{where}: {ctx} must be a list of {what} names")
        bad = [v for v in values if v not in known]
        if bad:
            raise UsageError(f"{where}: {ctx}: unknown {what} {bad[0]!r} (known: {', '.join(known)})")
        return tuple(values)

    rel = doc.get("relevant_when")
    if rel is not None and rel not in known_facts:
        raise UsageError(f"{where}: relevant_when: unknown fact {rel!r} (known: {', '.join(known_facts)})")
    specs = []
    for i, h in enumerate(need(doc, "hypothesis", list, "")):
        ctx = f"hypothesis {i + 1}: "
        if not isinstance(h, dict):
            raise UsageError(f"{where}: {ctx}must be a table")
        ev = names(h.get("evidence"), known_checks, "check", ctx + "evidence")
        if not ev:
            raise UsageError(f"{where}: {ctx}evidence names no check")
        needs = names(h.get("needs", []), known_facts, "fact", ctx + "needs")
        text = h.get("ruled_out") or "zero findings of {checks}"
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
        except ValueError as e:
            raise UsageError(f"{where}: {ctx}ruled_out: {e}") from None
        if fields - set(needs) - {"checks"}:
            raise UsageError(f"{where}: {ctx}ruled_out uses {{{sorted(fields - set(needs) - {'checks'})[0]}}}, "
                             "which is neither {checks} nor a fact in needs")
        specs.append(HypothesisSpec(need(h, "name", str, ctx), h.get("description", ""), ev, needs, text))
    return HypothesisFile(need(doc, "name", str, ""), doc.get("description", ""), rel, tuple(specs), where)
