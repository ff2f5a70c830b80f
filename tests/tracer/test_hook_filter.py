"""An ``after`` hook row with a result filter (table.py ``results``): its handler runs for the
results it acts on and no other, the engine's result passes through either way, and a row
without a filter (its twin) sees every result."""
from __future__ import annotations

import dataclasses
import types

import pytest

from kvtrace.tracer.integrations import _patch
from kvtrace.tracer.integrations.table import Engine, Hook

ACT_ON = (3, 4)     # the results the handler records (a connector's Success / Failed)


def _engine(results: str | None, seen: list):
    """An engine table of one ``after`` row over Conn.poll, its handlers in a throwaway module."""
    mod = types.ModuleType("kvtrace.tracer.integrations._test_filter_handlers")
    mod.on_poll = lambda out, self: seen.append(out)
    mod.acts_on = lambda: frozenset(ACT_ON)
    mod.broken = lambda: 1 / 0
    import sys
    sys.modules[mod.__name__] = mod
    hook = Hook("m", "Conn", "poll", "after", "on_poll", "messages", results=results)
    return Engine("t", "test engine", "m", "m", "v", ("1",), "_test_filter_handlers", (hook,)), hook


class Conn:
    def __init__(self, answers):
        self.answers = list(answers)

    def poll(self):
        return self.answers.pop(0)


@pytest.mark.parametrize("results, handled", [("acts_on", [3, 4]),     # filtered
                                               (None, [0, 2, 3, 2, 4, None]),   # its twin: every result
                                               ("broken", [0, 2, 3, 2, 4, None])])   # a filter that fails: none
def test_after_row_filter(results, handled):
    seen: list = []
    engine, hook = _engine(results, seen)
    poll = _patch._wrap(engine, hook, "Conn.poll", Conn.__dict__["poll"], getattr(
        __import__(f"kvtrace.tracer.integrations.{engine.handlers}", fromlist=["x"]), hook.handler))
    answers = [0, 2, 3, 2, 4, None]
    c = Conn(answers)
    assert [poll(c) for _ in answers] == answers        # the engine's results, unchanged
    assert seen == handled


def test_unhashable_result_is_not_acted_on():
    seen: list = []
    engine, hook = _engine("acts_on", seen)
    handlers = __import__(f"kvtrace.tracer.integrations.{engine.handlers}", fromlist=["x"])
    poll = _patch._wrap(engine, dataclasses.replace(hook), "Conn.poll", Conn.__dict__["poll"], handlers.on_poll)
    c = Conn([[3], 3])
    assert poll(c) == [3] and poll(c) == 3
    assert seen == [3]
