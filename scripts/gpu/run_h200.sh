#!/usr/bin/env bash
# Runs on the lent H200 (device tool), from the repo root, with `.whl` carried (the
# format validator is part of the package, kvtrace.tracer.validate):
#   bash scripts/gpu/run_h200.sh tests bench engine
# Installs the carried wheels (slim nixl-cu13 + nixl meta + duckdb) into /tmp/site, makes
# kvtrace importable without a build (the package-dir mapping, as symlinks), then runs
# the named steps. Each step logs to $OUT/<step>.txt and has its own time limit, so one
# slow step cannot eat the whole call.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# PYTHONSAFEPATH: `python -m` must not put the checkout's own kvtrace/ (the CLI folder
# alone) ahead of the symlinked package
export PYTHONUNBUFFERED=1 NIXL_LOG_LEVEL=WARN PYTHONSAFEPATH=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >"$OUT/setup.txt" 2>&1 || { cat "$OUT/setup.txt"; exit 1; }
PKG=/tmp/kvpkg/kvtrace; rm -rf /tmp/kvpkg; mkdir -p $PKG
for f in kvtrace/*; do ln -s "$ROOT/$f" $PKG/; done
for d in tracer replay analysis tui kernels; do ln -s "$ROOT/$d" $PKG/$d; done
export PYTHONPATH=/tmp/kvpkg:/tmp/site
{ nvidia-smi -L; python3 -c "import torch, triton, nixl._api; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'nixl ok')"; date -u; } >>"$OUT/setup.txt" 2>&1
cat "$OUT/setup.txt"

step_tests() {
  timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels tests/replay tests/tracer -rs
}
step_bench() {
  timeout 400 python3 bench/bench_kernels.py --json "$OUT/bench_kernels.json"
}
step_sweep() {
  timeout 300 python3 bench/sweep_kernel_tiles.py
}
step_engbench() {
  timeout 200 python3 bench/bench_gpu_engine.py --reps 3 --rounds 9
}
step_engine() {
  T=/tmp/traces; rm -rf $T; mkdir -p $T
  t0=$SECONDS; timeout 120 python3 -m kvtrace record --workload production --device cuda --no-progress -o $T/clean.kvtrace
  echo "record clean: exit $? after $((SECONDS - t0)) s"; t0=$SECONDS
  timeout 120 python3 -m kvtrace record --workload production --device cuda --no-progress --inject uniform-slot-count \
      --index-k bf16 -o $T/usc.kvtrace
  echo "record usc: exit $? after $((SECONDS - t0)) s"
  # production's pools share one slot count, so there the bug cannot misaddress; small-mixed
  # gives index_k its own page size (the geometry the uniform count breaks)
  timeout 60 python3 -m kvtrace record --workload small-mixed --device cuda --no-progress \
      --inject uniform-slot-count -o $T/sm-usc.kvtrace; echo "record sm-usc: exit $?"
  for t in clean usc sm-usc; do
    echo "== kvtrace check $t"; timeout 60 python3 -m kvtrace check $T/$t.kvtrace >$T/$t.check 2>&1; echo "exit $?"; tail -15 $T/$t.check
  done
  for t in sm-usc usc clean; do
    echo "== kvtrace replay $t on cuda (bytes executor)"; t0=$SECONDS
    timeout 150 python3 -m kvtrace replay --executor bytes --device cuda $T/$t.kvtrace >$T/$t.replay 2>&1
    echo "exit $? after $((SECONDS - t0)) s"; tail -12 $T/$t.replay
  done
}
for s in "$@"; do
  echo "=== step $s ($(date -u +%T))"
  "step_$s" 2>&1 | tee "$OUT/$s.txt"
done
echo "=== done ($(date -u +%T))"
