import pytest

from cuda_probe import has_cuda

try:  # Hypothesis tests are reproducible: the same examples every run, no example database
    import os as _os

    from hypothesis import settings as _hyp_settings
    _hyp_settings.register_profile("kvtrace", derandomize=True, database=None, deadline=None)
    _hyp_settings.load_profile(_os.environ.get("HYPOTHESIS_PROFILE", "kvtrace"))
except ImportError:
    pass


def pytest_collection_modifyitems(config, items):
    # the marker, not item.keywords: keywords also hold the names of the folders above the
    # test (a checkout in a folder named "gpu" would skip every test)
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not has_cuda():                  # probe only when a gpu test was collected
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in gpu:
            item.add_marker(skip)


def validate(trace_dir) -> None:
    """Assert that the trace follows the format contract (kvtrace.tracer.validate)."""
    from kvtrace.tracer.validate import validate as check

    v = check(str(trace_dir))
    assert v.ok, "\n".join(v.problems)


@pytest.fixture
def validate_trace():
    return validate


@pytest.fixture(scope="session")
def gen_synthetic():
    """bench/gen_synthetic.py as a module: the synthetic traces of the scale benchmarks."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "bench", "gen_synthetic.py")
    spec = importlib.util.spec_from_file_location("gen_synthetic", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def writes_both_ways(tmp_path, monkeypatch):
    """``f(regions, slots, pages)`` -> {"async": rows, "sync": rows}: the write events that
    record_writes gives for the same pages hashed off the hook (the default) and inside it
    (KVTRACE_SYNC_CHECKSUMS=1); rows are (pool, layer, slots, checksums)."""
    from kvtrace.tracer import Recorder, open_trace
    from kvtrace.tracer.integrations._memory import record_writes

    def run(regions, slots, pages):
        got = {}
        for how in ("async", "sync"):
            monkeypatch.setenv("KVTRACE_SYNC_CHECKSUMS", "1" if how == "sync" else "0")
            rec = Recorder(str(tmp_path / f"{how}.kvtrace"), "p")
            record_writes(rec, "A", "r1", regions, slots, pages)
            rec.close()
            got[how] = [(e["pool"], e["layer"], e["slots"], e["checksums"])
                        for e in open_trace(str(tmp_path / f"{how}.kvtrace")).table("events").to_pylist()]
        return got
    return run
