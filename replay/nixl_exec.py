"""NIXL executor: the byte executor with every cross-agent move done by real NIXL agents.

One ``nixl_agent`` (UCX, CPU DRAM) per agent of the trace, all in this process; each
registers its re-created arena (never production-sized memory) and learns the others'
metadata. A move becomes one ``initialize_xfer("WRITE", ...)`` from the source agent,
posted and polled to DONE, then released.
"""
from __future__ import annotations

import itertools
import os

from ..errors import UsageError
from .bytes_exec import ByteExecutor

_ids = itertools.count()


class NixlExecutor(ByteExecutor):
    """Byte executor whose copies are NIXL transfers between in-process agents."""

    name = "nixl"

    def __init__(self):
        super().__init__("cpu")

    def start(self, graph) -> None:
        super().start(graph)
        try:
            from nixl._api import nixl_agent, nixl_agent_config  # ~0.3 s; only for --executor nixl
        except ImportError:
            raise UsageError("--executor nixl needs the nixl package (pip install nixl)") from None
        cfg = nixl_agent_config(backends=["UCX"])
        run = f"{os.getpid()}-{next(_ids)}"
        self.agents = [nixl_agent(f"kvr{ai}-{run}", cfg) for ai in range(len(self.arenas))]
        for ag, arena in zip(self.agents, self.arenas):
            ag.register_memory([(arena.ctypes.data, arena.nbytes, 0, "")], "DRAM")
        metas = [ag.get_agent_metadata() for ag in self.agents]
        for i, ag in enumerate(self.agents):
            for j, meta in enumerate(metas):
                if i != j:
                    ag.add_remote_agent(meta)
        self.nixl_xfers = 0

    def copy(self, sa: int, da: int, ranges: list) -> None:
        if sa == da:
            return super().copy(sa, da, ranges)
        src, dst = self.arenas[sa], self.arenas[da]
        ag = self.agents[sa]
        local = ag.get_xfer_descs([(src.ctypes.data + so, n, 0) for so, _do, n in ranges], "DRAM")
        remote = ag.get_xfer_descs([(dst.ctypes.data + do, n, 0) for _so, do, n in ranges], "DRAM")
        h = ag.initialize_xfer("WRITE", local, remote, self.agents[da].name, b"")
        try:
            state = ag.transfer(h)
            while state not in ("DONE", "ERR"):
                state = ag.check_xfer_state(h)
            if state == "ERR":
                raise RuntimeError("NIXL reported ERR for a replayed move")
        finally:
            ag.release_xfer_handle(h)
        self.nixl_xfers += 1
