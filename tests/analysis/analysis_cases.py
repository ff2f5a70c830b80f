"""Checks as data: small PD scenarios written with the TraceBuilder, each with the findings
it must produce — ``(check, agent, request, pool, slots)`` — and nothing else.

Every bug scenario takes ``bug``; with ``bug=False`` it is its clean twin and must give
no findings. Legal patterns (prefix sharing, READ mode, appends, ...) expect none.

The scenarios live by check family in ``cases_lifetime.py`` (page lifetime),
``cases_ordering.py`` (completion order) and ``cases_layout.py`` (descriptors against
layouts); the repeated steps (pd, handshake, push, finish) in ``cases_helpers.py``.
Importing this module registers them all in ``CASES``.
"""
from __future__ import annotations

import cases_layout  # noqa: F401  (registers its scenarios)
import cases_lifetime  # noqa: F401
import cases_ordering  # noqa: F401
import cases_answers  # noqa: F401  (issue 16: attribution, owner overwrite, layouts, liveness)
import cases_replicas  # noqa: F401  (replicated writes: overlapping_inflight_writes by content)
import cases_pools  # noqa: F401  (one request's hazard over two pools: one finding per pool)
import cases_layer_geometry  # noqa: F401  (pools whose layers differ in geometry)
import cases_legal_patterns  # noqa: F401  (legal patterns of unseen engines: several holders, chunks, acks, clocks)
from cases_helpers import CASES, XFAIL, case, finish, handshake, pd, push

__all__ = ["CASES", "XFAIL", "case", "finish", "handshake", "pd", "push"]
