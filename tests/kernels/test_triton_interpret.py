"""Triton kernels under Triton's interpreter (CPU tensors) give the CPU path's bits."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (bash scripts/setup.sh --kernels adds the CPU build)")

from kvtrace.kernels import checksum_slots, copy_ranges, fill_provenance

import kernel_cases as cases


@pytest.mark.parametrize("align", [1, 4, 16])
def test_checksum(interpret, align):
    got, want = cases.checksum_case(np.random.default_rng(align), interpret, "cpu", 8192, 12, 700, align)
    assert np.array_equal(got, want)


def test_checksum_many_regions_one_launch(interpret):
    rng = np.random.default_rng(5)
    regs = [cases.rand_bytes(rng, n) for n in (1000, 333, 2048)]
    reg = np.array([0, 1, 2, 2, 0, 1])
    off = np.array([10, 0, 1024, 4, 512, 200])
    got = checksum_slots(regs, off, 130, regions=reg, backend=interpret)
    assert np.array_equal(got, checksum_slots(regs, off, 130, regions=reg, backend="cpu"))


@pytest.mark.parametrize("align", [1, 4, 16])
def test_copy(interpret, align):
    got, want = cases.copy_case(np.random.default_rng(align), interpret, "cpu", 8192, 8, 600, align)
    assert torch.equal(got, want)


def test_copy_overlapping_ranges_run_in_order(interpret):
    a = torch.arange(256, dtype=torch.int32).view(torch.uint8)[:1000].clone()
    b = a.clone()
    ranges = [(0, 3, 100), (50, 60, 200), (300, 0, 64)]   # dst overlaps dst and src
    copy_ranges(a, a, ranges, backend=interpret)
    copy_ranges(b.numpy(), b.numpy(), ranges, backend="cpu")
    assert torch.equal(a, b)


@pytest.mark.parametrize("page,align", [(512, 4), (333, 1), (1000, 3)])
def test_fill(interpret, page, align):
    got, want = cases.fill_case(np.random.default_rng(0), interpret, "cpu", 8192, 6, page, align)
    assert torch.equal(got, want)


def test_fill_writes_only_its_pages(interpret):
    buf = torch.full((600,), 0x11, dtype=torch.uint8)
    fill_provenance(buf, [5], 301, "r", "kv", 0, 0, backend=interpret)
    assert (buf[:5] == 0x11).all() and (buf[306:] == 0x11).all() and not (buf[5:306] == 0x11).all()


def test_decode(interpret):
    got, want = cases.decode_case(np.random.default_rng(3), interpret, "cpu", 1024, 6)
    assert got == want
    assert [p.kind for p in got[:2]] == ["data", "poison"]
    assert got[2].page == 2 and 0.5 < got[2].agree < 1.0           # majority survives
    assert got[3].aligned is False                                  # shifted copy shows


def test_wrong_device_backend_is_refused():
    with pytest.raises(ValueError, match="cannot run"):
        checksum_slots(torch.zeros(16, dtype=torch.uint8), [0], 16, backend="triton")


def _intersect_brute(do, n) -> bool:
    live = [(d, d + k) for d, k in zip(do.tolist(), n.tolist()) if k > 0]
    return any(a < f and c < b for i, (a, b) in enumerate(live) for c, f in live[i + 1:])


def test_destination_overlap_check_matches_brute_force():
    """The launcher's overlap test (page histogram for equal aligned pages, two sorts
    otherwise) decides exactly like comparing every pair, empty ranges included."""
    from kvtrace.kernels import _launch
    rng = np.random.default_rng(5)
    for _ in range(2000):
        m, page = int(rng.integers(1, 8)), int(rng.choice([4, 12, 16]))
        if rng.random() < 0.5:
            do, n = rng.integers(0, 12, m) * page, np.full(m, page)
        else:
            do, n = rng.integers(0, 60, m), rng.integers(0, 10, m)
        do, n = do.astype(np.int64), n.astype(np.int64)
        assert _launch._overlapping(do + 1000, do, n, False) == _intersect_brute(do, n), (do, n)


@pytest.mark.parametrize("nbytes", [512, 1024, 4096])
def test_checksum_whole_tile_slots(interpret, nbytes):
    """Equal slots that fill their tiles exactly take the unmasked kernel path (FULL);
    its bits equal the CPU path's, beside a masked launch (one slot a word shorter)."""
    rng = np.random.default_rng(nbytes)
    data = cases.rand_bytes(rng, 64 * nbytes)
    off = rng.permutation(64)[:24].astype(np.int64) * nbytes
    got = checksum_slots(data, off, nbytes, backend=interpret)
    assert np.array_equal(got, checksum_slots(data.numpy(), off, nbytes, backend="cpu"))
    n = np.full(len(off), nbytes)
    n[3] -= 4
    assert np.array_equal(checksum_slots(data, off, n, backend=interpret),
                          checksum_slots(data.numpy(), off, n, backend="cpu"))
