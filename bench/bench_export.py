"""Export and report cost on a builder-made PD trace, measured side by side in one run.

    .venv/bin/python bench/bench_export.py [REQUESTS]

Prints events in the trace and, per output, seconds and events/s (and output size).
There is no target for exports in DESIGN.md; these numbers tell a user what to expect.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

from kvtrace.analysis.export_chrome import write_chrome_json
from kvtrace.analysis.export_model import build_timeline
from kvtrace.analysis.export_parquet import write_parquet
from kvtrace.analysis.export_perfetto import write_perfetto
from kvtrace.analysis.report import write_report
from kvtrace.analysis.session import TraceSession
from kvtrace.tracer.builder import TraceBuilder


def make(path: str, n: int) -> str:
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=4, slot_bytes=256, num_slots=4096)
    inflight = []
    for i in range(n):
        r, s = f"r{i}", [(2 * i) % 4096, (2 * i + 1) % 4096]
        d.req_start(r)
        d.alloc(r, "kv", s)
        d.msg_send(p, f"m{i}", request=r)
        p.msg_recv(d, f"m{i}", request=r)
        p.req_start(r)
        p.alloc(r, "kv", s)
        p.write(r, "kv", s)
        inflight.append((r, s, p.post(r, d, src=("kv", s), dst=("kv", s), msg=f"{r}_kv".encode())))
        if len(inflight) > 16:   # 16 transfers in flight at a time
            r, s, x = inflight.pop(0)
            p.done(x)
            d.notif_recv(p, f"{r}_kv".encode())
            d.read(r, "kv", s)
            for side in (p, d):
                side.free(r, "kv", s)
                side.req_done(r)
    return b.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as tmp:
        tr = make(os.path.join(tmp, "b.kvtrace"), n)
        t = time.perf_counter()
        s = TraceSession(tr)
        events = s.query("SELECT count(*) AS n FROM events").column("n")[0].as_py()
        print(f"trace: {n} requests, {events} events (index built in {time.perf_counter() - t:.2f} s)")
        rows = []
        t = time.perf_counter()
        tl = build_timeline(s)
        rows.append(("timeline model (incl. checks)", time.perf_counter() - t, None))
        for name, fn in (("chrome-json", lambda o: write_chrome_json(tl, o)), ("perfetto", lambda o: write_perfetto(tl, o)),
                         ("report html", lambda o: write_report(s, o))):
            out = os.path.join(tmp, name)
            t = time.perf_counter()
            fn(out)
            rows.append((name, time.perf_counter() - t, os.path.getsize(out)))
        t = time.perf_counter()
        write_parquet(s.trace, os.path.join(tmp, "pq"))
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(os.path.join(tmp, "pq")) for f in fs)
        rows.append(("parquet", time.perf_counter() - t, size))
        for name, sec, size in rows:
            extra = f"  {size / 1e6:7.2f} MB" if size is not None else ""
            print(f"{name:<32} {sec:7.2f} s  {events / sec / 1e3:8.1f} k events/s{extra}")
        s.close()


if __name__ == "__main__":
    main()
