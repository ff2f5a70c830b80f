"""Play vLLM's scheduler around its real NIXL connector (0.34, pull mode): prefill and
decode as two OS processes running ``NixlConnector``'s scheduler and worker halves over
real NIXL (UCX, DRAM) and vLLM's own side channel. No kvtrace code here: record it with
``kvtrace record --hooks vllm -- ...``.

Prefill, per request: allocate blocks, stamp every (layer, block) with who wrote it,
``update_state_after_alloc`` / ``request_finished`` / ``build_connector_meta`` (the
scheduler half) and ``start_load_kv`` + ``get_transfer_results`` (the worker half) until vLLM says
the blocks may be freed (decode's notification, or the lease expired), then free them.
Decode, per request: ``add_new_req_to_recv`` with the prefill's kv_transfer_params,
``start_load_kv``, ``get_finished`` until received; the verifier then says which decode
blocks hold whose bytes. ``--decode-delay S`` makes decode wait before reading (with a
short ``--lease`` prefill's blocks are freed and reused first: vllm #52234's shape).
``--kv-layout`` picks how each layer's cache is laid out in memory (what vLLM registers):
``packed`` (K and V inside each block: one region per layer), ``split`` (all K blocks,
then all V blocks: two regions per layer) or ``mla`` (one latent vector per token, a
DeepSeek-style model: one region per layer).
``--prefill-tp N --decode-tp M`` runs each engine tensor-parallel: every TP rank is an OS
process of its own with its own NIXL agent and vLLM's parallel state (world size N or M,
gloo over TCP), as vLLM's ``external_launcher`` executor runs one engine per rank: each
rank's scheduler half sees the same requests and hands out the same blocks; the side channel
is served once (rank 0's scheduler, with every rank's handshake metadata, as vLLM's engine
core serves its workers'). vLLM's own handshake and TP mapping decide who reads what: with
decode TP > prefill TP each decode rank READs its heads out of a prefill rank's blocks, with
prefill TP > decode TP a decode rank READs from several prefill ranks. Caches are shaped as
vLLM's CPU attention backend shapes them (heads outermost inside a block) and every head
slice is stamped, so the verifier catches a slice read from the wrong head, block or request.
``--memory vram`` puts every layer's cache on the GPU (``--gpu N``): CUDA tensors that
vLLM's own ``register_kv_caches`` registers with NIXL as VRAM (``kv_buffer_device``
cuda, vLLM's CUDA platform); the stamps are written and read back through torch.

    python tests/engines/vllm_pd.py --report out.json
    python tests/engines/vllm_pd.py --memory vram --report out.json
    python tests/engines/vllm_pd.py --prefill-tp 1 --decode-tp 2 --report out.json
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from free_ports import free_port, free_port_run

_SETUP = threading.Lock()
STAMP = np.dtype([("magic", "<u4"), ("req", "<i4"), ("layer", "<i4"), ("block", "<i4")])
HEAD_STAMP = np.dtype(STAMP.descr + [("head", "<i4")])  # tensor-parallel runs: one per head slice
MAGIC_WRITTEN, MAGIC_UNWRITTEN = 0x4B565752, 0x4B56554E


def fits(a) -> None:
    """Process-wide settings a run needs (REAL_ENGINES.md): before vLLM is imported. DRAM:
    vLLM's CPU platform, no GPU visible; VRAM: its CUDA platform."""
    if a.memory == "vram":
        os.environ["VLLM_TARGET_DEVICE"] = "cuda"
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    os.environ["VLLM_NIXL_SIDE_CHANNEL_HOST"] = "127.0.0.1"
    os.environ["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(a.side_port)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def model_dir(a) -> str:
    d = os.path.join(a.xchg, "model")  # one path for both sides: it is part of vLLM's compatibility hash
    os.makedirs(d, exist_ok=True)
    # query heads: the KV heads, times the group size that lets every TP size divide them (vLLM
    # requires it; a TP size above the KV heads then replicates KV heads over ranks, as GQA does)
    q_heads = a.heads * max(1, max(a.prefill_tp, a.decode_tp) // a.heads)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": q_heads * a.head_size,
           "num_attention_heads": q_heads, "num_key_value_heads": a.heads, "num_hidden_layers": a.layers,
           "intermediate_size": 64, "vocab_size": 256, "max_position_embeddings": 4096,
           "torch_dtype": "float32", "rms_norm_eps": 1e-5, "head_dim": a.head_size}
    if a.kv_layout == "mla":  # latent width = kv_lora_rank + qk_rope_head_dim = head_size
        cfg.update({"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
                    "kv_lora_rank": a.head_size - 8, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
                    "v_head_dim": 8, "q_lora_rank": None, "moe_intermediate_size": 64,
                    "n_routed_experts": 2, "num_experts_per_tok": 1, "n_shared_experts": 1,
                    "first_k_dense_replace": a.layers})
        cfg.pop("head_dim")
    path = os.path.join(d, "config.json")
    mine = f"{path}.{os.getpid()}.{threading.get_ident()}"  # every engine writes it (--role one-process: two threads)
    with open(mine, "w") as f:  # whole, or not at all: another engine may be reading it
        json.dump(cfg, f)
    os.replace(mine, path)
    return d


def configs(a, role: str, engine_id: str):
    import torch
    from vllm.config import CacheConfig, KVTransferConfig, ModelConfig, ParallelConfig, VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
    extra = {"kv_lease_duration": a.lease} if a.lease else {}
    if a.nixl_backend != "UCX":
        extra["backends"] = [a.nixl_backend]
    mc = ModelConfig(model=model_dir(a), skip_tokenizer_init=True, dtype="float32", max_model_len=1024)
    cc = CacheConfig(block_size=a.block_size)
    kt = KVTransferConfig(kv_connector="NixlConnector", kv_role=role,
                          kv_buffer_device="cuda" if a.memory == "vram" else "cpu",
                          engine_id=engine_id, kv_connector_extra_config=extra)
    tp = tp_size(a, role)
    # one engine per TP rank, in the rank's own process (vLLM's external_launcher executor)
    pc = ParallelConfig(tensor_parallel_size=tp, distributed_executor_backend="external_launcher") if tp > 1 \
        else ParallelConfig()
    cfg = VllmConfig(model_config=mc, cache_config=cc, kv_transfer_config=kt, parallel_config=pc)
    # each rank's KV heads (what vLLM's spec and cache hold): its share, or one replicated head
    # when the engine has more ranks than the model has KV heads
    a.rank_heads = max(1, a.heads // tp)
    a.first_head = a.rank * a.heads // tp
    cfg.cache_config.kv_cache_layout = "LBHNC"  # what the engine core resolves for the connector
    if a.kv_layout == "mla":
        a.kernel_block = kernel_block_size(a, cfg)
        if not a.kernel_blocks:
            a.block_size = cfg.cache_config.block_size = a.kernel_block
    names = [f"model.layers.{i}.self_attn.attn" for i in range(a.layers)]
    if a.kv_layout == "mla":
        from vllm.v1.kv_cache_interface import MLAAttentionSpec
        spec = MLAAttentionSpec(block_size=a.block_size, num_kv_heads=1, head_size=a.head_size, dtype=torch.float32)
    else:
        spec = FullAttentionSpec(block_size=a.block_size, num_kv_heads=a.rank_heads, head_size=a.head_size,
                                 dtype=torch.float32)
    page = spec.page_size_bytes
    tensors = [KVCacheTensor(size=page * a.blocks, layers=[n], layer_stride=page * a.blocks, block_stride=page)
               for n in names]
    kcc = KVCacheConfig(num_blocks=a.blocks, kv_cache_tensors=tensors,
                        kv_cache_groups=[KVCacheGroupSpec(names, spec)], kv_cache_layout="LBHNC")
    return cfg, kcc, names, page


def kernel_block_size(a, cfg) -> int:
    """The block size this machine's MLA attention backend takes (vLLM asks the backend;
    CPU_MLA takes 16 tokens, AMX_MLA multiples of 32, chosen by the CPU's ISA). A larger
    block would be split by vLLM into kernel blocks the cache views here do not have, so
    the driver runs with the backend's size, as an engine configured for it would."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.selector import get_attn_backend
    from vllm.v1.worker.utils import select_common_block_size
    with set_current_vllm_config(cfg):
        backend = get_attn_backend(head_size=cfg.model_config.get_head_size(), dtype=cfg.model_config.dtype,
                                   kv_cache_dtype=cfg.cache_config.cache_dtype, use_mla=True)
    return select_common_block_size(a.block_size, [backend], [None])


def parallel_state(port: int, world: int = 1, rank: int = 0) -> None:
    from vllm.distributed.parallel_state import ensure_model_parallel_initialized, init_distributed_environment
    init_distributed_environment(world_size=world, rank=rank, local_rank=rank,
                                 distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo")
    ensure_model_parallel_initialized(world, 1)


def tp_size(a, role: str) -> int:
    """The engine's tensor-parallel size (``role``: vLLM's kv_role)."""
    return a.prefill_tp if role == "kv_producer" else a.decode_tp


def ranked(a) -> bool:
    """A tensor-parallel run (either engine TP > 1): per-rank processes and head-slice stamps."""
    return a.prefill_tp > 1 or a.decode_tp > 1


def tp_barrier() -> None:
    """The TP ranks of an engine meet, as their forward pass's all-reduce makes them: no rank's
    scheduler hands a request over before every rank has written its KV."""
    import torch.distributed as dist
    from vllm.distributed.parallel_state import get_tp_group
    dist.barrier(group=get_tp_group().cpu_group)


def gather_handshakes(a, meta):
    """Every prefill rank's handshake metadata, for rank 0's scheduler to serve (vLLM's engine
    core collects its workers' with a collective RPC); None on the other ranks."""
    mine = os.path.join(a.xchg, f"prefill-handshake.r{a.rank}.pkl")
    with open(mine + ".tmp", "wb") as f:
        pickle.dump(meta, f)
    os.replace(mine + ".tmp", mine)
    if a.rank != 0:
        return None
    out = {}
    for r in range(a.prefill_tp):
        path = os.path.join(a.xchg, f"prefill-handshake.r{r}.pkl")
        wait_file(path, a.timeout, load=False)
        with open(path, "rb") as f:
            out[(0, r)] = pickle.load(f)  # (pp, tp) rank
    return out


def connector(a, role: str, engine_id: str):
    """The scheduler and worker halves of vLLM's NixlConnector, with the cache registered."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector import NixlConnector
    cfg, kcc, names, page = configs(a, role, engine_id)
    if a.memory == "vram":
        torch.cuda.set_device(a.gpu)  # the engine's device: vLLM's CUDA platform binds NIXL to it
    with _SETUP, set_current_vllm_config(cfg):  # one engine at a time sets up vLLM's process-wide state
        parallel_state(a.dist_port if role == "kv_producer" else a.dist_port + 1, tp_size(a, role), a.rank)
        worker = NixlConnector(cfg, KVConnectorRole.WORKER, kcc)
        apart = role == "kv_producer" and a.prefill_scheduler == "process"
        sched = None if apart else NixlConnector(cfg, KVConnectorRole.SCHEDULER, kcc)
    raw = {n: Region(a.blocks * page, a.memory, a.gpu) for n in names}
    caches = {n: cache_view(a, raw[n].tensor) for n in names}
    worker.register_kv_caches(caches)
    meta = worker.get_handshake_metadata()
    if sched is None:
        sched = SchedulerProcess(a, meta)
    elif meta is not None and role == "kv_producer" and ranked(a):
        if (every := gather_handshakes(a, meta)) is not None:
            sched.set_xfer_handshake_metadata_pp_aware(every)
    elif meta is not None and role == "kv_producer":  # prefill serves the side channel; decode asks it
        sched.set_xfer_handshake_metadata_pp_aware({(0, 0): meta})  # (pp, tp) rank
    return cfg, worker, sched, raw, names, page


class Region:
    """One layer's cache bytes: the tensor vLLM registers and a host array the stamps are
    written to and read from. DRAM: the host array is the tensor's own memory; VRAM: a
    CUDA tensor, with ``push`` / ``pull`` copying byte ranges to and from it."""

    def __init__(self, nbytes: int, memory: str, gpu: int):
        import torch
        if memory == "vram":
            self.tensor = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{gpu}")
            self.host = np.zeros(nbytes, dtype=np.uint8)
        else:
            self.tensor = torch.zeros(nbytes, dtype=torch.uint8)
            self.host = self.tensor.numpy()
        self.vram = memory == "vram"

    def push(self, spans) -> None:
        """Host bytes of each (offset, length) onto the GPU, finished before returning (the
        forward pass's writes land before the connector reads them)."""
        if self.vram:
            import torch
            for off, n in spans:
                self.tensor[off:off + n].copy_(torch.from_numpy(self.host[off:off + n]))
            torch.cuda.synchronize(self.tensor.device)

    def pull(self, spans) -> None:
        """The GPU's bytes of each (offset, length) into the host array."""
        if self.vram:
            for off, n in spans:
                self.host[off:off + n] = self.tensor[off:off + n].cpu().numpy()


def cache_view(a, raw):
    """The layer's cache tensor over its bytes, as the attention backend would shape it."""
    import torch
    f = raw.view(torch.float32)
    if a.kv_layout == "mla":  # one latent vector per token, block-major, in the backend's kernel blocks
        k = getattr(a, "kernel_block", a.block_size)
        return f.view(a.blocks * (a.block_size // k), k, a.head_size)
    heads = getattr(a, "rank_heads", a.heads)
    if a.kv_layout == "split":  # every K block, then every V block; indexed [block, K/V, ...]
        return f.view(2, a.blocks, heads, a.block_size, a.head_size).permute(1, 0, 2, 3, 4)
    if ranked(a):  # vLLM's CPU attention backend: [blocks, heads, tokens, K|V], heads outermost in a block
        return f.view(a.blocks, heads, a.block_size, 2 * a.head_size)
    return f.view(a.blocks, 2, heads, a.block_size, a.head_size)  # K and V inside each block


def segments(a, page: int, block: int) -> list[tuple[int, int]]:
    """(offset, bytes) of the pieces of ``block`` in a layer's buffer: one, or K then V."""
    if a.kv_layout == "split":
        half = page // 2
        return [(block * half, half), (a.blocks * half + block * half, half)]
    return [(block * page, page)]


class SchedulerProcess:
    """Prefill's scheduler half in a process of its own, as with vLLM's multiprocess executor
    (the engine core schedules; the worker, its memory and its NIXL agent live elsewhere).
    The calls and the connector metadata go over a pipe."""

    def __init__(self, a, handshake):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=scheduler_main, args=(vars(a), child, handshake), daemon=True)
        self.proc.start()

    def _call(self, *msg):
        self.conn.send(msg)
        ok, out = self.conn.recv()
        if not ok:
            raise RuntimeError(f"prefill scheduler process: {out}")
        return out

    def update_state_after_alloc(self, req, _blocks, _n):
        return self._call("alloc", req.request_id, req.num_prompt_tokens, req.kv_transfer_params)

    def request_finished(self, req, blocks):
        return self._call("finish", req.request_id, list(blocks))

    def build_connector_meta(self, _out):
        return self._call("meta")

    def close(self):
        self.conn.send(("stop",))
        self.proc.join(30)


def scheduler_main(args: dict, conn, handshake) -> None:
    a = argparse.Namespace(**args)
    fits(a)
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector import NixlConnector
    cfg, kcc, _names, _page = configs(a, "kv_producer", "prefill")
    with set_current_vllm_config(cfg):
        parallel_state(a.dist_port + 3)
        sched = NixlConnector(cfg, KVConnectorRole.SCHEDULER, kcc)
    sched.set_xfer_handshake_metadata_pp_aware({(0, 0): handshake})
    reqs: dict[str, Req] = {}
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            break
        try:
            if msg[0] == "alloc":
                req = reqs[msg[1]] = Req(msg[1], msg[2], msg[3])
                out = sched.update_state_after_alloc(req, None, 0)
            elif msg[0] == "finish":
                out = sched.request_finished(reqs.pop(msg[1]), msg[2])
            else:
                out = sched.build_connector_meta(None)
            conn.send((True, out))
        except Exception as e:  # noqa: BLE001 - the driver's main process raises it
            conn.send((False, f"{type(e).__name__}: {e}"))
    sys.stdout.flush()
    sys.stderr.flush()
    import atexit
    atexit._run_exitfuncs()
    os._exit(0)


# ----------------------------------------------------------------- stamps
def head_slices(a, page: int, block: int) -> list[tuple[int, int, int, int]]:
    """(offset, bytes, part, head) of every KV head's slice of ``block`` on this rank (heads
    outermost inside a block, so each is contiguous); ``head`` is the model's (global) head.
    MLA's latent is one slice, replicated on every rank (head 0)."""
    heads = 1 if a.kv_layout == "mla" else a.rank_heads
    first = 0 if a.kv_layout == "mla" else a.first_head
    return [(off + j * (n // heads), n // heads, part, first + j)
            for part, (off, n) in enumerate(segments(a, page, block)) for j in range(heads)]


def stamp(a, buf, page, block, magic, req, layer) -> None:
    if ranked(a):  # a stamp per head slice: a slice read from the wrong rank or offset shows
        for off, n, part, head in head_slices(a, page, block):
            row = np.array([(magic, req, layer * 16 + part, block, head)], dtype=HEAD_STAMP).view(np.uint8)
            buf[off: off + min(n, 256)] = np.resize(row, min(n, 256))
            buf[off + 256: off + n: 509] = (req * 3 + layer * 7 + block * 13 + part + head * 5) % 251
        return
    for part, (off, n) in enumerate(segments(a, page, block)):
        row = np.array([(magic, req, layer * 16 + part, block)], dtype=STAMP).view(np.uint8)
        buf[off: off + min(n, 256)] = np.resize(row, min(n, 256))
        buf[off + 256: off + n: 509] = (req * 3 + layer * 7 + block * 13 + part) % 251


def read_stamps(a, buf, page, block) -> list[tuple]:
    out = []
    for off, _n in segments(a, page, block):
        s = buf[off: off + STAMP.itemsize].view(STAMP)[0]
        out.append((int(s["magic"]), int(s["req"]), int(s["layer"]), int(s["block"])))
    return out


def read_head_stamps(a, buf, page, block) -> list[tuple[int, int, tuple]]:
    """(part, head, stamp) of every head slice of ``block`` on this rank."""
    out = []
    for off, _n, part, head in head_slices(a, page, block):
        s = buf[off: off + HEAD_STAMP.itemsize].view(HEAD_STAMP)[0]
        out.append((part, head, tuple(int(s[k]) for k in HEAD_STAMP.names)))
    return out


def describe(st) -> str:
    magic, req, layer, block = st[:4]
    if magic == MAGIC_WRITTEN:
        return f"request {req} layer {layer // 16} part {layer % 16} block {block}" + \
            (f" head {st[4]}" if len(st) > 4 else "")
    return "zeros (nothing arrived)" if not any(st) else f"unknown bytes {st}"


def allocator(n: int, seed: int):
    free = [int(x) for x in np.random.default_rng(seed).permutation(n)]

    def alloc(k):
        return [free.pop(0) for _ in range(k)]

    def release(blocks):  # most recently freed first: what a prefix-less block pool hands out next
        free[:0] = list(blocks)
    return alloc, release


class Req:
    """The fields of vllm.v1.request.Request the connector's scheduler half reads."""

    def __init__(self, req_id: str, tokens: int, params: dict):
        from vllm.v1.request import RequestStatus
        self.request_id = req_id
        self.kv_transfer_params = params
        self.num_prompt_tokens = tokens
        self.num_computed_tokens = tokens
        self.prompt_token_ids = list(range(tokens))
        self.status = RequestStatus.FINISHED_LENGTH_CAPPED
        self.skip_reading_external_kv = False


def workload(a) -> list[dict]:
    rng = np.random.default_rng(a.seed)
    return [{"id": f"req-{i}", "num": i, "blocks": int(rng.integers(1, a.max_blocks + 1))}
            for i in range(a.requests)]


def wait_file(path, timeout, load: bool = True):
    t_end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > t_end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)
    if not load:
        return None
    with open(path) as f:
        return json.load(f)


def put_file(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


# ----------------------------------------------------------------- the two sides
def run_prefill(a):
    fits(a)
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata import NixlConnectorMetadata  # noqa: F401
    cfg, worker, sched, bufs, names, page = connector(a, "kv_producer", "prefill")
    alloc, release = allocator(a.blocks, a.seed + 1)
    did = {"requests": [], "vllm_stats": {}, "rank": a.rank}
    did.update(registered(worker))
    for r in workload(a):
        blocks = alloc(r["blocks"])
        for li, n in enumerate(names):  # the forward pass fills the request's blocks
            for b in blocks:
                stamp(a, bufs[n].host, page, b, MAGIC_WRITTEN, r["num"], li)
            bufs[n].push([s for b in blocks for s in segments(a, page, b)])
        if tp_size(a, "kv_producer") > 1:
            tp_barrier()
        req = Req(r["id"], r["blocks"] * a.block_size, {"do_remote_decode": True})
        sched.update_state_after_alloc(req, None, 0)
        step(worker, sched)
        _delay, params = sched.request_finished(req, blocks)
        step(worker, sched)
        if a.rank == 0:  # the engine's one answer to the proxy (every rank's scheduler computed the same)
            put_file(os.path.join(a.xchg, f"{r['num']}.json"), {"params": params, "blocks": r["blocks"]})
        t_end = time.monotonic() + a.timeout
        while True:  # the engine loop: blocks stay held until vLLM says they are sent (or expired)
            sent = worker.get_transfer_results(set()).finished_sending  # what vLLM's model runner calls
            tally(worker, did["vllm_stats"])
            if r["id"] in sent:
                break
            if time.monotonic() > t_end:
                raise TimeoutError(f"prefill: {r['id']} never finished sending")
            step(worker, sched)
            time.sleep(0.005)
        release(blocks)
        did["requests"].append({"id": r["id"], "blocks": blocks})
    print(f"prefill: {len(did['requests'])} requests sent", flush=True)
    # a server stays up: decode may still handshake and read (late reads are the fault mode)
    for d in range(a.decode_tp if ranked(a) else 1):
        wait_file(os.path.join(a.xchg, done_name(a, d)), a.timeout)
    for _ in range(20):  # take decode's last notifications, as the engine loop would
        worker.get_transfer_results(set())
        tally(worker, did["vllm_stats"])
        time.sleep(0.01)
    if isinstance(sched, SchedulerProcess):
        sched.close()
    vs = did["vllm_stats"]
    if ranked(a):  # requests vLLM released once every decode rank reading this rank had notified it
        did["read_by_all"] = len(did["requests"]) - vs.get("num_kv_expired_reqs", 0)
    else:  # notifications prefill took: one per read unless its lease had expired
        did["notifications"] = (len(did["requests"]) - vs.get("num_kv_expired_reqs", 0)
                                + vs.get("num_notifications_after_expiry", 0))
    if a.report:
        put_file(a.report + ".prefill" + rank_suffix(a), did)
    return worker


def rank_suffix(a) -> str:
    """A TP rank's own report file (merged by the launching process): '' without TP."""
    return f".rank{a.rank}" if ranked(a) else ""


def done_name(a, rank: int) -> str:
    return f"decode-done.r{rank}.json" if ranked(a) else "decode-done.json"


def registered(worker) -> dict:
    """What vLLM registered with NIXL: one region per (layer, piece), block b of region i at
    ``addr + b * block_stride``, ``block_len`` bytes (its own lists, read back for the tests)."""
    cw = worker.connector_worker
    return {"use_mla": bool(cw.use_mla), "agent": str(cw.nixl_wrapper.name, "utf-8")
            if isinstance(cw.nixl_wrapper.name, bytes) else str(cw.nixl_wrapper.name),
            "regions": [{"addr": int(x), "block_len": int(n), "block_stride": int(st), "blocks": int(c)}
                        for x, n, st, c in zip(cw.kv_caches_base_addr[cw.engine_id][cw.tp_rank],
                                               cw.block_len_per_layer, cw.block_stride_per_layer,
                                               cw.region_num_blocks)]}


def tally(worker, acc: dict) -> None:
    """vLLM's own transfer stats (what it says it did), summed over the run."""
    st = worker.get_kv_connector_stats()
    for k, v in (st.data.items() if st is not None else ()):
        acc[k] = acc.get(k, 0) + (sum(v) if k in ("num_descriptors", "bytes_transferred") else len(v))


def step(worker, sched) -> None:
    """One scheduler step: metadata from the scheduler half bound to the worker half."""
    meta = sched.build_connector_meta(None)
    worker.bind_connector_metadata(meta)
    worker.start_load_kv(None)
    worker.clear_connector_metadata()


class Step:
    """The field of vllm.v1.core.sched.output.SchedulerOutput the connector reads: the
    requests that finished last step (the model runner hands it to ``start_load_kv``)."""

    def __init__(self, finished: set[str]):
        self.finished_req_ids = set(finished)


def runner_step(a, finished: set[str]) -> dict:
    return {"scheduler_output": Step(finished)} if a.decode_finish == "runner" else {}


def run_decode(a):
    fits(a)
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata import NixlConnectorMetadata
    cfg, worker, sched, bufs, names, page = connector(a, "kv_consumer", "decode")
    alloc, release = allocator(a.blocks, a.seed + 2)
    report = {"requests": [], "misaddressed": [], "vllm_stats": {}, "kv_layout": a.kv_layout,
              "memory": a.memory, "rank": a.rank, "heads": a.heads}
    report.update(registered(worker))
    finished: set[str] = set()  # --decode-finish runner: last step's finished requests
    for r in workload(a):
        got = wait_file(os.path.join(a.xchg, f"{r['num']}.json"), a.timeout)
        if r["num"] == 0 and a.decode_delay:
            time.sleep(a.decode_delay)  # the fault: decode reads after prefill's lease ran out
            if a.requests > 1:  # ...and after prefill reused the blocks for the next request
                wait_file(os.path.join(a.xchg, "1.json"), a.timeout)
        blocks = alloc(got["blocks"])
        for n in names:
            for b in blocks:
                for off, k in segments(a, page, b):
                    bufs[n].host[off:off + k] = 0
            bufs[n].push([s for b in blocks for s in segments(a, page, b)])
        if tp_size(a, "kv_consumer") > 1:  # the ranks step together (their forward's all-reduce)
            tp_barrier()
        meta = NixlConnectorMetadata()
        meta.add_new_req_to_recv(request_id=r["id"], local_block_ids=[blocks],
                                 kv_transfer_params=got["params"], awaiting_kvs=True)
        worker.bind_connector_metadata(meta)
        worker.start_load_kv(None, **runner_step(a, finished))
        worker.clear_connector_metadata()
        t_end = time.monotonic() + a.timeout
        while True:
            if a.decode_finish == "runner":  # as the model runner: this step's finished requests
                recvd = worker.get_transfer_results(finished).finished_recving
                finished = set()
            else:
                _, recvd = worker.get_finished(set())  # the legacy API (a wrapper of get_transfer_results)
            tally(worker, report["vllm_stats"])
            if r["id"] in recvd:
                break
            if time.monotonic() > t_end:
                raise TimeoutError(f"decode: {r['id']} never arrived")
            worker.bind_connector_metadata(NixlConnectorMetadata())
            worker.start_load_kv(None)
            worker.clear_connector_metadata()
            time.sleep(0.005)
        report["requests"].append({"id": r["id"], "num": r["num"], "blocks": blocks,
                                   "remote_blocks": got["params"]["remote_block_ids"][0]})
        for li, n in enumerate(names):  # the verifier: whose bytes does each block hold?
            bufs[n].pull([s for b in blocks for s in segments(a, page, b)])
            for g, b in enumerate(blocks):
                src = got["params"]["remote_block_ids"][0][g]
                for part, head, st in (read_head_stamps(a, bufs[n].host, page, b) if ranked(a) else ()):
                    if st != (MAGIC_WRITTEN, r["num"], li * 16 + part, src, head):
                        report["misaddressed"].append({"request": r["id"], "layer": li, "part": part, "block": b,
                                                       "page": g, "head": head, "rank": a.rank,
                                                       "holds": describe(st)})
                for part, st in enumerate(() if ranked(a) else read_stamps(a, bufs[n].host, page, b)):
                    want = (MAGIC_WRITTEN, r["num"], li * 16 + part, got["params"]["remote_block_ids"][0][g])
                    if st != want:
                        report["misaddressed"].append({"request": r["id"], "layer": li, "part": part, "block": b,
                                                       "page": g, "holds": describe(st)})
        # the request finishes on decode: the blocks go back; the scheduler half hears of it
        # (one engine process), or the worker does next step (--decode-finish runner: the
        # scheduler runs in another process, as with vLLM's multiprocess executor)
        if a.decode_finish == "runner":
            finished = {r["id"]}
        else:
            sched.request_finished(Req(r["id"], got["blocks"] * a.block_size,
                                       dict(got["params"], do_remote_prefill=False)), blocks)
        release(blocks)
    if finished:  # the last step: its finished requests reach the worker
        worker.get_transfer_results(finished)
    vs = report["vllm_stats"]
    report["transfers"], report["descriptors"] = vs.get("transfer_duration", 0), vs.get("num_descriptors", 0)
    bad = report["misaddressed"]
    who = f"decode rank {a.rank}" if ranked(a) else "decode"
    what = "head slice(s)" if ranked(a) else "block(s)"
    print(f"{who}: {len(report['requests'])} requests received, {len(bad)} misaddressed {what}", flush=True)
    for m in bad[:8]:
        head = f" head {m['head']}" if "head" in m else ""
        print(f"  {m['request']} layer {m['layer']} block {m['block']}{head} holds {m['holds']}")
    if a.report:
        put_file(a.report + rank_suffix(a), report)
    time.sleep(0.2)  # let the last notification leave before prefill stops listening
    put_file(os.path.join(a.xchg, done_name(a, a.rank)), {})
    return worker


def done(*workers) -> None:
    import atexit
    time.sleep(0.2)
    for worker in workers:
        try:
            worker.shutdown()
        except Exception:
            pass
    sys.stdout.flush()
    atexit._run_exitfuncs()
    os._exit(0)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", choices=("both", "prefill", "decode", "one-process"), default="both",
                   help="both: two processes; one-process: prefill and decode engines as two threads of one")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=None,
                   help="the model's KV heads (default: the larger TP size; 1 without TP)")
    p.add_argument("--head-size", type=int, default=16)
    p.add_argument("--kv-layout", choices=("packed", "split", "mla"), default="packed",
                   help="each layer's cache: K and V in each block, K blocks then V blocks, or an MLA latent")
    p.add_argument("--block-size", type=int, default=32, help="tokens per block (a multiple of 32 on CPU; --kv-layout mla: what the MLA backend takes)")
    p.add_argument("--kernel-blocks", action="store_true",
                   help="mla: keep --block-size and shape the cache in the MLA backend's smaller kernel blocks, "
                        "which vLLM then registers and moves one by one (default: run at the backend's size)")
    p.add_argument("--blocks", type=int, default=16, help="blocks per layer on each side")
    p.add_argument("--requests", type=int, default=3)
    p.add_argument("--max-blocks", type=int, default=3)
    p.add_argument("--lease", type=int, default=0, help="prefill's kv_lease_duration in seconds (0: vLLM's)")
    p.add_argument("--decode-delay", type=float, default=0.0, help="decode waits this long before reading request 0")
    p.add_argument("--prefill-scheduler", choices=("inline", "process"), default="inline",
                   help="prefill's scheduler half in the worker's process, or in a process of its own")
    p.add_argument("--decode-finish", choices=("scheduler", "runner"), default="scheduler",
                   help="who tells decode a request is done: its scheduler half (same process) or the "
                        "finished ids the model runner hands the worker each step")
    p.add_argument("--memory", choices=("dram", "vram"), default="dram",
                   help="where each layer's cache lives (vram: CUDA tensors, kv_buffer_device cuda, NIXL VRAM)")
    p.add_argument("--gpu", type=int, default=0, help="the GPU of VRAM caches (both engines)")
    p.add_argument("--nixl-backend", default="UCX", help="the NIXL backend vLLM asks for (kv_connector_extra_config)")
    p.add_argument("--prefill-tp", type=int, default=1, help="prefill's tensor-parallel size (one process per rank)")
    p.add_argument("--decode-tp", type=int, default=1, help="decode's tensor-parallel size (one process per rank)")
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)  # this process's TP rank (set by the launch)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--side-port", type=int, default=0)
    p.add_argument("--dist-port", type=int, default=0)
    p.add_argument("--xchg", help="folder where prefill hands kv_transfer_params to decode (the proxy)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--report", help="write the verifier's findings (JSON) here")
    return p


def one_process(a, side: int, dist: int, xchg: str) -> int:
    """Prefill and decode engines in one process (two threads): two connector workers and
    two scheduler halves side by side, each engine's own."""
    a.side_port, a.dist_port, a.xchg = side, dist, xchg
    fits(a)
    workers, errors = {}, []

    def run(role, fn):
        try:
            workers[role] = fn(a)
        except BaseException as e:  # noqa: BLE001 - reported below, the process exits non-zero
            errors.append(f"{role}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(r, f), name=r)
               for r, f in (("prefill", run_prefill), ("decode", run_decode))]
    for t in threads:
        t.start()
        time.sleep(0.5)  # prefill first: its side channel serves decode's handshake
    for t in threads:
        t.join()
    for e in errors:
        print(e, file=sys.stderr, flush=True)
    sys.stdout.flush()
    if errors:
        os._exit(1)
    done(*workers.values())


def cuda_missing(gpu: int) -> str | None:
    """Why VRAM caches cannot be made here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    if gpu >= torch.cuda.device_count():
        return f"GPU {gpu} does not exist ({torch.cuda.device_count()} visible)"
    return None


def tp_refusal(a) -> str | None:
    """Why this tensor-parallel run cannot be made, in one line (None: it can)."""
    for name, tp in (("--prefill-tp", a.prefill_tp), ("--decode-tp", a.decode_tp)):
        if tp < 1:
            return f"{name} must be at least 1"
        if a.kv_layout != "mla" and a.heads % tp and tp % a.heads:
            return f"{name} {tp} and the model's {a.heads} KV heads (--heads) must divide one or the other"
    if a.kv_layout != "mla" and a.decode_tp < a.prefill_tp and a.prefill_tp > a.heads:
        return (f"vLLM does not read a prefill whose {a.prefill_tp} ranks replicate the model's {a.heads} KV "
                "heads into fewer decode ranks (an assertion in its handshake: "
                "NixlBaseConnectorWorker._validate_remote_agent_handshake)")
    big, small = max(a.prefill_tp, a.decode_tp), min(a.prefill_tp, a.decode_tp)
    if big % small:
        return f"vLLM needs one TP size to divide the other (prefill {a.prefill_tp}, decode {a.decode_tp})"
    if a.memory == "vram":
        return "tensor-parallel runs keep the KV cache in DRAM (--memory dram)"
    if a.role == "one-process":
        return "tensor-parallel runs put every rank in a process of its own (--role both)"
    if a.prefill_scheduler == "process":
        return "tensor-parallel runs run a scheduler half beside each rank's worker (--prefill-scheduler inline)"
    return None


def merge_reports(a, report: str) -> None:
    """One report per engine from its ranks' (each rank's verifier and vLLM's per-rank stats):
    decode's misaddressed head slices of every rank, stats summed; ``ranks`` keeps each rank's."""
    def load(path):
        with open(path) as f:
            return json.load(f)

    def summed(parts, key):
        out: dict = {}
        for part in parts:
            for k, v in part[key].items():
                out[k] = out.get(k, 0) + v
        return out
    for suffix, tp in ((".prefill", a.prefill_tp), ("", a.decode_tp)):
        paths = [f"{report}{suffix}.rank{r}" for r in range(tp)]
        if not all(os.path.exists(p) for p in paths):
            continue
        parts = [load(p) for p in paths]
        merged = dict(parts[0], vllm_stats=summed(parts, "vllm_stats"), ranks=parts,
                      prefill_tp=a.prefill_tp, decode_tp=a.decode_tp)
        merged.pop("rank", None)
        if suffix:
            merged["read_by_all"] = sum(p["read_by_all"] for p in parts)
        else:
            merged["misaddressed"] = [m for p in parts for m in p["misaddressed"]]
            merged["transfers"] = sum(p["transfers"] for p in parts)
            merged["descriptors"] = sum(p["descriptors"] for p in parts)
        put_file(report + suffix, merged)
        for p in paths:
            os.remove(p)


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    if a.heads is None:
        a.heads = max(a.prefill_tp, a.decode_tp)
    if ranked(a) and a.role in ("both", "one-process") and (why := tp_refusal(a)):
        print(f"vllm_pd: {why}", file=sys.stderr)
        return 2
    if a.memory == "vram" and a.role in ("both", "one-process"):  # once, before any engine starts
        if a.kv_layout == "mla":
            print("vllm_pd: --memory vram takes --kv-layout packed or split (mla's block size comes from "
                  "vLLM's CUDA attention backend, compiled kernels this driver does not load)", file=sys.stderr)
            return 2
        if why := cuda_missing(a.gpu):
            print(f"vllm_pd: --memory vram needs a CUDA GPU: {why}", file=sys.stderr)
            return 2
    if a.role == "prefill":
        done(run_prefill(a))
    if a.role == "decode":
        done(run_decode(a))
    # the distributed stores take ports at offsets up to +11 from dist (see connector())
    side, dist = a.side_port or free_port(), a.dist_port or free_port_run(12)
    xchg = a.xchg or tempfile.mkdtemp(prefix="vllm_pd_")
    if not a.xchg:  # ours: the hand-over files and the tiny model config are of no use after the run
        # atexit, not finally: the one-process run ends in os._exit after running the exit functions
        import atexit
        atexit.register(shutil.rmtree, xchg, ignore_errors=True)
    if a.role == "one-process":
        return one_process(a, side, dist, xchg)
    skip = {"--role", "both"}
    base = [sys.executable, os.path.abspath(__file__)] + [x for x in (argv or sys.argv[1:]) if x not in skip]
    if not ranked(a):
        procs = [subprocess.Popen(base + ["--role", role, "--side-port", str(side), "--dist-port", str(dist + i * 7),
                                          "--xchg", xchg])
                 for i, role in enumerate(("prefill", "decode"))]
        return max(p.wait() for p in procs)
    # one process per TP rank; an engine's ranks share its torch.distributed rendezvous port
    procs = [subprocess.Popen(base + ["--role", role, "--rank", str(r), "--side-port", str(side),
                                      "--dist-port", str(dist + i * 7), "--xchg", xchg])
             for i, (role, tp) in enumerate((("prefill", a.prefill_tp), ("decode", a.decode_tp)))
             for r in range(tp)]
    rc = max(p.wait() for p in procs)
    if a.report:
        merge_reports(a, a.report)
    return rc


if __name__ == "__main__":
    sys.exit(main())
