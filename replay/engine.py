"""The replay engine: runs an operation graph under a scheduler on an executor.

Invisible program events (everything but ``write``/``read``/``xfer_post``) have no
effect on data and only enable others, so they run as soon as they can without asking
the scheduler (posts are scheduled, so "a move right after its post" exists) —
this loses no data outcome and keeps schedules short. The scheduler is consulted
whenever two or more visible events or moves are enabled; its answers are the
run's *decisions*, which replay it exactly (``schedule.py``).
"""
from __future__ import annotations

import dataclasses


SCHEDULED = frozenset({"write", "read", "xfer_post"})


class ScheduleMismatch(Exception):
    """A replayed decision list does not fit the trace."""


@dataclasses.dataclass
class RunResult:
    """What one run did: the order of operations and what every read observed."""
    order: list[int]
    decisions: list[int]
    reads: dict[int, list]          # read op -> observed content per slot (executor-specific)
    writes: dict[int, list]         # write op -> its slots' content right after it (if asked)
    stale_moves: list[int]          # moves whose source changed after the post
    forced: list[int]               # ops run against a wait that could never be met


class Run:
    """Public state a scheduler may read."""

    def __init__(self, n_ops: int):
        self.done = bytearray(n_ops)
        self.step = 0


class _Static:
    """Per-graph tables the engine reuses across runs (built once)."""

    def __init__(self, g):
        n_prog, n_ops = g.n_prog, g.n_ops
        self.need = [len(w) for w in g.waits]
        self.dependents: list[list[int]] = [[] for _ in range(n_ops)]
        for op, ws in enumerate(g.waits):
            for w in ws:
                self.dependents[w].append(op)
        kinds = g.col["kind"]
        codes = {"write": 1, "read": 2, "xfer_post": 3}
        self.code = [codes.get(k, 0) for k in kinds]
        self.next_op = [-1] * n_prog
        for th in g.threads:
            for a, b in zip(th, th[1:]):
                self.next_op[a] = b
        self.post_xfer = {t.post: i for i, t in enumerate(g.transfers)}


def _static(g) -> _Static:
    st = getattr(g, "_engine", None)
    if st is None:
        st = g._engine = _Static(g)
    return st


def execute(graph, scheduler, executor, observe_writes: bool = False) -> RunResult:
    """Run ``graph`` to the end; deterministic for a deterministic scheduler.

    ``observe_writes`` keeps what each write left in its slots (for the output trace:
    a partly filled page's checksum covers the tail it kept)."""
    g = graph
    n_prog, n_ops = g.n_prog, g.n_ops
    st = _static(g)
    run = Run(n_ops)
    done = run.done
    need = list(st.need)
    dependents, code, next_op, post_xfer = st.dependents, st.code, st.next_op, st.post_xfer
    threads = g.threads
    thread_of = g.thread_of
    head = [t[0] if t else -1 for t in threads]
    visible_ready: set[int] = set()
    auto: list[int] = []
    moves: list[int] = []
    order, decisions, stale, forced = [], [], [], []
    reads: dict[int, list] = {}
    writes: dict[int, list] = {}
    executor.start(g)
    scheduler.start(g, run)
    ex_write, ex_read, ex_post, ex_move = executor.write, executor.read, executor.post, executor.move

    def ready(t: int) -> None:
        if code[head[t]]:
            visible_ready.add(t)
        else:
            auto.append(t)

    for t, h in enumerate(head):
        if h >= 0 and need[h] == 0:
            ready(t)

    def run_op(op: int) -> None:
        done[op] = 1
        order.append(op)
        if op >= n_prog:
            moves.remove(op)
            if not ex_move(op):
                stale.append(op)
        else:
            k = code[op]
            if k == 1:
                ex_write(op)
                if observe_writes:
                    writes[op] = ex_read(op)
            elif k == 2:
                reads[op] = ex_read(op)
            elif k == 3:
                ex_post(post_xfer[op])
            t = thread_of[op]
            visible_ready.discard(t)
            nxt = head[t] = next_op[op]
            if nxt >= 0 and need[nxt] == 0:
                if code[nxt]:
                    visible_ready.add(t)
                else:
                    auto.append(t)
        for d in dependents[op]:
            need[d] -= 1
            if need[d] == 0:
                if d >= n_prog:
                    moves.append(d)
                elif head[thread_of[d]] == d:
                    ready(thread_of[d])

    while True:
        while auto:
            run_op(head[auto.pop()])
        if len(visible_ready) == 1:
            cands = [head[next(iter(visible_ready))]] + moves
        else:
            cands = [head[t] for t in sorted(visible_ready)] + moves
        if not cands:
            blocked = [t for t in range(len(threads)) if head[t] >= 0]
            if not blocked:
                break
            # a wait that can never be met (e.g. a truncated trace): run it anyway, report it
            op = head[blocked[0]]
            forced.append(op)
            need[op] = 0
            ready(blocked[0])
            continue
        run.step = len(order)
        if len(cands) == 1:
            i = 0
        else:
            i = scheduler.pick(cands)
            if not 0 <= i < len(cands):
                raise ScheduleMismatch(f"decision {len(decisions)} picks {i} of {len(cands)} enabled operations")
            decisions.append(i)
        run_op(cands[i])
    return RunResult(order, decisions, reads, writes, stale, forced)
