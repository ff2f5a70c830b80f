#!/usr/bin/env bash
# vLLM 0.34's real NIXL connector (unmodified, pull mode) with its KV caches in GPU memory on
# the lent GPU machine (device tool), recorded with `kvtrace record --hooks vllm`. Run from the
# repo root with the folder made by scripts/gpu/pack_vllm.sh carried (default .gpu-vllm/):
#   bash .gpu-vllm/vllm_h200.sh smoke   # imports; the driver on DRAM and on VRAM unrecorded; VRAM
#                                       # recorded, clean and late read, each `kvtrace check`ed there
#   bash .gpu-vllm/vllm_h200.sh tests   # pytest -m gpu tests/engines/test_vllm_vram.py (TESTS=files),
#                                       # each test's trace `kvtrace check`ed and kept
#   bash .gpu-vllm/vllm_h200.sh quick   # imports, the VRAM driver unrecorded, then tests
# The image has no network, no duckdb, no vLLM: the pack brings vLLM's pure-Python tree (no .so),
# the light dependencies and NIXL as cp312 trees, stand-ins for the compiled modules vLLM imports
# on this path (xgrammar, llguidance, vllm._C_stable_libtorch: every name imports, any call
# raises; the connector calls none), and this checkout's code (src.tgz), which runs from
# /tmp/src. Traces come back in $OUT/traces.tgz and the step logs in $OUT/STEP.txt.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 NIXL_LOG_LEVEL=WARN VLLM_LOGGING_LEVEL=WARNING
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PACK=${PACK:-$(cd "$(dirname "$0")" && pwd)}
T=/tmp/traces; mkdir -p $T

t0=$SECONDS
rm -rf /tmp/site /tmp/vllm /tmp/src /tmp/failed-*; mkdir -p /tmp/site /tmp/vllm /tmp/src
for f in site312 duckdb312 vdeps312; do tar xJf "$PACK/$f.txz" -C /tmp/site || { echo "unpack $f failed"; exit 1; }; done
tar xJf "$PACK"/vllm-*.txz -C /tmp/vllm && tar xzf "$PACK/src.tgz" -C /tmp/src || { echo "unpack failed"; exit 1; }
ROOT=/tmp/src; cd $ROOT
# kvtrace without a build: the package-dir mapping of pyproject.toml, as symlinks
PKG=/tmp/kvpkg/kvtrace; rm -rf /tmp/kvpkg; mkdir -p $PKG
for f in kvtrace/*; do ln -s "$ROOT/$f" $PKG/; done
for d in tracer replay analysis tui kernels; do ln -s "$ROOT/$d" $PKG/$d; done
# the C extensions, built for this Python as `pip install` builds them (else: Python fallbacks)
EXT=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
INC=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
for c in tracer/_rows kernels/_kvh64; do
  gcc -O3 -shared -fPIC -I"$INC" "$ROOT/$c.c" -o "$ROOT/$c$EXT" || echo "could not build $c.c: Python fallback"
done
BASE=/tmp/kvpkg:/tmp/site
ENG=/tmp/vllm:$BASE:$PACK/standins-vllm     # what the driver runs with
DRIVER=$ROOT/tests/engines/vllm_pd.py
echo "setup: unpacked in $((SECONDS - t0)) s"
# every python3 runs from /tmp: in $ROOT, `python3 -m` / `-c` would take $ROOT/kvtrace (a source folder)
# for the package (the H100 call of 14:15 UTC lost its in-script checks to that; the tests passed)
cd /tmp

# run NAME HOOKS(-|spec) ARGS...: the driver (recorded unless HOOKS is -), timed, then checked
run() {
  local name=$1 hooks=$2; shift 2
  local s=$SECONDS rc
  if [ "$hooks" = - ]; then
    PYTHONPATH=$ENG timeout ${RUN_TIMEOUT:-100} python3 "$DRIVER" "$@" --report $T/$name.json >$T/$name.log 2>&1
  else
    PYTHONPATH=$ENG timeout ${RUN_TIMEOUT:-100} python3 -m kvtrace record --hooks $hooks -o $T/$name.kvtrace -- \
      python3 "$DRIVER" "$@" --report $T/$name.json >$T/$name.log 2>&1
  fi
  rc=$?
  [ $rc = 0 ] || touch /tmp/failed-$name
  echo "== $name (hooks $hooks): exit $rc after $((SECONDS - s)) s: $*"
  grep -E "^(decode|prefill|kvtrace|  req)|rror|Traceback|stand-in" $T/$name.log | head -16
  [ $rc = 0 ] || tail -25 $T/$name.log
  summarize $name
}

# summarize NAME: the verifier's report of $T/NAME.json, and `kvtrace check` of $T/NAME.kvtrace
summarize() {
  local name=$1
  python3 - $T/$name.json <<'EOF'
import json, os, sys
p = sys.argv[1]
if os.path.exists(p):
    r = json.load(open(p)); vs = r["vllm_stats"]
    print(f"   verifier: memory {r.get('memory')}, {len(r['requests'])} requests, {len(r['misaddressed'])} misaddressed"
          f" block(s); vLLM: {r['transfers']} transfers, {r['descriptors']} descriptors, {vs.get('bytes_transferred', 0)} bytes;"
          f" regions {[(hex(g['addr']), g['block_len'], g['blocks']) for g in r['regions']]}")
if os.path.exists(p + ".prefill"):
    print(f"   prefill: notifications {json.load(open(p + '.prefill'))['notifications']}")
EOF
  if [ -d $T/$name.kvtrace ]; then
    PYTHONPATH=$BASE python3 -m kvtrace check $T/$name.kvtrace --format json >$T/$name.check.json 2>$T/$name.check.err
    echo "   kvtrace check: exit $?"
    python3 - $T/$name.check.json <<'EOF'
import collections, json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:  # noqa: BLE001
    print("   check output unreadable:", e); sys.exit()
c = collections.Counter((f["check"], f.get("severity")) for f in r["findings"])
print("   findings:", dict(c) or "none")
for f in r["findings"][:4]:
    print("    -", f["message"][:300])
print("   hypotheses:", [(h["name"], h["status"]) for h in r["verdict"]["hypotheses"]])
EOF
    head -c 1500 $T/$name.check.err
  fi
}

step_imports() {
  nvidia-smi -L
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), 'triton', triton.__version__)"
  local s=$SECONDS
  PYTHONPATH=$ENG VLLM_TARGET_DEVICE=cuda python3 -c "
import vllm, nixl._api
from vllm.platforms import current_platform
from vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector import NixlConnector
import kvtrace.tracer.integrations.vllm
print('imports ok: vllm', vllm.__version__, 'platform', type(current_platform).__name__, current_platform.device_type)" 2>&1 | grep -v "^W[0-9]" | tail -25
  echo "import: $((SECONDS - s)) s"
}

step_smoke() {
  step_imports
  run dram-plain - --memory dram
  run vram-plain - --memory vram
  [ -f /tmp/failed-vram-plain ] && { echo "VRAM run failed: recorded runs skipped"; return 1; }
  run vram-clean vllm --memory vram
  run vram-late-read vllm --memory vram --lease 2 --decode-delay 6
}

# the gpu-marked tests, with an "engines venv" made of a python3 wrapper that puts the
# unpacked trees on PYTHONPATH (tests/engines/engine_runs.py runs $KVTRACE_ENGINES_VENV/bin/python)
step_tests() {
  [ -f /tmp/failed-vram-plain ] && { echo "VRAM run failed in smoke: tests skipped"; return 1; }
  local ev=/tmp/ev; mkdir -p $ev/bin
  printf '#!/bin/sh\nexport PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}%s"\nexec python3 "$@"\n' "$ENG" >$ev/bin/python
  chmod +x $ev/bin/python
  (KVTRACE_ENGINES_VENV=$ev PYTHONPATH=$BASE timeout ${TESTS_TIMEOUT:-300} python3 -m pytest -q \
    -p no:cacheprovider --rootdir=$ROOT -c $ROOT/pyproject.toml -m gpu -rs --durations=8 --basetemp=/tmp/pt \
    $(for t in ${TESTS:-tests/engines/test_vllm_vram.py}; do echo $ROOT/$t; done))
  local rc=$?
  for tr in /tmp/pt/*/run.kvtrace; do   # each test's trace and reports, summarized as run()'s
    [ -d "$tr" ] || continue
    local n=test-$(basename "$(dirname "$tr")") d=$(dirname "$tr")
    cp -r "$tr" $T/$n.kvtrace; cp "$d/run.json" $T/$n.json 2>/dev/null; cp "$d/run.json.prefill" $T/$n.json.prefill 2>/dev/null
    echo "== $n"; summarize $n
  done
  return $rc
}

# the VRAM driver unrecorded (imports and a transfer: the gate), then the gpu-marked tests
step_quick() {
  step_imports
  run vram-plain - --memory vram
  [ -f /tmp/failed-vram-plain ] && { echo "VRAM run failed: tests skipped"; return 1; }
  step_tests
}

for s in "$@"; do
  echo "=== step $s ($(date -u +%T))"
  "step_$s" 2>&1 | tee "$OUT/$s.txt"
  (cd /tmp && tar czf "$OUT/traces.tgz" traces)   # after each step: a later step's timeout keeps them
done
echo "=== done ($(date -u +%T)), traces.tgz $(du -h "$OUT/traces.tgz" | cut -f1)"
