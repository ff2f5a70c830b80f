"""Flight recorder: record into a bounded in-memory ring, write the window out on a trigger.

``kvtrace record --ring 30s|256MB`` (and ``RingRecorder`` from Python) keeps each
process's events, descriptors and prepared lists in memory (``ring_store.RingStore``)
instead of writing them. A *session directory* ``S`` (the ``-o`` path) holds only the
control files under ``S/_ring/``; each trigger ``n`` makes every recorder of the session
write its window into the trace ``S.dump<n>`` (``s.kvtrace`` -> ``s.dump1.kvtrace``), a
complete trace in the normal format whose shards' ``shard.json`` carry a ``ring`` field
(see docs/ring.md).

Triggers (any of them reaches every process of the session, through
``S/_ring/triggers.jsonl``, which every recorder polls at each flush):
    * :func:`trigger` ``(reason)`` — the public hook for engine integrations, e.g. on a KV
      checksum mismatch; a no-op when this process records no ring;
    * SIGUSR1 to a recording process (``kvtrace dump PID``);
    * ``kvtrace dump S`` (appends to the trigger file);
    * a NIXL error state seen by the tap (``xfer_error``), at most once per ``min_gap_s``.
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
import threading
import time
import weakref

from . import ring_budget, ring_dump
from .recorder import Recorder
from .ring_store import RingStore

ENV_RING = "KVTRACE_RING"
ENV_RING_TAIL = "KVTRACE_RING_TAIL"   # seconds each shard keeps recording after a trigger
DEFAULT_TAIL_S = 1.5
#: a ring's flush interval (s) unless given, at most a quarter of its slack: a ring is read
#: only at a trigger, and each flush costs its thread a fixed share of CPU (packing, the
#: trigger poll, the live-request exchange) whatever it holds; measured on the reference
#: engine (small x200, bench/results/ring.txt), 0.5 s instead of the Recorder's 0.2 s took
#: ~10 ms (~30%) off the flush threads' CPU a run. process_recorder.RING_FLUSH_S is the same.
FLUSH_S = 0.5
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_SECONDS = {"ms": 1e-3, "s": 1, "sec": 1, "min": 60, "h": 3600}

_recorders: "weakref.WeakSet[RingRecorder]" = weakref.WeakSet()
_signal_pending = False
_signal_lock = threading.Lock()     # one recorder turns a signal into one trigger


def parse_ring(spec: str) -> tuple[int | None, float | None]:
    """``"256MB"`` -> (bytes, None); ``"30s"``/``"2min"`` -> (None, seconds); both bounds,
    ``"30s,64MB"`` -> (bytes, seconds). ValueError if neither, or for a SIZE below what
    one ring needs (``ring_budget.RingSizeError``: see :func:`check_ring` for more shards)."""
    size, seconds = _parse(spec)
    if size is not None:
        ring_budget.check(size, 1, spec)
    return size, seconds


def _parse(spec: str) -> tuple[int | None, float | None]:
    parts = [x for x in str(spec).split(",")]
    if len(parts) == 2:
        (b1, s1), (b2, s2) = _parse_one(parts[0], spec), _parse_one(parts[1], spec)
        if (b1 is None) == (b2 is None):
            raise ValueError(f"--ring {spec}: give one size and one duration (30s,64MB)")
        return b1 if b1 is not None else b2, s1 if s1 is not None else s2
    if len(parts) > 2:
        raise ValueError(f"--ring {spec}: expected a size (256MB), a duration (30s) or both (30s,64MB)")
    return _parse_one(spec, spec)


def _parse_one(one: str, spec: str) -> tuple[int | None, float | None]:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(one))
    if not m:
        raise ValueError(f"--ring {spec}: expected a size (256MB) or a duration (30s)")
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit == "m":
        raise ValueError(f"--ring {spec}: say {m.group(1)}min (minutes) or {m.group(1)}MB (megabytes)")
    if unit in _SECONDS:
        seconds = value * _SECONDS[unit]
        if seconds <= 0:
            raise ValueError(f"--ring {spec}: the duration must be positive")
        return None, seconds
    if unit in _UNITS:
        return int(value * _UNITS[unit]), None
    raise ValueError(f"--ring {spec}: unknown unit {m.group(2)!r} (sizes: KB, MB, GB; durations: ms, s, min, h)")


def ring_budget_bytes(spec: str) -> int:
    """The memory budget of a ring spec, per process: its SIZE, or for a DURATION given
    alone the default ceiling (``ring_budget.DEFAULT_CEILING``)."""
    size, _ = _parse(spec)
    return ring_budget.DEFAULT_CEILING if size is None else size


def check_ring(spec: str, shards: int = 1) -> None:
    """ValueError for a spec that cannot be parsed; ``ring_budget.RingSizeError`` (a
    ValueError) for one whose memory cannot hold a process's ``shards`` rings (the
    message states the minimum)."""
    ring_budget.check(ring_budget_bytes(spec), shards, spec)


def parse_tail(spec: str | float | None) -> float:
    """``"1.5"`` / ``"1.5s"`` / ``"500ms"`` -> seconds (None: the default). ValueError if not a duration."""
    if spec is None or spec == "":
        return DEFAULT_TAIL_S
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|min)?\s*", str(spec))
    if not m:
        raise ValueError(f"ring-tail {spec}: expected a duration (1.5s, 500ms)")
    return float(m.group(1)) * _SECONDS[m.group(2) or "s"]


class RingRecorder(Recorder):
    """A Recorder that keeps the last SIZE bytes or DURATION of its shard in memory and
    writes them as a trace when the session is triggered.

    Args:
        session_dir: the session directory (``-o``); dumps go beside it.
        shard: shard name, unique within the session.
        ring: ``"256MB"``, ``"30s"`` or ``"30s,64MB"`` (see :func:`parse_ring`). SIZE is the
            budget of this process's rings of the session (they share it: see ring_budget);
            a DURATION alone is also bounded by ``ring_budget.DEFAULT_CEILING``. A SIZE too
            small for the ring's own working memory raises ``ring_budget.RingSizeError``.
        slack_s: how long facts of a finished request stay beyond the window (ring_store);
            default 5 s, or a quarter of a shorter duration (at least 1 s).
        min_gap_s: automatic (NIXL error) triggers closer than this to the last one are ignored.
        tail_s: how long after a trigger the window goes on (default $KVTRACE_RING_TAIL or
            1.5 s): what the trigger's incident still has in flight (a transfer's completion,
            the other shard's frees) lands in the dump; a recorder closed sooner dumps at close.
        signals: install a SIGUSR1 handler (main thread, default handler only).
        flush_interval: (a Recorder argument) by default :data:`FLUSH_S`, at most a quarter
            of the slack (the live-request exchange happens at flushes).
    """

    def __init__(self, session_dir: str, shard: str = "main", *, ring: str = "30s", slack_s: float | None = None,
                 min_gap_s: float = 10.0, signals: bool = True, manifest_extra: dict | None = None,
                 tail_s: float | None = None, **kw):
        max_bytes, seconds = parse_ring(ring)
        size = ring_budget.DEFAULT_CEILING if max_bytes is None else max_bytes
        budget = ring_budget.for_session(session_dir, size)
        ring_budget.check(size, budget.stores + 1, str(ring))   # before anything is created
        if tail_s is None:   # a bad $KVTRACE_RING_TAIL must not stop the traced engine: the default
            try:
                tail_s = parse_tail(os.environ.get(ENV_RING_TAIL))
            except ValueError:
                tail_s = DEFAULT_TAIL_S
        self.tail_s = max(0.0, float(tail_s))
        self._pending: list[dict] = []            # triggers whose tail has not ended yet
        self.session_dir = os.fspath(session_dir)
        self.ring_spec = str(ring)
        if slack_s is None:  # long enough for the shards' clocks and ends of a request to meet
            slack_s = 5.0 if seconds is None else min(5.0, max(1.0, seconds / 4))
        kw.setdefault("flush_interval", min(FLUSH_S, slack_s / 4))
        self.store = RingStore(None, None if seconds is None else int(seconds * 1e9), int(slack_s * 1e9),
                               budget=budget)
        # a flush must fit the room the budget leaves the batches, with room to spare: a busy
        # process flushes early rather than in one batch larger than a small ring's share
        room = (budget.size - budget.process_reserve) // max(1, budget.stores) - budget.shard_reserve
        kw.setdefault("flush_rows", int(min(65536, max(1024, room // 1024))))
        self.store.on_error = self._on_xfer_error
        self.min_gap_s = min_gap_s
        self.dumps: list[str] = []
        self._triggers = ring_dump.TriggerLog(self.session_dir)
        self._triggers.skip_existing()            # a window is dumped for triggers after we started
        self._auto_reason: str | None = None
        self._live_cache: dict = {}               # what was read of the other shards' live.jsonl
        self._live_pub = ring_dump.LivePublisher(self.session_dir, shard)
        self._clock_off: int | None = None        # see _wall_offset
        self._exchanged = 0
        self.exchange_s = min(0.5, self.store.slack_ns / 4e9)
        self.remote_from_unix: float | None = None  # the latest start of the other shards' rings
        # the Recorder writes only shard.json under _ring/ (no streams: _open_streams): that is
        # the session's registry of live recorders (pid, closed), read by `kvtrace dump S`
        super().__init__(ring_dump.staging_dir(self.session_dir), shard,
                         manifest_extra={"ring": self.ring_spec, **(manifest_extra or {})}, **kw)
        _recorders.add(self)
        if signals:
            _install_sigusr1()

    def close(self) -> None:
        """Close the Recorder (a pending window is written), then give the ring's budget back."""
        try:
            super().close()
        finally:
            self.store.close()

    def _open_streams(self) -> dict:
        # nothing is written to files under _ring/ but shard.json (batches go to the ring,
        # dumps write their own trace): no stream files (four opened, each with its schema
        # and an empty batch, were ~1.5 ms of CPU per recorder started)
        return {}

    def _write(self, name, batch, rows=None) -> None:  # the Recorder's one sink: batches go to the ring
        if batch is not None:   # the row tuples too, when the batch holds them all (none dropped as invalid)
            self.store.add(name, batch, rows if name == "events" and rows is not None
                           and len(rows) == batch.num_rows else None)

    def flush(self) -> None:
        """Move buffered rows into the ring, dump if the session was triggered, then evict.

        Dump before evicting: a process whose flush comes late (a busy engine) would
        otherwise evict what the trigger's window needs before writing it."""
        global _signal_pending
        # whether this flush is the last one, read before it moves rows: a close() that comes
        # while a flush thread is past moving its rows (some held back, still being hashed
        # or out of order) must not let that flush write the window without them; the
        # close's own final flush, which moves every row first, writes it
        stopping = self._stop
        super().flush()
        with self._io_lock:
            now = time.monotonic_ns()
            self._exchange_live(now)
            evicted = self.store.evicted_events
            with _signal_lock:
                got_signal, _signal_pending = _signal_pending, False
            if got_signal:
                self._triggers.append("signal SIGUSR1", self.shard, self.session_dir)
            if self._auto_reason is not None:
                reason, self._auto_reason = self._auto_reason, None
                self._triggers.append(reason, self.shard, self.session_dir, min_gap_s=self.min_gap_s)
            dumped = False
            self._pending += self._triggers.poll()
            unix = time.time()
            due = self._pending and (stopping or unix >= float(self._pending[0]["unix"]) + self.tail_s)
            if due:
                # write events still being hashed belong to the window: wait, then move them
                # (and what this flush held back behind a hash that has finished since) into the ring
                if self._hasher is not None and self._hasher.busy:
                    self.wait_hashes()
                self._flush_locked()
                # and take the other shards' latest stop times, not ones up to exchange_s old:
                # which finished requests the window keeps is decided from them, on each shard
                # alone, and a request a peer still held at the window's cut is kept whole
                self._exchanged = 0
                self._exchange_live(time.monotonic_ns())
            while self._pending and (stopping or unix >= float(self._pending[0]["unix"]) + self.tail_s):
                self.dumps.append(ring_dump.dump(self, self._pending.pop(0), self.tail_s))
                dumped = True
            if not self._pending:   # a pending window keeps its start until it is written
                self.store.evict(now)
            self._note_memory()
            if self.store.overflow_events:
                self._warn("ring-room", f"kvtrace: recorder {self.shard}: --ring {self.ring_spec} leaves no room for "
                           f"recorded batches beside the ring's own working memory (its bookkeeping of "
                           f"{len(self.store._last_t)} requests and transfers); its dumps miss events: give a larger size")
            if dumped or self.store.evicted_events != evicted or self.store.chunks_dropped:
                self.store.chunks_dropped = 0
                _trim_heap(now)

    def _note_memory(self) -> None:
        """Keep the most the budget committed in shard.json (``ring_memory``, written with
        the shard's other facts): what the ring really charged against SIZE in this run."""
        b = self.store.budget
        m = self._info.setdefault("ring_memory", {"size": b.size, "committed_max": 0, "rings_in_process": 0})
        m["committed_max"] = max(m["committed_max"], b.committed())
        m["rings_in_process"] = max(m["rings_in_process"], b.stores)
        m["overflow_events"] = self.store.overflow_events

    def _exchange_live(self, now: int) -> None:
        """Publish what changed of this shard's live requests; take the other shards'
        (see ring_store; ring_dump.LivePublisher: only changes are written, and each
        reader reads on from where it stopped). At most every ``exchange_s`` (a fraction
        of the slack, so what is published is never older than the slack allows for)."""
        if now - self._exchanged < self.exchange_s * 1e9:
            return
        self._exchanged = now
        try:
            off = self._wall_offset(now)
            live, last = self.store.live_requests()
            self._live_pub.publish(live, last, self.store.from_ns, self.store.depends(), lambda t: t + off)
            remote, r_last, self.remote_from_unix, r_depends = ring_dump.read_live(
                self.session_dir, self.shard, self._live_cache)
            self.store.set_remote(remote, {o: t - off for o, t in r_last.items()}, now, r_depends)
        except OSError:  # a full disk or a removed session: the local rules still hold
            pass

    def _wall_offset(self, now: int) -> int:
        """Wall-clock ns minus this process's monotonic ns, as the exchange uses it: held
        until the clocks move apart by more than 1 ms (a step of the wall clock). Why held:
        a time sent to another shard and raised there comes back as the same integer and
        is not taken again; an offset sampled at every exchange moved each round trip by
        microseconds, so every stop time changed, and was written again, at every flush."""
        cur = time.time_ns() - now
        if self._clock_off is None or abs(cur - self._clock_off) > 1_000_000:
            self._clock_off = cur
        return self._clock_off

    @property
    def from_unix(self) -> float | None:
        """Wall-clock time of the ring's oldest chunk (None: empty)."""
        f = self.store.from_ns
        return None if f is None else time.time() - (time.monotonic_ns() - f) / 1e9

    def _on_xfer_error(self, row: dict) -> None:
        self._auto_reason = f"NIXL error state on transfer {row['xfer']} of {row['agent']}"

    def trigger(self, reason: str, *, repeated: bool = False) -> None:
        """Ask every recorder of this session to dump its window (this one at its next flush).
        ``repeated``: a report that may come in bursts (an engine's failure path): skipped
        when the session's last trigger is younger than ``min_gap_s``."""
        self._triggers.append(reason, self.shard, self.session_dir, min_gap_s=self.min_gap_s if repeated else None)
        self._wake.set()

    def dump_now(self, reason: str = "dump") -> str:
        """Trigger, wait out the tail and flush here; returns this shard's dump directory."""
        n = len(self.dumps)
        self.trigger(reason)
        self.flush()
        while len(self.dumps) == n:
            time.sleep(min(0.05, self.tail_s))
            self.flush()
        return self.dumps[-1]


_libc = None
_trimmed_ns = 0


def _trim_heap(now_ns: int) -> None:
    """Give the C heap's free pages back to the OS (glibc ``malloc_trim``), at most once a
    second. Why: what the ring evicts was allocated among the Recorder's short-lived
    buffers; glibc keeps the freed pages between live blocks resident until trimmed, and
    over a long run that is most of the ring's growth beyond what it holds (measured in
    bench/bench_ring.py). A no-op where there is no glibc."""
    global _libc, _trimmed_ns
    if now_ns - _trimmed_ns < 1_000_000_000:
        return
    _trimmed_ns = now_ns
    if _libc is None:
        try:
            _libc = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc(0)


def trigger(reason: str, *, repeated: bool = False) -> list[str]:
    """Dump the window of every ring recording in this process's sessions (all their
    processes); returns the session directories triggered ([] when no ring is recording).

    The hook for engine integrations: call it where the engine learns that KV data went
    wrong (a checksum or digest mismatch, a transfer error, a timeout). Cheap and
    thread-safe; the dump itself happens in the recorders' flush threads. ``repeated``:
    the caller may report one incident many times (every request of a failed batch):
    a trigger closer than the recorder's ``min_gap_s`` to the session's last is skipped."""
    done: list[str] = []
    for rec in list(_recorders):
        if rec.closed:
            continue
        if rec.session_dir not in done:
            rec.trigger(reason, repeated=repeated)
            done.append(rec.session_dir)
        else:
            rec._wake.set()
    return done


def _on_sigusr1(signum, frame) -> None:
    # only a flag: the flush threads (polling every flush interval) do the file work, so the
    # handler never takes a lock the interrupted thread may hold
    global _signal_pending
    _signal_pending = True


def _install_sigusr1() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGUSR1, _on_sigusr1)
    except (ValueError, OSError):  # not the main interpreter thread, or no signals here
        pass


def open_recorder(trace_dir: str, shard: str, ring: str | None = None, *,
                  ring_flush_interval: float | None = None, **kw) -> Recorder:
    """A RingRecorder when ``ring`` (or $KVTRACE_RING) is set, else a plain Recorder;
    ``ring_flush_interval``: the ring's flush interval instead of ``flush_interval``, at
    most a quarter of its slack (the live-request exchange happens at flushes)."""
    ring = ring or os.environ.get(ENV_RING) or None
    if ring:
        if ring_flush_interval is not None:
            seconds = _parse(ring)[1]
            slack = kw.get("slack_s") or (5.0 if seconds is None else min(5.0, max(1.0, seconds / 4)))
            kw["flush_interval"] = min(ring_flush_interval, slack / 4)
        return RingRecorder(trace_dir, shard, ring=ring, **kw)
    return Recorder(trace_dir, shard, **kw)
