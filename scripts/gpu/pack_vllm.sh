#!/usr/bin/env bash
# Pack what scripts/gpu/vllm_h200.sh needs on the GPU machine (no network there) into DIR
# (default .gpu-vllm/ at the repo root; list it in .git/info/exclude and name it in the device
# call's `carry`; the device tool sends the session's checkout, so DIR goes there):
#   site312.txz      NIXL + the light connector dependencies as a cp312 tree: the SGLang pack's
#                    (scripts/gpu/pack_sglang.sh), taken from SGLANG_PACK (default .gpu/) or made
#   duckdb312.txz    duckdb (cp312), likewise, for `pytest -m gpu` there (kvtrace check)
#   vdeps312.txz     what vLLM needs beyond that and the image: cachetools, cbor2 (cp312 wheels)
#   vllm-0.34.0.txz  vLLM from .venv-engines without .so files, __pycache__, the vllm-rs binary,
#                    the C++ header trees of third_party/ and benchmarks; stand-ins added for the
#                    compiled modules the CUDA platform's import path needs (scripts/gpu/standins-vllm:
#                    vllm/_C_stable_libtorch.py, vllm/vllm_flash_attn/_vllm_fa2_C.py)
#   standins-vllm/   xgrammar, llguidance stand-ins and _gpu_standin.py (scripts/gpu/standins')
#   src.tgz          this checkout's kvtrace package folders, tests/ and bench/ (the committed
#                    tree plus uncommitted changes): the code that runs there
#   vllm_h200.sh     the run script
# Needs .venv-engines (scripts/setup_engines.sh) and PyPI access. ~52 MB (41 of it the SGLang
# pack's two trees); ~2 min on 2 busy cores when site312/duckdb312 are reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DIR=${1:-$ROOT/.gpu-vllm}
SGL=${SGLANG_PACK:-$ROOT/.gpu}
EV=${KVTRACE_ENGINES_VENV:-$ROOT/.venv-engines}
mkdir -p "$DIR"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
if [ ! -f "$SGL/site312.txz" ] || [ ! -f "$SGL/duckdb312.txz" ]; then
  bash scripts/gpu/pack_sglang.sh "$SGL"
fi
cp "$SGL/site312.txz" "$SGL/duckdb312.txz" "$DIR/"
ver() { "$EV/bin/python" -c "from importlib.metadata import version; print(version('$1'))"; }
PLAT=(--python-version 3.12 --implementation cp --only-binary=:all:)
for n in 28 27 26 24 17 5; do PLAT+=(--platform manylinux_2_${n}_x86_64); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
"$EV/bin/python" -m pip download -q --no-deps "${PLAT[@]}" -d "$TMP/whl" \
    "cachetools==$(ver cachetools)" "cbor2==$(ver cbor2)"
"$EV/bin/python" -m pip install -q --no-deps --no-index --no-compile "${PLAT[@]}" \
    --target "$TMP/vdeps" "$TMP"/whl/*.whl
tar cJf "$DIR/vdeps312.txz" -C "$TMP/vdeps" .
V=$(ver vllm)
SP=$("$EV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
EX=(--exclude=__pycache__ --exclude='*.so' --exclude=vllm/vllm-rs --exclude=vllm/third_party/deep_gemm
    --exclude=vllm/third_party/fmha_sm100 --exclude=vllm/third_party/tml_fa4 --exclude=vllm/benchmarks
    --exclude=vllm/entrypoints/serve/instrumentator/static)
mkdir -p "$TMP/vllm"
tar cf - -C "$SP" "${EX[@]}" vllm "vllm-$V.dist-info" | tar xf - -C "$TMP/vllm"
cp scripts/gpu/standins-vllm/_C_stable_libtorch.py "$TMP/vllm/vllm/"
cp scripts/gpu/standins-vllm/_vllm_fa2_C.py "$TMP/vllm/vllm/vllm_flash_attn/"
tar cf - -C "$TMP/vllm" . | xz -T2 -6 >"$DIR/vllm-$V.txz"
rm -rf "$DIR/standins-vllm"; mkdir -p "$DIR/standins-vllm"
cp -r scripts/gpu/standins-vllm/xgrammar scripts/gpu/standins-vllm/llguidance scripts/gpu/standins/_gpu_standin.py \
    "$DIR/standins-vllm/"
# the code that runs there: tracked files of these folders as they are in the working tree
git ls-files -z --cached --others --exclude-standard kvtrace tracer replay analysis tui kernels tests bench/derived_digest.py pyproject.toml \
  | tar czf "$DIR/src.tgz" --null -T -
cp scripts/gpu/vllm_h200.sh "$DIR/"
du -sh "$DIR"/*
du -sh "$DIR"
