#!/usr/bin/env bash
# The README's test command: set up, then run the fast and integration tests on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -rs -p no:cacheprovider "$@"
