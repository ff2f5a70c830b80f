"""Long randomized campaigns with fresh seeds, run by hand (the test suite replays only the
corpus and a few derandomized cases):

    .venv/bin/python tests/fuzz/campaign.py format  --seed 7 --cases 300
    .venv/bin/python tests/fuzz/campaign.py partial --seed 5 --sessions 40
    .venv/bin/python tests/fuzz/campaign.py partial --seed 5 --sessions 40 --cut start
    .venv/bin/python tests/fuzz/campaign.py partial --seed 5 --sessions 10 --traces traces/sglang-*.kvtrace

``format``: random valid traces (fuzzlib.build) with 1-3 random mutations each, every command
of fuzzlib.COMMANDS run in a forked child; prints each case that tracebacks or hangs as JSON
(add it to corpus/ with the fix). ``partial``: reference-engine sessions (random seed, bug,
process count, concurrency) recorded on real NIXL (or, with ``--traces``, given recordings of
any engine, SGLang's or vLLM's connectors: taken in turn), each cut or robbed of shards six
times at random; prints a cut trace that shows a violation the whole trace does not, a clean session
with a finding, or a hypothesis "ruled out" on a cut trace. ``--cut start`` cuts every shard
at its *start* instead, like a flight-recorder dump's window (partial_cases.ring_window: a
random start, before it nothing, the whole owners a ring keeps after dropping its kept
facts, random events, or everything with ``state_complete`` true, where one process then
at times let go of a finished request its peer kept), then at times a stream tail too.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "analysis")]

BUGS = [None, None, "uniform-slot-count", "early-src-free", "abort-free-inflight", "notify-first-handle"]
VALUES = [None, -1, 0, 2**70, "", "x", ["a"], "../x", "/etc", "..", "[b]x[/b]", "<script>", 1.5, True, {}]


def _mutation(rng: random.Random) -> dict:
    k = rng.choice(["flip", "flip", "truncate", "wrong_type", "huge", "dup_seq", "drop_col", "null_col",
                    "manifest", "shard_json"])
    i = lambda: rng.randint(0, 2**16)  # noqa: E731
    if k == "flip":
        return {"kind": k, "file": i(), "pos": i(), "bits": rng.randint(1, 255)}
    if k == "truncate":
        return {"kind": k, "file": i(), "pos": i()}
    if k == "wrong_type":
        return {"kind": k, "file": i(), "col": i(), "as": rng.choice(["str", "int"])}
    if k == "huge":
        return {"kind": k, "file": i(), "col": i(), "row": i(), "big": i()}
    if k == "dup_seq":
        return {"kind": k, "file": i(), "col": i(), "row": i(), "row2": i()}
    if k in ("drop_col", "null_col"):
        return {"kind": k, "file": i(), "col": i()}
    if k == "manifest":
        return {"kind": k, "key": rng.choice(["shards", "version", "format", "workload", "complete"]),
                "value": rng.choice(VALUES)}
    shard = {"closed": rng.choice(VALUES), "lost": rng.choice(VALUES), "untraced_postings": rng.choice(VALUES)}
    return {"kind": k, "file": i(), "value": rng.choice(VALUES + [shard])}


def format_campaign(seed: int, cases: int, work: str) -> int:
    import fuzzlib

    rng, bad = random.Random(seed), 0
    for c in range(cases):
        case = {"trace": {"seed": rng.randint(0, 1000), "requests": rng.randint(1, 4), "pages": rng.randint(1, 3),
                          "layers": rng.randint(1, 2), "slots": rng.choice([4, 8]), "early_free": rng.random() < .5,
                          "msgs": rng.random() < .5, "shards": rng.choice([1, 2]), "cycle": rng.random() < .2},
                "mutations": [_mutation(rng) for _ in range(rng.randint(1, 3))]}
        wd = os.path.join(work, "case")
        shutil.rmtree(wd, ignore_errors=True)
        os.makedirs(wd)
        trace = fuzzlib.make_case(wd, case)
        for cmd in fuzzlib.COMMANDS:
            outcome, err = fuzzlib.run_bounded(cmd, trace, os.path.join(wd, cmd), 90)
            if outcome not in ("ok", "refused"):
                bad += 1
                print(f"{cmd} {outcome}: {json.dumps(case)}\n{err[-1500:]}", flush=True)
        if (c + 1) % 10 == 0:
            print(f"{c + 1} cases, {bad} failing ({time.strftime('%H:%M:%S')})", flush=True)
    return bad


def ring_damage(rng: random.Random, shards=("prefill", "decode")) -> list:
    """A flight-recorder window of the whole trace (see the module doc), now and then with a
    stream cut short as well."""
    from partial_cases import cut_stream, let_go_at_window_start, ring_window

    keep = rng.choice(["none", "owners", "owners", "random", "all"])
    out = [ring_window(rng.uniform(0.05, 0.9), keep, rng.random(), rng.randint(0, 10**6), complete=keep == "all")]
    if keep == "all" and len(shards) > 1 and rng.random() < 0.5:
        # one process let go of a finished request its peer kept (each decides alone at the cut)
        out.append(let_go_at_window_start(rng.choice(shards), rng.randint(0, 10**6)))
    if rng.random() < 0.25:
        out.append(cut_stream(rng.choice(shards), rng.choice(["events", "descs"]), rng.uniform(0.5, 1)))
    return out


def _record_session(rng: random.Random, work: str, i: int) -> tuple[str | None, str | None, str]:
    """A reference-engine session with a random seed, bug, process count and concurrency:
    (its path or None when recording failed, the bug injected, the command)."""
    from kvtrace.cli import main

    inject = rng.choice(BUGS)
    whole = os.path.join(work, f"s{i}.kvtrace")
    argv = ["record", "--workload", "small", "--seed", str(rng.randint(0, 10**6)), "--no-progress",
            "--processes", rng.choice(["1", "2"]), "--concurrency", rng.choice(["2", "4", "8", "16"]), "-o", whole]
    argv += ["--inject", inject] if inject else []
    argv += ["--no-checksums"] if rng.random() < 0.3 else []
    return (whole if main(argv) == 0 else None), inject, " ".join(argv)


def partial_campaign(seed: int, sessions: int, work: str, cut: str = "any", traces: list[str] | None = None) -> int:
    """``traces``: damage copies of these recordings (taken in turn, any engine; whether a
    trace is clean is not known, so only what a cut adds is a failure) instead of recording
    reference-engine sessions."""
    from kvtrace.analysis.session import TraceSession
    from partial_cases import _shards, copy_trace
    from test_partial_recorded import attributed, random_damage

    rng, bad = random.Random(seed), 0
    for i in range(sessions):
        if traces:
            src = traces[i % len(traces)]
            whole, inject, what_run = copy_trace(src, os.path.join(work, f"s{i}.kvtrace")), "unknown", src
        else:
            whole, inject, what_run = _record_session(rng, work, i)
            if whole is None:
                print("recording failed:", what_run, flush=True)
                continue
        shards = tuple(_shards(whole))
        with TraceSession(whole) as s:
            base = attributed(s.findings())
        if inject is None and base:
            bad += 1
            print("clean session with findings:", what_run, sorted(base), flush=True)
        for k in range(6):
            damage = ring_damage(rng, shards) if cut == "start" else random_damage(rng, shards)
            path = copy_trace(whole, os.path.join(work, f"s{i}-{k}.kvtrace"))
            for t in damage:
                t(path)
            what = f"{what_run} | {[t.__name__ for t in damage]}"
            if not any(os.path.isdir(os.path.join(path, sh)) for sh in shards):
                shutil.rmtree(path, ignore_errors=True)   # every shard dropped: nothing to check
                continue
            with TraceSession(path) as s:
                found = s.findings()
                verdict = s.verdict(found)
            extra = attributed(found) - base
            problems = ([f"violations the whole trace has not: {sorted(extra)[:5]}"] if extra else []) + \
                (["clean session, cut trace has findings"] if inject is None and found else []) + \
                (["a hypothesis ruled out on a cut trace"] if any(h.status == "ruled out" for h in verdict.hypotheses) else [])
            for p in problems:
                bad += 1
                print(f"{p}: {what}", flush=True)
            shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(whole, ignore_errors=True)
        print(f"{i + 1} sessions, {bad} failing ({time.strftime('%H:%M:%S')})", flush=True)
    return bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=["format", "partial"])
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--cases", type=int, default=100, help="format: random cases")
    p.add_argument("--sessions", type=int, default=10, help="partial: recorded sessions (6 cuts each)")
    p.add_argument("--cut", choices=["any", "start"], default="any",
                   help="partial: cut streams and drop shards (any), or cut every shard at its start as a ring window")
    p.add_argument("--traces", nargs="+", metavar="TRACE",
                   help="partial: damage copies of these recordings (any engine, taken in turn) instead of "
                        "recording reference-engine sessions")
    a = p.parse_args()
    print(f"{a.kind} campaign, seed {a.seed}{', cut ' + a.cut if a.kind == 'partial' else ''}", flush=True)
    with tempfile.TemporaryDirectory(prefix="kvtrace-campaign-") as work:
        bad = (format_campaign(a.seed, a.cases, work) if a.kind == "format"
               else partial_campaign(a.seed, a.sessions, work, a.cut, a.traces))
    print(f"done: {bad} failing", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
