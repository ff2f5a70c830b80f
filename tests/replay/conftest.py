"""Scenario traces for replay tests, written with tracer/builder.py (recordings are clean
unless the name says otherwise: the builder models data moving at post)."""
import pytest

from kvtrace.kernels.checksum import kvh64
from kvtrace.kernels.provenance import fill_page, poison
from kvtrace.replay.synth import pd_workload
from kvtrace.tracer.builder import TraceBuilder


def _pair(path):
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=12)
    return b, p, d


def prefix_sharing(path):
    """Legal prefix sharing on both sides: prefill r2 reuses r1's first page by reference;
    decode r3 holds a reference to r1's delivered first page."""
    b, p, d = _pair(path)
    p.alloc("r1", "kv", [0, 1]); p.write("r1", "kv", [0, 1])
    d.alloc("r1", "kv", [4, 5])
    x1 = p.post("r1", d, src=("kv", [0, 1]), dst=("kv", [4, 5]), msg=b"r1_kv")
    p.alloc("r2", "kv", [0], pages=[0], shared=True)
    p.alloc("r2", "kv", [2], pages=[1]); p.write("r2", "kv", [2])
    d.alloc("r2", "kv", [6, 7])
    x2 = p.post("r2", d, src=("kv", [0, 2]), dst=("kv", [6, 7]), msg=b"r2_kv")
    p.done(x1); p.done(x2)
    d.notif_recv(p, b"r1_kv"); d.notif_recv(p, b"r2_kv")
    d.read("r1", "kv", [4, 5]); d.read("r2", "kv", [6, 7])
    d.alloc("r3", "kv", [4], pages=[0], shared=True); d.read("r3", "kv", [4])
    p.free("r2", "kv", [0, 2]); p.free("r1", "kv", [0, 1])
    d.free("r1", "kv", [4, 5]); d.free("r2", "kv", [6, 7]); d.free("r3", "kv", [4])
    return b.close()


def abort_late_write(path, bug=True):
    """Decode aborts r1 and frees its pages while r1's WRITE is in flight; r2 gets the
    pages and a transfer of its own. With ``bug=False`` decode waits for r1's transfer
    (a notification) before freeing — the deferred-release fix (sglang #35049)."""
    b, p, d = _pair(path)
    d.alloc("r1", "kv", [5, 6]); d.msg_send(p, "r1/pages")
    p.msg_recv(d, "r1/pages"); p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    x1 = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv")
    d.req_abort("r1")
    if not bug:
        d.notif_recv(p, b"r1_kv")
    d.free("r1", "kv", [5, 6], reason="abort")
    d.alloc("r2", "kv", [5, 6]); d.msg_send(p, "r2/pages")
    p.msg_recv(d, "r2/pages"); p.alloc("r2", "kv", [3, 4]); p.write("r2", "kv", [3, 4])
    x2 = p.post("r2", d, src=("kv", [3, 4]), dst=("kv", [5, 6]), msg=b"r2_kv")
    p.done(x2); d.notif_recv(p, b"r2_kv"); d.read("r2", "kv", [5, 6])
    p.done(x1)
    p.free("r1", "kv", [1, 2]); p.free("r2", "kv", [3, 4]); d.free("r2", "kv", [5, 6])
    return b.close()


def notify_then_read(path):
    """Decode reads right after the notification; prefill sees DONE later (clean)."""
    b, p, d = _pair(path)
    d.alloc("r1", "kv", [5, 6]); p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv"); d.read("r1", "kv", [5, 6])
    p.done(x); p.free("r1", "kv", [1, 2]); d.free("r1", "kv", [5, 6])
    return b.close()


def bytes_only(path, bug=False):
    """A NIXL program recorded without hooks: registered regions, raw descriptors, no
    layouts, reads or writes. With ``bug`` a second transfer overwrites the first one's
    source while it is in flight."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.register(0x1000, 4096); d.register(0x9000, 4096)
    x1 = p.post("r1", d, descs=[(0x1000, 0x9000, 256), (0x1100, 0x9100, 256)], msg=b"r1")
    if bug:
        x2 = d.post("r2", p, op="WRITE", descs=[(0x9800, 0x1000, 256)], msg=b"r2")
        d.done(x2); p.notif_recv(d, b"r2")
    p.done(x1); d.notif_recv(p, b"r1")
    return b.close()


def out_of_bounds(path):
    """A descriptor past the end of the registered destination (sglang #31295)."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.register(0x1000, 4096); d.register(0x9000, 1024)
    x = p.post("r1", d, descs=[(0x1000, 0x9000, 256), (0x1100, 0x9380, 256)], msg=b"r1")
    p.done(x); d.notif_recv(p, b"r1")
    return b.close()


def head_split(path, prefill_tp=1, decode_tp=2, misplace=False, wrong_heads=None):
    """Heterogeneous attention TP as SGLang's send_kvcache_slice does it (non-MLA): 4 heads
    of 8 bytes per token, 4-token pages laid out [token][head]; each (prefill rank, decode
    rank) pair overlapping in heads sends one descriptor per token and page carrying their
    common heads, at the decode rank's head offset in the decode token (legal).
    ``misplace``: the last rank pair's slice of token 1 of the first page lands at head
    offset 0 of the destination token instead of its own. ``wrong_heads``: that pair sends
    the source token's first heads instead of the decode rank's, for token 1 of the first
    page (``"token"``) or every token of it (``"page"``): the page is fully covered, with
    the wrong heads."""
    b = TraceBuilder(path)
    heads, hb, pt = 4, 8, 4
    ps = [b.agent(f"prefill{r}") for r in range(prefill_tp)]
    ds = [b.agent(f"decode{r}") for r in range(decode_tp)]
    for side, tp in [(a, prefill_tp) for a in ps] + [(a, decode_tp) for a in ds]:
        side.pool("kv", layers=2, slot_bytes=pt * heads // tp * hb, num_slots=6, page_tokens=pt)
    for p in ps:
        p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    for d in ds:
        d.alloc("r1", "kv", [3, 4])
    xs = []
    # what each decode page holds afterwards (its recorded read checksum)
    held = {(dr, layer, t): poison(d.pools["kv"].slot_bytes)[0].copy()
            for dr, d in enumerate(ds) for layer in range(2) for t in (3, 4)}
    for pr, p in enumerate(ps):
        ph = range(pr * heads // prefill_tp, (pr + 1) * heads // prefill_tp)
        for dr, d in enumerate(ds):
            dh = range(dr * heads // decode_tp, (dr + 1) * heads // decode_tp)
            common = [h for h in ph if h in dh]
            if not common:
                continue
            sp, dp = p.pools["kv"], d.pools["kv"]
            st, dt, n = sp.slot_bytes // pt, dp.slot_bytes // pt, len(common) * hb
            descs = []
            for layer in range(2):
                for page, (s, t) in enumerate(zip([1, 2], [3, 4])):
                    for tok in range(pt):
                        doff = (common[0] - dh[0]) * hb
                        if misplace and (pr, dr) == (prefill_tp - 1, decode_tp - 1) and (layer, page, tok) == (0, 0, 1):
                            doff = 0 if doff else hb
                        soff = (common[0] - ph[0]) * hb
                        if wrong_heads and (pr, dr) == (prefill_tp - 1, decode_tp - 1) and (layer, page) == (0, 0) \
                                and (tok == 1 or wrong_heads == "page"):
                            soff = 0
                        descs.append((sp.addr(layer, s) + tok * st + soff,
                                      dp.addr(layer, t) + tok * dt + doff, n))
                        src = fill_page("r1", "kv", layer, page, sp.slot_bytes)
                        held[(dr, layer, t)][tok * dt + doff:tok * dt + doff + n] = \
                            src[tok * st + soff:tok * st + soff + n]
            msg = f"r1_{pr}_{dr}".encode()
            xs.append((p, d, p.post("r1", d, descs=descs, msg=msg), msg))
    for p, d, x, msg in xs:
        p.done(x); d.notif_recv(p, msg)
    for dr, d in enumerate(ds):
        for layer in range(2):
            d.read("r1", "kv", [3, 4], layers=[layer], checksums=[kvh64(held[(dr, layer, t)]) for t in (3, 4)])
    return b.close()


#: prefill's source and decode's destination slots per request (r3 reuses r1's source slots)
HANDOFF_SLOTS = {"r1": ([1, 2], [5, 6]), "r2": ([3, 4], [7, 8]), "r3": ([1, 2], [9, 10])}


def thread_handoff(path, steps):
    """Prefill records its KV writes on the scheduler thread (0) and posts and completions
    on a transfer worker (1), as SGLang's hooks do (sender.send() writes, the worker posts;
    the FastQueue between them is not in the trace). ``steps``: prefill's events in
    recorded order, ``write|post|done|free|handoff|poll rN`` (``handoff``: the worker
    sets the request's status, a msg_send to its own agent; ``poll``: the scheduler thread
    sees it, the msg_recv); decode, one thread of its own shard, then receives every
    notification and reads every request. The builder moves data at post, so a post
    recorded before its write delivers poison in the recording too."""
    b, p, d = _pair(path)
    xs = {}
    for r, (_, dst) in HANDOFF_SLOTS.items():
        if any(s.endswith(" " + r) for s in steps):
            d.alloc(r, "kv", dst)
    for step in steps:
        what, r = step.split()
        src, dst = HANDOFF_SLOTS[r]
        p.rec.pin_thread(1 if what in ("post", "done", "handoff") else 0)
        if what == "write":
            p.alloc(r, "kv", src); p.write(r, "kv", src)
        elif what == "post":
            xs[r] = p.post(r, d, src=("kv", src), dst=("kv", dst), msg=f"{r}_kv".encode())
        elif what == "done":
            p.done(xs[r])
        elif what == "handoff":
            p.msg_send(p, f"handoff:{r}", request=r)
        elif what == "poll":
            p.msg_recv(p, f"handoff:{r}", request=r)
        else:
            p.free(r, "kv", src)
    p.rec.pin_thread(0)
    for r in xs:
        d.notif_recv(p, f"{r}_kv".encode()); d.read(r, "kv", HANDOFF_SLOTS[r][1])
    return b.close()


SCENARIOS = {
    "clean": lambda path: pd_workload(path, requests=12, concurrency=3),
    "clean_index_k": lambda path: pd_workload(path, requests=8, concurrency=2, index_k=True),
    "prefix": prefix_sharing,
    "early_src_free": lambda path: pd_workload(path, requests=8, concurrency=2, bug="early-src-free"),
    "uniform": lambda path: pd_workload(path, requests=6, concurrency=2, bug="uniform-slot-count"),
    "abort": abort_late_write,
    "abort_fixed": lambda path: abort_late_write(path, bug=False),
    "notify": notify_then_read,
    "bytes_only": bytes_only,
    "bytes_only_bug": lambda path: bytes_only(path, bug=True),
    "oob": out_of_bounds,
    "head_split_p1d2": head_split,
    "head_split_p2d1": lambda path: head_split(path, 2, 1),
    "head_split_p1d2_misplaced": lambda path: head_split(path, misplace=True),
    "head_split_p2d1_misplaced": lambda path: head_split(path, 2, 1, misplace=True),
    # prefill's write and post on two threads (test_thread_handoff.py)
    "handoff_write_then_post": lambda path: thread_handoff(path, ["write r1", "post r1", "write r2", "post r2",
                                                                   "done r1", "done r2"]),
    "handoff_post_before_write": lambda path: thread_handoff(path, ["write r1", "post r1", "post r2", "write r2",
                                                                     "done r1", "done r2"]),
    "handoff_reuse_in_flight": lambda path: thread_handoff(path, ["write r1", "post r1", "free r1", "write r3",
                                                                   "post r3", "done r1", "done r3"]),
    "handoff_reuse_after_done": lambda path: thread_handoff(path, ["write r1", "post r1", "done r1", "free r1",
                                                                    "write r3", "post r3", "done r3"]),
    # the same with the status hand-off recorded (worker sets Success, the scheduler's poll sees it)
    "handoff_reuse_after_done_recorded": lambda path: thread_handoff(
        path, ["write r1", "post r1", "done r1", "handoff r1", "poll r1", "free r1", "write r3", "post r3",
               "done r3", "handoff r3", "poll r3"]),
}
# fully covered pages with the wrong heads: the symbolic executor lists the page's parts
# ("mixed: ..."), the byte executor sees one misaligned page, so these stay out of the
# executors' word-for-word comparison (test_head_split.py checks both fail)
SCENARIOS_VERIFY_ONLY = {
    "head_split_p1d2_wrong_heads": lambda path: head_split(path, wrong_heads="token"),
    "head_split_p1d2_wrong_page": lambda path: head_split(path, wrong_heads="page"),
}
CLEAN = ("clean", "clean_index_k", "prefix", "abort_fixed", "notify", "bytes_only", "head_split_p1d2",
         "head_split_p2d1", "handoff_write_then_post", "handoff_reuse_after_done_recorded")


@pytest.fixture(scope="session")
def scenario(tmp_path_factory):
    """scenario(name) -> path of that trace (built once per session)."""
    made = {}

    def get(name):
        if name not in made:
            build = SCENARIOS.get(name) or SCENARIOS_VERIFY_ONLY[name]
            made[name] = build(str(tmp_path_factory.mktemp("replay") / f"{name}.kvtrace"))
        return made[name]
    return get
