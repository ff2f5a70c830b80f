"""The further answers `kvtrace check` prints after the findings: what a request still
open at trace end holds and waits for, and how the two sides' buffer layouts differ.
Each is name → (JSON value, text lines)."""
from __future__ import annotations


def sections(session) -> dict:
    out = {}
    return out
