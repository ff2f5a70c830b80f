"""The recorder's C conversion of event rows (tracer/_rows.c) gives the batch pyarrow's own
conversion gives: the same values, buffer sizes and IPC bytes, on random rows; values it does
not convert itself (numpy integers, bools, str subclasses, ...) go to pyarrow, with pyarrow's
result or error. Its bookkeeping selection (pick) gives the lists the Python one does. Without
the extension (absent, or KVTRACE_ROWS=python) the recorder converts with pyarrow."""
from __future__ import annotations

import enum
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kvtrace.tracer import recorder as R
from kvtrace.tracer import ring_store as S
from kvtrace.tracer.schema import EVENTS

C = R._c_rows
needs_c = pytest.mark.skipif(C is None, reason="tracer/_rows.c is not built here")

_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_I32 = st.integers(-(1 << 31), (1 << 31) - 1)
_U64 = st.integers(0, (1 << 64) - 1)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
_VALUE = {"q": _I64, "i": _I32, "Q": _U64, "s": _TEXT, "b": st.binary(max_size=6),
          "l": st.one_of(st.tuples(), st.lists(_I64, max_size=4).map(tuple), st.lists(_I64, max_size=3)),
          "L": st.lists(_U64, max_size=4).map(tuple)}


def _row():
    return st.tuples(*[st.one_of(st.none(), _VALUE[chr(c)]) for c in R._EVENT_SPEC])


def _python(rows):
    return pa.RecordBatch.from_arrays(pa.array(rows, type=R._EVENT_STRUCT).flatten(), schema=EVENTS)


def _native(rows):
    got = C.columns(rows, R._EVENT_SPEC)
    return None if got is None else pa.RecordBatch._import_from_c(got[0], EVENTS)


def _ipc(batch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


@needs_c
@settings(max_examples=150, deadline=None)
@given(st.lists(_row(), max_size=40))
def test_c_batch_is_pyarrows_batch(rows):
    want = _python(rows)
    got = _native(rows)
    assert got is not None
    got.validate(full=True)
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.to_pylist() == want.to_pylist()
    assert got.nbytes == want.nbytes
    assert _ipc(got) == _ipc(want)


class _Kind(str, enum.Enum):
    ALLOC = "alloc"


_BASE = (0, 1, 0, "a", "alloc", "r", "kv", 0, (1, 2), (0, 1), None, None, None, None, None, None, None,
         None, None, None)


@needs_c
@pytest.mark.parametrize("col,value", [
    (0, np.int64(3)), (1, True), (2, 1 << 31), (13, -1), (4, _Kind.ALLOC), (8, np.arange(3)),
    (8, (1, np.int64(2))), (8, (True,)), (10, (-1,)), (17, bytearray(b"x")), (19, "\ud800"), (7, 2.0)])
def test_values_c_leaves_to_pyarrow(col, value):
    rows = [_BASE, _BASE[:col] + (value,) + _BASE[col + 1:]]
    assert C.columns(rows, R._EVENT_SPEC) is None
    try:
        want = _python(rows)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            R._events_batch(rows)
    else:
        assert R._events_batch(rows).to_pylist() == want.to_pylist()


@needs_c
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "free", "write", "xfer_post", "req_start", None]),
                          st.one_of(st.none(), st.text(max_size=3)),
                          st.one_of(st.none(), st.tuples(st.integers(0, 9)), st.lists(st.integers(0, 9)))),
                max_size=30))
def test_pick_is_the_python_selection(items):
    rows = [(i, 10 * i, 0, "a", k, r, "kv", None, sl, None, None, i, None, 7, None, None, None, None, None, None)
            for i, (k, r, sl) in enumerate(items)]
    rows.append(rows[0][:8] + (np.arange(2),) + rows[0][9:] if rows else _BASE[:8] + (np.arange(2),) + _BASE[9:])
    idx, cols, slots = C.pick(rows, S._KIND, S._STATE_KINDS, S._PICK_COLS, S._seq)
    want_idx = [i for i, r in enumerate(rows) if r[S._KIND] in S._STATE_KINDS]
    assert idx == want_idx
    assert cols == [[rows[i][c] for i in want_idx] for c in S._PICK_COLS]
    assert slots == [S._seq(rows[i][S._SLOTS]) for i in want_idx]


_CHILD = """
import json, sys
if sys.argv[1] == "absent":
    sys.modules["kvtrace.tracer._rows"] = None   # as on an install built without a compiler
from kvtrace.tracer import recorder as R, ring_store as S
rows = [tuple(r) for r in json.loads(sys.argv[2])]
print(json.dumps({"native": R.NATIVE_ROWS is not None, "pick": S._PICK is not None,
                  "rows": R._events_batch(rows).to_pylist()}))
"""


@pytest.mark.parametrize("how", ["absent", "env"])
def test_python_fallback_is_used_and_gives_the_same_rows(how):
    rows = [list(_BASE), [1, 2, 3, "b", "free", None, "kv", None, [], None, [5], 4, "p", 9, 10, "DRAM", 0,
                          None, "DONE", "{}"]]
    env = dict(os.environ)
    env.pop("KVTRACE_ROWS", None)
    if how == "env":
        env["KVTRACE_ROWS"] = "python"
    p = subprocess.run([sys.executable, "-c", _CHILD, how, json.dumps(rows)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["native"] is False and out["pick"] is False
    assert out["rows"] == R._events_batch([tuple(r) for r in rows]).to_pylist()


def test_extension_is_built_where_a_compiler_is():
    """An install with a C compiler builds _rows (setup.py): a silent build failure would make
    recording slower, so it is caught here."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    if not (shutil.which(cc) and headers):
        pytest.skip("no C compiler or Python headers here: the pyarrow fallback is expected")
    assert C is not None, "kvtrace.tracer._rows is not built: run `pip install -e .` (it needs a C compiler)"
    assert hasattr(C, "appender"), "kvtrace.tracer._rows is older than tracer/_rows.c: run `pip install -e .`"
    if os.environ.get("KVTRACE_ROWS", "").lower() == "python":
        assert R.NATIVE_ROWS is None and S._PICK is None
    else:
        assert R.NATIVE_ROWS is not None and S._PICK is not None
