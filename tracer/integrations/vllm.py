"""Handlers for vLLM's NIXL connector (``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``,
a package since 0.34; pull mode: decode READs, prefill learns completion from
notifications ``"{req_id}:{world}"``).

What each hook point says (rows in table.py):

- ``NixlBaseConnectorWorker.register_kv_caches``: every layer's cache is one region of
  pool ``kv`` (layer = its place in the dict vLLM registers), ``shape[0]`` blocks of
  ``stride(0)`` bytes (block-major views, what the connector registers per layer).
- ``NixlBaseConnector.request_finished`` (the scheduler half): on prefill
  (``do_remote_decode``) the request's blocks are its pages 0..n-1 and the producer has
  written them (checksums of each layer's blocks); on decode it frees the request's blocks.
- ``NixlPullConnectorWorker.start_load_kv``: decode's blocks of each request to receive.
- The kv_transfer_params prefill's ``request_finished`` hands (through the proxy) to
  decode's ``start_load_kv`` are a control message (msg_send / msg_recv, ``detail.id``
  ``blocks:{request}``): it orders prefill's allocs and writes before decode's READs.
- ``NixlPullConnectorWorker._read_blocks_for_req``: the request of the READs it posts.
- ``NixlBaseConnectorWorker.get_finished``: prefill frees what vLLM reports sent (read
  by decode, or its lease expired); decode reads what it reports received (checksums).
- ``NixlBaseConnectorWorker._handle_failed_transfer`` (a KV transfer failed) and
  ``NixlKVConnectorStats.record_notification_after_expiry`` (prefill learns a decode read
  blocks whose lease had expired: they may hold another request's KV): a ``--ring``
  recording dumps. vLLM 0.34's connector verifies no KV digest (its only hash is the
  handshake's compatibility hash, a configuration check), so these are its KV failures.

Request key: prefill's request id (what decode names as ``remote_request_id`` and what
the notification tags carry), on both sides. The scheduler half runs in the worker's
process here (one engine process); its facts are recorded under the last worker's agent.
"""
from __future__ import annotations

import threading

import numpy as np

from ..autotrace import default_recorder
from ..recorder import current_request
from ..schema import EventKind as K
from ._memory import region_checksums
from ._patch import enabled

ENGINE = "vllm"
POOL = "kv"
_lock = threading.Lock()
_workers: list = []


class _Region:
    __slots__ = ("pool", "layer", "ptr", "item", "slots", "mem", "device")

    def __init__(self, pool, layer, ptr, item, slots, mem, device):
        self.pool, self.layer, self.ptr, self.item = pool, layer, int(ptr), int(item)
        self.slots, self.mem, self.device = int(slots), mem, int(device)


class _State:
    def __init__(self, worker):
        name = worker.nixl_wrapper.name
        self.agent = name.decode() if isinstance(name, bytes) else str(name)
        self.kv: list[_Region] = []
        self.sending: dict[str, list[int]] = {}   # prefill: request -> blocks held for decode
        self.recving: dict[str, tuple[str, list[int]]] = {}  # decode: local id -> (request, blocks)
        self.held: dict[str, list[int]] = {}      # decode: request -> blocks until it finishes


def _on(group: str) -> bool:
    return enabled(ENGINE, group)


def _state(worker) -> _State | None:
    return worker.__dict__.get("_kvtrace")


def _last() -> _State | None:
    with _lock:
        return _state(_workers[-1]) if _workers else None


# ------------------------------------------------------------------ regions
def regions(_out, self, kv_caches, *a, **kw) -> None:
    rec = default_recorder()
    if rec is None:
        return
    st = _State(self)
    self.__dict__["_kvtrace"] = st
    for layer, cache in enumerate(kv_caches.values()):
        mem = "DRAM" if cache.device.type == "cpu" else "VRAM"
        dev = 0 if mem == "DRAM" else max(cache.get_device(), 0)
        item = cache.stride(0) * cache.element_size() if cache.ndim > 1 else cache.nbytes // self.num_blocks
        r = _Region(POOL, layer, cache.data_ptr(), item, cache.shape[0] if cache.ndim > 1 else self.num_blocks,
                    mem, dev)
        st.kv.append(r)
        rec.layout(st.agent, POOL, layer, r.ptr, r.item, r.slots, page_tokens=int(self.block_size),
                   mem_type=mem, device=dev)
    with _lock:
        _workers.append(self)


# ------------------------------------------------------------------ scheduler half
def _flat(block_ids) -> list[int]:
    if block_ids and isinstance(block_ids[0], (list, tuple)):
        return [int(b) for g in block_ids for b in g]
    return [int(b) for b in block_ids]


def request_finished(self, request, block_ids, *a, **kw) -> None:
    st, rec = _last(), default_recorder()
    params = getattr(request, "kv_transfer_params", None) or {}
    if st is None or rec is None:
        return
    if params.get("do_remote_decode"):  # prefill: the blocks decode will read
        blocks = _flat(block_ids)
        req = str(request.request_id)
        if not blocks:
            return
        rec.event(K.REQ_START, st.agent, req, detail={"pages": len(blocks)})
        pages = list(range(len(blocks)))
        if _on("pages"):
            rec.alloc(st.agent, req, POOL, blocks, pages)
            st.sending[req] = blocks
        if _on("content"):
            for r, sums in zip(st.kv, region_checksums(st.kv, blocks)):
                rec.write(st.agent, req, r.pool, r.layer, blocks, sums, pages)
        if _on("messages"):  # kv_transfer_params (remote_block_ids) leave for decode, via the proxy
            rec.event(K.MSG_SEND, st.agent, req, msg=np.asarray(blocks, dtype=np.int32).tobytes(),
                      detail={"id": f"blocks:{req}", "what": "prefill blocks (kv_transfer_params)"})
    else:  # decode: the request is done with its blocks
        req = str(params.get("remote_request_id") or request.request_id)
        blocks = st.held.pop(req, None)
        if blocks and _on("pages"):
            rec.free(st.agent, req, POOL, blocks, reason="finish")
        rec.event(K.REQ_DONE, st.agent, req)


# ------------------------------------------------------------------ worker half
def start_load_kv(self, metadata, *a, **kw) -> None:
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or metadata is None:
        return
    for local_id, meta in getattr(metadata, "reqs_to_recv", {}).items():
        remote = getattr(meta, "remote", None)
        req = str(remote.request_id) if remote is not None else str(local_id)
        blocks = _flat(meta.local_block_ids)
        if not blocks:
            continue
        if remote is not None and _on("messages"):
            rec.event(K.MSG_RECV, st.agent, req, msg=np.asarray(_flat(remote.block_ids), dtype=np.int32).tobytes(),
                      detail={"id": f"blocks:{req}", "what": "prefill blocks (kv_transfer_params)"})
        rec.event(K.REQ_START, st.agent, req, detail={"pages": len(blocks)})
        if _on("pages"):
            rec.alloc(st.agent, req, POOL, blocks, list(range(len(blocks))))
            st.held[req] = blocks
        st.recving[str(local_id)] = (req, blocks)


def read_blocks_for_req(self, req_id, meta, *a, **kw) -> None:
    remote = getattr(meta, "remote", None)
    current_request.set(str(remote.request_id) if remote is not None else str(req_id))


def get_finished(out, self, *a, **kw) -> None:
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or not out:
        return
    done_sending, done_recving = out
    for req in done_sending or ():
        blocks = st.sending.pop(str(req), None)
        if blocks and _on("pages"):
            rec.free(st.agent, str(req), POOL, blocks, reason="finish")
        rec.event(K.REQ_DONE, st.agent, str(req))
    for local_id in done_recving or ():
        got = st.recving.pop(str(local_id), None)
        if got is None or not _on("content"):
            continue
        req, blocks = got
        pages = list(range(len(blocks)))
        for r, sums in zip(st.kv, region_checksums(st.kv, blocks)):
            rec.read(st.agent, req, r.pool, r.layer, blocks, sums, pages)


# ------------------------------------------------------------------ engine-reported failure
def failed_transfer(self, req_id, *a, **kw) -> None:
    """vLLM records a failed KV transfer: dump the session's rings (no-op without one)."""
    from ..ring import trigger
    trigger(f"vLLM: KV transfer failed, request {req_id}", repeated=True)


def read_after_expiry(self, *a, **kw) -> None:
    """vLLM's prefill learned a decode read the blocks of a request whose lease had expired
    (freed, maybe reused by another request): dump the session's rings."""
    from ..ring import trigger
    trigger("vLLM: a decode read KV blocks whose lease had expired (they may hold another request's data)",
            repeated=True)
