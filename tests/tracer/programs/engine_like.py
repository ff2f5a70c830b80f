"""A tiny prefill/decode engine on NIXL, with kvtrace's few-line hooks (marked `# kvtrace`).

Prefill and decode are two agents of this process; each has a paged KV pool, one
registered region per layer, and SGLang-style prepared lists indexed ``layer * SLOTS +
slot``. Per request decode allocates destination pages, prefill allocates source pages,
fills them, WRITEs them with tag ``{room}_kv_0_1_0`` and releases them; decode reads the
pages after the notification and frees them.

--early-free plants the bug of ai-dynamo/dynamo#826: prefill returns its source pages to
the allocator right after posting, before the transfer reading them is done. Usage:
engine_like.py [--early-free] [--requests N] [--page-bytes B]
"""
import argparse
import sys
import time

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

from kvtrace.tracer.hooks import KVHooks  # kvtrace

LAYERS, SLOTS, PAGE_BYTES, PAGES_PER_REQ = 2, 16, 128, 3


class Side:
    def __init__(self, name):
        self.agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
        self.kv = np.zeros((LAYERS, SLOTS, PAGE_BYTES), np.uint8)
        self.agent.register_memory([(self.kv[l].ctypes.data, self.kv[l].nbytes, 0, "") for l in range(LAYERS)],
                                   "DRAM")
        self.free_slots = list(range(SLOTS))
        self.hooks = KVHooks(self.agent)  # kvtrace
        self.hooks.layouts("kv", [self.kv[l].ctypes.data for l in range(LAYERS)],  # kvtrace
                           [self.kv[l].nbytes for l in range(LAYERS)], [PAGE_BYTES] * LAYERS,
                           page_tokens=16, dtype="bf16")

    def descs(self):
        return [(self.kv[l].ctypes.data + s * PAGE_BYTES, PAGE_BYTES, 0) for l in range(LAYERS) for s in range(SLOTS)]

    def alloc(self, room, n):
        slots, self.free_slots = self.free_slots[:n], self.free_slots[n:]
        self.hooks.alloc(str(room), "kv", slots)  # kvtrace
        return slots

    def release(self, room, slots, reason):
        self.free_slots += slots
        self.hooks.free(str(room), "kv", slots, reason=reason)  # kvtrace


def main():
    global PAGE_BYTES
    ap = argparse.ArgumentParser()
    ap.add_argument("--early-free", action="store_true")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--page-bytes", type=int, default=PAGE_BYTES,
                    help="bytes per page; large pages make UCX answer PROC at post, opening the race")
    args = ap.parse_args()
    PAGE_BYTES = args.page_bytes
    prefill, decode = Side("prefill"), Side("decode")
    prefill.agent.add_remote_agent(decode.agent.get_agent_metadata())
    src_list = prefill.agent.prep_xfer_dlist("", prefill.descs(), "DRAM")
    dst_list = prefill.agent.prep_xfer_dlist("decode", decode.descs(), "DRAM")
    ok = 0
    for i in range(args.requests):
        room = 1000 + i
        dst = decode.alloc(room, PAGES_PER_REQ)
        src = prefill.alloc(room, PAGES_PER_REQ)
        for layer in range(LAYERS):
            for p, s in enumerate(src):
                prefill.kv[layer, s] = (room * 7 + layer * 3 + p) % 256
            prefill.hooks.write(str(room), "kv", layer, src, data=prefill.kv[layer])  # kvtrace
        idx = lambda slots: [l * SLOTS + s for l in range(LAYERS) for s in slots]  # noqa: E731
        h = prefill.agent.make_prepped_xfer("WRITE", src_list, idx(src), dst_list, idx(dst),
                                            f"{room}_kv_0_1_0".encode())
        prefill.agent.transfer(h)
        if args.early_free:
            prefill.release(room, src, "finish")  # BUG: the transfer may still be reading them
        while prefill.agent.check_xfer_state(h) == "PROC":
            pass
        if not args.early_free:
            prefill.release(room, src, "finish")
        prefill.agent.release_xfer_handle(h)
        deadline = time.time() + 10
        while not decode.agent.check_remote_xfer_done("prefill", f"{room}_kv".encode()):
            if time.time() > deadline:
                raise SystemExit(f"no notification for {room}")
        for layer in range(LAYERS):
            decode.hooks.read(str(room), "kv", layer, dst, data=decode.kv[layer])  # kvtrace
            want = [(room * 7 + layer * 3 + p) % 256 for p in range(PAGES_PER_REQ)]
            ok += all(int(decode.kv[layer, s, 0]) == w for s, w in zip(dst, want))
        decode.release(room, dst, "finish")
    print(f"requests {args.requests} layers ok {ok}/{args.requests * LAYERS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
