"""How long the other threads of a process keep running after ``kill(pid, SIGSTOP)`` returns
(tests/engines/vllm_engine_pd.py stalls prefill with SIGSTOP around decode's READ post).

Linux wakes one thread of the process for a stop signal; that thread stops the others when it
runs, and until then they run on. A child with a spinning thread (bumping a shared counter) and
a sleeping main thread is stopped and resumed N times: how far the counter moved after kill()
returned, and how long until /proc shows every thread stopped.

    python bench/sigstop_window.py [N]
"""
import mmap
import os
import signal
import struct
import sys
import threading
import time


def states(pid: int) -> list[str]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            out.append(f.read().rsplit(")", 1)[1].split()[0])
    return out


def main(n: int) -> None:
    buf = mmap.mmap(-1, 8)
    pid = os.fork()
    if pid == 0:
        def spin():
            k = 0
            while True:
                k += 1
                buf[:8] = struct.pack("q", k)
        threading.Thread(target=spin, daemon=True).start()
        while True:
            time.sleep(0.05)
    time.sleep(0.5)
    moved, waits = [], []
    for _ in range(n):
        os.kill(pid, signal.SIGSTOP)
        a = struct.unpack("q", buf[:8])[0]
        t0 = time.monotonic()
        while not all(s in "tT" for s in states(pid)):
            pass
        waits.append(time.monotonic() - t0)
        moved.append(struct.unpack("q", buf[:8])[0] - a)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    moved.sort()
    waits.sort()
    print(f"{n} stops, load {os.getloadavg()[0]:.2f}: the spinning thread ran on after kill() returned in "
          f"{sum(m > 0 for m in moved)} (median {moved[n // 2]}, max {moved[-1]} counter steps); every thread "
          f"stopped after median {waits[n // 2] * 1e6:.0f} us, max {waits[-1] * 1e6:.0f} us")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
