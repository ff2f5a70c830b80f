"""What a flight recorder keeps when every request shares one prefix page (a system prompt's
pages in SGLang's radix cache or vLLM's prefix cache): the page's slot generation never ends
while requests overlap, so whatever the ring keeps "because of" that page is what matters.

    .venv/bin/python bench/ring_shared_prefix.py [--seconds 12] [--ring 2s] [--rate 450]

One RingRecorder (a --ring DURATION ring); requests arrive every 1/--rate s, each allocates
the 4 shared prefix slots plus 8 of its own, and frees them two requests later (so the
prefix is always held). Prints, every 1000 requests: the ring's chunks, the rows pinned
outside it (facts kept for live owners), its bytes and the process's peak RSS. A bounded
recorder keeps the pinned rows flat; one that keeps every reader of the page grows them with
the run's length (until the budget's cut drops them all and marks the window start a cut).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--ring", default="2s")
    p.add_argument("--rate", type=float, default=450.0, help="requests per second")
    a = p.parse_args(argv)
    from kvtrace.tracer.ring import open_recorder

    tmp = tempfile.mkdtemp(prefix="kvtrace-prefix-")
    rec = open_recorder(os.path.join(tmp, "p.kvtrace"), "prefill", a.ring, flush_interval=0.1,
                        ring_flush_interval=0.2)
    st = rec.store
    prefix = [0, 1, 2, 3]

    def own(i: int) -> list[int]:
        return [1000 + (i % 50) * 8 + k for k in range(8)]

    print(f"ring {a.ring}, {a.rate:.0f} requests/s, each: the 4 shared prefix slots + 8 of its own")
    try:
        t0, i = time.time(), 0
        while time.time() - t0 < a.seconds:
            rec.allocs("prefill", str(i), [("kv", prefix + own(i), list(range(12)))])
            if i >= 2:
                rec.frees("prefill", str(i - 2), [("kv", prefix + own(i - 2))], reason="finish")
            i += 1
            time.sleep(1 / a.rate)
            if i % 1000 == 0:
                pinned = sum(e[0].num_rows for e in st.pinned)
                print(f"  {time.time() - t0:5.1f} s  requests {i:6d}  chunks {len(st.chunks):3d}  "
                      f"pinned rows {pinned:6d}  held {st.nbytes / 1e6:6.2f} MB  "
                      f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB", flush=True)
    finally:
        rec.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
