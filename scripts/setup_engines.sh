#!/usr/bin/env bash
# Install the real engines' NIXL connectors into .venv-engines (separate from .venv):
#   SGLang 0.5.21 (the release with the uniform-slot-count line) and vLLM 0.34.0, --no-deps, plus the
#   light packages their connector modules import; SGLang 0.5.23 (fixed) side by side under
#   .venv-engines/sglang-0.5.23 (put it first on PYTHONPATH to use it).
# The heavy packages (torch, nixl, numpy, duckdb) are not installed twice: .venv-engines sees
# .venv's site-packages after its own (a .pth with site.addsitedir), so .venv stays untouched.
# Idempotent: each step is skipped when what it installs is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EV=${KVTRACE_ENGINES_VENV:-$ROOT/.venv-engines}
SGL_OLD=0.5.21
SGL_NEW=0.5.23
VLLM=0.34.0
T0=$SECONDS
step() { echo "[setup_engines +$((SECONDS - T0))s] $*"; }
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
# pip's resolver lists every unmet requirement of the --no-deps engines (by design: only the
# connector modules are used); keep its output out of the way unless a step fails
pip_install() {
  if ! "$PY" -m pip install -q --disable-pip-version-check --no-input "$@" >"$LOG" 2>&1; then
    grep -v -e "^WARNING: Location" -e " requires " "$LOG" | tail -30; return 1
  fi
}

step "base venv (.venv)"
bash scripts/setup.sh

if [ ! -x "$EV/bin/python" ]; then
  step "creating $EV"
  .venv/bin/python -c 'import sys; print(sys.base_prefix)' >/dev/null
  "$(.venv/bin/python -c 'import sys; print(sys._base_executable)')" -m venv "$EV"
fi
PY=$EV/bin/python
sp=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
base_sp=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# processed with .pth files of its own (a worktree's .venv layers over another one)
echo "import site; site.addsitedir('$base_sp')" > "$sp/_kvtrace_base_venv.pth"

have() {  # have DIST VERSION [PATH...]: is DIST==VERSION importable from PATH (default sys.path)?
  "$PY" - "$@" <<'EOF'
import sys
from importlib import metadata
dist, ver, paths = sys.argv[1], sys.argv[2], sys.argv[3:] or None
try:
    found = [d.version for d in metadata.distributions(name=dist, path=paths or sys.path)]
except Exception:
    found = []
sys.exit(0 if found and found[0] == ver else 1)
EOF
}

if have sglang $SGL_OLD; then step "sglang $SGL_OLD present"; else
  step "sglang $SGL_OLD (--no-deps, ~29 MB)"; pip_install --no-deps "sglang==$SGL_OLD"; fi
if have sglang $SGL_NEW "$EV/sglang-$SGL_NEW"; then step "sglang $SGL_NEW present"; else
  step "sglang $SGL_NEW side by side in $EV/sglang-$SGL_NEW (--no-deps)"
  pip_install --no-deps --upgrade --target "$EV/sglang-$SGL_NEW" "sglang==$SGL_NEW"; fi
if have vllm $VLLM; then step "vllm $VLLM present"; else
  step "vllm $VLLM (--no-deps, ~240 MB)"; pip_install --no-deps "vllm==$VLLM"; fi

# what the connector modules import; torch: the one already visible (pinned so pip never
# replaces it), else the release these connector versions were run with. The base .venv has no
# torch (scripts/setup.sh keeps CPU installs light), so a fresh clone installs it here.
TORCH=$("$PY" -c 'from importlib.metadata import version; print(version("torch").split("+")[0])' 2>/dev/null || echo 2.14.1)
LIGHT=(msgspec pyzmq aiohttp requests psutil orjson pybase64 starlette tqdm IPython pydantic
       "transformers>=5.16.1,<5.23.0" torchvision dill sentencepiece compressed_tensors gguf
       apache-tvm-ffi cachetools cbor2 cloudpickle uvloop py-cpuinfo prometheus_client
       llguidance "xgrammar==0.2.8" einops "filelock>=4.2.4" "kernels>=0.14.1,<0.15")
STAMP=$EV/.kvtrace-deps
WANT="$TORCH ${LIGHT[*]}"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  step "connector dependencies present"
else
  # PyPI's torch for x86_64 is a CUDA build: with its nvidia-* wheels and the connectors'
  # packages this step writes ~6.4 GB (measured); say so plainly instead of pip's OSError midway
  need_kb=$((7 * 1024 * 1024))
  free_kb=$(df -Pk "$EV" | awk 'NR == 2 {print $4}')
  if ! "$PY" -c 'import torch' 2>/dev/null && [ "${free_kb:-0}" -lt "$need_kb" ]; then
    echo "setup_engines: installing torch and the connectors' packages needs about 7 GB free;" \
         "$((free_kb / 1024 / 1024)) GB free on $(df -P "$EV" | awk 'NR == 2 {print $6}')" >&2
    exit 1
  fi
  step "connector dependencies (${#LIGHT[@]} packages, torch==$TORCH kept)"
  pip_install "torch==$TORCH" "${LIGHT[@]}"
  echo "$WANT" > "$STAMP"
fi

# NIXL's meta package picks its build from the CUDA major of the torch it finds; .venv has only
# the CUDA 12 build (no torch), the torch here may be a CUDA 13 build: add the matching NIXL build
CUDA_MAJOR=$("$PY" -c 'from nixl_meta_utils import detect_cuda_major as d; print(d() or "")')
NIXL_VERSION=$("$PY" -c 'from importlib.metadata import version; print(version("nixl"))')
if [ -n "$CUDA_MAJOR" ] && ! "$PY" -c "import nixl_cu$CUDA_MAJOR" 2>/dev/null; then
  step "nixl-cu$CUDA_MAJOR $NIXL_VERSION (--no-deps: torch here is a CUDA $CUDA_MAJOR build)"
  pip_install --no-deps "nixl-cu$CUDA_MAJOR==$NIXL_VERSION"
fi

if [ "$("$PY" -c 'import os, kvtrace; print(os.path.dirname(os.path.dirname(kvtrace.__file__)))' 2>/dev/null)" = "$ROOT" ]; then
  step "kvtrace (editable) present"
else
  step "kvtrace (editable, no deps)"; pip_install --no-deps -e .
fi

if [ ! -f "$EV/.kvtrace-import-ok" ] || [ "$STAMP" -nt "$EV/.kvtrace-import-ok" ]; then
  step "import check: SGLang's connector (~20 s)"
  if (cd / && "$PY" -W ignore -c 'import nixl, sglang.srt.disaggregation.nixl.conn, kvtrace' >"$LOG" 2>&1); then
    touch "$EV/.kvtrace-import-ok"
  else
    tail -20 "$LOG"; exit 1
  fi
fi
step "done in $((SECONDS - T0))s: $EV"
