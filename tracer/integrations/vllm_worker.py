"""vLLM's prefill with its scheduler in another process: the blocks and writes seen from the
worker's side (handlers named ``vllm_worker.*`` in table.py's vLLM rows).

vLLM's multiprocess executor (any TP > 1) runs the engine's scheduler in one process and
each TP rank's worker in its own. The scheduler half of the NIXL connector knows which
blocks a prefill request keeps for decode, but its process has no NIXL agent to tie them
to (vllm.py says so once and records nothing there). The worker's process has the agent,
and each step vLLM hands its model runner the same facts in the ``SchedulerOutput``: the
blocks of every new request (``scheduled_new_reqs[i].block_ids``, one list per KV cache
group), the blocks appended to running ones (``scheduled_cached_reqs.new_block_ids``), the
tokens computed so far and scheduled now, the requests preempted and finished, and the
connector's metadata (``reqs_to_send``: the requests whose blocks vLLM keeps for decode).

So, on a prefill engine (``kv_producer``, or ``kv_both`` for the requests it does not load
from a remote prefill: ``reqs_to_recv``) whose scheduler half is not in this process:

- ``ActiveKVConnector.pre_forward(scheduler_output)`` (the model runner's connector glue,
  CPU and GPU runners): the bookkeeping above; a request whose scheduled tokens reach the
  end of its prompt completes its prefill in this step's forward. A finished request that
  was announced and that vLLM does not keep for decode (not in ``reqs_to_send``: aborted,
  nothing to send) had its blocks freed by the scheduler: they are freed here.
- ``ActiveKVConnector.post_forward`` (before it: the forward has written this step's
  tokens): each request that completed its prefill now holds its blocks (its pages 0..n-1
  of each transfer group; leading blocks another announced request still holds are
  prefix-cache hits, shared references written by their first holder, by the rule vllm.py
  uses), the producer wrote the others (checksums), and its blocks leave for decode: the same
  kv_transfer_params control message the scheduler half records in one process (one per
  prefill TP rank, ``_params_id`` in vllm.py), sent here before vLLM returns the request's
  output, so before decode can read.
- Freed once sent, or once their lease expired, when the worker reports them sent
  (``get_transfer_results``, vllm.py), as in one process.

With the scheduler in this process (uniprocess executor) its half records these facts
(vllm.py) and these handlers record nothing.
"""
from __future__ import annotations

import threading

import numpy as np

from ..autotrace import default_recorder
from ..schema import EventKind as K
from ._patch import say_once
from .vllm import _PARAMS, ENGINE, _alloc, _content, _flat, _on, _params_id, _prefix_hits, _state

_lock = threading.Lock()
_scheduler_engines: set[str] = set()   # engines whose connector scheduler half runs in this process


def scheduler_here(_out, self, *a, **kw) -> None:
    """``NixlBaseConnectorScheduler.__init__``: this process runs that engine's scheduler half."""
    with _lock:
        _scheduler_engines.add(str(getattr(self, "engine_id", "")))


class _Steps:
    """What one worker learned from the scheduler outputs so far (prefill requests not yet announced)."""

    def __init__(self, worker):
        self.worker = worker                           # the connector worker whose agent these are
        self.blocks: dict[str, list[list[int]]] = {}   # request -> blocks per KV cache group
        self.prompt: dict[str, int] = {}               # request -> prompt tokens
        self.completing: list[str] = []                # requests whose prefill this step's forward completes
        self.announced: set[str] = set()               # requests whose blocks were recorded
        self.received: set[str] = set()                # requests this engine loads from a remote prefill


def _worker_state(glue):
    """(the worker's recording state, its step bookkeeping) when these handlers record for it."""
    conn = getattr(glue, "kv_connector", None)
    w = getattr(conn, "connector_worker", None)
    st = _state(w) if w is not None else None
    if st is None or default_recorder() is None:
        return None, None
    with _lock:
        if st.engine in _scheduler_engines:
            return None, None
    cfg = getattr(getattr(glue, "vllm_config", None), "kv_transfer_config", None)
    if str(getattr(cfg, "kv_role", "")) not in ("kv_producer", "kv_both"):
        return None, None
    if st.padded:
        # a sliding-window (or mamba) group's blocks leave the window while the request
        # prefills, and the scheduler output never says which: recording the first list
        # would claim blocks vLLM gave to others. Nothing is recorded (check: unknown).
        say_once((ENGINE, "worker-window"), "vLLM's scheduler runs in another process and the model has "
                 "sliding-window or state groups: prefill's blocks are not recorded from the worker")
        return None, None
    steps = w.__dict__.get("_kvtrace_steps")
    if steps is None:
        steps = w.__dict__["_kvtrace_steps"] = _Steps(w)
    return st, steps


def _lists(block_ids) -> list[list[int]]:
    return [[int(b) for b in g] for g in (block_ids or ())]


def pre_forward(self, scheduler_output=None, *a, **kw) -> None:
    st, steps = _worker_state(self)
    so = scheduler_output if scheduler_output is not None else (a[0] if a else None)
    if st is None or so is None:
        return
    rec = default_recorder()
    meta = getattr(so, "kv_connector_metadata", None)
    keep = set(map(str, getattr(meta, "reqs_to_send", None) or ()))
    # a kv_both engine also decodes: requests it loads from a remote prefill are decode's
    # (their blocks recorded where the worker receives them, vllm.py), never announced here
    steps.received.update(map(str, getattr(meta, "reqs_to_recv", None) or ()))
    for rid in getattr(so, "preempted_req_ids", None) or ():
        _forget(steps, str(rid))      # resumed later as a new request, with its blocks anew
    starts = {}
    for nr in getattr(so, "scheduled_new_reqs", None) or ():
        rid = str(nr.req_id)
        steps.blocks[rid] = _lists(nr.block_ids)
        toks = nr.prompt_token_ids if nr.prompt_token_ids is not None else getattr(nr, "prefill_token_ids", ())
        steps.prompt[rid] = len(toks or ())
        starts[rid] = int(nr.num_computed_tokens)
    cr = getattr(so, "scheduled_cached_reqs", None)
    if cr is not None:
        for rid, new, done in zip(cr.req_ids, cr.new_block_ids, cr.num_computed_tokens):
            rid = str(rid)
            if rid not in steps.blocks:
                continue
            for g, more in enumerate(_lists(new)):
                if g < len(steps.blocks[rid]):
                    steps.blocks[rid][g].extend(more)
            starts[rid] = int(done)
    steps.completing = [str(rid) for rid, n in (getattr(so, "num_scheduled_tokens", None) or {}).items()
                        if str(rid) in starts and str(rid) not in steps.announced
                        and str(rid) not in steps.received
                        and starts[str(rid)] + int(n) >= steps.prompt.get(str(rid), 1 << 62)]
    for rid in map(str, getattr(so, "finished_req_ids", None) or ()):
        if rid in steps.announced and rid not in keep:
            held = st.sending.pop(rid, None)   # the scheduler freed them at once: nothing to send
            if held and _on("pages"):
                for pool, blocks in held.items():
                    rec.free(st.agent, rid, pool, blocks, reason="finish")
            if held is not None:
                rec.event(K.REQ_DONE, st.agent, rid)
        _forget(steps, rid)


def _forget(steps: _Steps, rid: str) -> None:
    steps.blocks.pop(rid, None)
    steps.prompt.pop(rid, None)
    steps.announced.discard(rid)
    steps.received.discard(rid)


def post_forward(self, *a, **kw) -> None:
    st, steps = _worker_state(self)
    if st is None or not steps.completing:
        return
    rec = default_recorder()
    w = steps.worker
    try:
        kv_group = list(w.kv_cache_config.transfer_group_ids)
    except Exception:   # one KV cache group per transfer group, in order
        kv_group = list(range(max((len(b) for b in steps.blocks.values()), default=0)))
    for rid in steps.completing:
        per_kv = steps.blocks.get(rid)
        if per_kv is None:
            continue
        groups = {t: list(per_kv[k]) for t, k in enumerate(kv_group) if k < len(per_kv) and per_kv[k]}
        if not groups:
            continue
        steps.announced.add(rid)
        hits = _prefix_hits(st, groups)   # leading blocks another announced request still holds
        rec.event(K.REQ_START, st.agent, rid, detail={"pages": sum(map(len, groups.values()))})
        if _on("pages"):
            st.sending[rid] = _alloc(st, rec, rid, groups, shared=hits)
        if _on("content"):
            _content(st, rec, rid, {g: b[hits.get(g, 0):] for g, b in groups.items()}, rec.write,
                     first={g: hits.get(g, 0) for g in groups})
        if _on("messages"):
            rec.event(K.MSG_SEND, st.agent, rid, msg=np.asarray(_flat(list(groups.values())), dtype=np.int32).tobytes(),
                      detail={"id": _params_id(rid, st.tp_rank, st.tp_size), "what": _PARAMS})
    steps.completing = []
