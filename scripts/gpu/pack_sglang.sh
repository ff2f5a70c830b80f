#!/usr/bin/env bash
# Pack what scripts/gpu/sglang_h200.sh needs on the H200 (no network there) into DIR
# (default .gpu/ at the repo root; list it in .git/info/exclude and name it in the device
# call's `carry`):
#   site312.txz       NIXL 1.5.1 (nixl-cu13 cp312 without its nixl_ep_cu13 extension, the nixl
#                     meta package) and the connector's light dependencies that the H200
#                     image lacks, as cp312 wheels unpacked into one tree (pip --target)
#   sglang-0.5.21.txz SGLang from .venv-engines, without .so files (the connector loads none),
#   sglang-0.5.23.txz tests, benchmarks, multimodal_gen and srt/models (never imported by it)
#   duckdb312.txz     duckdb (cp312) for `pytest -m gpu tests/engines` there (kvtrace check)
#   standins/         scripts/gpu/standins (flashinfer, sgl_kernel)
#   sglang_pd.py, sglang_h200.sh   this checkout's driver and run script
# Needs scripts/setup_engines.sh done (.venv-engines) and PyPI access. ~57 MB; ~10 min on 2 busy
# cores (xz).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DIR=${1:-$ROOT/.gpu}
EV=${KVTRACE_ENGINES_VENV:-$ROOT/.venv-engines}
mkdir -p "$DIR"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
# versions as in .venv-engines (pydantic_core must match pydantic exactly)
ver() { "$EV/bin/python" -c "from importlib.metadata import version; print(version('$1'))"; }
PKGS=(nixl-cu13==$(ver nixl) nixl==$(ver nixl))
for p in pyzmq msgspec pydantic pydantic_core orjson pybase64 annotated_types typing_inspection \
         compressed_tensors ipython ipython_pygments_lexers traitlets loguru dill starlette gguf \
         truststore apache-tvm-ffi; do
  PKGS+=("$p==$(ver $p)")
done
PLAT=(--python-version 3.12 --implementation cp --only-binary=:all:)
for n in 28 27 26 24 17 5; do PLAT+=(--platform manylinux_2_${n}_x86_64); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
"$EV/bin/python" -m pip download -q --no-deps "${PLAT[@]}" -d "$TMP/whl" "${PKGS[@]}"
"$EV/bin/python" -m pip install -q --no-deps --no-index --no-compile "${PLAT[@]}" \
    --target "$TMP/site" "$TMP"/whl/*.whl
rm -rf "$TMP/site/nixl_ep_cu13"   # NIXL's expert-parallel extension: 91 MB, not used
tar cJf "$DIR/site312.txz" -C "$TMP/site" .
DUCK=$(.venv/bin/python -c "from importlib.metadata import version; print(version('duckdb'))")
"$EV/bin/python" -m pip download -q --no-deps "${PLAT[@]}" -d "$TMP/whl-duck" "duckdb==$DUCK"
"$EV/bin/python" -m pip install -q --no-deps --no-index --no-compile "${PLAT[@]}" \
    --target "$TMP/duck" "$TMP"/whl-duck/*.whl
tar cJf "$DIR/duckdb312.txz" -C "$TMP/duck" .
EX=(--exclude=__pycache__ --exclude='*.so' --exclude=sglang/multimodal_gen --exclude=sglang/test
    --exclude=sglang/benchmark --exclude=sglang/srt/models)
SP=$("$EV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tar cJf "$DIR/sglang-0.5.21.txz" -C "$SP" "${EX[@]}" sglang sglang-0.5.21.dist-info
tar cJf "$DIR/sglang-0.5.23.txz" -C "$EV/sglang-0.5.23" "${EX[@]}" sglang sglang-0.5.23.dist-info
rm -rf "$DIR/standins"; cp -r scripts/gpu/standins "$DIR/standins"
cp tests/engines/sglang_pd.py scripts/gpu/sglang_h200.sh "$DIR/"
du -sh "$DIR"/*
