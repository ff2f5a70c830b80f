"""No kvtrace hooks: a second transfer overwrites the source of a transfer in flight.

Prefill WRITEs four pages of its buffer to decode (tag ``1_kv_0_1_0``). With --bug it then,
without waiting for that transfer, READs two pages from decode into the *same* source
pages (tag ``2_kv_0_1_0``); the fixed version waits for DONE first. On CPU UCX the first
transfer usually wins the race, so the program's output looks right either way -- the
hazard is in the ordering, which only the trace shows. Pages are 256 KiB so that, over
UCX's TCP transport, the first WRITE is still in flight when the READ is posted (tiny
pages over shared memory can complete inside the post, and then no race was planted).
Usage: overwrite_inflight.py [--bug]
"""
import sys

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

PAGE = 256 << 10


def wait(agent, h):
    while (s := agent.check_xfer_state(h)) == "PROC":
        pass
    return s


def main(bug: bool) -> int:
    cfg = nixl_agent_config(backends=["UCX"])
    prefill, decode = nixl_agent("prefill", cfg), nixl_agent("decode", cfg)
    src = np.full(4 * PAGE, 7, np.uint8)
    dst = np.zeros(4 * PAGE, np.uint8)
    other = np.full(2 * PAGE, 9, np.uint8)
    prefill.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    decode.register_memory([(dst.ctypes.data, dst.nbytes, 0, ""), (other.ctypes.data, other.nbytes, 0, "")], "DRAM")
    prefill.add_remote_agent(decode.get_agent_metadata())
    d = prefill.get_xfer_descs
    x1 = prefill.initialize_xfer("WRITE", d([(src.ctypes.data, 4 * PAGE, 0)], "DRAM"),
                                 d([(dst.ctypes.data, 4 * PAGE, 0)], "DRAM"), "decode", b"1_kv_0_1_0")
    x2 = prefill.initialize_xfer("READ", d([(src.ctypes.data, 2 * PAGE, 0)], "DRAM"),
                                 d([(other.ctypes.data, 2 * PAGE, 0)], "DRAM"), "decode", b"2_kv_0_1_0")
    prefill.transfer(x1)
    if not bug:
        wait(prefill, x1)
    prefill.transfer(x2)  # with --bug: x1 may still be reading these source pages
    print("x1", wait(prefill, x1), "x2", wait(prefill, x2))
    prefill.release_xfer_handle(x1)
    prefill.release_xfer_handle(x2)
    return 0


if __name__ == "__main__":
    sys.exit(main("--bug" in sys.argv))
