"""Ring dumps of complete recordings, made by the flight recorder's own stores, checked
against the recording they were cut from (the same session: an exact comparison).

    python bench/ring_window_replay.py TRACE [TRACE ...] --sizes 1.5MB,3MB,8MB --at 0.5,0.8,0.97

Each recording's shards are fed, 50 ms of events at a time in time order (each posting's
descriptor rows just before it, layouts and lists first), to one RingStore per shard
bounded by SIZE (its kept facts are dropped past half of it, as a recording ring's are:
``state_complete`` false), the shards exchanging their live requests and groups after each
step (kvtrace/model/live_window.py, as the ring's shards do through the session
directory); at the trigger (a fraction of the recording's time span) every shard writes the
window a dump would (RingStore.snapshot from the latest oldest chunk, up to the trigger)
with its ``ring.window`` in shard.json. Printed per dump: each shard's (state_complete,
pinned, evicted), how many (check, request) pairs `check` proves on the dump and on the
whole recording, and any the whole recording lacks (EXTRA: a soundness bug) or a
hypothesis "ruled out". Small recordings want small sizes and a short slack/step
(``--slack-ms 20 --step-ms 5`` for the 24-request traces/)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from kvtrace.analysis.session import TraceSession
from kvtrace.model.live_window import LiveWindow
from kvtrace.tracer.ring_dump import _write_stream
from kvtrace.tracer.ring_store import RingStore
from kvtrace.tracer.schema import SCHEMAS, TABLES


def _size(text: str) -> int:
    """``1.5MB``, ``120KB`` -> bytes (a store's own bound: below the recorder's minimum on purpose)."""
    for unit, mult in (("MB", 2**20), ("KB", 2**10), ("B", 1)):
        if text.upper().endswith(unit):
            return int(float(text[:-len(unit)]) * mult)
    return int(text)


def _read(path: str) -> pa.Table:
    with open(path, "rb") as f:
        return ipc.open_stream(pa.BufferReader(f.read())).read_all()


def dump(src: str, out: str, max_bytes: int, frac: float, slack_ns: int, step_ns: int) -> dict | None:
    """Write the dump of ``src`` at ``frac`` of its span through rings of ``max_bytes``;
    its shards' windows (None: a ring kept nothing, the size is too small)."""
    shards = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)) and not d.startswith("_"))
    tabs = {s: {t: _read(os.path.join(src, s, t + ".arrows")) for t in TABLES} for s in shards}
    ts = np.sort(np.concatenate([tabs[s]["events"].column("t_ns").to_numpy() for s in shards]))
    t, end = int(ts[0]), int(ts[min(len(ts) - 1, int(len(ts) * frac))])
    lw = LiveWindow(1.0, slack_ns / 1e9)
    lw._store = lambda shard: lw.stores.setdefault(shard, RingStore(max_bytes=max_bytes, slack_ns=slack_ns))
    for s in shards:
        lw.feed(s, {"layouts": tabs[s]["layouts"], "dlists": tabs[s]["dlists"], "descs": tabs[s]["descs"]})
    times = {s: tabs[s]["events"].column("t_ns").to_numpy() for s in shards}
    while t <= end:
        for s in shards:
            m = (times[s] >= t) & (times[s] < min(t + step_ns, end + 1))
            if m.any():
                lw.feed(s, {"events": tabs[s]["events"].filter(pa.array(m))})
        lw._exchange_live(t + step_ns)
        t += step_ns
    firsts = [st.chunks[0].t_first for st in lw.stores.values() if st.chunks]
    if len(firsts) < len(shards):
        return None
    start = max(firsts)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    windows = {}
    for s in shards:
        tables, window = lw.stores[s].snapshot(start, end)
        window.update(to_t_ns=end, tail_s=0.0)
        os.makedirs(os.path.join(out, s))
        rows = {n: _write_stream(os.path.join(out, s, n + ".arrows"), tables[n], SCHEMAS[n]) for n in TABLES}
        with open(os.path.join(src, s, "shard.json")) as f:
            info = json.load(f)
        info.update(closed=False, events=rows["events"], ring={"spec": f"replay {max_bytes}", "window": window})
        with open(os.path.join(out, s, "shard.json"), "w") as f:
            json.dump(info, f)
        windows[s] = window
    shutil.copy(os.path.join(src, "manifest.json"), os.path.join(out, "manifest.json"))
    return windows


def proven(findings) -> set:
    out = set()
    for f in findings:
        out.add((f.check, f.request))
        for g in f.extra.get("folded") or []:
            out.add((g["check"], g["request"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--sizes", default="1.5MB,3MB,8MB")
    ap.add_argument("--at", default="0.5,0.8,0.97", help="trigger points, fractions of the span")
    ap.add_argument("--slack-ms", type=float, default=200)
    ap.add_argument("--step-ms", type=float, default=50)
    a = ap.parse_args()
    sizes = [_size(x) for x in a.sizes.split(",")]
    bad = n = 0
    with tempfile.TemporaryDirectory(prefix="kvtrace-ringwin-") as work:
        for full in a.traces:
            with TraceSession(full) as s:
                base = proven(s.findings())
            for size in sizes:
                for frac in (float(x) for x in a.at.split(",")):
                    out = os.path.join(work, "dump.kvtrace")
                    w = dump(full, out, size, frac, int(a.slack_ms * 1e6), int(a.step_ms * 1e6))
                    if w is None:
                        print(f"{full} {size} {frac}: a ring kept nothing (size too small)")
                        continue
                    with TraceSession(out) as s:
                        found = s.findings()
                        ruled = any(h.status == "ruled out" for h in s.verdict(found).hypotheses)
                    got = proven(found)
                    extra = sorted(got - base)
                    n += 1
                    bad += bool(extra or ruled)
                    state = {k: (x["state_complete"], x["pinned_events"], x["evicted_events"]) for k, x in w.items()}
                    print(f"{os.path.basename(full)} {size} {frac} {state} found {len(got)} of {len(base)}"
                          + (f" EXTRA {extra[:5]}" if extra else "") + (" RULED OUT" if ruled else ""), flush=True)
    print(f"dumps {n}, with a finding the whole recording lacks or a hypothesis ruled out: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
