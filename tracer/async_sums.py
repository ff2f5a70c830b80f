"""Page checksums taken off the engine's critical path: a write event now, its hash later.

A producer hook (SGLang's ``send()``, vLLM's ``request_finished``) used to hash every page
of every layer before returning to the engine: on a CPU that was a fifth to two thirds of
the transfer's wall time. With :meth:`Recorder.write_async` the hook reserves the write
events (their seqs and times, so the trace's order is exactly what a synchronous hash
gives) and hands the hashing to one background thread per recorder (this module); the C
hash gives the GIL away for its whole loop, so the engine's threads run meanwhile. The
recorder writes an event only once its checksums are in (events after it wait in the
buffer, so every stream stays in seq order); a close or a ring dump waits for them.
Device memory (VRAM) takes the same road with one difference: the hook queues the GPU
hash and the copy of its sums on the caller's current stream (tracer/integrations/
_memory.py), so the kernel reads the pages right after the producer's queued writes, as a
synchronous hash would; the hashing thread only waits for the copy (the GIL given away).
What it buys is overlap with the transfer, so it needs a core to spare: on a saturated CPU
it takes the hash out of send() but not out of the transfer's time (measured on 2 loaded
cores: bench/results/real_connector.txt). Reads stay synchronous (the consumer may change
its pages once it has them), and so does the reference engine (tracer/engine), whose
checksums are the baseline the checks' tests compare against.

What the hash sees. A synchronous hash reads the pages when the hook runs; this one reads
them a little later, while the transfer that moves them may already be running. A correct
engine does not touch a source page between its write and the end of the transfers that
read it and its free, so both read the same bytes. To keep it so, the hash is finished
before (the barriers; Recorder.alloc/free, the NIXL tap, Recorder.close):

* the transfer poll of this process reports a transfer completed or failed (the tap waits
  for the hashes submitted before that transfer's posting): the engine learns that its
  source pages may be reused only after they were hashed;
* an ``alloc`` or ``free`` of any of the slots is recorded: the next owner of a slot writes
  it after the hash;
* memory is deregistered from NIXL (an engine frees its pools after that), and the
  recorder closes (at the process's exit).

If an engine rewrites a page illegally in between (the very bug kvtrace looks for), a
hash may see the new bytes. When the hooks record that rewrite (a later write event on the
same slot of the same layer while the earlier hash is still pending), the earlier event's
checksums are recorded as unknown with the reason, never a wrong value; the ordering
checks still see the rewrite itself. A rewrite that no hook sees before the hash ran
cannot be told apart: the checksum then describes the rewritten bytes (what a synchronous
hash taken at that moment would also say). A hash that fails is recorded as unknown with
its error (``detail.checksums``), never dropped.
"""
from __future__ import annotations

import collections
import sys
import threading

UNKNOWN = "unknown"


class SumJob:
    """The checksums of one hook call: ``compute()`` -> one list per (pool, layer) target."""
    __slots__ = ("compute", "agent", "targets", "slots", "request", "index", "done", "value", "error", "bad")

    def __init__(self, compute, agent: str, targets: list[tuple[str, int]], slots: list[int], request):
        self.compute, self.agent, self.targets, self.request = compute, agent, targets, request
        self.slots = frozenset(slots)
        self.index = -1
        self.done = False
        self.value: list | None = None
        self.error: str | None = None   # why every checksum of the job is unknown (hashing failed)
        self.bad: dict[int, str] = {}   # target -> why its checksums are unknown (page rewritten)

    def covers(self, agent: str, pool: str, slots, layer: int | None = None) -> list[int]:
        """The targets of this job on ``pool`` (``layer``: that layer only) holding any of ``slots``."""
        if agent != self.agent or self.slots.isdisjoint(slots):
            return []
        return [i for i, (p, l) in enumerate(self.targets) if p == pool and (layer is None or l == layer)]

    def why_unknown(self, i: int) -> str | None:
        return self.error or self.bad.get(i) or (None if self.value is not None else "not computed")


class Pending:
    """What a reserved write event carries in its checksums column until the hash is in."""
    __slots__ = ("job", "i")

    def __init__(self, job: SumJob, i: int):
        self.job, self.i = job, i


class Hasher:
    """One background hashing thread, jobs done in the order submitted."""

    def __init__(self, name: str):
        self._cv = threading.Condition()
        self._queue: collections.deque[SumJob] = collections.deque()
        self._pending: list[SumJob] = []      # submitted, not done (oldest first)
        self.submitted = 0
        self.finished = 0
        self._warned = False
        self._thread = threading.Thread(target=self._loop, name=f"kvtrace-hash-{name}", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def submit(self, job: SumJob) -> int:
        with self._cv:
            job.index = self.submitted
            self.submitted += 1
            self._queue.append(job)
            self._pending.append(job)
            self._cv.notify_all()
        return job.index

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                job = self._queue.popleft()
            try:
                if len(job.bad) < len(job.targets):   # else every page was rewritten: nothing to hash
                    value = job.compute()
                    if len(value) != len(job.targets):
                        raise ValueError(f"{len(value)} checksum lists for {len(job.targets)} layers")
                    job.value = value
            except BaseException as e:  # never kill the thread: the event says unknown, and why
                job.error = f"hashing failed ({type(e).__name__}: {e})"
                if not self._warned:
                    self._warned = True
                    print(f"kvtrace: page checksums could not be computed ({type(e).__name__}: {e}); "
                          "the write events say 'unknown'", file=sys.stderr)
            job.compute = None   # drop the closure (it holds views of engine memory)
            with self._cv:
                job.done = True
                self.finished += 1
                self._pending.remove(job)
                self._cv.notify_all()

    def wait(self, upto: int | None = None) -> None:
        """Return once every job submitted before ``upto`` (None: all so far) is done."""
        with self._cv:
            upto = self.submitted if upto is None else upto
            while self._pending and self._pending[0].index < upto:
                self._cv.wait()

    def wait_slots(self, agent: str, pool: str, slots) -> None:
        """Return once no pending job covers any of ``slots`` of ``pool`` on ``agent``."""
        slots = frozenset(slots)
        with self._cv:
            last = max((j.index for j in self._pending if j.covers(agent, pool, slots)), default=-1)
        if last >= 0:
            self.wait(last + 1)

    def rewritten(self, agent: str, pool: str, layer: int, slots, request) -> None:
        """A write to these slots is recorded while an earlier hash of them is pending: the
        engine rewrote them (before freeing them); that hash may see the new bytes."""
        slots = frozenset(slots)
        with self._cv:
            for j in self._pending:
                for i in j.covers(agent, pool, slots, layer):
                    j.bad.setdefault(i, f"page rewritten (by request {request}) before its checksum was taken"
                                     if request is not None else "page rewritten before its checksum was taken")
