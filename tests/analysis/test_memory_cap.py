"""The memory cap: every model runs under a DuckDB memory limit (default a fraction of
RAM, --memory / KVTRACE_DUCKDB_MEMORY to set it) and spills under the trace's index."""
from __future__ import annotations

import os

import pytest

from kvtrace.cli import main
from kvtrace.errors import UsageError
from kvtrace.model import memory

from analysis_cases import CASES


def _twin(tmp_path_factory, bug: bool) -> str:
    """The abort-free-in-flight scenario: its planted bug, or its clean twin."""
    p = str(tmp_path_factory.mktemp("mem") / ("bug.kvtrace" if bug else "clean.kvtrace"))
    CASES["abort_free_inflight"](p, bug=bug)
    return p


@pytest.fixture(scope="module")
def bug(tmp_path_factory):
    return _twin(tmp_path_factory, bug=True)


def test_default_is_a_fraction_of_ram(monkeypatch):
    monkeypatch.delenv("KVTRACE_DUCKDB_MEMORY", raising=False)
    mb = int(memory.resolve(None)[:-2])
    assert 0 < mb * 2**20 <= memory.physical_ram() * memory.RAM_FRACTION
    monkeypatch.setenv("KVTRACE_DUCKDB_MEMORY", "700MB")
    assert memory.resolve(None) == "700MB" and memory.resolve("2GB") == "2GB"
    with pytest.raises(UsageError):
        memory.resolve("lots")


def test_model_runs_under_the_cap_and_spills_under_the_index(bug):
    from kvtrace.analysis.session import TraceSession

    with TraceSession(bug, memory_limit="300MB") as s:
        lim, tmp = s.con.execute("SELECT current_setting('memory_limit'), current_setting('temp_directory')").fetchall()[0]
        assert lim.replace(" ", "").upper().startswith(("286", "300", "0.2"))   # DuckDB prints MiB/GiB
        assert os.path.dirname(tmp) == s.index_dir
        assert [f.check for f in s.findings()] == ["write_after_free"]
    assert not os.path.exists(tmp)     # the spill folder goes with the model


def test_cli_memory_flag(bug, capsys):
    assert main(["check", bug, "--memory", "300MB", "--format", "json"]) == 1
    assert '"write_after_free"' in capsys.readouterr().out
    assert main(["check", bug, "--memory", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "memory limit" in err[0]


def test_a_cap_too_small_ends_in_one_line_saying_how_to_raise_it(bug, capsys):
    assert main(["check", bug, "--memory", "1KB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "out of memory under its cap" in err[0] and "--memory" in err[0]
    assert main(["check", bug, "--memory", "300MB"]) == 1      # the same trace with room: its finding
    assert "write_after_free" in capsys.readouterr().out


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return _twin(tmp_path_factory, bug=False)


def _findings(path):
    import shutil

    from kvtrace.analysis.session import TraceSession
    from kvtrace.model.index import index_dir_for
    from kvtrace.model.persist import DERIVED_DIR

    shutil.rmtree(os.path.join(index_dir_for(path), DERIVED_DIR), ignore_errors=True)   # derive, never reuse
    with TraceSession(path) as s:
        found = sorted(map(repr, s.findings()))
        moved = {n for (n,) in s.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        return s.database, found, moved


@pytest.mark.parametrize("twin", ["bug", "clean"])
def test_tables_past_the_cap_go_to_a_database_file(twin, request, monkeypatch):
    """Derived tables that would outgrow the cap are built in a database file in the
    spill folder (out of core), with the same findings as in memory; it goes at close."""
    path = request.getfixturevalue(twin)
    monkeypatch.delenv("KVTRACE_DATABASE", raising=False)
    db, in_memory, _ = _findings(path)
    assert db == ":memory:"                                   # a small trace: in memory
    monkeypatch.setattr(memory, "DERIVED_PER_INDEX_BYTE", 10**9)   # as if it were huge
    db, on_disk, views = _findings(path)
    assert {"end_hold", "reads_ids", "slot_life"} <= views   # each table moved to its Parquet file
    assert db.endswith(".duckdb") and os.path.dirname(os.path.dirname(db)).endswith("_index")
    assert not os.path.exists(db) and not os.path.exists(os.path.dirname(db))
    assert on_disk == in_memory and (on_disk != []) == (twin == "bug")
    monkeypatch.setenv("KVTRACE_DATABASE", "sometimes")
    with pytest.raises(UsageError):
        memory.database_path("/nonexistent", "1GB")


def test_spill_folders_of_dead_processes_are_removed(bug):
    """A model killed before it closed leaves its spill folder (GBs at 100M events): the
    next model of the trace removes it, never a live process's."""
    import subprocess
    import sys

    from kvtrace.analysis.session import TraceSession

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with TraceSession(bug) as s:
        d = s.index_dir
    stale = os.path.join(d, f"spill-{int(dead.stdout)}")
    live = os.path.join(d, f"spill-{os.getppid()}")
    for p in (stale, live):
        os.makedirs(p, exist_ok=True)
        open(os.path.join(p, "x.tmp"), "w").close()
    with TraceSession(bug):
        pass
    assert not os.path.exists(stale) and os.path.exists(live)
    memory.remove_spill(live)
