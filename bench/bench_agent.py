"""Interposition cost of TracedAgent: µs per NIXL call, traced vs. NIXL directly, same run.

Two agent pairs live in this process -- plain ``nixl_agent`` and ``TracedAgent`` writing
to a real Recorder -- and every operation is timed on both in alternating rounds (so
drift hits both alike); the table shows medians over rounds.

    .venv/bin/python bench/bench_agent.py [--rounds 15] [--iters 200]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

PAGE = 256


class Pair:
    def __init__(self, make, tag):
        from nixl._api import nixl_agent_config
        cfg = nixl_agent_config(backends=["UCX"], enable_prog_thread=False)  # no busy progress threads competing for cores
        self.a, self.b = make(f"A{tag}", cfg), make(f"B{tag}", cfg)
        self.src = np.ones(1024 * PAGE, np.uint8)
        self.dst = np.zeros(1024 * PAGE, np.uint8)
        self.a.register_memory([(self.src.ctypes.data, self.src.nbytes, 0, "")], "DRAM")
        self.b.register_memory([(self.dst.ctypes.data, self.dst.nbytes, 0, "")], "DRAM")
        self.a.add_remote_agent(self.b.get_agent_metadata())
        self.peer = self.b.name
        self.loc = self.a.prep_xfer_dlist("", self._rows(self.src), "DRAM")
        self.rem = self.a.prep_xfer_dlist(self.peer, self._rows(self.dst), "DRAM")
        self.h16 = self.a.make_prepped_xfer("WRITE", self.loc, list(range(16)), self.rem, list(range(16)), b"1_kv_0_1_0")
        self.h256 = self.a.make_prepped_xfer("WRITE", self.loc, list(range(256)), self.rem,
                                             list(range(256, 512)), b"2_kv_0_1_0")
        self.ld = self.a.get_xfer_descs(self._rows(self.src)[:16], "DRAM")
        self.rd = self.a.get_xfer_descs(self._rows(self.dst)[:16], "DRAM")
        self.rows_src = self._rows(self.src)
        self.a.transfer(self.h16)
        self.wait(self.h16)

    @staticmethod
    def _rows(buf):
        return np.array([[buf.ctypes.data + i * PAGE, PAGE, 0] for i in range(1024)], dtype=np.uint64)

    # ---- the operations: each returns the clock time of its timed part ----
    def op_check_done(self, clk):
        t = clk()
        self.a.check_xfer_state(self.h16)
        return clk() - t

    def _post(self, h, clk):
        t = clk()
        self.a.transfer(h)
        dt = clk() - t
        self.wait(h)
        return dt

    def wait(self, h):
        while self.a.check_xfer_state(h) == "PROC":
            self.b.get_new_notifs()
        self.b.get_new_notifs()

    def op_post_16(self, clk):
        return self._post(self.h16, clk)

    def op_post_256(self, clk):
        return self._post(self.h256, clk)

    def op_complete_16(self, clk):
        self.a.transfer(self.h16)
        t = clk()
        self.wait(self.h16)  # no progress threads: both sides are polled, as an engine loop would
        return clk() - t

    def op_make_release_16(self, clk):
        t = clk()
        h = self.a.make_prepped_xfer("WRITE", self.loc, list(range(16)), self.rem, list(range(16)))
        self.a.release_xfer_handle(h)
        return clk() - t

    def op_init_release_16(self, clk):
        t = clk()
        h = self.a.initialize_xfer("WRITE", self.ld, self.rd, self.peer)
        self.a.release_xfer_handle(h)
        return clk() - t

    def op_send_notif(self, clk):
        t = clk()
        self.a.send_notif(self.peer, b"3_aux")
        dt = clk() - t
        while not self.b.get_new_notifs():
            pass
        return dt

    def op_recv_notif(self, clk):
        self.a.send_notif(self.peer, b"3_aux")
        time.sleep(0)
        while True:
            t = clk()
            got = self.b.get_new_notifs()
            dt = clk() - t
            if got:
                return dt

    def op_get_notifs_empty(self, clk):
        t = clk()
        self.b.get_new_notifs()
        return clk() - t

    def op_prep_1024(self, clk):
        t = clk()
        self.a.release_dlist_handle(self.a.prep_xfer_dlist("", self.rows_src, "DRAM"))
        return clk() - t

    def op_register_deregister(self, clk):
        t = clk()
        self.a.deregister_memory(self.a.register_memory([(self.src.ctypes.data, PAGE, 0, "")], "DRAM"))
        return clk() - t


OPS = [
    ("check_xfer_state (DONE handle)", "op_check_done", 1),
    ("get_new_notifs (empty)", "op_get_notifs_empty", 1),
    ("get_new_notifs (1 message)", "op_recv_notif", 1),
    ("send_notif", "op_send_notif", 1),
    ("transfer() post, 16 descs", "op_post_16", 1),
    ("transfer() post, 256 descs", "op_post_256", 1),
    ("poll to DONE + notif, 16 descs", "op_complete_16", 1),
    ("make_prepped_xfer+release, 16", "op_make_release_16", 1),
    ("initialize_xfer+release, 16", "op_init_release_16", 1),
    ("prep_xfer_dlist 1024 + release", "op_prep_1024", 10),
    ("register+deregister 1 region", "op_register_deregister", 10),
]


def time_op(pair, name, iters, clk):
    fn = getattr(pair, name)
    return sum(fn(clk) for _ in range(iters)) / iters / 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args(argv)
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    from nixl._api import nixl_agent

    from kvtrace.tracer import Recorder
    from kvtrace.tracer.agent import TracedAgent
    tmp = tempfile.mkdtemp(prefix="bench_agent_")
    rec = Recorder(os.path.join(tmp, "b.kvtrace"), "bench")
    plain = Pair(lambda n, c: nixl_agent(n, c), "p")
    traced = Pair(lambda n, c: TracedAgent(n, c, recorder=rec, request_tags="sglang"), "t")
    load = os.getloadavg()[0]
    print(f"# bench_agent: {args.rounds} alternating rounds x {args.iters} calls; medians; "
          f"python {sys.version.split()[0]}; {os.cpu_count()} cpus, load {load:.1f}")
    print("# cpu = CPU time of the calling thread (immune to preemption by other processes); wall = elapsed")
    print(f"{'operation':36s} {'nixl cpu':>9s} {'traced':>8s} {'+cpu µs':>8s} | {'nixl wall':>9s} {'traced':>8s} {'+wall µs':>8s}")
    for label, name, div in OPS:
        iters = max(1, args.iters // div)
        res = {(k, c): [] for k in ("p", "t") for c in ("cpu", "wall")}
        for r in range(args.rounds):
            order = ((plain, "p"), (traced, "t")) if r % 2 == 0 else ((traced, "t"), (plain, "p"))
            for pair, k in order:
                res[(k, "cpu")].append(time_op(pair, name, iters, time.thread_time_ns))
                res[(k, "wall")].append(time_op(pair, name, iters, time.perf_counter_ns))
        m = {key: statistics.median(v) for key, v in res.items()}
        print(f"{label:36s} {m['p', 'cpu']:9.2f} {m['t', 'cpu']:8.2f} {m['t', 'cpu'] - m['p', 'cpu']:8.2f} | "
              f"{m['p', 'wall']:9.2f} {m['t', 'wall']:8.2f} {m['t', 'wall'] - m['p', 'wall']:8.2f}")
    rec.close()
    ev = rec._info.get("events")
    print(f"# recorded {ev} events into {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
