"""A reference-engine recording followed live by a Watcher, as `kvtrace watch` follows it
(real clocks): what the watch tests run and then compare with `check` on the finished trace."""
from __future__ import annotations

import os
import subprocess
import sys
import time


def record_and_follow(tmp_path, requests: int, inject: str | None, after: int, check=None) -> tuple[str, list, object]:
    """Record ``requests`` requests (``inject`` after ``after`` of them, if given) while a
    Watcher with ``check`` (default: its own) polls every 0.1 s, printing findings as
    `kvtrace watch` does (emitted while a re-check runs, or returned at its end). Returns
    (the trace, the findings reported, in order, the open model's analysis window or None)."""
    from kvtrace.analysis.watch import Watcher
    out = str(tmp_path / "live.kvtrace")
    toml = tmp_path / "w.toml"
    toml.write_text(f'name = "watched"\nrequests = {requests}\nconcurrency = 4\n')
    cmd = [sys.executable, "-m", "kvtrace", "record", "--workload", str(toml), "--no-progress", "--no-checksums",
           "-o", out]
    if inject:
        cmd += ["--inject", inject, "--inject-after", str(after)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NIXL_LOG_LEVEL": "WARN"})
    w = Watcher(out, time.monotonic, check=check) if check is not None else Watcher(out, time.monotonic)
    reported, window = [], None
    try:
        while True:
            done = proc.poll() is not None
            reported += [r.finding for r in w.poll(emit=lambda r: reported.append(r.finding))]
            if done:
                break
            time.sleep(0.1)
        reported += [r.finding for r in w.poll(emit=lambda r: reported.append(r.finding))]  # the last flush
        window = getattr(getattr(w.check, "session", None), "window", None)
    finally:
        w.close()
    assert proc.returncode in (0, 1), proc.stderr.read()[-2000:]
    return out, reported, window
