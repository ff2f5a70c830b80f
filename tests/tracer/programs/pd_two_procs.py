"""Prefill and decode as two OS processes exchanging NIXL metadata over loopback.

Ordinary NIXL style, no kvtrace: each agent runs a listener thread on a free port;
prefill fetches decode's metadata and sends its own; buffer addresses travel over a
multiprocessing pipe (the engine's control channel). Prefill WRITEs through prepared
lists (tag ``7_kv_0_1_0``); decode READs a page back through plain lists (tag ``8:2``)
and sends a standalone notification. Usage: pd_two_procs.py
"""
import multiprocessing as mp
import socket
import sys
import time

import numpy as np

PAGE = 512


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent(name, port):
    from nixl._api import nixl_agent, nixl_agent_config
    return nixl_agent(name, nixl_agent_config(backends=["UCX"], enable_listen_thread=True, listen_port=port))


def wait(a, h):
    while (s := a.check_xfer_state(h)) == "PROC":
        pass
    return s


def wait_notifs(a, n, timeout=20.0):
    got, deadline = [], time.time() + timeout
    while len(got) < n and time.time() < deadline:
        for msgs in a.get_new_notifs().values():
            got.extend(msgs)
    return got


def wait_metadata(a, peer, timeout=20.0):
    deadline = time.time() + timeout
    while not a.check_remote_metadata(peer):
        if time.time() > deadline:
            raise SystemExit(f"{a.name}: no metadata from {peer}")
        time.sleep(0.01)


def decode_main(port, conn):
    d = agent("decode", port)
    dst = np.zeros(4 * PAGE, np.uint8)
    d.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    conn.send(("decode-buffer", dst.ctypes.data))
    _, src_addr = conn.recv()
    wait_metadata(d, "prefill")
    kv = wait_notifs(d, 1)
    ld = d.get_xfer_descs([(dst.ctypes.data + 3 * PAGE, PAGE, 0)], "DRAM")
    rd = d.get_xfer_descs([(src_addr + 3 * PAGE, PAGE, 0)], "DRAM")
    h = d.initialize_xfer("READ", ld, rd, "prefill", b"8:2")
    d.transfer(h)
    state = wait(d, h)
    d.release_xfer_handle(h)
    d.send_notif("prefill", b"7_aux")
    conn.send(("decode", [m.decode() for m in kv], state, bytes(dst[:3 * PAGE]), bytes(dst[3 * PAGE:])))
    conn.recv()  # keep the agent alive until prefill has its notifications


def main():
    ctx = mp.get_context("spawn")
    port_p, port_d = free_port(), free_port()
    here, there = ctx.Pipe()
    child = ctx.Process(target=decode_main, args=(port_d, there))
    child.start()
    p = agent("prefill", port_p)
    src = (np.arange(4 * PAGE) % 253).astype(np.uint8)
    p.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    _, dst_addr = here.recv()
    here.send(("prefill-buffer", src.ctypes.data))
    p.fetch_remote_metadata("decode", "127.0.0.1", port_d)
    p.send_local_metadata("127.0.0.1", port_d)
    wait_metadata(p, "decode")
    local = p.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    remote = p.prep_xfer_dlist("decode", [(dst_addr + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    h = p.make_prepped_xfer("WRITE", local, [0, 1, 2], remote, [0, 1, 2], b"7_kv_0_1_0")
    p.transfer(h)
    print("prefill write", wait(p, h))
    p.release_xfer_handle(h)
    name, kv, state, written, read_back = here.recv()
    print("decode got", kv, "read", state)
    print("prefill got", sorted(m.decode() for m in wait_notifs(p, 2)))
    here.send("bye")
    child.join(30)
    ok = written == bytes(src[:3 * PAGE]) and read_back == bytes(src[3 * PAGE:])
    print("bytes ok", ok, "child exit", child.exitcode)
    return 0 if ok and child.exitcode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
