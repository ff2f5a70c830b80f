"""Fixtures: the scenario traces of tui_helpers.build (clean and early-free)."""
import pytest

from tui_helpers import build


@pytest.fixture(scope="session")
def clean_trace(tmp_path_factory) -> str:
    return build(tmp_path_factory.mktemp("tui") / "clean.kvtrace", early_free=False)


@pytest.fixture(scope="session")
def early_free_trace(tmp_path_factory) -> str:
    return build(tmp_path_factory.mktemp("tui") / "early.kvtrace", early_free=True)

