"""Handlers for SGLang's NIXL connector (``sglang/srt/disaggregation/nixl/conn.py``).

What each hook point says (rows in table.py):

- ``NixlKVManager.register_buffer_to_engine``: every ``kv_data`` entry is a region of
  ``kv_data_lens[i] // kv_item_lens[i]`` slots of ``kv_item_lens[i]`` bytes (one page of
  one layer). SGLang does not name pools, so entries are grouped by (item_len, slot
  count) in order: pool ``kv0`` holds the first group's entries as layers 0..n-1,
  ``kv1`` the next, and a ``mark`` event in the trace says which entries each holds.
  ``KVTRACE_SGLANG_POOLS="kv:2,index_k:2"`` names them instead (entry counts in order).
  ``aux`` entries are pool ``aux``, one layer per entry. Layers are numbered as SGLang
  pairs entries across the two sides: by ``kv_args.kv_layer_ids`` where it gives one id per
  entry (distinct within a pool); else, on a prefill pipeline stage, as the decode numbers
  the entry SGLang sends each one into (``_build_transfer_dst_indices``: a decode holding
  every layer takes a plain MLA stage's entry i at ``prefill_start_layer + i``, a decode
  running the same stages at i), so its layouts are recorded when the first decode
  registers; else by position.
- ``NixlKVSender.send`` (prefill, before the chunk is queued): the chunk's pages are the
  request's next page ordinals (continuing across chunks) in every pool, and the
  producer has written them: checksums of each (pool, layer) slot (the events ordered
  in send(), host memory hashed off its critical path: tracer/async_sums.py). On the
  last chunk, the request's aux slot too (sent with it; page 0 of pool ``aux``).
- ``NixlKVSender.clear``: prefill frees the request's pages.
- ``NixlKVReceiver.send_metadata`` (decode): the destination pages (alloc in every
  pool) and the destination-pages control message (msg_send); ``TransferInfo.from_zmq``
  is its receiving end on prefill (msg_recv), paired by ``detail.id``.
- ``NixlKVReceiver.poll`` first returning Success: decode reads its pages (checksums).
- A status hand-off between threads of one process: ``NixlKVManager.update_status`` moving
  a room to Success or Failed is a ``msg_send`` on the thread that sets it (prefill's
  transfer worker once its transfers are done; decode's bootstrap thread once prefill's
  status arrived), and so is prefill's WaitingForInput (its bootstrap thread got the
  destination pages); the first ``NixlKVSender.poll`` / ``NixlKVReceiver.poll`` (the
  scheduler thread) that returns that status is its ``msg_recv`` (before decode's reads),
  paired by ``detail.id`` with the agent as its own peer. Without it nothing in the trace
  orders the scheduler's reads, sends, frees and rewrites after what the other thread saw.
  A status the poll reaches on its own thread (0.5.21's decode poll draining notifications
  itself) is program order and records nothing.
- ``send_kv_status_message`` / ``apply_prefill_status``: the completion-status message.
- ``FastQueue.get`` in a transfer worker: the room of the chunk it took is the request
  of every posting the worker makes until its next chunk (0.5.22+ sends no tag).
- ``SchedulerDisaggregationDecodeMixin._handle_kv_checksum_mismatch`` (decode's
  scheduler, ``--disaggregation-enable-kv-checksum``; hooked when SGLang imports it): the
  KV a request received differs from what prefill sent: a ``--ring`` recording dumps.

Request key: the bootstrap room, as text (what SGLang's notification tags carry).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from ..autotrace import default_recorder
from ..recorder import current_request
from ..schema import EventKind as K
from ._memory import record_writes, region_checksums, warm_device_hash
from ._patch import enabled

ENGINE = "sglang"
ENV_POOLS = "KVTRACE_SGLANG_POOLS"
_lock = threading.Lock()
_prefill_mgrs: list = []   # managers in PREFILL mode in this process (bootstrap thread's owner)
_msg_counts: dict[str, int] = {}


class _Region:
    __slots__ = ("pool", "layer", "ptr", "item", "slots", "mem", "device")

    def __init__(self, pool, layer, ptr, item, slots, mem, device):
        self.pool, self.layer, self.ptr, self.item = pool, layer, int(ptr), int(item)
        self.slots, self.mem, self.device = int(slots), mem, int(device)


class _State:
    """What the hooks know about one NixlKVManager."""

    def __init__(self, mgr):
        self.agent = _agent_name(mgr)
        self.mode = str(getattr(mgr.disaggregation_mode, "name", mgr.disaggregation_mode)).lower()
        self.kv: list[_Region] = []
        self.aux: list[_Region] = []
        self.pools: list[str] = []
        self.deferred: list[_Region] | None = None   # a pipeline stage's kv layouts until its first peer
        self.deferred_note: str | None = None
        self.page_tokens = 1
        self.entry_map: list[int] | None = None


def _agent_name(mgr) -> str:
    name = mgr.agent.name
    return name.decode() if isinstance(name, bytes) else str(name)


def _state(mgr) -> _State | None:
    return mgr.__dict__.get("_kvtrace")


def _on(group: str) -> bool:
    return enabled(ENGINE, group)


# ------------------------------------------------------------------ set-up and regions
def manager_init(call, self, *args, **kwargs):
    try:
        out = call(self, *args, **kwargs)
    except Exception as e:
        from ._patch import say
        say(f"SGLang's NixlKVManager raised during set-up ({type(e).__name__}: {e}); "
            "what was recorded so far is kept")
        raise
    return out


def _pool_names(entries: list[tuple[int, int]]) -> tuple[list[tuple[str, int]], str | None]:
    """(pool, layer) of each kv_data entry, and a note when the names were inferred."""
    spec = os.environ.get(ENV_POOLS)
    if spec:
        out = []
        for part in spec.split(","):
            name, _, count = part.partition(":")
            out += [(name.strip(), i) for i in range(int(count))]
        if len(out) == len(entries):
            return out, None
    groups: dict[tuple[int, int], str] = {}
    layer_of: dict[str, int] = {}
    out, members = [], {}
    for i, key in enumerate(entries):
        pool = groups.setdefault(key, f"kv{len(groups)}")
        out.append((pool, layer_of.get(pool, 0)))
        layer_of[pool] = layer_of.get(pool, 0) + 1
        members.setdefault(pool, []).append(i)
    note = ("SGLang names no pools: kv_data entries grouped by (item_len, slot count): " + "; ".join(
        f"{p} = entries {_ranges(m)} ({entries[m[0]][0]} B x {entries[m[0]][1]} slots)" for p, m in members.items()))
    return out, note


def _model_layers(names: list[tuple[str, int]], layer_ids) -> list[tuple[str, int]] | None:
    """(pool, layer) of each entry with the layer numbered by SGLang's own ``kv_layer_ids``
    (the model layer of each entry), or None where they cannot number them.

    SGLang pairs a prefill entry with the decode entry of the same layer id
    (``build_transfer_entry_pairs``), so a pipeline stage that registers layers 30-60 sends
    its entry 0 into decode's entry 30: numbered by position, the two ends of every such
    descriptor would name different layers (a false layer mismatch). The ids number them
    as SGLang pairs them. Not where a pool repeats an id (K and V of one layer): there the
    position keeps them apart."""
    ids = list(layer_ids or [])
    if len(ids) != len(names):
        return None
    per_pool: dict[str, list[int]] = {}
    for (pool, _), lid in zip(names, ids):
        per_pool.setdefault(pool, []).append(int(lid))
    if any(len(set(v)) != len(v) for v in per_pool.values()):
        return None
    return [(pool, int(lid)) for (pool, _), lid in zip(names, ids)]


def _ranges(ix: list[int]) -> str:
    return f"{ix[0]}-{ix[-1]}" if len(ix) > 1 and ix[-1] - ix[0] == len(ix) - 1 else ",".join(map(str, ix))


def regions(_out, self) -> None:
    rec = default_recorder()
    if rec is None:
        return
    st = _State(self)
    self.__dict__["_kvtrace"] = st
    a = self.kv_args
    kinds = list(getattr(a, "kv_data_mem_kinds", None) or ["VRAM"] * len(a.kv_data_ptrs))
    entries = [(int(item), int(n) // int(item)) for n, item in zip(a.kv_data_lens, a.kv_item_lens)]
    names, note = _pool_names(entries)
    by_id = _model_layers(names, getattr(a, "kv_layer_ids", None))
    if by_id is not None:
        names = by_id
        note = (note + "; " if note else "") + "layers numbered by SGLang's layer ids (kv_layer_ids: the model's layers)"
    # a prefill pipeline stage without ids: where SGLang sends its entries depends on the
    # decode (one holding every layer, or the same stages), known when one registers
    defer = by_id is None and st.mode == "prefill" and _pipeline_stage(self, a)
    page_tokens = int(getattr(a, "page_size", 1) or 1)
    for (pool, layer), ptr, (item, slots), mem in zip(names, a.kv_data_ptrs, entries, kinds):
        dev = int(a.gpu_id) if mem == "VRAM" else 0
        st.kv.append(_Region(pool, layer, ptr, item, slots, mem, dev))
        if pool not in st.pools:
            st.pools.append(pool)
        if not defer:
            rec.layout(st.agent, pool, layer, int(ptr), item, slots, page_tokens=page_tokens,
                       mem_type=mem, device=dev)
    if defer:
        st.deferred, st.deferred_note, st.page_tokens = list(st.kv), note, page_tokens
    for i, (ptr, n, item) in enumerate(zip(a.aux_data_ptrs, a.aux_data_lens, a.aux_item_lens)):
        r = _Region("aux", i, ptr, item, int(n) // int(item), "DRAM", 0)
        st.aux.append(r)
        rec.layout(st.agent, "aux", i, r.ptr, r.item, r.slots, mem_type="DRAM")
    if _on("content"):
        warm_device_hash(st.kv)
    if st.mode == "prefill":  # before __init__ starts the bootstrap thread that receives messages
        with _lock:
            _prefill_mgrs.append(self)
    if note and not defer:
        rec.mark(note, st.agent, pools={p: [r.layer for r in st.kv if r.pool == p] for p in st.pools})


def stage_layers(own: list[int], dst: list[int], dst_items: list[int]) -> list[int]:
    """The layer of each of a pipeline stage's entries, as the decode numbers the entry
    SGLang sends it into (``dst[i]``; ``dst_items``: the decode's item size per entry).

    Positional pairing (``dst[i] == i``: a decode running the same stages, or stage 0 into a
    decode holding every layer) keeps the stage's own numbering: the decode registers the
    same entries and groups them the same way. Otherwise SGLang is offsetting a plain MLA
    pool into a decode holding every layer (``_build_transfer_dst_indices``): the decode
    numbers an entry by its position among its entries of that item size. The decode's
    slot counts are not sent, so two decode groups of one item size are told apart only in
    the positional case."""
    if dst[:len(own)] == list(range(min(len(own), len(dst)))):
        return list(own)
    seen: dict[int, int] = {}
    layer_of = []
    for it in dst_items:
        layer_of.append(seen.get(it, 0))
        seen[it] = seen.get(it, 0) + 1
    out = []
    for i, layer in enumerate(own):
        if i < len(dst):
            j = dst[i]
            layer = layer_of[j] if j < len(layer_of) else j
        out.append(layer)
    return out


def entry_map(out, self, *args, peer_info=None, **kwargs) -> None:
    """SGLang chose which decode entry each of this prefill's entries goes to: a pipeline
    stage's layouts (deferred in ``regions``) take the layers the decode numbers those
    entries by (``stage_layers``), then are recorded."""
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or out is None:
        return
    dst = [int(j) for j in out]
    if st.deferred is None:
        if st.entry_map is not None and dst != st.entry_map:
            from ._patch import say_once
            say_once(("sglang-entry-map", st.agent),
                     f"SGLang sends {st.agent}'s entries into a second decode's at other positions than the "
                     "first's: its layers stay numbered as for the first, so layer findings on descriptors "
                     "into the second are not reliable")
        return
    items = [int(x) for x in (getattr(peer_info, "dst_kv_item_lens", None) or [])]
    regions, st.deferred = st.deferred, None
    st.entry_map = dst
    layers = stage_layers([r.layer for r in regions], dst, items)
    shifted = any(r.layer != layer for r, layer in zip(regions, layers))
    for r, layer in zip(regions, layers):
        r.layer = layer
        rec.layout(st.agent, r.pool, r.layer, r.ptr, r.item, r.slots, page_tokens=st.page_tokens,
                   mem_type=r.mem, device=r.device)
    note = (st.deferred_note + "; " if st.deferred_note else "") + (
        "pipeline stage: layers numbered as the decode numbers the entries SGLang sends them into"
        + (" (not the stage's own positions)" if shifted else ""))
    rec.mark(note, st.agent, pools={p: [r.layer for r in regions if r.pool == p] for p in st.pools})


def _stage_start(a) -> int:
    return int(getattr(a, "prefill_start_layer", 0) or 0)


def _pipeline_stage(mgr, a) -> bool:
    """Whether this manager registers one pipeline stage's layers (SGLang's pp_size > 1)."""
    try:
        return int(getattr(mgr, "pp_size", 1) or 1) > 1 or _stage_start(a) > 0
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------ prefill: pages and writes
def _room(obj) -> str:
    return str(obj.bootstrap_room)


def sender_init(_out, self, num_kv_indices=None, aux_index=None, *a, **kw) -> None:
    st, rec = _state(self.kv_mgr), default_recorder()
    if st is None or rec is None:
        return
    self.__dict__["_kvtrace_pages"] = 0
    self.__dict__["_kvtrace_held"] = {}
    rec.event(K.REQ_START, st.agent, _room(self), detail={"pages": num_kv_indices})
    if aux_index is not None and st.aux and _on("pages"):
        rec.alloc(st.agent, _room(self), "aux", [int(aux_index)], [0])
        self.__dict__["_kvtrace_held"]["aux"] = [int(aux_index)]


def _last_chunk(sender, n: int) -> bool:
    """Whether send() of ``n`` pages is the request's last chunk, read before send() moves
    its index (SGLang's _prepare_send_indices: curr_idx + n == num_kv_indices)."""
    cur, total = getattr(sender, "curr_idx", None), getattr(sender, "num_kv_indices", None)
    return cur is not None and total is not None and int(cur) + n == int(total)


def sender_send(self, kv_indices, *a, **kw) -> None:
    st, rec = _state(self.kv_mgr), default_recorder()
    if st is None or rec is None or kv_indices is None:
        return
    slots = np.asarray(kv_indices, dtype=np.int64).ravel()
    aux = getattr(self, "aux_index", None)
    if aux is not None and st.aux and _on("content") and _last_chunk(self, len(slots)):
        # the aux slot goes out with the last chunk, filled by then (the scheduler's set_buf
        # precedes send_kv_chunk(last_chunk=True)): its checksum tells the identical copies
        # several TP ranks send into one decode slot from different ones (inflight_writes)
        record_writes(rec, st.agent, _room(self), st.aux, [int(aux)], [0])
    if len(slots) == 0:
        return
    first = self.__dict__.get("_kvtrace_pages", 0)
    pages = list(range(first, first + len(slots)))
    self.__dict__["_kvtrace_pages"] = first + len(slots)
    room, sl = _room(self), slots.tolist()
    if _on("pages"):
        held = self.__dict__.setdefault("_kvtrace_held", {})
        rec.allocs(st.agent, room, [(pool, sl, pages) for pool in st.pools])   # = rec.alloc per pool
        for pool in st.pools:
            held.setdefault(pool, []).extend(sl)
    if _on("content"):   # ordered here, hashed on the recorder's hashing thread (DRAM)
        record_writes(rec, st.agent, room, st.kv, sl, pages)


def sender_clear(_out, self, *a, **kw) -> None:
    st, rec = _state(self.kv_mgr), default_recorder()
    held = self.__dict__.pop("_kvtrace_held", None)
    if st is None or rec is None or not held:
        return
    rec.frees(st.agent, _room(self), held.items(), reason="finish")   # = rec.free per pool
    rec.event(K.REQ_DONE, st.agent, _room(self))


# ------------------------------------------------------------------ decode: pages, message, reads
def receiver_metadata(self, kv_indices, aux_index=None, *a, **kw) -> None:
    st, rec = _state(self.kv_mgr), default_recorder()
    if st is None or rec is None or kv_indices is None:
        return
    room = _room(self)
    slots = np.asarray(kv_indices, dtype=np.int64).ravel()
    sl = slots.tolist()
    held = {}
    rec.event(K.REQ_START, st.agent, room, detail={"pages": len(sl)})
    if _on("pages"):
        pages = list(range(len(sl)))
        items = [(pool, sl, pages) for pool in st.pools]
        for pool in st.pools:
            held[pool] = sl
        if aux_index is not None and st.aux:
            items.append(("aux", [int(aux_index)], [0]))
            held["aux"] = [int(aux_index)]
        rec.allocs(st.agent, room, items)   # one call: = rec.alloc per pool, then aux
    self.__dict__["_kvtrace_held"] = held
    self.__dict__["_kvtrace_slots"] = slots
    if _on("messages"):
        body = np.asarray(kv_indices, dtype=np.int32).tobytes()
        for info in (getattr(self, "bootstrap_infos", None) or [None]):
            peer = f"{info.get('rank_ip')}:{info.get('rank_port')}" if isinstance(info, dict) else None
            rec.event(K.MSG_SEND, st.agent, room, peer=peer, msg=body,
                      detail={"id": f"pages:{room}:{st.agent}", "what": "destination pages"})


def transfer_info(out, cls, msg, *a, **kw) -> None:
    rec = default_recorder()
    if rec is None or out is None or not _prefill_mgrs:
        return
    st = _state(_prefill_mgrs[-1])
    if st is None:
        return
    room = str(out.room)
    peer = out.agent_name.decode() if isinstance(out.agent_name, bytes) else str(out.agent_name)
    rec.event(K.MSG_RECV, st.agent, room, peer=peer,
              msg=np.asarray(out.dst_kv_indices, dtype=np.int32).tobytes(),
              detail={"id": f"pages:{room}:{peer}", "what": "destination pages"})


def receiver_poll(out, self, *a, **kw) -> None:
    # the scheduler polls every receiver on every step: the common answer (not Success yet,
    # or already recorded) returns before any other work
    if out not in _terminal() or self.__dict__.get("_kvtrace_read"):
        return
    st, rec = _state(self.kv_mgr), default_recorder()
    if st is None or rec is None:
        return
    self.__dict__["_kvtrace_read"] = True
    room = _room(self)
    _handoff_recv(rec, st, self.kv_mgr, room, out)
    if out != _terminal()[0]:
        return
    slots = self.__dict__.get("_kvtrace_slots")
    if slots is not None and len(slots) and _on("content"):
        sl, pages = slots.tolist(), list(range(len(slots)))
        for r, sums in zip(st.kv, region_checksums(st.kv, slots)):
            rec.read(st.agent, room, r.pool, r.layer, sl, sums, pages)
    rec.event(K.REQ_DONE, st.agent, room)


_KVPOLL: list = []


def _terminal() -> tuple:
    """SGLang's ``(KVPoll.Success, KVPoll.Failed)``."""
    return _states()[0]


def _states() -> tuple:
    """``((Success, Failed), (WaitingForInput, Success, Failed), WaitingForInput)`` of SGLang's
    KVPoll (imported once: the poll and status hooks run on every poll and status change)."""
    if not _KVPOLL:
        from sglang.srt.disaggregation.base.conn import KVPoll  # a plain class of ints, not an enum
        _KVPOLL.append(((KVPoll.Success, KVPoll.Failed),
                        (KVPoll.WaitingForInput, KVPoll.Success, KVPoll.Failed), KVPoll.WaitingForInput))
    return _KVPOLL[0]


def terminal_states() -> frozenset:
    """The poll results receiver_poll acts on (table.py's filter of that row)."""
    return frozenset(_terminal())


def handed_states() -> frozenset:
    """The poll results sender_poll acts on (table.py's filter of that row)."""
    return frozenset(_states()[1])


# ------------------------------------------------------------------ status hand-off between threads
def status_set(self, bootstrap_room=None, status=None, *a, **kw) -> None:
    """``update_status`` (before it acts): a room about to reach a status the scheduler
    thread acts on is a state hand-off to whichever thread polls it: Success or Failed
    (the transfer ended: decode reads, prefill frees), and on prefill WaitingForInput (the
    destination pages arrived on the bootstrap thread: the scheduler may send). Recorded
    before the status is set, so the poll that sees it always finds the send recorded."""
    terminal, handed, waiting = _states()
    if status not in handed:   # Bootstrapping / Transferring: at once
        return
    cur = self.request_status.get(bootstrap_room)
    # no room (cleared, or being created by its own thread), concluded, or not moving up
    if cur is None or cur in terminal or (status != terminal[1] and status <= cur):
        return
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or (status == waiting and st.mode != "prefill"):
        return   # decode's WaitingForInput is set on the polling thread itself
    room, name = str(bootstrap_room), _status_name(status)
    mid = _count(f"handoff:{room}:{name}:{st.agent}")
    self.__dict__.setdefault("_kvtrace_handoff", {})[room] = mid
    rec.event(K.MSG_SEND, st.agent, room, peer=st.agent, msg=str(int(status)).encode(),
              detail={"id": mid, "what": "status handoff", "status": name})


def _handoff_recv(rec, st, mgr, room: str, status) -> None:
    """A poll that first returns a status: the receiving end of the latest hand-off
    ``status_set`` recorded for the room, if another call set one (else nothing)."""
    mid = mgr.__dict__.get("_kvtrace_handoff", {}).pop(room, None)
    if mid is None or not _on("messages"):
        return
    rec.event(K.MSG_RECV, st.agent, room, peer=st.agent, msg=str(int(status)).encode(),
              detail={"id": mid, "what": "status handoff", "status": _status_name(status)})


def sender_poll(out, self, *a, **kw) -> None:
    """Prefill's scheduler polls its senders every step: the common answer (a status it
    does not act on, or the one it saw last) returns at once."""
    if out not in _states()[1] or self.__dict__.get("_kvtrace_seen") == out:
        return
    self.__dict__["_kvtrace_seen"] = out
    st, rec = _state(self.kv_mgr), default_recorder()
    if st is not None and rec is not None:
        _handoff_recv(rec, st, self.kv_mgr, _room(self), out)


def receiver_clear(self, *a, **kw) -> None:
    st, rec = _state(self.kv_mgr), default_recorder()
    held = self.__dict__.pop("_kvtrace_held", None)
    if st is None or rec is None or not held:
        return
    rec.frees(st.agent, _room(self), held.items(), reason="finish")   # = rec.free per pool


# ------------------------------------------------------------------ completion status
def _count(base: str) -> str:
    with _lock:
        n = _msg_counts.get(base, 0)
        _msg_counts[base] = n + 1
    return f"{base}#{n}"


def status_send(self, *a, targets=(), bootstrap_room=None, status=None, failure_reason=None, **kw) -> None:
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or not targets:
        return
    rank = self._prefill_unique_rank() if hasattr(self, "_prefill_unique_rank") else self.kv_args.engine_rank
    for endpoint, port in targets:
        base = f"status:{bootstrap_room}:{int(status)}:{endpoint}:{port}:{rank}"
        rec.event(K.MSG_SEND, st.agent, str(bootstrap_room), peer=f"{endpoint}:{port}",
                  msg=str(int(status)).encode(), detail={"id": _count(base), "what": "completion status",
                                                         "status": _status_name(status)})


def status_recv(self, *a, bootstrap_room=None, status=None, prefill_rank=None, failure_reason=None, **kw) -> None:
    st, rec = _state(self), default_recorder()
    if st is None or rec is None:
        return
    base = f"status:{bootstrap_room}:{int(status)}:{self.local_ip}:{self.rank_port}:{prefill_rank}"
    rec.event(K.MSG_RECV, st.agent, str(bootstrap_room), peer=None, msg=str(int(status)).encode(),
              detail={"id": _count(base), "what": "completion status", "status": _status_name(status)})


_STATUS_NAMES: dict = {}


def _status_name(status) -> str:
    """KVPoll's name of a status (its names read once: every status change asks)."""
    if not _STATUS_NAMES:
        from sglang.srt.disaggregation.base.conn import KVPoll
        _STATUS_NAMES.update({v: k for k, v in vars(KVPoll).items() if isinstance(v, int) and not k.startswith("_")})
    return _STATUS_NAMES.get(int(status), str(status))


# ------------------------------------------------------------------ request of each posting
def queue_get(out, self, *a, **kw) -> None:
    room = getattr(out, "room", None)
    if room is not None:
        current_request.set(str(room))


# ------------------------------------------------------------------ engine-reported failure
def checksum_mismatch(self, req, msg=None, *a, **kw) -> None:
    """SGLang's decode scheduler computed a request's KV checksum and it differs from
    prefill's: dump the session's rings (a no-op when none records)."""
    from ..ring import trigger
    room = getattr(req, "bootstrap_room", None)
    trigger(f"SGLang: KV checksum mismatch, request {room}" + (f" ({msg})" if msg else ""), repeated=True)
