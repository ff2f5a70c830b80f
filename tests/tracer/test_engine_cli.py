"""`kvtrace record` in engine mode: summary output and one-line errors."""
from __future__ import annotations

import pytest

pytest.importorskip("nixl._api")

from kvtrace.cli import main  # noqa: E402


@pytest.mark.timeout(120)
def test_record_prints_verifier_summary(tmp_path, capsys, validate_trace):
    out = tmp_path / "s.kvtrace"
    assert main(["record", "-o", str(out), "--workload", "small", "--no-progress",
                 "--inject", "notify-first-handle"]) == 0
    text = capsys.readouterr().out
    assert "pages read" in text and "corrupted" in text and "pages hold" in text
    validate_trace(out)
    assert main(["record", "-o", str(out), "--no-progress"]) == 2          # exists
    assert "exists" in capsys.readouterr().err


@pytest.mark.parametrize("argv,err", [
    (["--inject", "nope"], "unknown bug"),
    (["--workload", "missing"], "no such file or preset"),
    (["--concurrency", "0"], "concurrency"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, err):
    assert main(["record", "-o", str(tmp_path / "x.kvtrace"), "--no-progress", *argv]) == 2
    e = capsys.readouterr().err
    assert err in e and e.count("\n") == 1 and "Traceback" not in e


def test_cuda_without_a_gpu_is_one_line(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["record", "-o", str(tmp_path / "g.kvtrace"), "--no-progress", "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
