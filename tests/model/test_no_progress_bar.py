"""DuckDB's Python client turns its terminal progress bar on in an interactive Python
(`python -c`, a REPL, a notebook): a model's derivation queries would then draw bars among
the user's output. Every model's connection turns it off, whoever imports it."""
import os
import subprocess
import sys

import pytest

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "engine-clean.kvtrace")

PROBE = """
import sys, duckdb
from kvtrace.model import TraceModel
from kvtrace.model.live import LiveModel
q = "SELECT current_setting('enable_progress_bar')"
plain = duckdb.connect(':memory:').execute(q).fetchall()[0][0]
out = [plain]
for cls in (TraceModel, LiveModel):
    m = cls(sys.argv[1])
    out.append(m.con.execute(q).fetchall()[0][0])
    m.close()
print(out)
"""


def test_models_draw_no_progress_bar_in_an_interactive_python():
    r = subprocess.run([sys.executable, "-c", PROBE, TRACE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    plain, trace_model, live_model = eval(r.stdout.strip())
    if plain is not True:   # this DuckDB leaves the bar off on its own: nothing to show
        pytest.skip("this DuckDB does not turn its progress bar on in an interactive Python")
    assert (trace_model, live_model) == (False, False)
