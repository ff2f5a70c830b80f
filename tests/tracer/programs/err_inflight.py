"""A transfer fails while in flight: the target agent is destroyed after the post.

Run with UCX_TLS=tcp so the 4 MiB WRITE is still in progress when the peer goes away;
NIXL then reports the failure from check_xfer_state (it raises). Usage: err_inflight.py
"""
import gc
import sys

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

N = 4 << 20


def main():
    cfg = nixl_agent_config(backends=["UCX"])
    a, b = nixl_agent("sender", cfg), nixl_agent("target", cfg)
    src, dst = np.ones(N, np.uint8), np.zeros(N, np.uint8)
    a.register_memory([(src.ctypes.data, N, 0, "")], "DRAM")
    rb = b.register_memory([(dst.ctypes.data, N, 0, "")], "DRAM")
    a.add_remote_agent(b.get_agent_metadata())
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, N, 0)], "DRAM"),
                          a.get_xfer_descs([(dst.ctypes.data, N, 0)], "DRAM"), "target", b"11_kv_0_1_0")
    print("post", a.transfer(h))
    b.deregister_memory(rb)
    del b
    gc.collect()
    try:
        while (state := a.check_xfer_state(h)) == "PROC":
            pass
        print("state", state)
    except Exception as e:
        print("failed", type(e).__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
