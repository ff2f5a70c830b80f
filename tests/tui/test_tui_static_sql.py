"""No SQL built by string formatting anywhere in the TUI: every query the TUI runs is a
fixed string or a ``tui/sql/*.sql`` file, and what the user types reaches it only as
parameters (the SQL console runs the user's own query, as typed, in a sandbox)."""
import ast
import pathlib

TUI = pathlib.Path(__file__).resolve().parents[2] / "tui"
RUNS = {"execute", "sql", "query"}


def _built(node: ast.AST) -> bool:
    """A string made at run time from pieces: an f-string, + / % on strings, .format/.join."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join")


def test_every_tui_query_is_static():
    bad = []
    for f in sorted(TUI.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RUNS \
                    and node.args and _built(node.args[0]):
                bad.append(f"{f.name}:{node.lineno}")
    assert not bad, bad


def test_follow_under_a_filter_steps_only_visible_rows(early_free_trace):
    from kvtrace.analysis.session import TraceSession
    from kvtrace.tui.filters import parse_filter
    from kvtrace.tui.follow import Follow, follow_predicate
    from kvtrace.tui.source import TimelineSource

    src = TimelineSource(TraceSession(early_free_trace))
    first = src.row(0)
    follow, _ = follow_predicate(Follow.REQUEST, next(src.row(i) for i in range(src.count) if src.row(i)["request"] == "r1"))
    unfiltered = src.find(follow, first["ord"] - 1)
    assert src.row(src.position_of(unfiltered))["request"] == "r1"
    src.set_filter(parse_filter("kind=free"))
    hit = src.find(follow, -1)
    assert hit is not None and src.row(src.position_of(hit))["kind"] == "free"
    assert src.row(src.position_of(hit))["request"] == "r1"
