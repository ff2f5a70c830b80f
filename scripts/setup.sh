#!/usr/bin/env bash
# Create .venv and install kvtrace with everything the tests and the demo need.
# Re-running is cheap: pip only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
