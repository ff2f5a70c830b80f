"""Two NIXL agents in one process, written in the ordinary NIXL style (no kvtrace).

WRITE through prepared lists (posted twice), READ through plain descriptor lists,
notifications with and without transfers. Prints what it moved, deterministically.
"""
import sys
import time

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

PAGE = 256


def wait(agent, handle):
    while True:
        state = agent.check_xfer_state(handle)
        if state != "PROC":
            return state


def notifs(agent, n):
    got = {}
    deadline = time.time() + 10
    while sum(len(v) for v in got.values()) < n and time.time() < deadline:
        for k, v in agent.get_new_notifs().items():
            got.setdefault(k, []).extend(v)
    return got


def main():
    cfg = nixl_agent_config(backends=["UCX"])
    prefill, decode = nixl_agent("prefill", cfg), nixl_agent("decode", cfg)
    src = (np.arange(8 * PAGE) % 251).astype(np.uint8)
    dst = np.zeros(8 * PAGE, np.uint8)
    prefill.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    decode.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    prefill.add_remote_agent(decode.get_agent_metadata())
    decode.add_remote_agent(prefill.get_agent_metadata())

    local = prefill.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    remote = prefill.prep_xfer_dlist("decode", [(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    h = prefill.make_prepped_xfer("WRITE", local, [0, 1, 2], remote, [5, 6, 7], b"42_kv_0_1_0")
    prefill.transfer(h)
    print("write", wait(prefill, h))
    prefill.transfer(h)  # the same handle posted again
    print("repost", wait(prefill, h))
    prefill.release_xfer_handle(h)
    print("notifs", notifs(decode, 2))

    ld = decode.get_xfer_descs(np.array([[dst.ctypes.data, 2 * PAGE, 0]], dtype=np.uint64), "DRAM")
    rd = decode.get_xfer_descs([(src.ctypes.data + 3 * PAGE, 2 * PAGE, 0)], "DRAM")
    r = decode.initialize_xfer("READ", ld, rd, "prefill", b"req-7:1")
    decode.transfer(r)
    print("read", wait(decode, r))
    decode.release_xfer_handle(r)
    print("notifs", notifs(prefill, 1))

    decode.send_notif("prefill", b"42_aux")
    print("notifs", notifs(prefill, 1))
    ok = bool((dst[5 * PAGE:] == src[:3 * PAGE]).all() and (dst[:2 * PAGE] == src[3 * PAGE:5 * PAGE]).all())
    print("bytes ok", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
