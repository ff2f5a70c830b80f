"""A derived table declared in pieces (a "-- pieces:" header: end_hold_ids, desc_match_ids) is built
out of core piece by piece, in ranges of transfers, when the rows its hash joins build on
outgrow a share of the memory cap (memory.PIECE_SHARE): each piece reads only its share of
the descriptors, holdings and ends, so nothing spills. The rows, and so the findings, are
those of the one statement in memory."""
from __future__ import annotations

import os

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.model import memory
from kvtrace.model.registry import parse_sql, registry
from kvtrace.model.derived import RegistryError
from kvtrace.model.sqltext import query_sql


def _rows(s) -> dict[str, tuple]:
    """Every derived object's row count and order-independent digest (bench/derived_digest.py)."""
    out = {}
    for name in sorted(s._built):
        if not s.execute(query_sql("object_kind"), [name]).fetchall():
            continue     # a macro
        out[name] = s.execute(f'SELECT count(*), coalesce(sum(hash(t)::HUGEINT), 0) FROM "{name}" t').fetchall()[0]
    return out


def _findings(s) -> list[tuple]:
    return sorted((f.check, f.request, f.agent, f.pool, f.count, f.message, repr(sorted(map(repr, f.events))))
                  for f in s.findings())


@pytest.mark.parametrize("bug", [None, "early-free"])
def test_pieces_out_of_core_same_rows_and_findings(tmp_path, monkeypatch, bug, gen_synthetic):
    path = str(tmp_path / "t.kvtrace")
    made = gen_synthetic.build(path, 10_000, bug=bug)
    end_hold, desc_match = registry()["desc_hold_ids"], registry()["desc_match_ids"]
    assert end_hold.piece_key == ("xfers", "xfer") and end_hold.pieces == ("holding_list", "xfers")
    assert desc_match.piece_key == ("xfers", "xfer") and desc_match.pieces == ("desc_hold_ids",)
    assert desc_match.pieces_divisor == 2 and end_hold.pieces_divisor == 1

    monkeypatch.setenv("KVTRACE_DATABASE", "memory")
    with TraceSession(path, keep_derived=False) as s:     # far below the cap: one piece
        s.derive()
        assert s._piece_params(end_hold) == s._piece_params(desc_match) == [{"lo": None, "hi": None}]
        whole, found = _rows(s), _findings(s)
    if bug is None:
        assert found == []                                # the clean twin stays clean
    else:
        planted = {f"r{i}" for i in range(0, made["requests"], 97)}
        assert {f[0] for f in found} == {"src_free_before_done"}
        assert {f[1] for f in found} == planted

    # out of core (a database file) with the pieces' share of the cap so small that the
    # holdings and transfers need several pieces
    monkeypatch.setenv("KVTRACE_DATABASE", "file")
    monkeypatch.setattr(memory, "PIECE_SHARE", 1e-4)
    for keep in (True, False):   # pieces written straight to Parquet files / inserted into one table
        with TraceSession(path, keep_derived=keep, memory_limit="500MB") as s:
            s.derive()
            for d in (end_hold, desc_match):
                runs = s._piece_params(d)
                assert len(runs) >= 2
                # consecutive ranges of transfers, unbounded at both ends
                assert runs[0]["lo"] is None and runs[-1]["hi"] is None
                assert all(a["hi"] == b["lo"] and a["hi"] is not None for a, b in zip(runs, runs[1:]))
                if keep:
                    folder = s._store._file(d.name)
                    assert os.path.isdir(folder) and len(os.listdir(folder)) == len(runs)
            assert _rows(s) == whole
            assert _findings(s) == found
        if keep:   # the next model reads the saved pieces back: the same rows again
            with TraceSession(path, keep_derived=True, memory_limit="500MB") as s:
                s.derive(["end_hold"])
                assert s.execute("SELECT count(*), sum(hash(t)::HUGEINT) FROM end_hold t").fetchall()[0] \
                    == whole["end_hold"]


def test_piece_count_keeps_each_piece_within_its_share():
    cap = 10**9
    share = cap * memory.PIECE_SHARE
    assert memory.piece_count(0, cap) == 1
    assert memory.piece_count(share, cap) == 1
    assert memory.piece_count(share + 1, cap) == 2
    assert memory.piece_count(share * 7.5, cap) == 8


def test_pieces_header_names_required_tables():
    d = parse_sql("a", "-- requires: b, c\n-- pieces: b.k by b, c\nCREATE TABLE a AS SELECT * FROM b WHERE k >= $lo")
    assert d.piece_key == ("b", "k") and d.pieces == ("b", "c") and d.pieces_divisor == 1
    assert parse_sql("a", "-- requires: b\n-- pieces: b.k by b / 3\nCREATE TABLE a AS SELECT 1").pieces_divisor == 3
    plain = parse_sql("a", "-- requires: b\nCREATE TABLE a AS SELECT 1")
    assert plain.piece_key is None and plain.pieces == ()
    for bad in ("-- requires: b\n-- pieces: z.k by b\nCREATE TABLE a AS SELECT 1",   # not required
                "-- requires: b\n-- pieces: b.k by z\nCREATE TABLE a AS SELECT 1",
                "-- requires: b\n-- pieces: b\nCREATE TABLE a AS SELECT 1",          # no key column
                "-- requires: b\n-- pieces: b.k by b / 0\nCREATE TABLE a AS SELECT 1",
                "-- requires: b\n-- pieces: b.k by b\nCREATE VIEW a AS SELECT 1"):  # not a table
        with pytest.raises(RegistryError):
            parse_sql("a", bad)
