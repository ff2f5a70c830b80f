"""The recorder's per-event methods in C (tracer/_rows.c ``appender``: event, nixl_event,
layers, allocs, frees) append exactly the row tuples the Python methods append: the same
values of the same types in the same seq order, times aside (one clock reading per call, as
in Python), on ordinary and odd inputs (numpy integers, str subclasses, EventKind, dict and
str-subclass details, a request from the context or none, given times, dict views, lists as
pairs), with the same thread numbers (a new thread, a pinned one), the same errors (and no
row for a call that fails), ``layers`` held as one buffer entry per call until the flush
makes it into its rows (the same rows and the same written events), the flush wake-up at the same seq, the Python methods while a
hashing thread runs, and a subclass's own method kept; a dict detail's JSON text made in C
is the recorder's JSON encoder's text. Without the extension (absent, or
KVTRACE_ROWS=python) the recorder keeps its Python methods."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kvtrace.tracer import recorder as R
from kvtrace.tracer.schema import EventKind as K

needs_c = pytest.mark.skipif(not hasattr(R.NATIVE_ROWS, "appender"),
                             reason="tracer/_rows.c is not built here, or built before its appender "
                                    "(test_rows_native says which), or KVTRACE_ROWS=python")


class _Str(str):
    pass


def _pair(tmp_path):
    """Two recorders: C methods, and the same class with its Python methods."""
    c = R.Recorder(str(tmp_path / "c"), "s", flush_interval=3600, flush_rows=10 ** 9)
    py = R.Recorder(str(tmp_path / "p"), "s", flush_interval=3600, flush_rows=10 ** 9)
    for name in R._PY_METHODS:
        py.__dict__.pop(name, None)
    assert type(c.event) is not type(py.event)
    return c, py


def _typed(rows, keep_t=()):
    """Rows as (type, value) per item, t_ns left out except in rows whose seq is in keep_t."""
    out = []
    for r in rows:
        items = [(type(v).__name__, v.tolist() if isinstance(v, np.ndarray) else v) for v in r]
        if r[0] not in keep_t:
            assert type(r[1]) is int and r[1] > 0
            items[1] = None
        out.append(items)
    return out


def _script(rec):
    """Every method on ordinary and odd inputs; returns what each call returned."""
    got = []
    e = rec.event
    got.append(e("mark", "a"))
    got.append(e(_Str("mark"), "a"))   # a str subclass equal to a kind: mapped through EventKind
    got.append(e(K.REQ_START, "a", "r1", detail={"tokens": 3, "aliases": ["x"]}))
    got.append(e(K.WRITE, _Str("a"), _Str("r1"), pool=_Str("kv"), layer=np.int64(2), slots=(1, 2),
                 pages=[0, 1], checksums=(np.uint64(5), 6), detail=_Str("text")))
    got.append(e("xfer_post", "a", None, xfer=np.int32(7), peer="b", addr=1 << 63, nbytes=np.uint64(9),
                 mem_type="VRAM", device=np.int8(1), msg=b"m", status="DONE", detail="{}"))
    got.append(e(kind="read", agent=None, request="r2", slots=np.arange(3), t_ns=0))
    got.append(e("mark", detail={"k": [1, 2]}, t_ns=12345))
    got.append(e("mark", "a", t_ns=np.int64(777)))
    with rec.request("ctx"):
        got.append(e(K.FREE, "a", slots=[3]))
        got.append(e(K.FREE, "a", "explicit"))
        got.append(rec.nixl_event("xfer_done", "a", None, 3, "b", 10, None, "DONE"))
        got.append(rec.layers(K.READ, "a", None, "kv", 2, [4, 5], None, [[1, 2], (3, np.uint64(4))]))
        got.append(rec.allocs("a", None, [("kv", [1, 2], None)]))
        got.append(rec.frees("a", None, {"kv": [1], "st": (2,)}.items(), reason="finish"))
    got.append(rec.nixl_event("xfer_post", "a", "r", np.int64(4), "b", np.uint64(5), b"x", None, '{"a":1}'))
    got.append(rec.nixl_event(kind=_Str("xfer_release"), agent="a", request="r", xfer=4, peer="b"))
    got.append(rec.layers("write", "a", "r", "kv", np.int64(3), range(2), range(2)))
    got.append(rec.layers(K.WRITE, "a", "r", "kv", 0, [1]))
    got.append(rec.layers(kind=K.READ, agent="a", request=None, pool="kv", layers=1, slots=np.array([7]),
                          pages=np.array([0])))
    got.append(rec.allocs("a", "r", [("kv", [1, 2], None), ["st", (3,), (9,), True], ("aux", np.array([4]),
                                                                                     [0], 0)], shared=True))
    got.append(rec.allocs("a", "r", []))
    got.append(rec.allocs("a", "r", iter([("kv", [5], None, np.bool_(True))]), shared=False))
    got.append(rec.frees("a", "r", [["kv", [1, 2]], ("st", np.array([3]))]))
    got.append(rec.frees("a", "r", [("kv", [1])], reason=""))
    got.append(rec.frees("a", "r", [("kv", [])], reason=_Str("evict")))
    got.append(rec.frees("a", "r", [], reason="finish"))
    got.append(rec.alloc("a", "r", "kv", [1], shared=True, detail={"d": 1}))
    got.append(rec.free("a", "r", "kv", [1], reason="abort"))
    got.append(rec.write("a", "r", "kv", 0, [1], [2]))
    got.append(rec.mark("note", "a", extra=1))
    return got


@needs_c
def test_c_methods_append_the_python_rows(tmp_path):
    c, py = _pair(tmp_path)
    try:
        got_c, got_py = _script(c), _script(py)
        assert got_c == got_py
        assert [type(x) for x in got_c] == [type(x) for x in got_py]
        given = {6, 7}   # the rows with a given t_ns (t_ns=0 takes the clock, as `t_ns or monotonic_ns()`)
        assert _typed(c._buffered(), given) == _typed(py._buffered(), given)
        assert [r[0] for r in c._buffered()] == list(range(len(c._buffered())))
        for rows in (c._buffered(), py._buffered()):   # one clock reading per call, increasing
            ts = [r[1] for r in rows if r[0] not in given]
            assert ts == sorted(ts)
    finally:
        c.close()
        py.close()


_BAD = [
    ("event", (), {}, TypeError),                                  # no kind
    ("event", ("mark", "a", "r", "x"), {}, TypeError),             # keyword-only past request
    ("event", ("mark",), {"bogus": 1}, TypeError),
    ("event", ("mark",), {"kind": "mark"}, TypeError),             # given twice
    ("event", (_Str("nope"),), {}, KeyError),                      # a str subclass that is no EventKind
    ("event", ("mark",), {"detail": {1j: 2}}, TypeError),          # detail JSON cannot encode
    ("nixl_event", ("xfer_post", "a"), {}, TypeError),
    ("layers", (7, "a", "r", "kv", 2, [1]), {}, KeyError),
    ("layers", ("read", "a", "r", "kv", 2.0, [1]), {}, TypeError),
    ("layers", ("read", "a", "r", "kv", 2, 5), {}, TypeError),     # slots not iterable
    ("allocs", ("a", "r", [("kv",)]), {}, IndexError),
    ("allocs", ("a", "r", [("kv", 5, None)]), {}, TypeError),
    ("frees", ("a", "r", [("kv", [1], 3)]), {}, ValueError),
    ("frees", ("a", "r", [("kv",)]), {}, ValueError),
    ("frees", ("a", "r", [5]), {}, TypeError),
    ("frees", ("a", "r", [("kv", [1])]), {"why": "x"}, TypeError),
]


@needs_c
@pytest.mark.parametrize("method,args,kwargs,error", _BAD)
def test_c_methods_fail_as_python_does(tmp_path, method, args, kwargs, error):
    c, py = _pair(tmp_path)
    try:
        for rec in (c, py):
            rec.event("mark", "a")
            with pytest.raises(error):
                getattr(rec, method)(*args, **kwargs)
            assert rec.event("mark", "a") == 1 and len(rec._buffered()) == 2   # no row, no seq taken
    finally:
        c.close()
        py.close()


@needs_c
def test_thread_numbers_new_and_pinned(tmp_path):
    c, py = _pair(tmp_path)
    try:
        for rec in (c, py):
            rec.event("mark")

            def other(rec=rec):
                rec.layers("read", "a", "r", "kv", 1, [1])
                rec.nixl_event("xfer_post", "a", "r", 1)
                rec.pin_thread(9)
                rec.frees("a", "r", [("kv", [1])])
                rec.event("mark")
            t = threading.Thread(target=other)
            t.start()
            t.join()
            rec.allocs("a", "r", [("kv", [1], None)])
        assert [r[2] for r in c._buffered()] == [r[2] for r in py._buffered()] == [0, 1, 1, 9, 9, 0]
    finally:
        c.close()
        py.close()


@needs_c
def test_layers_wait_as_one_entry_and_flush_as_rows(tmp_path):
    c, py = _pair(tmp_path)
    try:
        for rec in (c, py):
            rec.event("mark", "a")
            rec.layers("read", "a", "r", "kv", 100, [1, 2], [0, 1], [[i, i + 1] for i in range(100)])  # > 64
            rec.layers(K.WRITE, "a", None, "kv", 61, np.array([3]))
            rec.layers("read", "a", "r", "kv", 0, [1])        # no layers: no row, no seq (-1)
            rec.event("mark", "a")
        assert len(c._events) == 4 and len(py._events) == 163       # one entry per C layers() call
        assert _typed(c._buffered()) == _typed(py._buffered())
        assert [r[0] for r in c._buffered()] == list(range(163))
        for rec in (c, py):
            rec.flush()
        assert c._events == [] and c._written_seq == py._written_seq == 163
        tables = [pa.ipc.open_stream(os.path.join(rec.dir, "events.arrows")).read_all() for rec in (c, py)]
        assert tables[0].drop_columns(["t_ns"]).equals(tables[1].drop_columns(["t_ns"]))
    finally:
        c.close()
        py.close()


class _Seqs:
    """A seq counter that is not consecutive ints (the C layers() then appends its rows at once)."""

    def __init__(self):
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self):
        self.n += 2
        return self.n


@needs_c
def test_layers_with_another_counter_appends_rows(tmp_path):
    rec = R.Recorder(str(tmp_path / "c"), "s", flush_interval=3600, flush_rows=10 ** 9)
    try:
        rec._seq = _Seqs()
        rec._native_methods()
        assert rec.layers("read", "a", "r", "kv", 3, [1]) == 2
        assert [(r[0], r[7]) for r in rec._events] == [(2, 0), (4, 1), (6, 2)]
    finally:
        rec._events.clear()
        rec.close()


class _Wake:
    def __init__(self):
        self.sets = []
        self.on = False

    def is_set(self):
        return self.on

    def set(self):
        self.sets.append(len(self.rec._buffered()))
        self.on = True


@needs_c
def test_flush_wake_up_at_the_same_seq(tmp_path):
    c, py = _pair(tmp_path)
    try:
        for rec in (c, py):
            real, rec._wake = rec._wake, _Wake()
            rec._wake.rec = rec
            rec.flush_rows = 3
            rec._flushed_seq = 1
            rec.event("mark")
            rec.nixl_event("xfer_post", "a", "r", 1)
            rec.layers("read", "a", "r", "kv", 2, [1])   # seqs 2, 3: 3 - 1 >= 3 is not yet
            assert rec._wake.sets == []
            rec.allocs("a", "r", [("kv", [1], None)])    # seq 4
            assert rec._wake.sets == [5]
            rec._wake.on = False
            rec.frees("a", "r", [("kv", [1])])
            rec.event("mark")
            assert rec._wake.sets == [5, 6]              # is_set() true after: no second set()
            rec._wake = real
    finally:
        c.close()
        py.close()


class _Hasher:
    busy = False


@needs_c
def test_batches_go_to_python_while_hashing(tmp_path, monkeypatch):
    c, py = _pair(tmp_path)
    calls = []
    for name in ("layers", "allocs", "frees"):
        fn = R._PY_METHODS[name]

        def spy(self, *a, _fn=fn, _name=name, **k):
            calls.append(_name)
            return _fn(self, *a, **k)
        monkeypatch.setattr(R.Recorder, name, spy)
    try:
        for rec in (c, py):
            rec._hasher = _Hasher()
            rec.layers("write", "a", "r", "kv", 2, [1])
            rec.allocs("a", "r", [("kv", [1], None)], shared=True)
            rec.frees("a", "r", [("kv", [1])], reason="finish")
            rec._hasher = None
        # the C object hands back to the original Python methods it was given; py calls the spies
        assert calls == ["layers", "allocs", "frees"]
        assert _typed(c._buffered()) == _typed(py._buffered())
    finally:
        c.close()
        py.close()


@needs_c
def test_a_subclass_method_is_kept(tmp_path):
    class Mine(R.Recorder):
        def event(self, *a, **k):
            return -7

    rec = Mine(str(tmp_path / "m"), "s", flush_interval=3600)
    try:
        assert rec.event("mark") == -7
        assert type(rec.nixl_event) is not type(Mine.event)   # the others are the C ones
    finally:
        rec.close()


_CHILD = """
import json, sys, tempfile
if sys.argv[1] == "absent":
    sys.modules["kvtrace.tracer._rows"] = None
from kvtrace.tracer import recorder as R
rec = R.Recorder(tempfile.mkdtemp(), "s", flush_interval=3600)
rec.event("mark", "a", detail={"x": 1}); rec.layers("read", "a", "r", "kv", 2, [1]); rec.frees("a", "r", [("kv", [1])])
out = {"python": all(n not in rec.__dict__ for n in R._PY_METHODS),
       "rows": [r[:1] + r[2:] for r in rec._buffered()]}
rec.close()
print(json.dumps(out))
"""


@pytest.mark.parametrize("how", ["absent", "env"])
def test_python_methods_without_the_extension(how, tmp_path):
    env = dict(os.environ)
    env.pop("KVTRACE_ROWS", None)
    if how == "env":
        env["KVTRACE_ROWS"] = "python"
    p = subprocess.run([sys.executable, "-c", _CHILD, how], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["python"] is True
    rec = R.Recorder(str(tmp_path / "x"), "s", flush_interval=3600)
    try:
        rec.event("mark", "a", detail={"x": 1})
        rec.layers("read", "a", "r", "kv", 2, [1])
        rec.frees("a", "r", [("kv", [1])])
        assert out["rows"] == json.loads(json.dumps([r[:1] + r[2:] for r in rec._buffered()]))
    finally:
        rec.close()


_KEY = st.text(max_size=5)   # any text: non-ASCII and control characters too
_PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.text(max_size=8),
              st.floats(allow_nan=True), st.just(_Str("s")), st.just(np.int64(3))),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(st.one_of(_KEY, st.integers(0, 3)), inner, max_size=4)),
    max_leaves=12)


@needs_c
@settings(max_examples=400, deadline=None)
@given(_PLAIN)
def test_detail_text_is_the_python_encoders(value):
    """The C detail text is the recorder's JSON encoder's text, or None (then that encoder)."""
    got = R.NATIVE_ROWS.json_text(value)
    if got is not None:
        assert type(got) is str and got == R._JSON(value)


@needs_c
def test_detail_text_on_plain_and_odd_values(tmp_path):
    C = R.NATIVE_ROWS
    for v in [{}, [], (), {"a": [1, "x\n\"\\\x7f\x01"], "b": None, "c": True, "d": (False, -5)},
              {"id": 12, "type": "kv_ready"}, {"aliases": ["s1t0"], "tokens": 300, "cached": 0}, "plain"]:
        assert C.json_text(v) == R._JSON(v)
    deep = []
    for _ in range(40):
        deep = [deep]
    loop = []
    loop.append(loop)
    for v in [1.5, "é", {1: 2}, _Str("s"), np.int64(3), 1 << 64, deep, loop, {"a": {"b": float("nan")}}]:
        assert C.json_text(v) is None
    c, py = _pair(tmp_path)
    try:
        for rec in (c, py):
            with pytest.raises(ValueError):   # circular: the Python encoder's error
                rec.event("mark", detail={"x": loop})
            rec.event("mark", detail={"deep": deep, "f": 0.1, "u": "é"})
        assert _typed(c._buffered()) == _typed(py._buffered())
    finally:
        c.close()
        py.close()
