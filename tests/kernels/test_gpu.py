"""Compiled Triton kernels on CUDA against the CPU path, and NIXL VRAM→VRAM (H200 runs)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (GPU machines: pip install -e \".[gpu]\")")

from kvtrace.kernels import checksum_slots, checksum_slots_later, copy_ranges, fill_provenance

import kernel_cases as cases

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("align", [1, 4, 16])
def test_checksum_cuda(align):
    rng = np.random.default_rng(align)
    got, want = cases.checksum_case(rng, "triton", "cuda", 64 << 20, 2000, 70_000, align)
    assert np.array_equal(got, want)


def test_checksum_huge_slot_splits_grid():
    """A slot larger than 65535 programs' worth of words still hashes right (grid y limit)."""
    buf = cases.rand_bytes(np.random.default_rng(9), (1 << 30) + 12, "cuda")
    got = checksum_slots(buf, [4, 0], [1 << 30, 1001])
    want = checksum_slots(buf.cpu(), [4, 0], [1 << 30, 1001], backend="cpu")
    assert np.array_equal(got, want)


def test_checksum_regions_on_device():
    rng = np.random.default_rng(4)
    regs = [cases.rand_bytes(rng, n, "cuda") for n in (1 << 20, 3 << 19, 777_777)]
    reg = rng.integers(0, 3, 500)
    off = rng.integers(0, 700_000, 500)
    got = checksum_slots(regs, off, 4096, regions=reg)
    want = checksum_slots([r.cpu() for r in regs], off, 4096, regions=reg, backend="cpu")
    assert np.array_equal(got, want)


def test_checksum_later_sees_the_memory_as_the_queued_work_leaves_it():
    """The deferred hash is queued on the current stream: it sees what was queued before it
    (a fill still running) and not what is queued after (a fill before the wait)."""
    buf = cases.rand_bytes(np.random.default_rng(5), 64 << 20, "cuda")
    offs = np.arange(0, 64 << 20, 1 << 20)
    buf.fill_(7)
    later = checksum_slots_later(buf, offs, 1 << 20)
    buf.fill_(9)
    want = checksum_slots(np.full(64 << 20, 7, np.uint8), offs, 1 << 20)
    assert np.array_equal(later(), want)
    assert not np.array_equal(checksum_slots(buf, offs, 1 << 20), want)


def test_vram_writes_hashed_off_the_hook_give_the_synchronous_bits(writes_both_ways):
    """record_writes on VRAM regions: queued in the hook, filled in on the hashing thread;
    the same events as hashing inside the hook."""
    class Region:
        def __init__(self, layer, buf):
            self.pool, self.layer, self.buf = "kv", layer, buf
            self.ptr, self.item, self.slots, self.mem, self.device = buf.data_ptr(), 4096, 64, "VRAM", buf.device.index
    rng = np.random.default_rng(6)
    regs = [Region(layer, cases.rand_bytes(rng, 4096 * 64, "cuda")) for layer in range(3)]
    got = writes_both_ways(regs, [9, 0, 63], [0, 1, 2])
    assert got["async"] == got["sync"]
    want = checksum_slots(regs[2].buf.cpu(), np.array([9, 0, 63]) * 4096, 4096, backend="cpu")
    assert got["async"][2][3] == [int(x) for x in want]


@pytest.mark.parametrize("align", [1, 4, 16])
def test_copy_cuda(align):
    got, want = cases.copy_case(np.random.default_rng(align), "triton", "cuda", 64 << 20, 1000, 60_000, align)
    assert torch.equal(got, want)


def test_copy_overlap_cuda():
    a = cases.rand_bytes(np.random.default_rng(1), 1 << 16, "cuda")
    b = a.cpu().clone()
    ranges = [(0, 1, 5000), (4000, 3000, 9000), (60000, 0, 10)]
    copy_ranges(a, a, ranges)
    copy_ranges(b, b, ranges, backend="cpu")
    assert torch.equal(a.cpu(), b)


@pytest.mark.parametrize("page,align", [(73_728, 16), (8_448, 4), (1_001, 3)])
def test_fill_cuda(page, align):
    got, want = cases.fill_case(np.random.default_rng(0), "triton", "cuda", 4000 * (page + align), 3000, page, align)
    assert torch.equal(got, want)


def test_decode_cuda():
    got, want = cases.decode_case(np.random.default_rng(3), "triton", "cuda", 73_728, 40)
    assert got == want and got[0].kind == "data" and got[1].kind == "poison"


def test_nixl_vram_write_delivers_checksummed_pages():
    """Prefill-like VRAM pool → decode-like VRAM pool through NIXL (UCX), pages scattered;
    the device checksum of every delivered slot equals its source's, and a slot NIXL did
    not touch keeps its poison (the clean twin of a wrong page)."""
    nixl_api = pytest.importorskip("nixl._api")
    from kvtrace.kernels import fill_poison
    page, slots = 8192, 256
    src = torch.empty(page * slots, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    fill_provenance(src, np.arange(slots) * page, page, "r1", "kv", 0, np.arange(slots))
    fill_poison(dst, np.arange(slots) * page, page)
    cfg = nixl_api.nixl_agent_config(backends=["UCX"], enable_prog_thread=False, enable_listen_thread=False)
    a, b = nixl_api.nixl_agent("gpu-prefill", cfg), nixl_api.nixl_agent("gpu-decode", cfg)
    a.register_memory([src])
    b.register_memory([dst])
    a.add_remote_agent(b.get_agent_metadata())
    src_slots = np.arange(0, slots - 1)
    dst_slots = np.random.default_rng(0).permutation(slots)[: slots - 1]
    dev = src.device.index or 0
    sd = a.get_xfer_descs(np.stack([src.data_ptr() + src_slots * page, np.full(len(src_slots), page),
                                    np.full(len(src_slots), dev)], 1), "VRAM")
    dd = a.get_xfer_descs(np.stack([dst.data_ptr() + dst_slots * page, np.full(len(dst_slots), page),
                                    np.full(len(dst_slots), dev)], 1), "VRAM")
    h = a.initialize_xfer("WRITE", sd, dd, "gpu-decode", b"r1_kv_0_1_0")
    assert a.transfer(h) in ("PROC", "DONE")
    while (state := a.check_xfer_state(h)) == "PROC":
        b.get_new_notifs()
    assert state == "DONE"
    a.release_xfer_handle(h)
    got = checksum_slots(dst, dst_slots * page, page)
    assert np.array_equal(got, checksum_slots(src, src_slots * page, page))
    untouched = np.setdiff1d(np.arange(slots), dst_slots)
    from kvtrace.kernels import decode_pages
    assert [p.kind for p in decode_pages(dst, untouched * page, page)] == ["poison"]
    first = decode_pages(dst, dst_slots[:1] * page, page)[0]
    assert (first.kind, first.page, first.agree) == ("data", int(src_slots[0]), 1.0)
