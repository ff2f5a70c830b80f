"""Kernels: provenance fill, slot checksum (kvh64), descriptor copy, provenance decode.

Every kernel has a numpy/torch CPU path with bit-identical results; the Triton versions
are imported lazily (Triton is optional).
"""
from .checksum import kvh64, kvh64_rows

__all__ = ["kvh64", "kvh64_rows"]
