"""KV memory of one side: one buffer per (pool, layer), and page allocators.

Buffers are numpy arrays on CPU (registered with NIXL as (addr, len, 0) DRAM regions)
or torch tensors with ``device="cuda"`` (registered as tensors, VRAM; filled and
checksummed by the Triton kernels in place). ``device="torch-cpu"`` runs that tensor
path on host memory (what CI can test without a GPU). The engine only
touches them through ``write``/``read`` with whole slots, so the same code runs on both.
Unwritten memory holds the provenance poison pattern, so "never delivered" is visible.
"""
from __future__ import annotations

import heapq

import numpy as np

from ...kernels.checksum import kvh64_ranges, kvh64_rows
from ...kernels.provenance import poison
from .verify import content


class Region:
    """One (pool, layer) buffer: ``num_slots`` rows of ``item_len`` bytes."""

    def __init__(self, pool, layer: int, device: str):
        self.pool, self.layer, self.device = pool, layer, device
        rows = poison(pool.item_len, pool.num_slots)
        if device == "cpu" or pool.mem_type == "DRAM":
            self.buf = rows
            self.addr = int(rows.ctypes.data)
            self.dev_id = 0
            self.mem_type = "DRAM"
        else:
            import torch  # only with --device cuda (or "torch-cpu": the tensor path on host memory)
            self.buf = torch.from_numpy(rows).to("cpu" if device == "torch-cpu" else device)
            self.addr = int(self.buf.data_ptr())
            self.dev_id = int(self.buf.device.index or 0)
            self.mem_type = "VRAM" if self.buf.is_cuda else "DRAM"

    @property
    def nbytes(self) -> int:
        return self.pool.region_bytes

    def slot_addrs(self) -> np.ndarray:
        """Address of every slot (the prepped list entries of this region)."""
        return self.addr + np.arange(self.pool.num_slots, dtype=np.uint64) * np.uint64(self.pool.item_len)

    def write(self, slots, rows: np.ndarray, used_last: int | None = None) -> None:
        """Store ``rows`` into ``slots``; the last row only up to ``used_last`` bytes
        (a partly filled last page keeps whatever its tail held)."""
        slots = np.asarray(slots, dtype=np.int64)
        if used_last is not None and used_last < rows.shape[1]:
            self._put(slots[:-1], rows[:-1])
            self._put(slots[-1:], rows[-1:, :used_last], used_last)
        else:
            self._put(slots, rows)

    def _put(self, slots, rows, width=None) -> None:
        if len(slots) == 0:
            return
        if isinstance(self.buf, np.ndarray):
            self.buf[slots, :width] = rows
        else:
            import torch
            idx = torch.as_tensor(slots, device=self.buf.device)
            self.buf[idx, :width] = torch.from_numpy(np.ascontiguousarray(rows)).to(self.buf.device)

    def fill(self, slots, key: str, layer: int, pages, used_last: int) -> None:
        """The producer's forward: provenance content of (key, pool, layer, page) into
        ``slots``, the last one only up to ``used_last`` bytes."""
        item = self.pool.item_len
        if isinstance(self.buf, np.ndarray):
            self.write(slots, content(key, self.pool.name, layer, pages, item), used_last)
            return
        from ...kernels import api  # Triton fill on the device: no host round trip
        n = np.full(len(slots), item, np.int64)
        n[-1] = used_last
        api.fill_provenance(self.buf, np.asarray(slots, np.int64) * item, n, key, self.pool.name, layer,
                            np.asarray(pages, np.int64))

    def read(self, slots) -> np.ndarray:
        """A host copy of ``slots`` (n, item_len) uint8."""
        slots = np.asarray(slots, dtype=np.int64)
        if isinstance(self.buf, np.ndarray):
            return self.buf[slots]
        import torch
        return self.buf[torch.as_tensor(slots, device=self.buf.device)].cpu().numpy()


class Memory:
    """All regions of one side, by pool name then layer."""

    def __init__(self, pools, device: str = "cpu"):
        self.pools = {p.name: p for p in pools}
        self.regions = {p.name: [Region(p, layer, device) for layer in range(p.layers)] for p in pools}

    def region(self, pool: str, layer: int) -> Region:
        return self.regions[pool][layer]

    def layer_checksums(self, pool: str, slots, rows_by_layer=None) -> np.ndarray:
        """kvh64 of ``slots`` in every layer of ``pool``, shape (layers, len(slots)), in one
        hash call (one kernel launch on a GPU) instead of one per layer: recording cost is
        per call far more than per byte at KV page sizes. ``rows_by_layer``: host copies
        already made of those slots, one (len(slots), item_len) array per layer, hashed
        on the host when the memory is host memory (on a GPU the kernel is faster)."""
        regions = self.regions[pool]
        slots = np.asarray(slots, dtype=np.int64)
        numpy_buf = isinstance(regions[0].buf, np.ndarray)
        if rows_by_layer is not None and (numpy_buf or not regions[0].buf.is_cuda):
            return np.stack([kvh64_rows(rows) for rows in rows_by_layer]).reshape(len(regions), len(slots))
        item = self.pools[pool].item_len
        if numpy_buf:  # hashed where the slots lie, no gather copy, all layers in one call
            return kvh64_ranges([r.buf.reshape(-1) for r in regions], np.tile(slots * item, len(regions)), item,
                                np.repeat(np.arange(len(regions)), len(slots))).reshape(len(regions), len(slots))
        from ...kernels import api  # Triton: all layers' slots in one launch
        return api.checksum_slots([r.buf for r in regions], np.tile(slots * item, len(regions)), item,
                                  regions=np.repeat(np.arange(len(regions)), len(slots))
                                  ).reshape(len(regions), len(slots))

    def kv_regions(self) -> list[Region]:
        """kv_data regions in SGLang's order: every kv layer, then every index_k layer."""
        return [r for p in self.pools.values() if p.prepped_kv for r in self.regions[p.name]]


class PageAllocator:
    """Slots of one pool with reference counts; hands out the lowest free slots first.

    Lowest-first (SGLang's paged allocator sorts its free list when it merges released
    pages back) means a freed slot is the next one handed out -- so a slot freed too
    early really does get new contents soon.
    """

    def __init__(self, num_slots: int):
        self.num_slots = num_slots
        self.refs = np.zeros(num_slots, dtype=np.int32)
        self._free = list(range(num_slots))
        heapq.heapify(self._free)

    @property
    def available(self) -> int:
        return len(self._free)

    def alloc(self, n: int) -> list[int] | None:
        """``n`` fresh slots (refcount 1), or None when fewer are free."""
        if n > len(self._free):
            return None
        out = [heapq.heappop(self._free) for _ in range(n)]
        self.refs[out] = 1
        return out

    def ref(self, slots) -> None:
        """One more reference to slots someone already holds (prefix sharing)."""
        assert all(self.refs[s] > 0 for s in slots), "ref of a free slot"
        self.refs[list(slots)] += 1

    def unref(self, slots) -> list[int]:
        """Drop one reference each; returns the slots that became free."""
        freed = []
        for s in slots:
            self.refs[s] -= 1
            if self.refs[s] == 0:
                heapq.heappush(self._free, s)
                freed.append(s)
        return freed
