"""Byte executor: re-creates the memory a trace touches and moves real bytes.

Only touched cells are re-created (never whole production regions): each agent gets
one *arena* packing its cells back to back, poisoned at start (provenance.poison, so
"never delivered" is recognisable). Writes fill provenance pages (words tagged with
their offset, so misaligned copies show); moves copy byte ranges through a pluggable
copy routine; reads are hashed with kvh64 and decoded to say whose bytes they hold.
Descriptors outside re-created memory were already dropped by the loader.

Memory and kernels: numpy on CPU; with ``device="cuda"`` torch tensors on the GPU and
the Triton kernels of ``kvtrace.kernels.api`` (the same bits as the CPU path).
"""
from __future__ import annotations

import collections
import time

import numpy as np

from ..errors import UsageError
from ..kernels.checksum import kvh64_rows
from ..kernels.provenance import decode as decode_page
from ..kernels.provenance import fill_pages, poison, pool_tag, request_tag
from .symbolic import checksum as content_checksum
from .symbolic import clip, initial_atom, write_atom


class _Bytes:
    """A read's bytes, compared by checksum only (equality/hash by identity is enough)."""
    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


def _kernels_api():
    try:
        from ..kernels import api  # optional: written alongside; numpy fallback below
        return api
    except ImportError:
        return None


class ByteExecutor:
    """Executes a run on re-created bytes.

    Args:
        device: "cpu" (numpy) or "cuda" (torch tensors + Triton kernels).
        copy: optional ``copy(src_arena, dst_arena, ranges)`` replacing the copy routine
            (ranges: (src offset, dst offset, nbytes) rows).
    """

    name = "bytes"

    def __init__(self, device: str = "cpu", copy=None):
        self.device = device
        self._copy = copy
        self.bytes_moved = 0
        self.copy_s = 0.0          # time spent inside the copy routine (benchmarks)

    # -- memory ---------------------------------------------------------------------------
    def start(self, graph) -> None:
        self.g = graph
        cells = graph.mem.cells
        self.where = [None] * len(cells)      # cell -> (agent index, arena offset)
        sizes = collections.OrderedDict()
        agents = {}
        for cid, c in enumerate(cells):
            ai = agents.setdefault(c.agent, len(agents))
            off = sizes.get(ai, 0)
            self.where[cid] = (ai, off)
            sizes[ai] = off + c.size
        self.agent_names = list(agents)
        host = []
        for ai in range(len(agents)):
            a = np.empty(max(1, sizes.get(ai, 0)), np.uint8)
            host.append(a)
        self.names = {request_tag(r): r for r in graph.requests}
        for cid, c in enumerate(cells):
            ai, off = self.where[cid]
            atom = initial_atom(c)
            if atom is None:
                host[ai][off:off + c.size] = poison(c.size)[0]
            else:
                host[ai][off:off + c.size] = fill_pages(request_tag(atom[0]), pool_tag("mem"), 0,
                                                         np.asarray([0]), c.size)[0]
                self.names[request_tag(atom[0])] = atom[0]
        self.api = _kernels_api()
        self.arenas = self._to_device(host)
        self.snap: dict[int, list] = {}

    def _to_device(self, host: list):
        if self.device == "cpu":
            return host
        import torch  # ~1 s import; only for --device cuda
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device available")
        if self.api is None:
            raise UsageError(f"--device {self.device}: kvtrace.kernels.api is not available")
        # "torch-cpu": the tensor/kernel path on CPU tensors (tests it without a GPU)
        dev = "cpu" if self.device == "torch-cpu" else self.device
        return [torch.from_numpy(h).to(dev) for h in host]

    def _host(self, ai: int, off: int, n: int) -> np.ndarray:
        a = self.arenas[ai]
        if self.device == "cpu":
            return a[off:off + n]
        return a[off:off + n].cpu().numpy()

    def _cell_checksums(self, cells: list[int]) -> list[int]:
        """kvh64 of cells, one batched call per agent arena."""
        if not cells:
            return []
        sizes = self.g.mem.cells
        if self.device != "cpu":
            return [int(self.api.checksum_slots(self.arenas[self.where[c][0]], [self.where[c][1]],
                                                [sizes[c].size])[0]) for c in cells]
        if len({sizes[c].size for c in cells}) == 1:
            n = sizes[cells[0]].size
            rows = np.stack([self.arenas[self.where[c][0]][self.where[c][1]:self.where[c][1] + n] for c in cells])
            return [int(x) for x in kvh64_rows(rows)]
        return [int(kvh64_rows(self._host(*self.where[c], sizes[c].size)[None, :])[0]) for c in cells]

    def _snapshot(self, cells: list[int]) -> list:
        return [self._host(*self.where[c], self.g.mem.cells[c].size).copy() for c in cells]

    # -- operations -----------------------------------------------------------------------
    def post(self, xi: int) -> None:
        g = self.g
        for m in g.transfers[xi].chunks:
            self.snap[m] = self._snapshot([p[0] for p in g.move_pieces[m - g.n_prog]])

    def write(self, op: int) -> None:
        g = self.g
        cells = [c for c in g.cells[op] if c is not None]
        if not cells:
            return
        atoms = [write_atom(g, op, i) for i, c in enumerate(g.cells[op]) if c is not None]
        size = g.mem.cells[cells[0]].size
        ext = [e for e, c in zip(g.extent[op] or [None] * len(g.cells[op]), g.cells[op]) if c is not None]
        req, pool, layer = atoms[0][:3]
        if self.device == "cpu":
            pages = fill_pages(request_tag(req), pool_tag(pool), layer, np.asarray([a[3] for a in atoms]), size)
            for row, cell, e in zip(pages, cells, ext):
                ai, off = self.where[cell]
                n = size if e is None else e     # a partly filled last page keeps its tail
                self.arenas[ai][off:off + n] = row[:n]
        else:
            for a, cell, e in zip(atoms, cells, ext):
                ai, off = self.where[cell]
                self.api.fill_provenance(self.arenas[ai], [off], [size if e is None else e], a[0], a[1], a[2], a[3])

    def read(self, op: int) -> list:
        """(kvh64, the slot's bytes) per slot; the bytes are decoded only when described."""
        g = self.g
        cells = g.cells[op]
        real = [c for c in cells if c is not None]
        css = self._cell_checksums(real)
        snaps = self._snapshot(real)
        out, k = [], 0
        for c in cells:
            if c is None:
                out.append(None)
                continue
            out.append((css[k], _Bytes(snaps[k])))
            k += 1
        return out

    def move(self, m: int) -> bool:
        g = self.g
        pieces = g.move_pieces[m - g.n_prog]
        snap = self.snap.pop(m, None)
        same = snap is None or all(np.array_equal(a, b) for a, b in zip(snap, self._snapshot([p[0] for p in pieces])))
        groups = collections.defaultdict(list)
        for sc, so, dc, do, n in pieces:
            (sa, soff), (da, doff) = self.where[sc], self.where[dc]
            groups[(sa, da)].append((soff + so, doff + do, n))
            self.bytes_moved += n
        t0 = time.perf_counter()
        for (sa, da), ranges in groups.items():
            self.copy(sa, da, ranges)
        self.copy_s += time.perf_counter() - t0
        return same

    def copy(self, sa: int, da: int, ranges: list) -> None:
        """Copy byte ranges between arenas: the pluggable copy routine."""
        src, dst = self.arenas[sa], self.arenas[da]
        if self._copy is not None:
            return self._copy(src, dst, ranges)
        if self.device != "cpu":
            return self.api.copy_ranges(src, dst, ranges)
        for so, do, n in ranges:   # applied in order, like overlapping NIXL descriptors
            dst[do:do + n] = src[so:so + n]

    # -- verification hooks -----------------------------------------------------------------
    def checksums(self, op: int, observed: list) -> list:
        return [None if o is None else o[0] for o in observed]

    def matches(self, observed, expected: tuple, size: int, extent: int | None = None) -> bool:
        if extent is None:
            return observed[0] == content_checksum(expected, size)
        got = int(kvh64_rows(np.ascontiguousarray(observed[1].data[:extent])[None, :])[0])
        return got == content_checksum(clip(expected, extent), extent)

    def describe(self, observed, graph=None, extent: int | None = None) -> str:
        p = decode_page(observed[1].data[:extent])
        if p.kind == "poison":
            return "poison (never delivered)"
        if p.kind != "data":
            return "unrecognisable bytes"
        who = self.names.get(p.request_tag, f"request#{p.request_tag:08x}")
        if p.pool_tag == pool_tag("mem") and "@" in who:
            return f"the initial bytes of {who}" + ("" if p.aligned else " misaligned")
        pools = {pool_tag(r["pool"]): r["pool"] for r in graph.layouts.values()} if graph else {}
        page = "?" if p.page == 0xFFFFFFFF else p.page
        w = f"{who}'s bytes ({pools.get(p.pool_tag, '?')} L{p.layer} page {page})"
        if p.agree < 0.999:
            w = "mixed: mostly " + w
        return w + ("" if p.aligned else " misaligned")
