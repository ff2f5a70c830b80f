"""Play SGLang's scheduler around its real NIXL connector: prefill and decode as two OS
processes over real NIXL (UCX, DRAM), SGLang's own bootstrap server, ZMQ and transfer
workers. No kvtrace code here: record it with ``kvtrace record --hooks sglang -- ...``.

Geometry DeepSeek-V4-shaped (MLA): ``--kv-layers`` MLA kv regions, then
``--index-layers`` index-K regions appended after them (the order SGLang's
``get_contiguous_buf_infos`` gives). Index-K is sized either by tokens (``tokens``: the
same slot count as kv) or by bytes (``bytes``: the same bytes per region as a kv region,
so its slot count depends on the index-K dtype: bf16 256 B/token, fp8 132 B/token).

Every slot of every region holds a stamp (who wrote it: request, region, page; or "never
written" with its region and slot), so the verifier on decode says which destination
pages hold whose bytes. Exit code 0 whatever the verifier finds (SGLang reports Success
either way); ``--report FILE`` gets the verifier's findings as JSON.

``--memory vram`` puts the kv and index-K pools on the GPU (CUDA tensors, given to SGLang
as ``kv_data_mem_kinds = VRAM``, so its connector registers and transfers them as NIXL
VRAM); stamps are written on the host and copied into the pool, and the verifier copies
the pools back through torch. Aux stays in DRAM, as in SGLang. Without a CUDA GPU it
refuses with one line and exit code 2.

``--prefill-tp N`` / ``--decode-tp N``: that side runs as N attention-TP ranks, one OS
process and NIXL agent each, published to SGLang as ``tp_size = attn_tp_size = N`` with
the process's rank (prefill rank 0 runs the bootstrap server; every rank registers with
it). By default the pools are MLA, replicated on every rank, as SGLang's MLA path
assumes: with prefill TP > decode TP decode reads from one prefill rank (the others get
dummy requests); with decode TP > prefill TP every decode rank is sent the same prefill
pages. Each rank allocates like its peers (one scheduler per instance), and each decode
rank verifies its own pages; the report merges them (``rank``, ``agent`` per entry).

``--kv-heads H`` makes the pools MHA instead (``is_mla_backend`` False, no index-K):
``--kv-layers`` K regions then as many V regions (SGLang's ``MHATokenToKVPool`` order), each
rank holding its ``H / TP`` heads of every token, a page laid out ``[token][head][head_dim]``
(bf16). Prefill TP != decode TP then takes SGLang's head-sliced path
(``send_kvcache_slice``): each prefill rank WRITEs, per token, the heads a decode rank holds,
at their offset in the decode token (prefill TP > decode TP: decode hears from every prefill
rank of its group; decode TP > prefill TP: each decode rank gets its heads from one prefill
rank). Every (token, head) cell holds a stamp (request, region, page, token, global head),
and decode's verifier checks every cell of every page. SGLang refuses this path for
destinations outside VRAM (``_prepare_payload_xfer``: "NIXL heterogeneous-TP direct-to-host
KV transfer is not implemented safely yet"), so it needs ``--memory vram`` (a GPU); on DRAM
prefill's bootstrap thread raises that when decode registers, nothing is sent, and the run
ends at ``--timeout``.

``--prefill-pp N``: prefill runs as N pipeline stages, one OS process and NIXL agent each,
published to SGLang as ``pp_size = N`` with the stage's ``pp_rank``; stage k registers only
its share of the kv layers and of the index-K layers (each group split evenly), with
``prefill_start_layer`` and the layer ids of its entries (``kv_layer_ids``: per group, the
model layer each entry holds, as a hybrid pool reports them). Decode (one stage) holds every
layer; SGLang pairs each stage's entries with decode's by those ids, and decode hears from
every stage. Stamps name the global region, so the verifier checks the same thing.
``--decode-pp N`` (with ``--prefill-pp N``, as SGLang requires a decode's stages to equal
prefill's or be 1): decode runs as the same N stages, each receiving from its own prefill
stage and verifying its share of the layers; the report merges them (``stage`` per entry).

    python tests/engines/sglang_pd.py --index-k bytes --index-dtype bf16 --report out.json
    python tests/engines/sglang_pd.py --index-k tokens --prefill-tp 2 --report out.json
    python tests/engines/sglang_pd.py --kv-heads 4 --prefill-tp 2 --memory vram --report out.json
    python tests/engines/sglang_pd.py --kv-layers 4 --index-layers 4 --prefill-pp 2 --memory vram --report out.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

KV_TOKEN_BYTES = 576 * 2                     # MLA: kv_lora_rank 512 + rope 64, bf16
INDEX_TOKEN_BYTES = {"bf16": 128 * 2, "fp8": 128 + 4}  # 128 dims (+ fp32 scale for fp8)
AUX_ITEM = 64
STAMP = np.dtype([("magic", "<u4"), ("room", "<i4"), ("region", "<i4"), ("page", "<i4")])
# MHA: one stamp per (token, head) cell; "page" is the slot for never-written cells
CELL = np.dtype([("magic", "<u4"), ("room", "<i4"), ("region", "<i4"), ("page", "<i4"),
                 ("token", "<i4"), ("head", "<i4")])
MAGIC_WRITTEN, MAGIC_UNWRITTEN = 0x4B565752, 0x4B56554E


def geometry(a, tp: int = 1, rank: int = 0) -> dict:
    """Regions (item_len, slots) in SGLang's kv_data order, plus aux. MHA (``--kv-heads``):
    K then V regions of this side's attention-TP rank ``rank`` of ``tp``, with its heads
    (``heads``: this rank's count, ``head0``: its first global head, ``cell``: bytes of one
    head of one token)."""
    if a.kv_heads:
        heads = a.kv_heads // tp
        cell = a.head_dim * 2   # bf16
        item = a.page_tokens * heads * cell
        return {"regions": [(item, a.slots)] * (2 * a.kv_layers), "aux": (AUX_ITEM, a.requests),
                "heads": heads, "head0": rank * heads, "cell": cell, "total_heads": a.kv_heads}
    kv_item = a.page_tokens * KV_TOKEN_BYTES
    idx_item = a.page_tokens * INDEX_TOKEN_BYTES[a.index_dtype]
    idx_slots = a.slots if a.index_k == "tokens" else (a.slots * kv_item) // idx_item
    regions = [(kv_item, a.slots)] * a.kv_layers + [(idx_item, idx_slots)] * a.index_layers
    return {"regions": regions, "aux": (AUX_ITEM, a.requests)}


def stage_regions(a, geom) -> list[int]:
    """The global region indices this process holds: all of them, or as a pipeline stage
    (``--prefill-pp`` / ``--decode-pp``), stage ``a.pp_rank``'s share of the kv and of the
    index-K regions."""
    pp = stages(a)
    if pp == 1:
        return list(range(len(geom["regions"])))
    kv_per, idx_per = a.kv_layers // pp, a.index_layers // pp
    k = a.pp_rank
    return (list(range(k * kv_per, (k + 1) * kv_per))
            + [a.kv_layers + j for j in range(k * idx_per, (k + 1) * idx_per)])


def stages(a) -> int:
    """Pipeline stages of this process's side."""
    return a.prefill_pp if a.role == "prefill" else a.decode_pp


def layer_ids(a, regions: list[int]) -> list[int]:
    """The model layer of each held region, per group (kv regions, then index-K regions):
    what SGLang pairs prefill and decode entries by (``kv_layer_ids``); none with
    ``--layer-ids none`` (a plain MLA pool reports none: SGLang pairs by position, and a
    pipeline stage's entries by its ``prefill_start_layer``)."""
    if a.layer_ids == "none":
        return []
    return [g if g < a.kv_layers else g - a.kv_layers for g in regions]


def workload(a) -> list[dict]:
    """Requests: room, pages on each side, chunks. Prefill and decode take pages from
    their own free lists (different orders), so the page maps differ per side."""
    rng = np.random.default_rng(a.seed)
    reqs, room0 = [], 1000
    for i in range(a.requests):
        n = int(rng.integers(2, a.max_pages + 1))
        reqs.append({"room": room0 + i, "pages": n, "aux": i,
                     "chunks": 2 if (i % 2 and n > 2) else 1})
    if getattr(a, "paused_waves", None):
        # the two waves of a pair (2k, 2k+1) move requests of the same shapes, so a recorded
        # wave and its unrecorded twin move the same bytes in the same descriptors
        for i, r in enumerate(reqs):
            w, j = divmod(i, a.wave)
            if w % 2:
                twin = reqs[(w - 1) * a.wave + j]
                r["pages"], r["chunks"] = twin["pages"], twin["chunks"]
    return reqs


def wave_recorded(w: int) -> bool:
    """--paused-waves: whether wave ``w`` runs recorded. Pairs of waves (2k, 2k+1) move the
    same shapes (workload); which of the two goes first alternates with k (R U, U R, R U, ...),
    so an order effect within a pair cancels over the run."""
    return (w % 2 == 0) != ((w // 2) % 2 == 1)


def allocator(slots: int, seed: int):
    free = list(np.random.default_rng(seed).permutation(slots))

    def alloc(n):
        out = [int(free.pop(0)) for _ in range(n)]
        return np.asarray(out, dtype=np.int32)

    def release(pages):
        free.extend(int(p) for p in pages)
    return alloc, release


# ----------------------------------------------------------------- memory and stamps
class Pool:
    """One kv_data region: host bytes (what is stamped and verified) and, for VRAM, the
    CUDA tensor SGLang registers. DRAM: the host array is the region itself."""

    def __init__(self, nbytes: int, memory: str, gpu: int):
        self.host = np.zeros(nbytes, dtype=np.uint8)
        self.dev = None
        if memory == "vram":
            import torch
            self.dev = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{gpu}")

    @property
    def ptr(self) -> int:
        return self.dev.data_ptr() if self.dev is not None else self.host.ctypes.data

    @property
    def nbytes(self) -> int:
        return self.host.nbytes

    def push(self, lo: int = 0, hi: int | None = None) -> None:
        """Host bytes [lo, hi) into the pool (VRAM: a copy onto the GPU)."""
        if self.dev is not None:
            import torch
            hi = self.nbytes if hi is None else hi
            self.dev[lo:hi].copy_(torch.from_numpy(self.host[lo:hi]))

    def pull(self) -> None:
        """The pool's bytes into the host copy (VRAM: read back through torch)."""
        if self.dev is not None:
            self.host[:] = self.dev.cpu().numpy()


def sync(memory: str) -> None:
    """Writes to VRAM pools finish before the connector reads them."""
    if memory == "vram":
        import torch
        torch.cuda.synchronize()


def make_regions(geom, memory: str = "dram", gpu: int = 0,
                 held: list[int] | None = None) -> tuple[list[Pool], list[np.ndarray]]:
    """The pools of ``geom``'s regions (``held``: their global region indices, which the
    stamps name), stamped "never written"."""
    kv = [Pool(item * n, memory, gpu) for item, n in geom["regions"]]
    aux = [np.zeros(geom["aux"][0] * geom["aux"][1], dtype=np.uint8)]
    held = held if held is not None else list(range(len(kv)))
    for r, pool, (item, n) in zip(held, kv, geom["regions"]):
        if "heads" in geom:
            stamp_cells(pool.host, geom, item, np.arange(n), MAGIC_UNWRITTEN, -1, r, np.arange(n))
        else:
            for s in range(n):
                stamp(pool.host, item, s, MAGIC_UNWRITTEN, -1, r, s)
        pool.push()
    sync(memory)
    return kv, aux


def stamp(buf, item, slot, magic, room, region, page) -> None:
    """Stamp one slot: 16 bytes saying whose it is, then bytes that depend on them (a real
    producer fills the whole slot; the checksums cover all of it)."""
    row = np.array([(magic, room, region, page)], dtype=STAMP).view(np.uint8)
    head = min(item, 256)
    buf[slot * item: slot * item + head] = np.resize(row, head)
    buf[slot * item + head: (slot + 1) * item: 4093] = (room + region * 7 + page * 13) % 251


def stamp_cells(buf, geom, item, slots, magic, room, region, pages) -> None:
    """MHA: stamp every (token, head) cell of ``slots`` (page ``pages[i]`` in slot
    ``slots[i]``): 24 bytes saying whose cell it is (the head global), then bytes that
    depend on them, so a cell from another token, head or page reads differently."""
    slots, pages = np.asarray(slots, dtype=np.int64), np.asarray(pages, dtype=np.int64)
    t_n, h_n, cell = item // (geom["heads"] * geom["cell"]), geom["heads"], geom["cell"]
    st = np.zeros((len(slots), t_n, h_n), dtype=CELL)
    st["magic"], st["room"], st["region"] = magic, room, region
    st["page"] = pages[:, None, None]
    st["token"] = np.arange(t_n)[None, :, None]
    st["head"] = geom["head0"] + np.arange(h_n)[None, None, :]
    view = buf.reshape(-1, item)[slots].reshape(len(slots), t_n, h_n, cell)
    view[..., :CELL.itemsize] = st.view(np.uint8).reshape(len(slots), t_n, h_n, CELL.itemsize)
    fill = (room + region * 7 + st["page"] * 13 + st["token"] * 17 + st["head"] * 19) % 251
    view[..., CELL.itemsize:] = fill[..., None].astype(np.uint8)
    buf.reshape(-1, item)[slots] = view.reshape(len(slots), item)


def check_cells(buf, geom, item, slot, room, region, page) -> list[tuple]:
    """MHA: the cells of ``slot`` that do not hold (room, region, page, token, head), as
    (token, head, what it holds) - every head of every token, content bytes included."""
    t_n, h_n, cell = item // (geom["heads"] * geom["cell"]), geom["heads"], geom["cell"]
    got = buf[slot * item:(slot + 1) * item].reshape(t_n, h_n, cell)
    want = np.zeros_like(got)
    stamp_cells(want.reshape(-1), geom, item, [0], MAGIC_WRITTEN, room, region, [page])
    bad = []
    for t, h in zip(*np.nonzero((got != want).any(axis=-1))):
        st = got[t, h, :CELL.itemsize].copy().view(CELL)[0]
        bad.append((int(t), geom["head0"] + int(h), tuple(int(x) for x in st)))
    return bad


def read_stamp(buf, item, slot) -> tuple:
    s = buf[slot * item: slot * item + STAMP.itemsize].view(STAMP)[0]
    return int(s["magic"]), int(s["room"]), int(s["region"]), int(s["page"])


# ----------------------------------------------------------------- SGLang set-up
def sglang_version() -> str:
    from sglang.version import __version__
    return __version__


class StageGroup:
    """The pipeline group a launcher's torch.distributed gives SGLang's stages, as far as the
    connector uses it: 0.5.23's prefill stages agree on request status through a store on
    stage 0 (``PPConsensusStore``), whose address stage 0 broadcasts to the others
    (``broadcast_object``). Here the stages of one run meet in a file named by the run."""

    def __init__(self, run: str, rank: int):
        self.path = self.file(run)
        self.rank_in_group = rank

    @staticmethod
    def file(run: str) -> str:
        import tempfile
        return os.path.join(tempfile.gettempdir(), f"sglang_pd-stages-{run}.json")

    @classmethod
    def clear(cls, run: str) -> None:
        """Before and after a run's stages (the launcher): no stage reads another run's address."""
        try:
            os.remove(cls.file(run))
        except FileNotFoundError:
            pass

    def broadcast_object(self, obj, src: int = 0, timeout: float = 60.0):
        if self.rank_in_group == src:
            with open(self.path + ".tmp", "w") as f:
                json.dump(obj, f)
            os.replace(self.path + ".tmp", self.path)   # others never read half a file
            return obj
        t_end = time.monotonic() + timeout
        while not os.path.exists(self.path):
            if time.monotonic() > t_end:
                raise TimeoutError(f"pipeline stage {self.rank_in_group}: stage {src} never broadcast")
            time.sleep(0.01)
        with open(self.path) as f:
            got = json.load(f)
        return tuple(got) if isinstance(got, list) else got


def configure(mode: str, port: int, device: str = "cpu", tp: int = 1, rank: int = 0, pp: int = 1, pp_rank: int = 0):
    """What a launcher publishes: server args (device, NIXL, loopback) and parallel ranks
    (``tp`` > 1: this process is attention-TP rank ``rank`` of ``tp``; ``pp`` > 1: pipeline
    stage ``pp_rank`` of ``pp``)."""
    from sglang.srt.runtime_context import get_context, get_parallel
    get_context().override_server_args(
        device=device, host="127.0.0.1", disaggregation_bootstrap_port=port,
        disaggregation_transfer_backend="nixl", disaggregation_mode=mode).install()
    ranks = dict(attn_tp_rank=0, attn_cp_rank=0, attn_dcp_rank=0, attn_dp_rank=0, dp_rank=0,
                 pp_rank=0, tp_rank=0, pp_group=StageGroup(f"{mode}-{port}", pp_rank) if pp > 1 else None)
    if tp > 1:
        ranks.update(tp_size=tp, attn_tp_size=tp, moe_tp_size=tp, tp_rank=rank, attn_tp_rank=rank)
    if pp > 1:
        ranks.update(pp_size=pp, pp_rank=pp_rank)
    par = get_parallel()
    from sglang.srt import runtime_context as rc
    fields = rc._parallel_fields()
    par.override_permanently(**{k: v for k, v in ranks.items() if k in fields})
    return get_context().server_args


def kv_args(kv, aux, geom, page_tokens, memory="dram", gpu=0, rank=0, ids=None, pp_rank=0, start_layer=0):
    """What prefill.py/decode.py's ``_init_kv_manager`` fills (MHA: the rank's head count and
    the model's total, no layer ids: a plain ``MHATokenToKVPool`` reports none)."""
    from sglang.srt.disaggregation.base.conn import KVArgs
    a = KVArgs()
    a.engine_rank = rank
    a.pp_rank = pp_rank
    a.system_dp_rank = 0
    a.rust_http_port = None
    a.kv_data_ptrs = [b.ptr for b in kv]
    a.kv_data_lens = [b.nbytes for b in kv]
    a.kv_item_lens = [item for item, _ in geom["regions"]]
    a.kv_layer_ids = [] if "heads" in geom else list(ids if ids is not None else range(len(kv)))
    a.kv_data_mem_kinds = ["VRAM" if memory == "vram" else "DRAM"] * len(kv)
    a.kv_cache_dtype_str = "bfloat16"
    a.num_draft_entries = 0
    a.prefill_start_layer = start_layer
    a.prefill_end_layer = start_layer + len(kv)   # (read only by tails this driver has none of)
    a.aux_data_ptrs = [b.ctypes.data for b in aux]
    a.aux_data_lens = [b.nbytes for b in aux]
    a.aux_item_lens = [geom["aux"][0]]
    a.state_types, a.state_data_ptrs, a.state_data_lens, a.state_item_lens = [], [], [], []
    a.state_layer_ids, a.state_dim_per_tensor, a.state_slice_outer_counts = [], [], []
    a.state_conv_shard_groups = []
    a.is_hybrid_mla_backend = False
    a.mla_compression_ratios = None   # a plain MLA pool (0.5.21 reads it when a stage sends into a whole decode)
    a.ib_device = None
    a.gpu_id = gpu
    a.kv_head_num = geom.get("heads", 1)
    a.total_kv_head_num = geom.get("total_heads", 1)
    a.page_size = page_tokens
    return a


def call_kw(fn, *args, **kw):
    """Call with the keywords this release's signature takes (they drift between releases)."""
    import inspect
    params = inspect.signature(fn).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kw = {k: v for k, v in kw.items() if k in params}
    return fn(*args, **kw)


def wait(objs, want, timeout, what):
    from sglang.srt.disaggregation.base.conn import KVPoll
    t_end = time.monotonic() + timeout
    pending, done = dict(objs), {}
    while pending:
        for k in list(pending):
            st = pending[k].poll()
            if st == getattr(KVPoll, want) or (want == "WaitingForInput" and st > KVPoll.WaitingForInput):
                pending.pop(k)
                done[k] = time.perf_counter()
            elif st == KVPoll.Failed:
                raise RuntimeError(f"{what}: room {k} failed")
        if time.monotonic() > t_end:
            raise TimeoutError(f"{what}: rooms {sorted(pending)} still waiting")
        if pending:
            time.sleep(0.0005)
    return done


# ----------------------------------------------------------------- the two sides
def run_prefill(a) -> int:
    geom = geometry(a, a.prefill_tp, a.rank)
    held = stage_regions(a, geom)   # global region indices (a pipeline stage holds a share)
    geom["regions"] = [geom["regions"][g] for g in held]
    configure("prefill", a.port, device(a), a.prefill_tp, a.rank, a.prefill_pp, a.pp_rank)
    from sglang.srt.disaggregation.nixl.conn import NixlKVBootstrapServer, NixlKVManager, NixlKVSender
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.runtime_context import get_context
    kv, aux = make_regions(geom, a.memory, a.gpu, held)
    if a.rank == 0 and a.pp_rank == 0:  # one bootstrap server per prefill instance; every rank registers with it
        call_kw(NixlKVBootstrapServer, host="127.0.0.1", port=a.port)
    else:
        wait_listening(a.port, a.timeout)
    start = a.pp_rank * (a.kv_layers // a.prefill_pp)
    mgr = NixlKVManager(kv_args(kv, aux, geom, a.page_tokens, a.memory, a.gpu, a.rank, layer_ids(a, held),
                                a.pp_rank, start), DisaggregationMode.PREFILL,
                        get_context().server_args, not a.kv_heads)
    alloc, release = allocator(geom["regions"][0][1], a.seed + 1)
    addr = f"127.0.0.1:{a.port}"
    # per wave too: the first wave also pays one-time costs (kernel compilation, connections)
    timing = {"latency_s": [], "busy_s": 0.0, "bytes": 0, "wave_busy_s": [], "wave_bytes": []}
    cpu0 = time.process_time()   # this process's CPU (all threads) over the waves: start-up left out
    timing["wave_recorded"] = []
    # --paused-waves: waves 2k and 2k+1 are twins (same request shapes; bench/paused_waves.py compares them)
    timing["wave_twins"] = bool(a.paused_waves)
    for w, wave in enumerate(waves(workload(a), a.wave)):
        if a.paused_waves:
            set_recording(mgr, wave_recorded(w), a.paused_waves)
        timing["wave_recorded"].append(not a.paused_waves or wave_recorded(w))
        senders, pages = {}, {}
        for r in wave:
            senders[r["room"]] = call_kw(NixlKVSender, mgr=mgr, bootstrap_addr=addr, bootstrap_room=r["room"],
                                         dest_tp_ranks=[0], pp_rank=a.pp_rank)
        wait(senders, "WaitingForInput", a.timeout, "prefill bootstrap")
        for r in wave:
            s = senders[r["room"]]
            p = pages[r["room"]] = alloc(r["pages"])
            for reg, pool, (item, _) in zip(held, kv, geom["regions"]):
                if a.kv_heads:  # this rank's heads of every token of every page
                    stamp_cells(pool.host, geom, item, p, MAGIC_WRITTEN, r["room"], reg, np.arange(len(p)))
                for g, slot in enumerate(p):  # the forward pass fills the request's pages
                    if not a.kv_heads:
                        stamp(pool.host, item, slot, MAGIC_WRITTEN, r["room"], reg, g)
                    pool.push(int(slot) * item, (int(slot) + 1) * item)
            aux[0][r["aux"] * AUX_ITEM:(r["aux"] + 1) * AUX_ITEM] = r["room"] % 251
        sync(a.memory)
        t0, started, nbytes = time.perf_counter(), {}, 0
        for r in wave:  # what the timing measures: queueing the chunks until SGLang says Success
            s = senders[r["room"]]
            started[r["room"]] = time.perf_counter()
            s.init(len(pages[r["room"]]), r["aux"])
            for chunk in np.array_split(pages[r["room"]], r["chunks"]):
                s.send(chunk)
            nbytes += len(pages[r["room"]]) * sum(item for item, _ in geom["regions"])
        done = wait(senders, "Success", a.timeout, "prefill transfer")
        timing["busy_s"] += max(done.values()) - t0
        timing["bytes"] += nbytes
        timing["wave_busy_s"].append(max(done.values()) - t0)
        timing["wave_bytes"].append(nbytes)
        timing["latency_s"] += [done[k] - started[k] for k in started]
        for r in wave:
            senders[r["room"]].clear()
            release(pages[r["room"]])
    timing["loop_cpu_s"] = time.process_time() - cpu0
    print(f"prefill: {len(workload(a))} requests sent", flush=True)
    time.sleep(a.linger)   # still serving: a trigger from decode reaches this process's ring
    if a.report:
        with open(a.report + ".prefill" + (str(a.rank) if a.rank else "") + (f"pp{a.pp_rank}" if a.pp_rank else ""),
                  "w") as f:
            json.dump({"version": sglang_version(), "timing": timing}, f)
    # the bootstrap thread is not a daemon: leave as a killed scheduler would, after the
    # interpreter's exit handlers (atexit) have run
    import atexit
    sys.stdout.flush()
    atexit._run_exitfuncs()
    os._exit(0)


def run_decode(a) -> int:
    geom = geometry(a, a.decode_tp, a.rank)
    held = stage_regions(a, geom)   # global region indices (a pipeline stage holds a share)
    geom["regions"] = [geom["regions"][g] for g in held]
    configure("decode", a.port, device(a), a.decode_tp, a.rank, a.decode_pp, a.pp_rank)
    from sglang.srt.disaggregation.nixl.conn import NixlKVManager, NixlKVReceiver
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.runtime_context import get_context
    kv = [Pool(item * n, a.memory, a.gpu) for item, n in geom["regions"]]  # decode's own memory: zeros until written
    aux = [np.zeros(geom["aux"][0] * geom["aux"][1], dtype=np.uint8)]
    mgr = NixlKVManager(kv_args(kv, aux, geom, a.page_tokens, a.memory, a.gpu, a.rank, layer_ids(a, held),
                                a.pp_rank), DisaggregationMode.DECODE,
                        get_context().server_args, not a.kv_heads)
    addr = f"127.0.0.1:{a.port}"
    t_end = time.monotonic() + a.timeout
    while not mgr.try_ensure_parallel_info(addr):
        if time.monotonic() > t_end:
            raise TimeoutError("decode: prefill bootstrap server never answered")
        time.sleep(0.05)
    alloc, release = allocator(geom["regions"][0][1], a.seed + 2)
    report = {"version": sglang_version(), "memory": a.memory, "geometry": geom, "requests": [],
              "misaddressed": []}
    cpu0 = time.process_time()   # this process's CPU (all threads) over the waves: start-up left out
    for w, wave in enumerate(waves(workload(a), a.wave)):
        if a.paused_waves:   # the same waves as prefill's
            set_recording(mgr, wave_recorded(w), a.paused_waves)
        recvs, pages = {}, {}
        for r in wave:
            rv = recvs[r["room"]] = call_kw(NixlKVReceiver, mgr=mgr, bootstrap_addr=addr,
                                            bootstrap_room=r["room"])
            if hasattr(rv, "init"):
                rv.init(0)
            p = pages[r["room"]] = alloc(r["pages"])
            rv.send_metadata(p, r["aux"], None)
        wait(recvs, "Success", a.timeout, "decode transfer")
        for pool in kv:  # VRAM: what NIXL delivered, read back through torch
            pool.pull()
        for r in wave:  # the verifier: whose bytes does each destination page hold?
            p = pages[r["room"]]
            report["requests"].append({"room": r["room"], "pages": [int(x) for x in p]})
            for reg, pool, (item, _) in zip(held, kv, geom["regions"]):
                for g, slot in enumerate(p):
                    if a.kv_heads:  # every head slice of every token of the page
                        bad = check_cells(pool.host, geom, item, int(slot), r["room"], reg, g)
                        if bad:
                            report["misaddressed"].append({
                                "room": r["room"], "region": reg, "page": g, "slot": int(slot),
                                "holds": f"token {bad[0][0]} head {bad[0][1]}: " + describe(bad[0][2]),
                                "cells": len(bad), "heads": sorted({h for _, h, _ in bad})})
                        continue
                    got = read_stamp(pool.host, item, int(slot))
                    if got != (MAGIC_WRITTEN, r["room"], reg, g):
                        report["misaddressed"].append({
                            "room": r["room"], "region": reg, "page": g, "slot": int(slot),
                            "holds": describe(got)})
            recvs[r["room"]].clear()
            release(p)
    report["loop_cpu_s"] = time.process_time() - cpu0
    if a.decode_tp > 1 or a.decode_pp > 1:  # which NIXL agent this rank's pages belong to (the merged report names it)
        name = mgr.agent.name
        report["agent"] = name.decode() if isinstance(name, bytes) else str(name)
    bad = report["misaddressed"]
    print(f"decode: {len(report['requests'])} requests received, {len(bad)} misaddressed page(s)", flush=True)
    if a.ring_trigger:  # the engine hook: dump the session's ring recording (kvtrace record --ring)
        from kvtrace.tracer import ring
        report["ring_triggered"] = ring.trigger(a.ring_trigger)
    time.sleep(a.linger)
    if a.hold:  # a serving decode stays up: prefill ranks decode did not wait for (dummies) still connect
        sys.stdin.read()
    for m in bad[:8]:
        print(f"  room {m['room']} region {m['region']} page {m['page']} (slot {m['slot']}) holds {m['holds']}")
    if a.report:
        with open(a.report + (f".decode{a.rank}" if a.rank else "") + (f"pp{a.pp_rank}" if a.pp_rank else ""),
                  "w") as f:
            json.dump(report, f)
    import atexit
    sys.stdout.flush()
    atexit._run_exitfuncs()
    os._exit(0)


def describe(st) -> str:
    """A stamp (MHA: a cell's, with its token and head) in words."""
    magic, room, region, page = st[:4]
    cell = f" token {st[4]} head {st[5]}" if len(st) > 4 else ""
    if magic == MAGIC_WRITTEN:
        return f"room {room} region {region} page {page}{cell}"
    if magic == MAGIC_UNWRITTEN:
        return f"never-written region {region} slot {page}{cell}"
    return "zeros (nothing arrived)" if not any(st) else f"unknown bytes {st}"


def device(a) -> str:
    """The device SGLang's server args name (its connector sets it current before NIXL starts)."""
    return "cuda" if a.memory == "vram" else "cpu"


def cuda_missing(gpu: int) -> str | None:
    """Why VRAM pools cannot be made here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    if gpu >= torch.cuda.device_count():
        return f"GPU {gpu} does not exist ({torch.cuda.device_count()} visible)"
    return None


def wait_listening(port: int, timeout: float) -> None:
    """Until prefill rank 0's bootstrap server accepts connections (the other ranks register with it)."""
    t_end = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > t_end:
                raise TimeoutError(f"prefill: bootstrap server on port {port} never listened")
            time.sleep(0.05)


def merge_decode_reports(path: str, tp: int, suffix: str = ".decode", key: str = "rank") -> None:
    """Decode TP > 1 (or pipeline stages: ``suffix`` "pp", ``key`` "stage"): rank 0's report
    gets every rank's verifier results (``key`` and the rank's NIXL ``agent`` on each request
    and misaddressed page) and ``ranks``."""
    reports = []
    for r in range(tp):
        with open(path + (f"{suffix}{r}" if r else "")) as f:
            reports.append(json.load(f))
    merged = dict(reports[0], requests=[], misaddressed=[], ranks=tp)
    merged.pop("agent")
    for r, rep in enumerate(reports):
        merged["requests"] += [dict(x, **{key: r}, agent=rep["agent"]) for x in rep["requests"]]
        merged["misaddressed"] += [dict(x, **{key: r}, agent=rep["agent"]) for x in rep["misaddressed"]]
    with open(path, "w") as f:
        json.dump(merged, f)


def set_recording(mgr, on: bool, parts: str = "all") -> None:
    """--paused-waves: switch this process's recording off (``on`` False) or back on between
    waves, an A/B of what recording costs inside one process (same NIXL agents, connections
    and buffers, so none of the run-to-run spread of two processes): kvtrace's NIXL tap is
    taken out of SGLang's agent (its binding called directly, as unrecorded) and the
    connector hooks see no recorder. Left in place: the hook wrappers' own call and the
    recorder's idle flush thread, so a paused wave costs a little more than an unrecorded
    run (the A/B understates recording's cost by that much)."""
    from kvtrace.tracer.integrations import sglang as hooks
    agent = mgr.agent
    tap = mgr.__dict__.setdefault("_kvtrace_tap", agent.agent)
    if not hasattr(tap, "_inner"):
        return   # not recorded: nothing to pause
    orig = mgr.__dict__.setdefault("_kvtrace_default_recorder", hooks.default_recorder)
    if parts in ("all", "tap"):
        agent.agent = tap if on else tap._inner
    if parts in ("all", "hooks"):
        hooks.default_recorder = orig if on else (lambda: None)


def waves(reqs, n):
    return [reqs[i:i + n] for i in range(0, len(reqs), n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", choices=("both", "prefill", "decode"), default="both")
    p.add_argument("--index-k", choices=("tokens", "bytes"), default="bytes")
    p.add_argument("--index-dtype", choices=tuple(INDEX_TOKEN_BYTES), default="bf16")
    p.add_argument("--kv-layers", type=int, default=2)
    p.add_argument("--kv-heads", type=int, default=0,
                   help="MHA pools with this many KV heads in all, split over each side's attention-TP "
                        "ranks (0: MLA pools)")
    p.add_argument("--head-dim", type=int, default=64, help="MHA: the head dimension (bf16: 2 bytes each)")
    p.add_argument("--index-layers", type=int, default=2)
    p.add_argument("--slots", type=int, default=32, help="kv pages per region")
    p.add_argument("--page-tokens", type=int, default=4)
    p.add_argument("--requests", type=int, default=6)
    p.add_argument("--max-pages", type=int, default=5)
    p.add_argument("--wave", type=int, default=3, help="requests in flight together")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--report", help="write the verifier's findings (JSON) here")
    p.add_argument("--memory", choices=("dram", "vram"), default="dram",
                   help="where the kv and index-K pools live (vram: CUDA tensors, NIXL VRAM)")
    p.add_argument("--gpu", type=int, default=0, help="the GPU of VRAM pools")
    p.add_argument("--ring-trigger", metavar="REASON",
                   help="decode, after its verifier: kvtrace.tracer.ring.trigger(REASON) (under --ring)")
    p.add_argument("--paused-waves", nargs="?", const="all", choices=("all", "tap", "hooks"),
                   help="under kvtrace record: one wave of each pair unrecorded in both processes, the pair's two "
                        "waves moving requests of the same shapes (an in-process A/B of recording's cost; the "
                        "report's timing.wave_recorded says which); tap / hooks: "
                        "pause only kvtrace's NIXL tap or only the connector hooks")
    p.add_argument("--linger", type=float, default=0.0, help="seconds each side stays up after its work")
    p.add_argument("--prefill-tp", type=int, default=1,
                   help="prefill attention-TP size: one process (own NIXL agent) per rank")
    p.add_argument("--decode-tp", type=int, default=1,
                   help="decode attention-TP size: one process (own NIXL agent) per rank")
    p.add_argument("--prefill-pp", type=int, default=1,
                   help="prefill pipeline stages: one process (own NIXL agent) per stage, each with its share "
                        "of the layers (decode holds them all)")
    p.add_argument("--decode-pp", type=int, default=1,
                   help="decode pipeline stages (1, or --prefill-pp's): one process per stage")
    p.add_argument("--layer-ids", choices=("model", "none"), default="model",
                   help="MLA: give SGLang each entry's model layer (kv_layer_ids, as a hybrid pool does) "
                        "or none (as a plain MLA pool does)")
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)  # set by --role both
    p.add_argument("--pp-rank", type=int, default=0, help=argparse.SUPPRESS)  # set by --role both
    p.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)  # decode: exit at stdin's EOF
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    os.environ.setdefault("SGLANG_HOST_IP", "127.0.0.1")
    for tp in (a.prefill_tp, a.decode_tp):
        if a.kv_heads and (a.kv_heads % tp or a.kv_heads < tp):
            print(f"sglang_pd: --kv-heads {a.kv_heads} does not split over attention TP {tp}", file=sys.stderr)
            return 2
    if a.kv_heads and a.head_dim * 2 < CELL.itemsize:
        print(f"sglang_pd: --head-dim {a.head_dim} is too small for a cell stamp ({CELL.itemsize} B)",
              file=sys.stderr)
        return 2
    if a.decode_pp not in (1, a.prefill_pp):
        print(f"sglang_pd: --decode-pp {a.decode_pp} must be 1 or --prefill-pp's ({a.prefill_pp})", file=sys.stderr)
        return 2
    if a.prefill_pp > 1 and (a.kv_heads or a.prefill_tp > 1 or a.decode_tp > 1
                             or a.kv_layers % a.prefill_pp or a.index_layers % a.prefill_pp):
        print(f"sglang_pd: --prefill-pp {a.prefill_pp} needs MLA pools, TP 1 on both sides and kv and index-K "
              "layer counts it divides", file=sys.stderr)
        return 2
    if a.memory == "vram" and (why := cuda_missing(a.gpu)):
        print(f"sglang_pd: --memory vram needs a CUDA GPU: {why}", file=sys.stderr)
        return 2
    if a.role == "prefill":
        return run_prefill(a)
    if a.role == "decode":
        return run_decode(a)
    port = a.port or free_port()
    base = [sys.executable, os.path.abspath(__file__)] + [x for x in (argv or sys.argv[1:])
                                                          if x not in ("--role", "both")]
    # hetero TP: decode waits only for the prefill ranks it reads from; it stays up (until
    # every prefill rank has exited) as a serving decode would, so the others can connect
    hetero = a.prefill_tp != a.decode_tp
    procs = {"prefill": [], "decode": []}
    for mode in ("prefill", "decode"):
        StageGroup.clear(f"{mode}-{port}")
    for role, tp in (("prefill", a.prefill_tp), ("decode", a.decode_tp)):
        for r in range(tp):
            for k in range(a.prefill_pp if role == "prefill" else a.decode_pp):
                hold = hetero and role == "decode"
                procs[role].append(subprocess.Popen(
                    base + ["--role", role, "--port", str(port)] + (["--rank", str(r)] if tp > 1 else [])
                    + (["--pp-rank", str(k)] if k else [])
                    + (["--hold"] if hold else []), stdin=subprocess.PIPE if hold else None))
    rcs = [p.wait() for p in procs["prefill"]]
    for p in procs["decode"]:
        if p.stdin is not None:
            p.stdin.close()
    rcs += [p.wait() for p in procs["decode"]]
    for mode in ("prefill", "decode"):
        StageGroup.clear(f"{mode}-{port}")
    if a.report and a.decode_tp > 1 and max(rcs) == 0:
        merge_decode_reports(a.report, a.decode_tp)
    if a.report and a.decode_pp > 1 and max(rcs) == 0:
        merge_decode_reports(a.report, a.decode_pp, "pp", "stage")
    return max(rcs)


if __name__ == "__main__":
    sys.exit(main())
