"""kvtrace replay / explore / minimize from the command line (exit codes gate CI)."""
import re
import subprocess
import sys

from kvtrace.cli import main


def kv(*args):
    r = subprocess.run([sys.executable, "-m", "kvtrace", *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def test_replay_clean_exits_0_and_writes_a_valid_trace(scenario, tmp_path, capsys, validate_trace):
    out = str(tmp_path / "r.kvtrace")
    assert main(["replay", scenario("clean"), "--scheduler", "pct", "--seed", "2", "-o", out]) == 0
    text = capsys.readouterr().out
    assert "verdict: clean" in text and "corrupted: 0" in text and "schedule: kvs1:" in text
    validate_trace(out)


def test_replay_corruption_exits_1_and_says_whose_bytes(scenario, capsys):
    assert main(["replay", scenario("early_src_free"), "--scheduler", "lazy", "--executor", "bytes"]) == 1
    text = capsys.readouterr().out
    assert "verdict: CORRUPTED" in text
    assert re.search(r"r\d+ read \d+ slot-read\(s\) of kv holding r\d+'s bytes", text)


def test_explore_summary_and_its_replay_command_reproduce(scenario, capsys):
    src = scenario("early_src_free")
    # random finds it ~70% per run: 20 fixed seeds include failures
    assert main(["explore", src, "--scheduler", "random", "--seeds", "0:20", "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert "failing seeds:" in text and "%" in text
    cmd = next(line for line in text.splitlines() if line.startswith("replay it: "))
    args = cmd[len("replay it: kvtrace "):].split()
    args = [a for a in args if a not in ("-o", "replay.kvtrace")]
    assert main(args) == 1
    assert "verdict: CORRUPTED" in capsys.readouterr().out


def test_explore_clean_exits_0(scenario, capsys):
    assert main(["explore", scenario("prefix"), "--scheduler", "conflicts", "--seeds", "0:30", "--no-progress"]) == 0
    assert "0 failing (0.0%)" in capsys.readouterr().out


def test_minimize_prints_reorderings(scenario, capsys):
    src = scenario("abort")
    assert main(["explore", src, "--scheduler", "conflicts", "--seeds", "0:50", "--stop-on-first", "--no-progress"]) == 1
    s = re.search(r"schedule: (kvs1:\S+)", capsys.readouterr().out).group(1)
    assert main(["minimize", src, "--schedule", s]) == 1      # corruption reproduced, as replay says it
    text = capsys.readouterr().out
    assert "moved past" in text and "schedule: kvs1:" in text


def test_bad_input_is_one_line_exit_2(scenario, tmp_path):
    for args in (["replay", str(tmp_path / "missing.kvtrace")],
                 ["replay", scenario("clean"), "--schedule", "kvs1:@@"],
                 ["minimize", scenario("clean"), "--schedule", "nonsense"],
                 ["explore", scenario("clean"), "--seeds", "5:5"],
                 ["replay", scenario("clean"), "--schedule", "kvs1:eNpjZBBkZGAAAABTABQ"]):
        rc, out, err = kv(*args)
        assert rc == 2, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_help_documents_exit_codes():
    rc, out, _ = kv("replay", "--help")
    assert rc == 0 and "exit status" in out and "1 corruption found" in out
    rc, out, _ = kv("explore", "--help")
    assert rc == 0 and "gate" in out


def test_replay_output_is_analysable_by_check(tmp_path, capsys):
    """The replay writes the recording's format: `kvtrace check` reads it like a recording
    (a clean trace replayed under pct stays clean to the analysis too)."""
    import os
    src = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "engine-clean.kvtrace")
    assert os.path.isdir(src), "traces/engine-clean.kvtrace is committed"
    out = str(tmp_path / "r.kvtrace")
    assert main(["replay", src, "--scheduler", "pct", "--seed", "4", "-o", out]) == 0
    capsys.readouterr()
    assert main(["check", out]) == 0, capsys.readouterr().out[-2000:]
