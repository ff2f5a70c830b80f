"""Handlers for vLLM's NIXL connector (``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``,
a package since 0.34; pull mode: decode READs, prefill learns completion from
notifications ``"{req_id}:{world}"``).

What each hook point says (rows in table.py):

- ``NixlBaseConnectorWorker.register_kv_caches``: every NIXL region vLLM registered
  (its own list: base address, block length, block stride, block count, transfer group)
  gets a layout. Pool ``kv`` (``kv{g}`` when the model has several transfer groups, i.e.
  hybrid/HMA models); a region is one layer of its pool, in vLLM's region order. A layer
  whose cache vLLM splits into several regions (K blocks then V blocks) gives one pool
  per piece: ``kv.K`` and ``kv.V`` (``kv.s0``, ``kv.s1``... beyond two), each with
  ``part`` set; MLA's single latent tensor is one region per layer. A ``mark`` event
  names the vLLM layers behind each (pool, layer). Regions whose blocks are strided
  (block stride > bytes moved per block, e.g. one layer's page in a packed row) get the
  stride as slot size and no checksums: the slot's other bytes are not transferred.
- ``NixlPullConnectorScheduler.request_finished`` (the scheduler half, after it ran):
  on prefill, when vLLM keeps the blocks for decode (``delay_free_blocks``), the
  request's blocks of each transfer group (the ``remote_block_ids`` it hands decode) are
  its pages in that group's pools — 0..n-1, or the last n pages of its computed tokens when
  the list is a tail (a sliding-window group's in-window blocks) — and the producer has
  written them (checksums).
  Leading blocks another request of the worker still holds are prefix-cache hits (vLLM's
  block pool hands a referenced block to a second request only as one): shared allocs,
  written by their first holder, not by this request. On decode the request is done with
  its blocks (free), unless its READ is posted and not yet reported (aborted while it
  loads): vLLM's scheduler keeps those blocks until the worker reports the READ, and
  nothing reads them.
- ``Scheduler._free_blocks`` (vLLM's engine scheduler, when the program runs one): the
  request's blocks went back to the block pool; decode's are free from then on, whatever
  is in flight (an engine that frees an aborted load's blocks at once shows as such).
- ``NixlPullConnector.start_load_kv`` (its ``scheduler_output``) and
  ``NixlBaseConnector.get_transfer_results(finished_req_ids)``, in the worker's process:
  the requests vLLM finished last step; decode frees their blocks there when the scheduler
  half runs elsewhere (each request's blocks are freed once, whichever comes first).
- ``NixlPullConnectorWorker.start_load_kv``: decode's blocks of each request to receive.
  After a local prefix-cache hit (or in a sliding-window group) they are a tail: the last
  pages of the tokens prefill computed (``remote_num_tokens``), else of
  ``local_num_computed_blocks + i``.
- The kv_transfer_params prefill's ``request_finished`` hands (through the proxy) to
  decode's ``start_load_kv`` are a control message (msg_send / msg_recv, ``detail.id``
  ``blocks:{request}``): it orders prefill's allocs and writes before decode's READs.
  Tensor-parallel engines (heterogeneous TP included): vLLM hands the params over once,
  after every prefill rank's forward pass, and the decode engine's scheduler gives them to
  every decode rank. Neither side knows the other's rank count when it sends, and a message
  id pairs one sender with one receiver, so prefill rank p sends ``blocks:{request}@p{p}``,
  decode rank 0 receives one per prefill rank (the params carry prefill's TP size) and hands
  them on to decode rank d as ``blocks:{request}>d{d}``. Every prefill rank's blocks and
  writes are then ordered before every decode rank's READs, as the engines' all-reduces
  order them.
- ``NixlPullConnectorWorker._read_blocks_for_req``: the request of the READs it posts.
- ``NixlBaseConnectorWorker.get_transfer_results`` (what the model runner calls each step;
  the legacy ``get_finished`` wraps it): prefill frees what vLLM reports sent (read by
  decode, or its lease expired); decode reads what it reports received (checksums), not
  what it reports failed.
- ``NixlBaseConnectorWorker._handle_failed_transfer`` (a KV transfer failed) and
  ``NixlKVConnectorStats.record_notification_after_expiry`` (prefill learns a decode read
  blocks whose lease had expired: they may hold another request's KV): a ``--ring``
  recording dumps. vLLM 0.34's connector verifies no KV digest (its only hash is the
  handshake's compatibility hash, a configuration check), so these are its KV failures.

Request key: prefill's request id (what decode names as ``remote_request_id`` and what
the notification tags carry), on both sides.

Who owns the scheduler half's facts: the blocks it names live in the memory of the
connector workers of the same engine (``engine_id``), one NIXL agent per worker (TP
rank). The scheduler half records its facts under every worker of its engine in its own
process, in the scheduler's thread, before it returns to the engine (so before decode
can learn the blocks). vLLM runs the scheduler and a single worker in one process
(uniprocess executor); with workers in other processes (multiprocess executor, TP > 1)
the scheduler's process has no worker of its engine: its facts cannot be tied to any
memory and are not recorded there (said once on stderr). Each worker's process records
prefill's instead, from the scheduler outputs vLLM's model runner hands its connector glue
(vllm_worker.py); decode's frees come from the workers (the finished request ids each step
hands them). vLLM's ``external_launcher`` executor runs a whole engine per TP rank (each
rank's process has its scheduler and its one worker, scheduling deterministically): each
rank's scheduler half records under its own worker, so every rank's blocks, writes and
frees are in the trace (test_vllm_hetero_tp.py). A program that drives the worker without
vLLM's model-runner glue and its scheduler elsewhere leaves prefill's blocks and writes
missing, so which pages prefill's descriptors read is unknown: `check` says so in one note
with the remedy and flags nothing there (test_vllm.py,
test_vllm_scheduler_in_its_own_process_is_not_flagged).
"""
from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np

from ..autotrace import default_recorder
from ..recorder import current_request
from ..schema import EventKind as K
from ._memory import record_writes, region_checksums, warm_device_hash
from ._patch import enabled, say_once

ENGINE = "vllm"
POOL = "kv"
_lock = threading.Lock()
_workers: list = []


class _Region:
    __slots__ = ("pool", "layer", "ptr", "item", "slots", "mem", "device", "group", "summed", "part", "names")

    def __init__(self, pool, layer, ptr, item, slots, mem, device, group=0, summed=True, part=None, names=()):
        self.pool, self.layer, self.ptr, self.item = pool, layer, int(ptr), int(item)
        self.slots, self.mem, self.device = int(slots), mem, int(device)
        self.group, self.summed, self.part, self.names = int(group), bool(summed), part, list(names)


class _State:
    def __init__(self, worker):
        name = worker.nixl_wrapper.name
        self.agent = name.decode() if isinstance(name, bytes) else str(name)
        self.engine = str(getattr(worker, "engine_id", ""))
        # the worker's rank among its engine's transfer ranks (TP ranks; DCP shards on a TP-1
        # PCP engine), each a process with its own NIXL agent
        self.tp_rank = int(getattr(worker, "transfer_tp_rank", getattr(worker, "tp_rank", 0)) or 0)
        self.tp_size = int(getattr(worker, "transfer_tp_size", getattr(worker, "world_size", 1)) or 1)
        self.kv: list[_Region] = []
        self.sending: dict[str, dict[str, list[int]]] = {}   # prefill: request -> pool -> blocks held
        self.recving: dict[str, tuple] = {}  # decode: local id -> (request, group blocks, group first page)
        self.held: dict[str, dict[str, list[int]]] = {}      # decode: request -> pool -> blocks until it finishes
        self.local: dict[str, str] = {}                      # decode: local request id -> request
        self.aborting: set[str] = set()                      # decode: finished while its READ is unreported
        self.padded: set[int] = set()                        # transfer groups whose lists may hold the null block

    def pools(self, group: int) -> list[str]:
        return list(dict.fromkeys(r.pool for r in self.kv if r.group == group))

    def regions(self, group: int) -> list[_Region]:
        return [r for r in self.kv if r.group == group]


def _on(group: str) -> bool:
    return enabled(ENGINE, group)


def _state(worker) -> _State | None:
    return worker.__dict__.get("_kvtrace")


def _workers_of(engine_id) -> list[_State]:
    """The recorded connector workers of ``engine_id`` in this process (one per TP rank)."""
    with _lock:
        sts = [_state(w) for w in _workers]
    return [s for s in sts if s is not None and s.engine == str(engine_id)]


# ------------------------------------------------------------------ regions
def _pool_name(base: str, piece: int, pieces: int, mla: bool) -> tuple[str, str | None]:
    if pieces <= 1:
        return base, None
    part = "KV"[piece] if pieces == 2 and not mla else f"s{piece}"
    return f"{base}.{part}", part


def _vllm_regions(w) -> list[_Region]:
    """Layouts from vLLM's own region list (0.34: what it registered with NIXL and builds
    descriptors from: block b of region i is [base_i + b*stride_i, +block_len_i))."""
    bases = list(w.kv_caches_base_addr[w.engine_id][w.tp_rank])
    lens, strides = list(w.block_len_per_layer), list(w.block_stride_per_layer)
    counts = list(w.region_num_blocks)
    n = len(bases)
    members = list(getattr(w, "region_members", None) or [[f"region{i}"] for i in range(n)])
    mems = list(getattr(w, "region_mem_types", None) or ["DRAM"] * n)
    is_mla = list(getattr(w, "_region_is_mla", None) or [False] * n)
    ssm = set(getattr(w, "_ssm_region_indices", None) or ())
    by_group = getattr(w, "_group_region_indices", None)
    gids = list(getattr(w, "region_group_ids", None) or [0] * n)
    groups = []
    for i in range(n):  # a region several groups page (overlaid caches): its first group
        g = gids[i]
        if by_group is not None and (g < 0 or g >= len(by_group)):
            g = next((k for k, rs in enumerate(by_group) if rs and i in rs), 0)
        groups.append(max(int(g), 0))
    ratio = int(getattr(w, "_physical_blocks_per_logical_kv_block", 1) or 1)
    by_layer: dict[str, list[int]] = defaultdict(list)
    for i, names in enumerate(members):
        if names:
            by_layer[names[0]].append(i)
    several = len(set(groups)) > 1
    layer_of: dict[str, int] = defaultdict(int)
    out = []
    for i in range(n):
        base = f"{POOL}{groups[i]}" if several else POOL
        pieces = by_layer.get(members[i][0], [i]) if members[i] else [i]
        pool, part = _pool_name(base, pieces.index(i), len(pieces), bool(is_mla[i]))
        r = 1 if i in ssm else ratio  # a logical block is `ratio` kernel blocks (mamba: 1)
        item = int(strides[i]) * r
        contiguous = int(strides[i]) == int(lens[i])
        mem = mems[i]
        dev = 0 if mem == "DRAM" else int(getattr(w, "device_id", 0) or 0)
        out.append(_Region(pool, layer_of[pool], bases[i], item, int(counts[i]) // r, mem, dev, groups[i],
                           summed=contiguous, part=part, names=members[i]))
        layer_of[pool] += 1
    return out


def _tensor_regions(w, kv_caches) -> list[_Region]:
    """Without vLLM's region list (another release): one region per cache tensor, block-major."""
    out = []
    for layer, (name, cache) in enumerate(kv_caches.items()):
        mem = "DRAM" if cache.device.type == "cpu" else "VRAM"
        dev = 0 if mem == "DRAM" else max(cache.get_device(), 0)
        if cache.ndim > 1:
            item, slots = cache.stride(0) * cache.element_size(), cache.shape[0]
        else:
            item, slots = cache.nbytes // w.num_blocks, w.num_blocks
        out.append(_Region(POOL, layer, cache.data_ptr(), item, slots, mem, dev, names=[name]))
    return out


def _setup(what: str, call, self, *args, **kwargs):
    """Run a set-up step of vLLM's; if it raises, say so in one line and let it propagate."""
    try:
        return call(self, *args, **kwargs)
    except Exception as e:
        say_once((ENGINE, "setup"), f"vLLM's NIXL connector raised during {what} ({type(e).__name__}: "
                 f"{_first_line(e)}); "
                 "what was recorded so far is kept")
        raise


def _first_line(e: Exception) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def worker_init(call, self, *args, **kwargs):
    return _setup("set-up (connector worker)", call, self, *args, **kwargs)


def regions(call, self, kv_caches, *args, **kwargs):
    out = _setup("set-up (registering the KV cache)", call, self, kv_caches, *args, **kwargs)
    try:
        _record_regions(self, kv_caches)
    except Exception as e:  # never break the engine for a trace
        say_once((ENGINE, "regions"), f"vLLM's NIXL connector: recording its KV cache regions failed "
                 f"({type(e).__name__}: {_first_line(e)}); the trace has no layouts for them")
    return out


def _record_regions(self, kv_caches) -> None:
    rec = default_recorder()
    if rec is None:
        return
    st = _State(self)
    try:
        st.kv = _vllm_regions(self)
    except (AttributeError, KeyError, TypeError, IndexError):
        st.kv = _tensor_regions(self, kv_caches)
    st.padded = _padded_groups(self)
    self.__dict__["_kvtrace"] = st
    with _lock:
        _workers.append(self)
    if _on("content"):
        warm_device_hash(st.kv)
    if not _on("layout"):
        return
    for r in st.kv:
        rec.layout(st.agent, r.pool, r.layer, r.ptr, r.item, r.slots, page_tokens=int(self.block_size),
                   part=r.part, mem_type=r.mem, device=r.device)
    pools = list(dict.fromkeys(r.pool for r in st.kv))
    rec.mark("vLLM's KV cache regions: " + "; ".join(
        f"{p} = " + ", ".join(f"L{r.layer} {'+'.join(r.names)}" for r in st.kv if r.pool == p) for p in pools),
        st.agent, pools={p: [r.layer for r in st.kv if r.pool == p] for p in pools},
        strided=[f"{r.pool} L{r.layer}" for r in st.kv if not r.summed])


def _padded_groups(w) -> set[int]:
    """Transfer groups that are not full attention (sliding window, mamba): vLLM pads their
    block lists with its null block (block 0 of the block pool, never a request's page) where
    a page is out of the window; those entries are placeholders, not blocks a request holds."""
    try:
        from vllm.v1.kv_cache_interface import FullAttentionSpec
        kcc = w.kv_cache_config
        return {g for g, grp in enumerate(kcc.transfer_groups) if not isinstance(grp.kv_cache_spec, FullAttentionSpec)}
    except Exception:
        return set()


# ------------------------------------------------------------------ blocks per group
def _groups(block_ids) -> dict[int, list[int]]:
    """vLLM's BlockIds (one list per transfer group) or a flat list (one group)."""
    if block_ids is None:
        return {}
    ids = list(block_ids)
    if ids and isinstance(ids[0], (list, tuple, np.ndarray)):
        return {g: [int(b) for b in blocks] for g, blocks in enumerate(ids) if len(blocks)}
    return {0: [int(b) for b in ids]} if ids else {}


def _flat(block_ids) -> list[int]:
    return [b for _g, blocks in sorted(_groups(block_ids).items()) for b in blocks]


def _alloc(st: _State, rec, req: str, groups: dict[int, list[int]], first: dict[int, int] | None = None,
           shared: dict[int, int] | None = None) -> dict[str, list[int]]:
    """``req`` holds ``groups``' blocks: block i of group g is page ``first[g] + i`` of the
    request (0 unless the blocks are a suffix of its sequence); its first ``shared[g]``
    blocks are prefix-cache references (another request's blocks, not handed out anew)."""
    held: dict[str, list[int]] = {}
    for g, blocks in groups.items():
        p0, k = (first or {}).get(g, 0), (shared or {}).get(g, 0)
        pages = list(range(p0, p0 + len(blocks)))
        hit, own = _real(st, g, blocks[:k], pages[:k]), _real(st, g, blocks[k:], pages[k:])
        for pool in st.pools(g):
            if hit[0]:
                rec.alloc(st.agent, req, pool, hit[0], hit[1], shared=True)
            if own[0]:
                rec.alloc(st.agent, req, pool, own[0], own[1])
            held[pool] = hit[0] + own[0]
    return held


def _real(st: _State, g: int, blocks: list[int], pages: list[int]) -> tuple[list[int], list[int]]:
    """The (blocks, pages) of a list without the null block's placeholders (padded groups)."""
    if g not in st.padded or 0 not in blocks:
        return list(blocks), list(pages)
    keep = [(b, p) for b, p in zip(blocks, pages) if b != 0]
    return [b for b, _ in keep], [p for _, p in keep]


def _content(st: _State, rec, req: str, groups: dict[int, list[int]], what,
             first: dict[int, int] | None = None) -> None:
    """Checksums of ``req``'s blocks in every region of their group (``what``: rec.write or rec.read);
    block i of group g is page ``first[g] + i``."""
    for g, blocks in groups.items():
        regs = [r for r in st.regions(g) if r.summed]
        if not regs or not blocks:
            continue
        p0 = (first or {}).get(g, 0)
        blocks, pages = _real(st, g, blocks, list(range(p0, p0 + len(blocks))))
        if not blocks:
            continue
        if what == rec.write:   # ordered here, hashed on the recorder's hashing thread (DRAM)
            record_writes(rec, st.agent, req, regs, blocks, pages)
            continue
        for r, sums in zip(regs, region_checksums(regs, blocks)):
            what(st.agent, req, r.pool, r.layer, blocks, sums, pages)


# ------------------------------------------------------------------ scheduler half
def request_finished(out, self, request, block_ids, *a, **kw) -> None:
    rec = default_recorder()
    if rec is None:
        return
    sts = _workers_of(getattr(self, "engine_id", ""))
    if not sts:
        say_once((ENGINE, "no-worker"), f"vLLM's scheduler for engine {getattr(self, 'engine_id', '?')} runs "
                 "in a process without that engine's connector worker (multiprocess executor): the blocks "
                 "it keeps for decode are recorded by the worker's process from the scheduler outputs its "
                 "model runner gets, or not at all where the worker runs without vLLM's model runner")
        return
    asked = getattr(request, "kv_transfer_params", None) or {}
    delay, params = out if isinstance(out, tuple) and len(out) == 2 else (False, None)
    if asked.get("do_remote_decode"):  # prefill
        if not delay or not params:
            return  # nothing kept for decode (aborted, or no blocks): vLLM frees them at once
        req = str(request.request_id)
        groups = _groups(params.get("remote_block_ids"))
        if not groups:
            return
        first = _tail_pages(self, groups, params.get("remote_num_tokens") or getattr(request, "num_computed_tokens", 0))
        for st in sts:
            rec.event(K.REQ_START, st.agent, req, detail={"pages": sum(map(len, groups.values()))})
            hits = _prefix_hits(st, groups)
            if _on("pages"):
                st.sending[req] = _alloc(st, rec, req, groups, first=first, shared=hits)
            if _on("content"):  # the forward pass wrote the blocks it computed, not the prefix-cache hits
                _content(st, rec, req, {g: b[hits.get(g, 0):] for g, b in groups.items()}, rec.write,
                         first={g: first.get(g, 0) + hits.get(g, 0) for g in groups})
            if _on("messages"):  # kv_transfer_params (remote_block_ids) leave for decode, via the proxy
                rec.event(K.MSG_SEND, st.agent, req, msg=np.asarray(_flat(params["remote_block_ids"]),
                                                                   dtype=np.int32).tobytes(),
                          detail={"id": _params_id(req, st.tp_rank, st.tp_size), "what": _PARAMS})
    else:  # decode: the request is done with its blocks
        for st in sts:
            _finish(st, rec, [request.request_id])


_PARAMS = "prefill blocks (kv_transfer_params)"


def _params_id(req: str, prefill_rank: int, prefill_tp: int) -> str:
    """``detail.id`` of the kv_transfer_params message as prefill TP rank ``prefill_rank`` of
    ``prefill_tp`` hands it over: one per prefill rank, so each rank's blocks and writes are
    ordered before decode's READs (plain ``blocks:{req}`` without TP)."""
    return f"blocks:{req}" if prefill_tp <= 1 else f"blocks:{req}@p{prefill_rank}"


def _params_received(st: _State, rec, req: str, remote, prefill_tp: int) -> None:
    """Decode got ``req``'s kv_transfer_params. vLLM's prefill engine hands them over once,
    after every prefill TP rank's forward pass (their all-reduce); the decode engine's
    scheduler hands them to every decode TP rank's worker. Recorded as: decode rank 0 receives
    every prefill rank's message (each rank's blocks and writes are ordered before it), then
    hands it on to decode ranks 1.. (``blocks:{req}>d{rank}``); a rank > 0 receives that.
    Each id has one sender and one receiver, whatever the two TP sizes (neither engine knows
    how many ranks the other has when it sends)."""
    blocks = np.asarray(_flat(remote.block_ids), dtype=np.int32).tobytes()
    if st.tp_rank > 0:
        rec.event(K.MSG_RECV, st.agent, req, msg=blocks, detail={"id": f"blocks:{req}>d{st.tp_rank}", "what": _PARAMS})
        return
    for p in range(max(int(prefill_tp or 1), 1)):
        rec.event(K.MSG_RECV, st.agent, req, msg=blocks, detail={"id": _params_id(req, p, prefill_tp), "what": _PARAMS})
    for d in range(1, st.tp_size):  # the decode engine's scheduler hands them to its other ranks
        rec.event(K.MSG_SEND, st.agent, req, msg=blocks, detail={"id": f"blocks:{req}>d{d}", "what": _PARAMS})


def _group_block_size(obj, g: int) -> int:
    """Tokens per block of transfer group ``g`` (its KV cache group's spec; else the engine's)."""
    try:
        kcc = obj.kv_cache_config
        return int(kcc.kv_cache_groups[tuple(kcc.transfer_group_ids)[g]].kv_cache_spec.block_size)
    except Exception:
        return int(getattr(obj, "block_size", 0) or 0)


def _tail_pages(obj, groups: dict[int, list[int]], num_tokens) -> dict[int, int]:
    """Per group, the request's page of the first block listed when the list is the tail of
    the blocks that hold ``num_tokens`` tokens: a sliding-window group keeps (and hands over)
    only its in-window blocks, and a decode prefix-cache hit pulls only the uncached ones; the
    pages are the sequence's last ones either way (0 when the list covers every block)."""
    out = {}
    for g, blocks in groups.items():
        bs = _group_block_size(obj, g)
        if num_tokens and bs:
            p0 = -(-int(num_tokens) // bs) - len(blocks)
            if p0 > 0:
                out[g] = p0
    return out


def _prefix_hits(st: _State, groups: dict[int, list[int]]) -> dict[int, int]:
    """Per group, how many leading blocks of a prefill request are prefix-cache hits: blocks
    another request of this worker still holds. vLLM's block pool hands a block that is
    referenced (ref_cnt > 0) to another request only as a prefix-cache hit, and hits are
    always a prefix of the request's blocks; a held block further on is not one."""
    out = {}
    for g, blocks in groups.items():
        pools = st.pools(g)
        taken = {b for held in st.sending.values() for p in pools for b in held.get(p, ())}
        k = 0   # (a padded group's null placeholders before its hits are neither)
        while k < len(blocks) and (blocks[k] in taken or (g in st.padded and blocks[k] == 0)):
            k += 1
        if k:
            out[g] = k
    return out


def _finish(st: _State, rec, local_ids, *, freed: bool = False) -> None:
    """Decode's requests ``local_ids`` are done: their blocks go back (once, whichever of
    the scheduler half, the worker or vLLM's scheduler hears of it first). A request whose
    READ is posted and not yet reported (aborted while it loads) keeps its blocks: vLLM's
    scheduler frees them when the worker reports the READ (finished or failed); ``freed``:
    the scheduler returned them to its block pool now, whatever is in flight."""
    for lid in local_ids or ():
        lid = str(lid)
        if not freed and lid in st.recving:
            st.aborting.add(lid)
            continue
        st.aborting.discard(lid)
        req = st.local.pop(lid, None)
        held = st.held.pop(req, None) if req is not None else None
        if held is None:
            continue
        if _on("pages"):
            reason = "abort" if lid in st.recving else "finish"
            for pool, blocks in held.items():
                rec.free(st.agent, req, pool, blocks, reason=reason)
        rec.event(K.REQ_DONE, st.agent, req)


def scheduler_free(out, self, request, *a, **kw) -> None:
    """vLLM's ``Scheduler._free_blocks``: the engine returned the request's blocks to its block
    pool (at once, or after an aborted load reported). On decode they are free from here."""
    rec = default_recorder()
    conn = getattr(self, "connector", None)
    if rec is None or conn is None:
        return
    for st in _workers_of(getattr(conn, "engine_id", "")):
        _finish(st, rec, [request.request_id], freed=True)


def _connector_state(connector) -> _State | None:
    w = getattr(connector, "connector_worker", None)
    return _state(w) if w is not None else None


def finished_before_load(self, *a, **kw) -> None:
    """The connector's ``start_load_kv`` gets the step's scheduler output: the requests that
    finished last step had their blocks freed before this step's were handed out."""
    st, rec = _connector_state(self), default_recorder()
    if st is not None and rec is not None:
        _finish(st, rec, getattr(kw.get("scheduler_output"), "finished_req_ids", None))


def finished_with_results(self, finished_req_ids=None, *a, **kw) -> None:
    """The connector's ``get_transfer_results(finished_req_ids)``: the same step's finished
    requests, when no load ran this step."""
    st, rec = _connector_state(self), default_recorder()
    if st is not None and rec is not None:
        _finish(st, rec, finished_req_ids)


# ------------------------------------------------------------------ worker half
def start_load_kv(self, metadata, *a, **kw) -> None:
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or metadata is None:
        return
    for local_id, meta in getattr(metadata, "reqs_to_recv", {}).items():
        remote = getattr(meta, "remote", None)
        req = str(remote.request_id) if remote is not None else str(local_id)
        groups = _groups(meta.local_block_ids)
        if not groups:
            continue
        if remote is not None and _on("messages"):
            _params_received(st, rec, req, remote, getattr(meta, "tp_size", 1))
        rec.event(K.REQ_START, st.agent, req, detail={"pages": sum(map(len, groups.values()))})
        first = _first_pages(self, meta, groups)
        if _on("pages"):
            st.held[req] = _alloc(st, rec, req, groups, first=first)
        st.recving[str(local_id)] = (req, groups, first)
        st.local[str(local_id)] = req


def _first_pages(worker, meta, groups: dict[int, list[int]]) -> dict[int, int]:
    """Per group, the request's page of decode's first block to receive. The blocks vLLM's
    scheduler allocates for the tokens it loads are the last ones of the prompt's (before
    them: blocks decode's prefix cache holds, or a sliding window's skipped pages), so with the
    number of tokens prefill computed they are the last pages of those tokens; without it, the
    blocks decode's cache holds come first (``local_num_computed_blocks``, per KV cache group),
    else the end of the remote list."""
    remote_meta = getattr(meta, "remote", None)
    n = getattr(remote_meta, "num_tokens", None)
    if n:
        return _tail_pages(worker, groups, n)
    cached = tuple(getattr(meta, "local_num_computed_blocks", None) or ())
    kcc = getattr(worker, "kv_cache_config", None)
    try:
        kv_group = tuple(kcc.transfer_group_ids) if kcc is not None else ()
    except Exception:
        kv_group = ()
    remote = _groups(getattr(remote_meta, "block_ids", None))
    out = {}
    for g, blocks in groups.items():
        kg = kv_group[g] if g < len(kv_group) else g
        if kg < len(cached):
            out[g] = int(cached[kg])
        elif g in remote:
            out[g] = max(len(remote[g]) - len(blocks), 0)
    return {g: p for g, p in out.items() if p}


def read_blocks_for_req(self, req_id, meta, *a, **kw) -> None:
    remote = getattr(meta, "remote", None)
    current_request.set(str(remote.request_id) if remote is not None else str(req_id))


def transfer_results(out, self, *a, **kw) -> None:
    st, rec = _state(self), default_recorder()
    if st is None or rec is None or out is None:
        return
    done_sending = getattr(out, "finished_sending", None) or ()
    failed = set(getattr(out, "failed_recving", None) or ())
    done_recving = [r for r in getattr(out, "finished_recving", None) or () if r not in failed]
    for local_id in sorted(set(map(str, failed)) | set(map(str, done_recving))):
        if local_id in st.aborting:  # finished while it loaded: its blocks go back now, unread
            _finish(st, rec, [local_id], freed=True)
            st.recving.pop(local_id, None)
    for local_id in failed:  # nothing arrived: decode does not use these blocks' bytes
        st.recving.pop(str(local_id), None)
    for req in done_sending or ():
        held = st.sending.pop(str(req), None)
        if held and _on("pages"):
            for pool, blocks in held.items():
                rec.free(st.agent, str(req), pool, blocks, reason="finish")
        rec.event(K.REQ_DONE, st.agent, str(req))
    for local_id in done_recving or ():
        got = st.recving.pop(str(local_id), None)
        if got is None or not _on("content") or str(local_id) not in st.local:
            continue  # (not held: the request finished and its blocks went back; nothing reads them)
        req, groups, first = got
        _content(st, rec, req, groups, rec.read, first=first)


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
