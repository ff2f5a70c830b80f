"""`kvtrace tui` on bad input: one clear line, non-zero exit, no traceback."""
import os
import subprocess
import sys

import pytest

from kvtrace.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "kvtrace", "tui", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def one_line_error(r):
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kvtrace tui: ")
    return lines[0]


def test_missing_trace():
    assert "no such trace directory" in one_line_error(run_cli("/nonexistent"))


def test_corrupt_manifest(tmp_path):
    t = tmp_path / "bad.kvtrace"
    t.mkdir()
    (t / "manifest.json").write_text("{not json")
    assert "unreadable manifest" in one_line_error(run_cli(str(t)))


def test_foreign_stream(tmp_path, clean_trace):
    import shutil
    t = tmp_path / "foreign.kvtrace"
    shutil.copytree(clean_trace, t, ignore=shutil.ignore_patterns("_index"))
    (t / "prefill" / "events.arrows").write_bytes(b"this is not arrow at all")
    assert "not an Arrow IPC stream" in one_line_error(run_cli(str(t)))


def test_bad_jump_is_a_user_error(clean_trace, capsys):
    assert main(["tui", clean_trace, "--jump", "prefill:xyz"]) == 2
    assert "not a number" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["tui", "--help"]])
def test_help_lists_the_keys(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert "j/k step" in out and os.linesep in out
