"""Record a trace.

Two ways:
  kvtrace record [--workload PRESET|FILE] [--inject BUG ...] [--processes 1|2] -o DIR
      runs the reference PD engine (prefill + decode on real NIXL) and records it;
  kvtrace record -o DIR [--request-tag PRESET|REGEX] -- python prog.py ARGS
      runs any NIXL program unmodified with every nixl_agent it creates traced.
"""
from __future__ import annotations

import argparse
import os


def add_arguments(p) -> None:
    p.add_argument("-o", "--output", required=True, help="trace directory to create (NAME.kvtrace)")
    p.add_argument("--workload", default="small", help="engine workload: a preset name (small, production) or a TOML file")
    p.add_argument("--inject", action="append", default=[], metavar="BUG",
                   help="engine bug to inject (repeatable): uniform-slot-count, early-src-free, "
                        "abort-free-inflight, notify-first-handle")
    p.add_argument("--processes", type=int, choices=(1, 2), default=1,
                   help="engine: 1 = prefill and decode in this process, 2 = separate OS processes")
    p.add_argument("--concurrency", type=int, default=None, help="engine: override the workload's concurrency")
    p.add_argument("--index-k", choices=("fp8", "bf16"), default=None, help="engine: override the index_k dtype")
    p.add_argument("--seed", type=int, default=None, help="engine: override the workload's seed")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="engine: where the KV pools live")
    p.add_argument("--no-checksums", action="store_true",
                   help="engine: record write/read events with null checksums (kvh64 of every page is most "
                        "of the recording cost; checks that compare bytes then say they were skipped)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--request-tag", default=None,
                   help="program mode: request attribution from notification tags: sglang, vllm, or a regex "
                        "with a named group (?P<request>...)")
    p.add_argument("--hooks", default=None, metavar="ENGINE[:-GROUP]",
                   help="program mode: also record the engine's own NIXL connector when the program imports "
                        "it (sglang: SGLang 0.5.21/0.5.23): layouts, pages, checksums, "
                        "control messages, the request of each posting. ':-messages' etc. switches a group off")
    p.add_argument("--ring", default=None, metavar="SIZE|DURATION",
                   help="flight recorder: keep only the last SIZE (256MB: all the memory the ring may add to "
                        "each process, its own working memory included) or DURATION (30s, within 256MB; "
                        "30s,64MB sets both) of each process in memory and write that window as "
                        "DIR.dumpN.kvtrace when triggered (SIGUSR1, kvtrace dump, a NIXL error, an engine's "
                        "checksum mismatch); see docs/ring.md")
    p.add_argument("--ring-tail", default=None, metavar="DURATION",
                   help="flight recorder: keep recording this long after a trigger before writing the window "
                        "(default 1.5s), so what the incident had in flight (a transfer's completion) is in it")
    p.add_argument("--inject-after", type=int, default=0, metavar="N",
                   help="engine: injected bugs take effect only after N requests started on each side")
    p.add_argument("--force", action="store_true", help="overwrite an existing output directory")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS: a program to run traced")


def run(args) -> int:
    if args.ring:
        from .ring import check_ring
        # one SIZE per process: the reference engine in one process records two shards there
        engine_shards = 2 if not args.cmd and args.processes == 1 else 1
        try:
            check_ring(args.ring, shards=engine_shards)
        except ValueError as e:
            from ..errors import UsageError
            raise UsageError(str(e)) from None
    if getattr(args, "ring_tail", None) is not None:
        from .ring import ENV_RING_TAIL, parse_tail
        try:
            parse_tail(args.ring_tail)
        except ValueError as e:
            from ..errors import UsageError
            raise UsageError(f"--{e}") from None
        os.environ[ENV_RING_TAIL] = args.ring_tail   # read by every recorder, here and in children
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if cmd:
        from .record_any import run_program
        return run_program(args, cmd)
    from .engine.cli import run_engine
    return run_engine(args)
