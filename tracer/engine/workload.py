"""Workloads: TOML presets and the deterministic request plan they expand to.

A workload fixes everything the engine decides: sessions, turns, prompt lengths, output
lengths, which requests abort or time out and when, pool geometry and the engine's
pacing. ``plan(wl)`` draws all of it from ``wl.seed`` up front, so one seed gives one
plan and (in-process) the same allocation decisions.
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
from importlib import resources

import numpy as np

from ...errors import WorkloadError

#: the injectable bugs (off by default); see engine/__init__.py
BUGS = ("uniform-slot-count", "early-src-free", "abort-free-inflight", "notify-first-handle", "free-on-received")


@dataclasses.dataclass
class Workload:
    """A parsed workload (see workloads/small.toml for every field's meaning)."""
    name: str
    seed: int
    requests: int
    concurrency: int
    turns: tuple
    prompt_tokens: tuple
    turn_tokens: tuple
    output_tokens: tuple
    think_steps: tuple
    abort_rate: float
    timeout_rate: float
    index_k: str
    geometry: dict
    engine: dict

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Turn:
    """One request of the plan (the decode side drives it)."""
    room: int                 # the trace-wide request key (SGLang's bootstrap room)
    session: int
    turn: int
    context: int              # prompt tokens: the whole conversation so far
    output: int               # decode steps after the KV arrived
    think: int                # steps after the previous turn finished
    fate: str                 # "ok" | "abort" | "timeout"
    abort_after: int          # abort: steps after admission

    @property
    def key(self) -> str:
        return str(self.room)


def preset_names() -> list[str]:
    """Names of the bundled presets."""
    d = resources.files(__package__) / "workloads"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def load(spec: str, *, concurrency: int | None = None, index_k: str | None = None,
         seed: int | None = None, requests: int | None = None) -> Workload:
    """A workload from a preset name or a TOML path, with optional overrides."""
    if os.path.exists(spec):
        with open(spec, "rb") as f:
            raw = _parse(f, spec)
    elif spec in preset_names():
        with (resources.files(__package__) / "workloads" / f"{spec}.toml").open("rb") as f:
            raw = _parse(f, spec)
    else:
        raise WorkloadError(f"--workload {spec}: no such file or preset (presets: {', '.join(preset_names())})")
    base = {}
    with (resources.files(__package__) / "workloads" / "small.toml").open("rb") as f:
        base = tomllib.load(f)   # defaults for fields a user file leaves out
    for k in ("geometry", "engine"):
        raw[k] = {**base[k], **raw.get(k, {})}
    merged = {**base, **raw}
    for k, v in (("concurrency", concurrency), ("index_k", index_k), ("seed", seed), ("requests", requests)):
        if v is not None:
            merged[k] = v
    try:
        wl = Workload(**{f.name: merged[f.name] for f in dataclasses.fields(Workload)})
    except KeyError as e:
        raise WorkloadError(f"workload {spec}: missing field {e}") from None
    for k in ("turns", "prompt_tokens", "turn_tokens", "output_tokens", "think_steps"):
        setattr(wl, k, tuple(int(x) for x in getattr(wl, k)))
    if wl.index_k not in ("fp8", "bf16"):
        raise WorkloadError(f"workload {spec}: index_k must be fp8 or bf16, got {wl.index_k!r}")
    if wl.concurrency < 1 or wl.requests < 1:
        raise WorkloadError(f"workload {spec}: concurrency and requests must be >= 1")
    if wl.geometry["index_k_sizing"] not in ("tokens", "bytes", "fp8-bytes"):
        raise WorkloadError(f"workload {spec}: geometry.index_k_sizing must be tokens, bytes or fp8-bytes")
    return wl


def _parse(f, spec: str) -> dict:
    try:
        return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise WorkloadError(f"workload {spec}: not valid TOML ({e})") from None


def _loguniform(rng: np.random.Generator, lo_hi: tuple) -> int:
    lo, hi = max(1, lo_hi[0]), max(1, lo_hi[1])
    return int(round(np.exp(rng.uniform(np.log(lo), np.log(hi + 1e-9)))))


def plan(wl: Workload) -> list[list[Turn]]:
    """Sessions (each a list of turns) totalling ``wl.requests`` requests."""
    rng = np.random.default_rng([wl.seed, 1])
    sessions: list[list[Turn]] = []
    total, room = 0, 1000
    while total < wl.requests:
        sid = len(sessions)
        n = min(int(rng.integers(wl.turns[0], wl.turns[1] + 1)), wl.requests - total)
        turns, ctx = [], 0
        for t in range(n):
            ctx += _loguniform(rng, wl.prompt_tokens if t == 0 else wl.turn_tokens)
            out = int(rng.integers(wl.output_tokens[0], wl.output_tokens[1] + 1))
            u = rng.random()
            fate = "abort" if u < wl.abort_rate else "timeout" if u < wl.abort_rate + wl.timeout_rate else "ok"
            turns.append(Turn(room, sid, t, ctx, out, int(rng.integers(wl.think_steps[0], wl.think_steps[1] + 1)),
                              fate, int(rng.integers(1, 5))))
            room += 1
            ctx += out                   # the answer becomes part of the next turn's context
            if fate != "ok":
                break                    # the user went away
        sessions.append(turns)
        total += len(turns)
    return sessions
