"""Kernels: provenance fill, slot checksum (kvh64), descriptor copy, provenance decode.

The definitions are the numpy references in ``checksum.py`` and ``provenance.py``. The
batched facade in ``api.py`` runs Triton kernels on CUDA tensors and bit-identical numpy
paths elsewhere (Triton and torch are imported only when a tensor needs them)::

    from kvtrace.kernels import checksum_slots, copy_ranges, fill_provenance
    fill_provenance(pool, offsets, slot_bytes, "r1", "kv", layer=0, page=[0, 1, 2])
    sums = checksum_slots(pool, offsets, slot_bytes)          # uint64 numpy array
    copy_ranges(src_pool, dst_pool, [(src_off, dst_off, nbytes), ...])
"""
from .api import (bytes_view, checksum_rows, checksum_slots, checksum_slots_later, copy_ranges,
                  decode_pages, fill_poison, fill_provenance, tag_names)
from .checksum import kvh64, kvh64_rows
from .provenance import Provenance, decode, fill_page, fill_pages, poison, pool_tag, request_tag

__all__ = ["kvh64", "kvh64_rows", "checksum_slots", "checksum_slots_later", "checksum_rows", "copy_ranges",
           "fill_provenance", "fill_poison", "decode_pages", "bytes_view", "tag_names",
           "Provenance", "decode", "fill_page", "fill_pages", "poison", "pool_tag", "request_tag"]
