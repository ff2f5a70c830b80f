#!/usr/bin/env bash
# Create .venv and install kvtrace with what the tests and the demo need on a CPU machine:
# kvtrace, its test tools, and ONE NIXL build (nixl-cu12, UCX over host memory). NIXL's
# wheels declare torch and both CUDA builds as requirements, though the Python API never
# imports torch; installing them the ordinary way pulls ~6 GB (PyPI's CUDA torch). So
# NIXL is installed without its declared requirements here, and torch only on request:
#   bash scripts/setup.sh --kernels   # + CPU torch and Triton: the kernel tests under
#                                     #   Triton's interpreter, --device torch-cpu
# GPU machines: pip install -e ".[gpu]" plus the NIXL build of their CUDA (see README).
# Re-running is cheap: pip only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
NIXL_VERSION=${NIXL_VERSION:-1.5.1}
KERNELS=0
for a in "$@"; do
  case "$a" in
    --kernels) KERNELS=1 ;;
    *) echo "setup.sh: unknown option $a (use --kernels)" >&2; exit 2 ;;
  esac
done
PIP=(.venv/bin/python -m pip install --disable-pip-version-check --progress-bar on)
step() { echo "==> setup: $*" >&2; }
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PY" --version)"
  "$PY" -m venv .venv
fi
step "kvtrace and its test tools (pyarrow, duckdb, textual, pytest, hypothesis, matplotlib, ...)"
"${PIP[@]}" -e ".[test]"
step "NIXL $NIXL_VERSION, the CUDA 12 build only, without torch (UCX works over host memory on CPU)"
"${PIP[@]}" --no-deps "nixl==$NIXL_VERSION" "nixl-cu12==$NIXL_VERSION"
if [ "$KERNELS" = 1 ]; then
  step "CPU torch (PyTorch's CPU index) and Triton, for the kernel tests under Triton's interpreter"
  "${PIP[@]}" torch --index-url https://download.pytorch.org/whl/cpu
  "${PIP[@]}" triton
fi
.venv/bin/python -c "import kvtrace, nixl._api" || { echo "setup.sh: the install did not complete (see above)" >&2; exit 1; }
step "done: $(du -sh .venv | cut -f1) in .venv"
