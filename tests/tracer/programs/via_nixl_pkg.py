"""Uses ``import nixl`` (not nixl._api), tags requests its own way, exits with a chosen code.

Usage: via_nixl_pkg.py EXIT_CODE [--kill]   (--kill: SIGKILL itself after the transfer)
"""
import os
import signal
import sys
import time

import nixl
import numpy as np


def main(code: int, kill: bool) -> int:
    cfg = nixl.nixl_agent_config(backends=["UCX"])
    a, b = nixl.nixl_agent("left", cfg), nixl.nixl_agent("right", cfg)
    buf = np.arange(1024, dtype=np.uint8)
    out = np.zeros(1024, dtype=np.uint8)
    a.register_memory([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM")
    b.register_memory([(out.ctypes.data, out.nbytes, 0, "")], "DRAM")
    a.add_remote_agent(b.get_agent_metadata())
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([(buf.ctypes.data, 512, 0)], "DRAM"),
                          a.get_xfer_descs([(out.ctypes.data, 512, 0)], "DRAM"), "right", b"job=alpha;part=1")
    a.transfer(h)
    while a.check_xfer_state(h) == "PROC":
        pass
    a.send_notif("right", b"job=beta;ping")
    got = []
    deadline = time.time() + 10
    while len(got) < 2 and time.time() < deadline:
        for msgs in b.get_new_notifs().values():
            got += msgs
    print("moved", bool((out[:512] == buf[:512]).all()), "notifs", sorted(got))
    sys.stdout.flush()
    if kill:
        time.sleep(0.5)  # longer than the recorder's flush interval
        os.kill(os.getpid(), signal.SIGKILL)
    return code


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), "--kill" in sys.argv))
