"""Engine tests run real connectors as separate processes: a driver run may be retried once
after a hang (engine_runs.record), so each test gets room for two runs of its drivers beyond
the suite's default 300 s per test."""
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/engines/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(900))
