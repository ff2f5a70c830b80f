"""What ``--ring SIZE`` buys: one process's memory budget for its flight-recorder rings.

A serving engineer who types ``--ring 64MB`` expects the process to use at most 64 MB
more than it would without the ring (recording to a file). So SIZE is the budget of
everything the ring causes, not only of the batches it holds. Before any batch is kept,
the budget is charged with:

* :data:`PROCESS_RESERVE`, once per process: the library code the ring's work touches
  (Arrow's compute kernels, IPC reading, LZ4: ~2 MiB of mapped pages, measured) and the
  allocators' slack around the ring's short-lived buffers;
* per ring (one per shard the process records), :data:`SHARD_RESERVE` (its flush
  thread's heap arena, the live-request exchange) plus what its store reports as
  ``working_bytes``: the liveness bookkeeping it still keeps (requests, transfers and
  slots of the last slack seconds, kept after their rows left, counted per entry), and
  twice the largest batch it has taken (one batch unpacked and its filtered copy while
  evicting or dumping, or a batch's IPC stream and its LZ4 copy while packing).

The rings' batches get what is left, split equally between the rings of one session in
this process (the reference engine run in one process records prefill and decode there).
Every store keeps ``its batches + its working bytes`` within its share before it adds a
flush, and a store never grows into room another store of the process still holds, so
``committed()`` (the reserve plus every store's batches and working bytes) stays within
SIZE after every flush.

A SIZE that cannot hold the reserves plus room for a flush per ring is refused
(:class:`RingSizeError`, which states the minimum).
"""
from __future__ import annotations

import os
import threading

from ..errors import UsageError

MiB = 1 << 20
#: charged once per process (see the module docstring); measured: the library code the ring
#: touches 1.2-2.0 MiB, the rest of a ring process's growth over file recording that no
#: store counts ~2.5-3 MiB (bench/bench_ring.py --only memory, bench/results/ring.txt: with
#: 4 MiB a 10 MB ring of the reference engine's two shards grew the process by 10.1 MiB)
PROCESS_RESERVE = 5 * MiB
#: charged per ring beside its counted bookkeeping and transient batches
SHARD_RESERVE = 1 * MiB
#: the least room per ring beyond the reserves: its working bytes (the reference engine's
#: bookkeeping ~0.9 MiB per ring and twice its largest batch, 0.4-0.6 MiB, measured) and a
#: few 0.2 s flushes (100-300 KB of Arrow each), so a window holds more than the last flush
MIN_BATCH_ROOM = 2 * MiB
#: the memory bound of a DURATION ring given without a size (``--ring 30s``): the window is
#: shorter than the duration when the process records faster than this holds
DEFAULT_CEILING = 256 * MiB


class RingSizeError(UsageError, ValueError):
    """A ring SIZE too small for the memory the ring itself needs (the message says the minimum)."""


def minimum(shards: int = 1) -> int:
    """The smallest SIZE a process recording ``shards`` rings accepts."""
    return PROCESS_RESERVE + max(1, shards) * (SHARD_RESERVE + MIN_BATCH_ROOM)


def _mb(n: int) -> str:
    return f"{-(-n // MiB)}MB"


def check(size: int, shards: int = 1, spec: str | None = None) -> None:
    """Raise :class:`RingSizeError` when ``size`` is below :func:`minimum`."""
    need = minimum(shards)
    if size < need:
        what = f"--ring {spec}" if spec else f"a ring of {size} bytes"
        per = "a process" if shards <= 1 else f"a process recording {shards} shards"
        raise RingSizeError(
            f"{what}: too small; {per} needs at least {_mb(need)} ({_mb(PROCESS_RESERVE)} for the ring's "
            f"own working memory, plus {_mb(SHARD_RESERVE + MIN_BATCH_ROOM)} per shard for its bookkeeping "
            f"and recorded batches)")


class RingBudget:
    """SIZE bytes shared by the rings (stores) of one process.

    Args:
        size: the budget in bytes (what the user typed).
        process_reserve: charged once (0 for a store tested on its own).
        shard_reserve: charged per store.
    """

    def __init__(self, size: int, process_reserve: int = PROCESS_RESERVE, shard_reserve: int = SHARD_RESERVE):
        self.size, self.process_reserve, self.shard_reserve = int(size), int(process_reserve), int(shard_reserve)
        self._stores: list = []
        self._lock = threading.Lock()

    def join(self, store) -> None:
        with self._lock:
            if store not in self._stores:
                self._stores = self._stores + [store]

    def leave(self, store) -> None:
        with self._lock:
            self._stores = [s for s in self._stores if s is not store]

    @property
    def stores(self) -> int:
        return len(self._stores)

    def charge(self, store) -> int:
        """What ``store`` costs now: its batches, working bytes and reserve."""
        return store.nbytes + store.working_bytes + self.shard_reserve

    def allowance(self, store) -> int:
        """How many bytes of batches ``store`` may hold now (may be negative: evict all).

        Its equal share of what the process reserve leaves, less its own working bytes;
        and never more than the others leave free (a ring that joins while the others are
        full waits for them to shrink to their new shares at their next flush)."""
        stores = self._stores            # replaced, never mutated: safe to read unlocked
        n = max(1, len(stores) + (store not in stores))
        room = self.size - self.process_reserve
        others = sum(self.charge(s) for s in stores if s is not store)
        own = store.working_bytes + self.shard_reserve
        return min(room // n, room - others) - own

    def committed(self) -> int:
        """The bytes charged against SIZE now (reserves, batches, working bytes)."""
        return self.process_reserve + sum(self.charge(s) for s in self._stores)


_budgets: dict = {}
_budgets_lock = threading.Lock()


def for_session(session_dir: str, size: int) -> RingBudget:
    """The budget the rings of ``session_dir`` share in this process (one SIZE per process:
    the reference engine run in one process records two shards under one ``--ring``)."""
    key = (os.getpid(), os.path.abspath(session_dir), int(size))
    with _budgets_lock:
        b = _budgets.get(key)
        if b is None:
            b = _budgets[key] = RingBudget(size)
        return b
