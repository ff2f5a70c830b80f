"""Baselines: findings a team has accepted, so a CI gate fails only on new ones.

A baseline is a JSON file::

    {"kvtrace_baseline": 1,
     "accepted": [{"check": "leak", "agent": "decode", "pool": "kv", "layer": 0,
                   "message": "request # still holds # slot(s) of kv at the end of the trace",
                   "reason": "the test ends before the cache is dropped"}]}

A finding is accepted when an entry has its check, agent, pool and layer and its message
with every number replaced by ``#`` (request ids, slots and counts change from run to
run; the kind of problem and where it is do not). ``reason`` is for people.
``kvtrace check TRACE --write-baseline FILE`` writes the current findings as a baseline
to start from; ``--baseline FILE`` applies one (``pytest --kvtrace-baseline FILE`` too).
"""
from __future__ import annotations

import dataclasses
import json
import re

from ..errors import UsageError

VERSION = 1
_NUM = re.compile(r"\d+(?:[,.]\d+)*")  # 7, 0,1,3 and 1.5 alike: lists of slots vary in length


class BaselineError(UsageError):
    """A baseline file that cannot be read (message: one line)."""


def fingerprint(f) -> tuple:
    """What identifies a finding across runs: check, agent, pool, layer, numberless message."""
    return (f.check, f.agent, f.pool, f.layer, _NUM.sub("#", f.message or ""))


@dataclasses.dataclass
class Baseline:
    path: str
    entries: list[dict]

    def __post_init__(self):
        self._keys = {(e.get("check"), e.get("agent"), e.get("pool"), e.get("layer"),
                       _NUM.sub("#", e.get("message") or "")) for e in self.entries}

    def accepts(self, f) -> bool:
        return fingerprint(f) in self._keys

    def split(self, findings: list) -> tuple[list, list]:
        """(new findings, accepted ones)."""
        new, old = [], []
        for f in findings:
            (old if self.accepts(f) else new).append(f)
        return new, old


def load(path: str) -> Baseline:
    """Read a baseline file (raises BaselineError with one line)."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except OSError as e:
        raise BaselineError(f"baseline {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise BaselineError(f"baseline {path}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("kvtrace_baseline") != VERSION \
            or not isinstance(data.get("accepted"), list) \
            or not all(isinstance(e, dict) and e.get("check") for e in data["accepted"]):
        raise BaselineError(f"baseline {path}: expected {{\"kvtrace_baseline\": {VERSION}, "
                            "\"accepted\": [{\"check\": ..., ...}]}")
    return Baseline(path, data["accepted"])


def write(path: str, findings: list, reason: str = "accepted when the baseline was written") -> int:
    """Write ``findings`` as a baseline (one entry per distinct fingerprint); their number."""
    seen, entries = set(), []
    for f in findings:
        k = fingerprint(f)
        if k in seen:
            continue
        seen.add(k)
        entries.append({"check": f.check, "agent": f.agent, "pool": f.pool, "layer": f.layer,
                        "message": k[4], "reason": reason})
    try:
        with open(path, "w") as fh:
            json.dump({"kvtrace_baseline": VERSION, "accepted": entries}, fh, indent=1)
            fh.write("\n")
    except OSError as e:
        from ..errors import OutputError
        raise OutputError(f"cannot write baseline {path}: {e.strerror or e}") from None
    return len(entries)
