#!/usr/bin/env bash
# Create .venv and install kvtrace with everything the tests and the demo need (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if ! .venv/bin/python -c "import kvtrace, nixl, duckdb, textual, pytest_timeout" 2>/dev/null; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[test]"
fi
