"""Shared scenarios: run one kernel operation on a backend, compare with the CPU path.

Used by the interpreter tests (small sizes, CI) and the gpu tests (large sizes, CUDA).
"""
import numpy as np
import torch

from kvtrace.kernels import (checksum_slots, copy_ranges, decode_pages, fill_poison,
                             fill_provenance)


def rand_bytes(rng, n, device="cpu"):
    return torch.from_numpy(rng.integers(0, 256, n, dtype=np.uint8)).to(device)


def slots(rng, size, count, max_n, align):
    """``count`` (offset, nbytes) inside ``size`` bytes, offsets multiple of ``align``."""
    n = rng.integers(0, max_n + 1, count)
    if align > 1:
        n = n // align * align
    off = rng.integers(0, size - max_n, count) // align * align
    return off.astype(np.int64), n.astype(np.int64)


def checksum_case(rng, backend, device, size, count, max_n, align):
    buf = rand_bytes(rng, size, device)
    off, n = slots(rng, size, count, max_n, align)
    got = checksum_slots(buf, off, n, backend=backend)
    want = checksum_slots(buf.cpu(), off, n, backend="cpu")
    return got, want


def disjoint_ranges(rng, size, count, max_n, align):
    """Ranges whose destinations do not overlap (so one launch runs them all)."""
    n = rng.integers(1, max_n + 1, count) // align * align
    slot = size // count
    d = np.arange(count) * slot + rng.integers(0, max(1, slot - max_n), count) // align * align
    s = rng.integers(0, size - max_n, count) // align * align
    return np.stack([s, d, n], 1).astype(np.int64)


def copy_case(rng, backend, device, size, count, max_n, align):
    src = rand_bytes(rng, size, device)
    dst = rand_bytes(rng, size, device)
    ref = dst.cpu().clone()
    ranges = disjoint_ranges(rng, size, count, max_n, align)
    copy_ranges(src, dst, ranges, backend=backend)
    copy_ranges(src.cpu(), ref, ranges, backend="cpu")
    return dst.cpu(), ref


def fill_case(rng, backend, device, size, count, page, align):
    dst = torch.zeros(size, dtype=torch.uint8, device=device)
    ref = torch.zeros(size, dtype=torch.uint8)
    off = np.arange(count, dtype=np.int64) * (page + align) + align   # disjoint pages
    nb = np.full(count, page, np.int64)
    reqs = [f"r{i % 3}" for i in range(count)]
    for t, b in ((dst, backend), (ref, "cpu")):
        fill_provenance(t, off[::2], nb[::2], reqs[::2], "index_k", 7, np.arange(0, count, 2), backend=b)
        fill_poison(t, off[1::2], nb[1::2], backend=b)
    return dst.cpu(), ref


def decode_case(rng, backend, device, page, pages):
    """Clean pages, poison, a page half overwritten, a misaligned page, garbage."""
    buf = torch.zeros(page * (pages + 2), dtype=torch.uint8, device=device)
    fill_provenance(buf, np.arange(pages) * page, page, "rA", "kv", 1, np.arange(pages), backend="cpu"
                    if device == "cpu" else backend)
    fill_poison(buf, [page], page, backend="cpu" if device == "cpu" else backend)
    third = page // 3 // 16 * 16
    fill_provenance(buf, [2 * page], third, "rB", "kv", 1, 9, backend="cpu" if device == "cpu" else backend)
    buf[3 * page: 4 * page - 4] = buf[4 * page + 4: 5 * page].clone()    # shifted by 4 bytes
    buf[pages * page:] = rand_bytes(rng, 2 * page, device)
    off = np.arange(pages + 2) * page
    got = decode_pages(buf, off, page, backend=backend)
    want = decode_pages(buf.cpu(), off, page, backend="cpu")
    return got, want
