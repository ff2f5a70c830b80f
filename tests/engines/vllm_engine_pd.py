"""A second, independent driver of vLLM 0.34's NIXL connector: vLLM's own engine loop.

Where ``vllm_pd.py`` plays the scheduler by hand (its own allocator, calls into the
connector's scheduler half), this driver runs vLLM's real ``Scheduler`` on each side
(its KV cache manager and block pool with prefix caching on, its connector bookkeeping,
its abort path) and vLLM's CPU model runner's own connector glue (``ActiveKVConnector``:
``pre_forward`` / ``post_forward`` around the forward pass, as the CPU worker calls it).
Only the forward pass is played: it writes, for every token range the scheduler hands
it, bytes that are a function of the token prefix and the layer (what KV is), so a
block's expected bytes are known from tokens alone, whichever request or side wrote it.
The proxy hands prefill's ``kv_transfer_params`` (the scheduler's own output) to decode
through files. No kvtrace code here: record it with ``kvtrace record --hooks vllm``.

The workload (``--scenario legal``) holds patterns that are legal but look suspicious:
- ``shared``: two requests with one prompt prefix reach prefill one step apart: the
  second hits prefill's prefix cache, so both hand decode the SAME prefill blocks; decode
  gets both at once and READs those blocks with two transfers in flight together.
- ``hit``: a request whose prefix decode already holds in its prefix cache (from an
  earlier request): decode pulls only the uncached suffix (a partial remote block list,
  paired with the END of prefill's list).
- ``abort-inflight``: decode aborts a request after its READ was posted and before the
  worker reported it: vLLM keeps the blocks until the READ is reported, then frees them.
  Prefill's process is stopped (every thread of it, before the post) from just before
  that READ is posted to just after the abort (a stalled peer), so over TCP
  (``UCX_TLS=tcp``) the READ is in progress at the abort on any machine; over shared
  memory it may finish inside the post.
- ``abort-early``: decode aborts a request before it was scheduled: no READ, vLLM only
  notifies prefill so that it frees its blocks.
- a tight decode pool: blocks freed by finished requests are handed to the next ones.

``--bug`` plants a real bug beside the same workload:
- ``decode-abort-free``: decode's engine frees an aborted request's blocks at once
  (not waiting for its READ), and the next request's READ targets them while the
  aborted one's is still unobserved (sglang #24527's shape, in vLLM's pull mode).
- ``prefill-lease``: prefill's lease is short and decode reads ``shared``'s pair late:
  prefill frees the shared blocks (vLLM's lease expiry) and reuses them first.

    python tests/engines/vllm_engine_pd.py --report out.json
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from free_ports import free_port, free_port_run


def fits(a) -> None:
    """Process-wide settings a CPU run needs (REAL_ENGINES.md): before vLLM is imported."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    os.environ["VLLM_NIXL_SIDE_CHANNEL_HOST"] = "127.0.0.1"
    os.environ["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(a.side_port)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


# ----------------------------------------------------------------- workload
def prompts(a) -> list[dict]:
    """Requests in the order the proxy sends them. ``after``: the proxy sends it to decode
    only once decode finished that request (so its prefix is in decode's cache);
    ``with``: decode adds it in the same step as that request; ``prefill_gap``: prefill
    gets it one step after the previous one (so it hits the previous one's blocks)."""
    bs = a.block_size
    rng = np.random.default_rng(a.seed)

    def toks(n):
        return [int(x) for x in rng.integers(1, 30000, n)]
    px, py = toks(2 * bs), toks(2 * bs)
    reqs = [
        {"id": "warm", "tokens": px + toks(bs // 2)},                       # decode caches px
        {"id": "hit", "tokens": px + toks(bs + 5), "after": "warm"},        # decode pulls the suffix only
        {"id": "sharedA", "tokens": py + toks(bs // 3)},
        {"id": "sharedB", "tokens": py + toks(bs // 4), "with": "sharedA"},  # prefill hits sharedA's py blocks
        {"id": "abort-inflight", "tokens": toks(2 * bs + 3), "abort": "inflight"},
        {"id": "reuse1", "tokens": toks(3 * bs - 1), "after": "abort-inflight"},
        {"id": "abort-early", "tokens": toks(bs + 1), "abort": "early"},
        {"id": "reuse2", "tokens": toks(2 * bs + 7), "after": "reuse1"},
    ]
    return reqs


# ----------------------------------------------------------------- vLLM objects
def model_dir(a) -> str:
    d = os.path.join(a.xchg, "model")  # one path for both sides: part of vLLM's compatibility hash
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": a.heads * a.head_size,
           "num_attention_heads": a.heads, "num_key_value_heads": a.heads, "num_hidden_layers": a.layers,
           "intermediate_size": 64, "vocab_size": 32000, "max_position_embeddings": 4096,
           "torch_dtype": "float32", "rms_norm_eps": 1e-5, "head_dim": a.head_size}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


class Engine:
    """One vLLM engine: its Scheduler (with the connector's scheduler half inside), the
    worker's connector (vLLM's KV transfer group) behind the CPU model runner's glue,
    and the KV cache tensors the forward pass writes."""

    def __init__(self, a, role: str, engine_id: str, blocks: int, lease: int, part: str = "both"):
        """``part``: ``both`` (vLLM's uniprocess executor: scheduler and worker in this
        process), ``scheduler`` or ``worker`` (its multiprocess executor's two processes)."""
        import torch
        from vllm.config import (CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig, SchedulerConfig,
                                 VllmConfig, set_current_vllm_config)
        from vllm.distributed.kv_transfer.kv_transfer_state import ensure_kv_transfer_initialized
        from vllm.distributed.parallel_state import ensure_model_parallel_initialized, init_distributed_environment
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor,
                                                SlidingWindowSpec)
        from vllm.v1.structured_output import StructuredOutputManager
        from vllm.v1.worker.cpu.kv_connector import ActiveKVConnector
        self.a, self.role = a, role
        extra = {"kv_lease_duration": lease} if lease else {}
        mc = ModelConfig(model=model_dir(a), skip_tokenizer_init=True, dtype="float32", max_model_len=2048)
        sc = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=2048, max_model_len=2048,
                             enable_chunked_prefill=True, is_encoder_decoder=False,
                             disable_hybrid_kv_cache_manager=not a.swa)
        cc = CacheConfig(block_size=a.block_size, enable_prefix_caching=True)
        kt = KVTransferConfig(kv_connector="NixlConnector", kv_role=role, kv_buffer_device="cpu",
                              engine_id=engine_id, kv_connector_extra_config=extra)
        cfg = VllmConfig(model_config=mc, scheduler_config=sc, cache_config=cc, kv_transfer_config=kt,
                         device_config=DeviceConfig("cpu"))
        cfg.cache_config.kv_cache_layout = "LBHNC"  # what the engine core resolves for this connector
        cfg.cache_config.num_gpu_blocks = blocks
        self.names = [f"model.layers.{i}.self_attn.attn" for i in range(a.layers)]
        spec = FullAttentionSpec(block_size=a.block_size, num_kv_heads=a.heads, head_size=a.head_size,
                                 dtype=torch.float32)
        self.page = page = spec.page_size_bytes
        if a.swa:  # a hybrid model: odd layers attend over a sliding window (a second KV cache group)
            sw = SlidingWindowSpec(block_size=a.block_size, num_kv_heads=a.heads, head_size=a.head_size,
                                   dtype=torch.float32, sliding_window=a.swa)
            groups = [KVCacheGroupSpec(self.names[0::2], spec), KVCacheGroupSpec(self.names[1::2], sw)]
        else:
            groups = [KVCacheGroupSpec(self.names, spec)]
        self.group_of = {n: g for g, grp in enumerate(groups) for n in grp.layer_names}
        kcc = KVCacheConfig(num_blocks=blocks, kv_cache_layout="LBHNC",
                            kv_cache_tensors=[KVCacheTensor(size=page * blocks, layers=[n], layer_stride=page * blocks,
                                                            block_stride=page) for n in self.names],
                            kv_cache_groups=groups)
        init_none_hash(sha256)
        self.hasher = get_request_block_hasher(a.block_size, sha256)
        port = a.dist_port + (0 if role == "kv_producer" else 1) + (2 if part == "worker" else 0)
        self.sched = self.kv = self.worker = None
        with set_current_vllm_config(cfg):
            init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                         distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo")
            ensure_model_parallel_initialized(1, 1)
            if part != "scheduler":
                ensure_kv_transfer_initialized(cfg, kcc)  # the worker's connector, as the GPU/CPU worker makes it
            if part != "worker":
                self.sched = Scheduler(vllm_config=cfg, kv_cache_config=kcc,
                                       structured_output_manager=StructuredOutputManager(cfg),
                                       block_size=a.block_size, log_stats=True)
            if part != "scheduler":
                raw = {n: torch.zeros(blocks * page, dtype=torch.uint8) for n in self.names}
                caches = {n: raw[n].view(torch.float32).view(blocks, 2, a.heads, a.block_size, a.head_size)
                          for n in self.names}
                self.kv = ActiveKVConnector(cfg, caches)  # registers the caches with NIXL
                self.bufs = {n: raw[n].numpy() for n in self.names}
        self.cfg = cfg
        if part != "scheduler":
            from vllm.distributed.kv_transfer import get_kv_transfer_group
            self.worker = get_kv_transfer_group()
        if role != "kv_consumer" and part == "both":  # the engine core hands the workers' handshake to its scheduler's connector
            self.handshake(self.worker.get_handshake_metadata())
        self.reqs: dict[str, tuple[list[int], list[list[int]]]] = {}   # worker part: tokens, blocks per group
        self.steps = 0

    def handshake(self, meta) -> None:
        self.sched.get_kv_connector().set_xfer_handshake_metadata_pp_aware({(0, 0): meta})

    def request(self, rid: str, tokens: list[int], params: dict, max_tokens: int):
        from vllm import SamplingParams
        from vllm.v1.request import Request
        sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        req = Request(request_id=rid, prompt_token_ids=list(tokens), sampling_params=sp, pooling_params=None,
                      block_hasher=self.hasher)
        req.kv_transfer_params = params
        return req

    # one engine step: schedule, the model runner (connector glue around a forward), update
    def step(self, before_post=None):
        so = self.sched.schedule()
        self.kv.pre_forward(so)
        sample = self.forward(so)
        self.kv.finish_forward()
        if before_post is not None:
            before_post(so)
        kvo = self.kv.post_forward(so.finished_req_ids)
        if kvo is not None and self.a.bug == "decode-abort-free" and kvo.finished_recving:
            # the buggy engine forgot the request it freed: it drops the late report
            kvo.finished_recving = {r for r in kvo.finished_recving if r in self.sched.requests} or None
        return self.update(so, sample, kvo)

    def update(self, so, sample: list[str], kvo):
        """The engine core takes the model runner's output: a token for each request in
        ``sample``, and the connector's output."""
        from vllm.v1.outputs import ModelRunnerOutput
        ids = list(so.num_scheduled_tokens)
        mro = ModelRunnerOutput(req_ids=ids,
                                sampled_token_ids=[[self.next_token(r)] if r in sample else [] for r in ids],
                                kv_connector_output=kvo)
        outs = self.sched.update_from_output(so, mro)
        self.steps += 1
        return so, kvo, [o for eo in outs.values() for o in eo.outputs]

    def worker_step(self, so):
        """The worker process's step (vLLM's multiprocess executor): the connector glue around
        a forward that knows the requests only from the scheduler outputs, as vLLM's model
        runner does. Returns (requests that sample a token, the connector's output)."""
        self.kv.pre_forward(so)
        for rid in so.preempted_req_ids or ():
            self.reqs.pop(rid, None)
        for nr in so.scheduled_new_reqs:
            self.reqs[nr.req_id] = (list(nr.prompt_token_ids), [list(g) for g in nr.block_ids])
        cr = so.scheduled_cached_reqs
        for rid, new in zip(cr.req_ids, cr.new_block_ids):
            if new is not None and rid in self.reqs:
                for g, more in enumerate(new):
                    self.reqs[rid][1][g].extend(more)
        starts = {r.req_id: r.num_computed_tokens for r in so.scheduled_new_reqs}
        starts.update(dict(zip(cr.req_ids, cr.num_computed_tokens)))
        sample = []
        for rid, n in so.num_scheduled_tokens.items():
            toks, gids = self.reqs[rid]
            end = starts[rid] + n
            self.write_kv(toks, gids, starts[rid], end)
            if end >= len(toks):
                sample.append(rid)
        self.kv.finish_forward()
        kvo = self.kv.post_forward(so.finished_req_ids)
        for rid in so.finished_req_ids:
            self.reqs.pop(rid, None)
        return sample, kvo

    def write_kv(self, toks: list[int], gids, start: int, end: int) -> None:
        bs = self.a.block_size
        for p in range(start // bs, (end - 1) // bs + 1):
            for li, name in enumerate(self.names):
                b = gids[self.group_of[name]][p]
                if b:  # block 0 is vLLM's null block: a sliding window's skipped page
                    put(self.bufs[name], self.page, b, kv_bytes(toks[:min((p + 1) * bs, end)], li, self.page))

    def next_token(self, rid) -> int:
        req = self.sched.requests.get(rid)
        return 1 + (len(req.all_token_ids) * 7919 if req is not None else 0) % 29000

    def forward(self, so) -> list[str]:
        """The model: KV of the scheduled token range of each request, written into its blocks.
        Returns the requests that sample a token this step."""
        starts = {r.req_id: r.num_computed_tokens for r in so.scheduled_new_reqs}
        cr = so.scheduled_cached_reqs
        starts.update(dict(zip(cr.req_ids, cr.num_computed_tokens)))
        ids = []
        for rid, n in so.num_scheduled_tokens.items():
            req = self.sched.requests[rid]
            start = starts[rid]
            self.before_compute(rid, req, start)
            gids = self.sched.kv_cache_manager.get_block_ids(rid)
            end = start + n
            self.write_kv(list(req.all_token_ids), gids, start, end)
            if end >= req.num_tokens:
                ids.append(rid)
        return ids

    def before_compute(self, rid, req, start) -> None:
        pass


def kv_bytes(prefix: list[int], layer: int, page: int) -> np.ndarray:
    """A block's KV as a function of the tokens up to its last written position and the layer."""
    h = hashlib.blake2b(np.asarray(prefix, dtype=np.int64).tobytes() + layer.to_bytes(2, "little"),
                        digest_size=32).digest()
    return np.resize(np.frombuffer(h, dtype=np.uint8), page)


def put(buf, page, block, data) -> None:
    buf[block * page:(block + 1) * page] = data


def wait_file(path, timeout):
    t_end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > t_end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)
    with open(path) as f:
        return json.load(f)


def put_file(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def registered(worker) -> dict:
    cw = worker.connector_worker
    name = cw.nixl_wrapper.name
    return {"agent": name.decode() if isinstance(name, bytes) else str(name)}


# ----------------------------------------------------------------- prefill
class EngineCoreWithWorkerProcess(Engine):
    """vLLM's multiprocess executor on prefill: this process runs the engine core (the
    Scheduler, with the connector's scheduler half) and hands each step's SchedulerOutput to
    the worker process (``--role prefill-worker``: the connector worker, the model runner's
    glue, the KV cache, the forward), which returns the connector's output; the scheduler
    half's process has no NIXL agent."""

    def __init__(self, a, conn):
        super().__init__(a, a.prefill_role, "prefill", a.prefill_blocks, a.lease, part="scheduler")
        self.conn = conn
        meta, self.agent, self.worker_pid = conn.recv()   # what the executor collects from its workers
        self.handshake(meta)

    def step(self, before_post=None):
        so = self.sched.schedule()
        self.conn.send(so)
        sample, kvo = self.conn.recv()
        return self.update(so, sample, kvo)

    def close(self) -> None:
        self.conn.send(None)


def start_worker_process(a):
    """The prefill worker's process and the connection the engine core talks to it over."""
    from multiprocessing.connection import Listener
    key = os.urandom(16)
    listener = Listener(("127.0.0.1", 0), authkey=key)
    args = sys.argv[1:] + ["--role", "prefill-worker", "--worker-port", str(listener.address[1]),
                           "--worker-key", key.hex()]
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + args)
    conn = listener.accept()
    listener.close()
    return proc, conn


def run_prefill_worker(a):
    from multiprocessing.connection import Client
    fits(a)
    conn = Client(("127.0.0.1", a.worker_port), authkey=bytes.fromhex(a.worker_key))
    eng = Engine(a, a.prefill_role, "prefill", a.prefill_blocks, a.lease, part="worker")
    conn.send((eng.worker.get_handshake_metadata(), registered(eng.worker)["agent"], os.getpid()))
    while (so := conn.recv()) is not None:
        conn.send(eng.worker_step(so))
    return eng


def run_prefill(a):
    fits(a)
    proc = None
    if a.prefill_workers == "process":
        proc, conn = start_worker_process(a)
        eng = EngineCoreWithWorkerProcess(a, conn)
        did = {"requests": {}, "steps": 0, "agent": eng.agent, "worker_pid": eng.worker_pid}
    else:
        eng = Engine(a, a.prefill_role, "prefill", a.prefill_blocks, a.lease)
        did = {"requests": {}, "steps": 0}
        did.update(registered(eng.worker))
    # decode stalls the process that serves its READs (the one with prefill's NIXL agent)
    put_file(os.path.join(a.xchg, "prefill-agent.json"), {"pid": did.get("worker_pid", os.getpid())})
    pending = list(prompts(a))
    live: set[str] = set()
    t_end = time.monotonic() + a.timeout
    while pending or live:
        if time.monotonic() > t_end:
            raise TimeoutError(f"prefill: still holding {sorted(live)}")
        if pending:  # one request per step: the next one can hit the previous one's cached blocks
            r = pending.pop(0)
            eng.sched.add_request(eng.request(r["id"], r["tokens"], {"do_remote_decode": True,
                                                                    "do_remote_prefill": False}, 1))
            live.add(r["id"])
        so, kvo, outs = eng.step()
        for o in outs:
            if o.finish_reason is not None and o.kv_transfer_params:
                p = o.kv_transfer_params
                rb = p["remote_block_ids"]
                did["requests"][o.request_id] = {"blocks": rb[0] if len(rb) == 1 else rb}
                put_file(os.path.join(a.xchg, f"p-{o.request_id}.json"), p)
        for rid in (kvo.finished_sending if kvo is not None and kvo.finished_sending else ()):
            did["requests"].setdefault(rid, {})["freed_at_step"] = eng.steps
            live.discard(rid)
        if not so.num_scheduled_tokens:
            time.sleep(0.005)
    did["steps"] = eng.steps
    print(f"prefill: {len(did['requests'])} requests sent", flush=True)
    wait_file(os.path.join(a.xchg, "decode-done.json"), a.timeout)
    for _ in range(10):
        eng.step()
        time.sleep(0.01)
    if a.report:
        put_file(a.report + ".prefill", did)
    if proc is not None:
        eng.close()
        proc.wait(timeout=30)
    return eng


# ----------------------------------------------------------------- decode
class DecodeEngine(Engine):
    """Decode's engine: the verifier runs when a loaded request is first computed (the
    forward is about to attend over the blocks vLLM says hold its prompt's KV)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.checked: set[str] = set()
        self.bad: list[dict] = []
        self.loaded: dict[str, list[int]] = {}

    def before_compute(self, rid, req, start) -> None:
        if rid in self.checked or start == 0:
            return
        self.checked.add(rid)
        ids = self.sched.kv_cache_manager.get_block_ids(rid)
        self.loaded[rid] = [list(g) for g in ids] if len(ids) > 1 else list(ids[0])
        toks, bs = list(req.prompt_token_ids), self.a.block_size
        for p in range((start + bs - 1) // bs):
            for li, name in enumerate(self.names):
                b = ids[self.group_of[name]][p]
                if not b:  # out of the sliding window: vLLM neither keeps nor pulls it
                    continue
                want = kv_bytes(toks[:min((p + 1) * bs, len(toks))], li, self.page)
                got = self.bufs[name][b * self.page:(b + 1) * self.page]
                if not np.array_equal(want, got):
                    self.bad.append({"request": rid, "layer": li, "page": p, "block": int(b)})


def run_decode(a):
    fits(a)
    eng = DecodeEngine(a, "kv_consumer", "decode", a.decode_blocks, 0)
    report = {"requests": {}, "misaddressed": [], "aborted": []}
    report.update(registered(eng.worker))
    plan = prompts(a)
    done: set[str] = set()
    added: dict[str, dict] = {}
    t_end = time.monotonic() + a.timeout
    while len(done) < len(plan):
        if time.monotonic() > t_end:
            raise TimeoutError(f"decode: done {sorted(done)} of {[r['id'] for r in plan]}")
        for r in plan:  # the proxy: prefill's kv_transfer_params, in order, when their turn comes
            if r["id"] in added:
                continue
            if r.get("after") and r["after"] not in done:
                break
            path = os.path.join(a.xchg, f"p-{r['id']}.json")
            if not os.path.exists(path):
                break
            if r.get("with") and r["with"] in added:
                continue  # added with its partner already
            group = [r] + [q for q in plan if q.get("with") == r["id"]]
            paths = [os.path.join(a.xchg, f"p-{q['id']}.json") for q in group]
            if not all(os.path.exists(p) for p in paths):
                break
            if a.bug == "prefill-lease" and r["id"] == "sharedA":
                time.sleep(a.lease + 2)  # the late read: prefill's lease on the shared blocks ran out
                wait_file(os.path.join(a.xchg, "p-abort-inflight.json"), a.timeout)
            for q, p in zip(group, paths):
                with open(p) as f:
                    params = json.load(f)
                eng.sched.add_request(eng.request(q["id"], q["tokens"], params, a.decode_tokens))
                added[q["id"]] = q
                if q.get("abort") == "early":  # the client goes away before decode schedules it
                    eng.sched.finish_requests(q["id"], _aborted())
                    report["aborted"].append(q["id"])
                    done.add(q["id"])
            break

        def abort_inflight(so):
            # the client's abort lands while the worker's READ is posted and not yet done
            # (the engine core takes aborts while the worker runs the step: async scheduling)
            waiting = [rid for rid, q in added.items() if q.get("abort") == "inflight" and rid not in done
                       and rid in eng.sched.requests]
            if not waiting:
                return
            # every step while it waits posts its READs here, inside the stall: vLLM posts in
            # start_load_kv only (a READ deferred by a NIXL handshake too, at the next one)
            with stalled(agent_pid(a) if eng.kv._pending_load_kwargs is not None else None):
                if eng.kv._pending_load_kwargs is not None:
                    eng.kv._start_load_kv()  # vLLM's own call: post this step's READs now
                for rid in waiting:
                    if eng.sched.requests[rid].status.name == "WAITING_FOR_REMOTE_KVS" and _posted(eng, rid):
                        if a.bug == "decode-abort-free":  # the bug: free at once, as if nothing were in flight
                            eng.sched.finished_recving_kv_req_ids.add(rid)
                        eng.sched.finish_requests(rid, _aborted())
                        report["aborted"].append(rid)
                        done.add(rid)
        so, kvo, outs = eng.step(before_post=abort_inflight)
        for o in outs:
            if o.finish_reason is not None:
                done.add(o.request_id)
                report["requests"][o.request_id] = {"blocks": eng.loaded.get(o.request_id)}
        if not so.num_scheduled_tokens:
            time.sleep(0.005)
    for _ in range(20):  # the engine keeps stepping: aborted loads report, their blocks go back
        eng.step()
        time.sleep(0.01)
    report["misaddressed"] = eng.bad
    report["steps"] = eng.steps
    report["stall_waits_us"] = [round(w * 1e6) for w in STALL_WAITS]
    print(f"decode: {len(done)} requests done, {len(eng.bad)} misaddressed block(s)", flush=True)
    for m in eng.bad[:8]:
        print(f"  {m}")
    if a.report:
        put_file(a.report, report)
    time.sleep(0.2)
    put_file(os.path.join(a.xchg, "decode-done.json"), {})
    return eng


@contextlib.contextmanager
def stalled(pid):
    """Prefill's process stopped (SIGSTOP) for the block, then resumed: a stalled peer. Over
    TCP (UCX_TLS=tcp) a READ needs prefill's reply, so a READ posted inside the block is
    still in progress when the block ends, whatever the load; over shared memory the READ
    does not need prefill and may finish at once (then NIXL says DONE at the post).
    The block starts only once every thread of prefill is stopped (``wait_stopped``)."""
    if pid is None:
        yield
        return
    os.kill(pid, signal.SIGSTOP)
    try:
        STALL_WAITS.append(wait_stopped(pid))
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


STALL_WAITS: list[float] = []  # seconds each stall waited for every prefill thread to stop


def agent_pid(a) -> int | None:
    """The process holding prefill's NIXL agent (its worker's, with a worker process)."""
    try:
        with open(os.path.join(a.xchg, "prefill-agent.json")) as f:
            return int(json.load(f)["pid"])
    except (OSError, ValueError, KeyError):
        return a.peer_pid


def wait_stopped(pid: int, timeout: float = 30.0) -> float:
    """Until every thread of ``pid`` is stopped; returns the seconds waited. ``kill(SIGSTOP)``
    returns once the signal is queued: Linux wakes one thread of the process, which stops
    the others when it runs, and they run on meanwhile (bench/sigstop_window.py: up to tens
    of ms on a loaded box). A READ posted in that window can be served by prefill and end
    inside the post (NIXL says DONE there), before the abort: a CI run at load ~8 recorded
    post, done, free in a row for the aborted request, and the run held no bug."""
    t0 = time.monotonic()
    t_end = t0 + timeout
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread exited
        if all(st in "tTZX" for st in states):  # stopped, traced, or gone
            return time.monotonic() - t0
        if time.monotonic() > t_end:
            raise TimeoutError(f"prefill (pid {pid}) not stopped after {timeout:.0f} s: thread states {states}")
        time.sleep(0.0002)


def _aborted():
    from vllm.v1.request import RequestStatus
    return RequestStatus.FINISHED_ABORTED


def _posted(eng, rid) -> bool:
    """The worker posted this request's READ (and has not reported it yet)."""
    cw = eng.worker.connector_worker
    return bool(cw._recving_transfers.get(rid))


def done(eng) -> None:
    import atexit
    time.sleep(0.2)
    try:
        eng.worker.shutdown()
    except Exception:
        pass
    sys.stdout.flush()
    atexit._run_exitfuncs()
    os._exit(0)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", choices=("both", "prefill", "decode", "prefill-worker"), default="both")
    p.add_argument("--prefill-workers", choices=("inline", "process"), default="inline",
                   help="prefill's worker in the engine core's process (vLLM's uniprocess executor) or in "
                        "its own (the multiprocess executor, as with TP > 1)")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--head-size", type=int, default=8)
    p.add_argument("--block-size", type=int, default=64, help="tokens per block (a multiple of 32 on CPU)")
    p.add_argument("--prefill-blocks", type=int, default=24)
    p.add_argument("--decode-blocks", type=int, default=12, help="decode's pool: tight, so freed blocks come back")
    p.add_argument("--decode-tokens", type=int, default=3, help="tokens decode generates per request")
    p.add_argument("--swa", type=int, default=0,
                   help="tokens of a sliding window for the odd layers (a hybrid model: two KV cache groups)")
    p.add_argument("--bug", choices=("none", "decode-abort-free", "prefill-lease"), default="none")
    p.add_argument("--lease", type=int, default=0, help="prefill's kv_lease_duration (s); --bug prefill-lease: 2")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--side-port", type=int, default=0)
    p.add_argument("--dist-port", type=int, default=0)
    p.add_argument("--xchg")
    p.add_argument("--peer-pid", type=int, help=argparse.SUPPRESS)  # decode: prefill's process (set by the launcher)
    p.add_argument("--prefill-role", choices=("kv_producer", "kv_both"), default="kv_producer",
                   help="prefill's kv_role (vLLM's NIXL docs launch both sides kv_both)")
    p.add_argument("--worker-port", type=int, help=argparse.SUPPRESS)   # prefill-worker: the engine core's
    p.add_argument("--worker-key", help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--report")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    if a.bug == "prefill-lease" and not a.lease:
        a.lease = 2
    if a.role == "prefill":
        done(run_prefill(a))
    if a.role == "decode":
        done(run_decode(a))
    if a.role == "prefill-worker":
        done(run_prefill_worker(a))
    # the distributed stores take ports at offsets up to +11 from dist (see connector())
    side, dist = a.side_port or free_port(), a.dist_port or free_port_run(12)
    xchg = a.xchg or tempfile.mkdtemp(prefix="vllm_engine_pd_")
    if not a.xchg:
        import atexit
        atexit.register(shutil.rmtree, xchg, ignore_errors=True)
    args = list(argv if argv is not None else sys.argv[1:])
    base = [sys.executable, os.path.abspath(__file__)] + args
    if a.lease and "--lease" not in args:
        base += ["--lease", str(a.lease)]
    procs = []
    for i, role in enumerate(("prefill", "decode")):
        peer = ["--peer-pid", str(procs[0].pid)] if role == "decode" else []
        procs.append(subprocess.Popen(base + ["--role", role, "--side-port", str(side), "--dist-port",
                                              str(dist + i * 7), "--xchg", xchg] + peer))
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
