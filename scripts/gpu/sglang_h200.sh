#!/usr/bin/env bash
# SGLang's real NIXL connector with VRAM pools on the lent H200 (device tool), recorded with
# `kvtrace record --hooks sglang`. Run from the repo root with the folder made by
# scripts/gpu/pack_sglang.sh carried (default .gpu/):
#   bash .gpu/sglang_h200.sh smoke          # imports, one unrecorded and one recorded request
#   bash .gpu/sglang_h200.sh cases thru     # the bug/clean cases, NIXL VRAM throughput
#   bash .gpu/sglang_h200.sh tests          # pytest -m gpu tests/engines (duckdb312.txz packed; TESTS=files)
#   bash .gpu/sglang_h200.sh hetero         # head-sliced hetero TP (MHA pools, send_kvcache_slice)
#   bash .gpu/sglang_h200.sh pp             # pipeline-parallel prefill (2 stages) into one decode
#   ROUNDS=2 bash .gpu/sglang_h200.sh ring  # the flight recorder's cost on VRAM, interleaved arms
#   bash .gpu/sglang_h200.sh ringab         # the same, this kvtrace vs .gpu/old/'s (another checkout)
#   REQ=384 ROUNDS=4 bash .gpu/sglang_h200.sh abthru   # ring without checksums vs none vs .gpu/old, longer transfer phase
#   REQ=768 bash .gpu/sglang_h200.sh pausedab   # recorded vs unrecorded waves inside one run (--paused-waves)
#   REQ=768 ROUNDS=2 bash .gpu/sglang_h200.sh ringgil   # the same, ring: .gpu/old vs this vs this + switch 0.2 ms
#   REQ=3072 ROUNDS=2 bash .gpu/sglang_h200.sh tapab    # the same, ring: .gpu/old vs this, then this with its tap / hooks paused
#   REQ=768 REQ_BIG=384 bash .gpu/sglang_h200.sh geom   # the ring's cost (paused waves) at three geometries: bytes a request
# RUN_TIMEOUT: seconds a run may take (default 240)
# The H200 image has no network, no duckdb, no flashinfer/sgl_kernel: the pack brings SGLang
# 0.5.21 and 0.5.23 (pure Python, no .so), the light dependencies and NIXL as cp312 trees,
# and stand-ins for the two GPU-kernel packages (scripts/gpu/standins: every name imports,
# any call raises; the connector calls none). Traces come back in $OUT/traces.tgz and are
# checked on a CPU machine (`kvtrace check`).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 NIXL_LOG_LEVEL=WARN PYTHONSAFEPATH=1 SGLANG_HOST_IP=127.0.0.1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(pwd)
PACK=${PACK:-$ROOT/.gpu}
DRIVER=$PACK/sglang_pd.py
[ -f "$DRIVER" ] || DRIVER=$ROOT/tests/engines/sglang_pd.py
T=/tmp/traces; mkdir -p $T

t0=$SECONDS
mkdir -p /tmp/site /tmp/sgl21 /tmp/sgl23
tar xJf "$PACK/site312.txz" -C /tmp/site && tar xJf "$PACK/sglang-0.5.21.txz" -C /tmp/sgl21 \
  && tar xJf "$PACK/sglang-0.5.23.txz" -C /tmp/sgl23 || { echo "unpack failed"; exit 1; }
if [ -f "$PACK/duckdb312.txz" ]; then tar xJf "$PACK/duckdb312.txz" -C /tmp/site || exit 1; fi
# kvtrace without a build: the package-dir mapping of pyproject.toml, as symlinks
PKG=/tmp/kvpkg/kvtrace; rm -rf /tmp/kvpkg; mkdir -p $PKG
for f in kvtrace/*; do ln -s "$ROOT/$f" $PKG/; done
for d in tracer replay analysis tui kernels; do ln -s "$ROOT/$d" $PKG/$d; done
# $PACK/old (optional): another kvtrace checkout's package folders, for old-vs-new runs (KV=old)
if [ -d "$PACK/old" ]; then
  rm -rf /tmp/kvpkg-old; mkdir -p /tmp/kvpkg-old/kvtrace
  for f in "$PACK"/old/kvtrace/*; do ln -s "$f" /tmp/kvpkg-old/kvtrace/; done
  for d in tracer replay analysis tui kernels; do ln -s "$PACK/old/$d" /tmp/kvpkg-old/kvtrace/$d; done
fi
# the C extensions (the recorder's per-event methods and the NIXL tap's per-posting calls, and
# kvh64), built for this Python as `pip install` builds them; without them kvtrace records
# through its Python fallbacks (same rows, slower: not what a deployment runs)
EXT=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
INC=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
for c in tracer/_rows kernels/_kvh64; do
  gcc -O3 -shared -fPIC -I"$INC" "$ROOT/$c.c" -o "$ROOT/$c$EXT" || echo "could not build $c.c: Python fallback"
  # and $PACK/old's (KV=old), or its arms would record through the fallbacks
  if [ -f "$PACK/old/$c.c" ]; then
    gcc -O3 -shared -fPIC -I"$INC" "$PACK/old/$c.c" -o "$PACK/old/$c$EXT" || echo "could not build old $c.c"
  fi
done
BASE=/tmp/kvpkg:/tmp/site:$PACK/standins
pp() { local b=$BASE; [ "${KV:-new}" = old ] && b=/tmp/kvpkg-old:/tmp/site:$PACK/standins
       [ "$1" = 0.5.23 ] && echo /tmp/sgl23:$b || echo /tmp/sgl21:$b; }
echo "setup: unpacked in $((SECONDS - t0)) s"

# run NAME VERSION HOOKS(-|spec) ARGS...: the driver (recorded unless HOOKS is -), timed
run() {
  local name=$1 ver=$2 hooks=$3; shift 3
  local s=$SECONDS rc
  if [ "$hooks" = - ]; then
    PYTHONPATH=$(pp $ver) timeout ${RUN_TIMEOUT:-240} python3 "$DRIVER" "$@" --report $T/$name.json >$T/$name.log 2>&1
  else
    # REC_ARGS: more `kvtrace record` options (e.g. --ring 30s)
    PYTHONPATH=$(pp $ver) timeout ${RUN_TIMEOUT:-240} python3 -m kvtrace record --hooks $hooks ${REC_ARGS:-} -o $T/$name.kvtrace -- \
      python3 "$DRIVER" "$@" --report $T/$name.json >$T/$name.log 2>&1
  fi
  rc=$?
  echo "== $name (sglang $ver, hooks $hooks): exit $rc after $((SECONDS - s)) s: $*"
  grep -E "^(decode|prefill|kvtrace|  room)|rror|arning|Traceback" $T/$name.log | head -14
  python3 - $T/$name.json <<'EOF'
import json, os, sys
p = sys.argv[1]
if os.path.exists(p + ".prefill"):
    t = json.load(open(p + ".prefill"))["timing"]
    lat = sorted(t["latency_s"])
    print(f"   prefill: {t['bytes']/2**20:.1f} MiB in {t['busy_s']:.3f} s busy = {t['bytes']/max(t['busy_s'],1e-9)/1e9:.3f} GB/s;"
          f" request latency median {lat[len(lat)//2]*1e3:.1f} ms")
    wb, ws = t.get("wave_bytes", [])[1:], t.get("wave_busy_s", [])[1:]
    if ws:
        print(f"   after the first wave: {sum(wb)/2**20:.1f} MiB in {sum(ws):.3f} s busy = {sum(wb)/max(sum(ws),1e-9)/1e9:.3f} GB/s"
              f" (first wave {t['wave_bytes'][0]/2**20:.1f} MiB in {t['wave_busy_s'][0]:.3f} s)")
if os.path.exists(p):
    r = json.load(open(p))
    print(f"   verifier: sglang {r['version']}, memory {r.get('memory')}, {len(r['requests'])} requests,"
          f" {len(r['misaddressed'])} misaddressed page(s)")
EOF
}

step_smoke() {
  nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), 'triton', triton.__version__)"
  for v in 0.5.21 0.5.23; do
    local s=$SECONDS
    PYTHONPATH=$(pp $v) python3 -c "import nixl._api, sglang.version, sglang.srt.disaggregation.nixl.conn as c, flashinfer, kvtrace.tracer.integrations.sglang; print('imports ok: sglang', sglang.version.__version__, 'nixl', nixl._api.__file__.split('/')[-3], 'flashinfer', flashinfer.__version__)" 2>&1 | tail -4
    echo "import $v: $((SECONDS - s)) s"
  done
  PYTHONPATH=$(pp 0.5.21) python3 -c "import ucp" 2>/dev/null; ls /tmp/site/nixl_cu13.libs/ucx 2>/dev/null | head -20
  run smoke-vram 0.5.21 - --memory vram --requests 1 --index-k bytes --index-dtype bf16
  run smoke-vram-rec 0.5.21 sglang --memory vram --requests 2 --index-k bytes --index-dtype bf16
}

# the gpu-marked engine tests, with an "engines venv" made of a python3 wrapper that puts the
# unpacked trees on PYTHONPATH (tests/engines/engine_runs.py runs $KVTRACE_ENGINES_VENV/bin/python
# and puts $KVTRACE_ENGINES_VENV/sglang-0.5.23 first for the fixed release)
step_tests() {
  local ev=/tmp/ev; mkdir -p $ev/bin; ln -sfn /tmp/sgl23 $ev/sglang-0.5.23
  printf '#!/bin/sh\nexport PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}%s"\nexec python3 "$@"\n' "/tmp/sgl21:$BASE" >$ev/bin/python
  chmod +x $ev/bin/python
  KVTRACE_ENGINES_VENV=$ev PYTHONPATH=$BASE timeout 420 python3 -m pytest -q -p no:cacheprovider -m gpu \
    ${TESTS:-tests/engines/test_sglang_vram.py tests/engines/test_vram_checksums.py} -rs --durations=8 -s
}

step_cases() {
  run usc-bf16-vram 0.5.21 sglang --memory vram --index-k bytes --index-dtype bf16
  run tokens-vram 0.5.21 sglang --memory vram --index-k tokens
  run fixed-0523-vram 0.5.23 sglang --memory vram --index-k bytes --index-dtype bf16
  run usc-fp8-vram 0.5.21 sglang --memory vram --index-k bytes --index-dtype fp8
}

# SGLang's head-sliced hetero-TP path (MHA pools: --kv-heads, send_kvcache_slice), which its
# connector refuses for DRAM destinations: prefill TP 2 -> decode TP 1 and 1 -> 2 (and 2 -> 4
# unless HETERO_WIDE=0), both releases; each direction unrecorded first (the verifier alone),
# then recorded with --hooks sglang. HEADS total KV heads (default 4).
step_hetero() {
  nvidia-smi -L
  local g="--memory vram --kv-heads ${HEADS:-4} --timeout 90"
  local cases=("2 1" "1 2"); [ "${HETERO_WIDE:-1}" = 1 ] && cases+=("2 4")
  for v in 0.5.21 0.5.23; do
    for c in "${cases[@]}"; do
      set -- $c
      local n=hetero-${v//./}-p$1d$2
      [ "$1$2" = 24 ] || run $n-plain $v - $g --prefill-tp $1 --decode-tp $2
      run $n $v sglang $g --prefill-tp $1 --decode-tp $2
    done
  done
}

# the same, longer (12 waves), UCX's protocol choice printed for the unrecorded VRAM run
step_thru2() {
  local big="--slots 512 --page-tokens 64 --requests 96 --max-pages 48 --wave 8 --index-k tokens"
  UCX_PROTO_INFO=y run thru2-vram 0.5.21 - --memory vram $big
  grep -i "cuda\|tcp\|posix\|sysv\|cma" $T/thru2-vram.log | sort | uniq -c | sort -rn | head -12
  for m in vram dram; do
    export KVTRACE_CHECKSUM_LOG=$T/thru2-$m-rec.sums
    run thru2-$m-rec 0.5.21 sglang --memory $m $big
    unset KVTRACE_CHECKSUM_LOG
    [ $m = dram ] && run thru2-dram 0.5.21 - --memory dram $big
  done
}

# the flight recorder's cost on VRAM: unrecorded, recorded to files without page checksums,
# and --ring 30s with and without them, ROUNDS rounds interleaved (thru2's 96 requests)
step_ring() {
  local big="--slots 512 --page-tokens 64 --requests 96 --max-pages 48 --wave 8 --index-k tokens"
  for r in $(seq 1 ${ROUNDS:-2}); do
    run ring$r-plain 0.5.21 - --memory vram $big
    run ring$r-file-no-sums 0.5.21 sglang:-content --memory vram $big
    REC_ARGS="--ring 30s" run ring$r-ring 0.5.21 sglang --memory vram $big
    REC_ARGS="--ring 30s" run ring$r-ring-no-sums 0.5.21 sglang:-content --memory vram $big
  done
}

# step_ring's ring arms, this checkout's kvtrace vs $PACK/old's (KV=old), interleaved
step_ringab() {
  local big="--slots 512 --page-tokens 64 --requests 96 --max-pages 48 --wave 8 --index-k tokens"
  for r in $(seq 1 ${ROUNDS:-2}); do
    run ab$r-plain 0.5.21 - --memory vram $big
    REC_ARGS="--ring 30s" run ab$r-ring-no-sums 0.5.21 sglang:-content --memory vram $big
    KV=old REC_ARGS="--ring 30s" run ab$r-ring-no-sums-old 0.5.21 sglang:-content --memory vram $big
    REC_ARGS="--ring 30s" run ab$r-ring 0.5.21 sglang --memory vram $big
    KV=old REC_ARGS="--ring 30s" run ab$r-ring-old 0.5.21 sglang --memory vram $big
  done
}

# the ring's cost on VRAM throughput, this checkout vs $PACK/old, without page checksums,
# REQ requests (more waves: a longer transfer phase than ringab's 96), ROUNDS rounds, arms rotating
step_abthru() {
  local big="--slots 512 --page-tokens 64 --requests ${REQ:-384} --max-pages 48 --wave 8 --index-k tokens"
  for r in $(seq 1 ${ROUNDS:-3}); do
    local arms=(plain new old); local k=$((r % 3))
    for a in "${arms[@]:$k}" "${arms[@]:0:$k}"; do
      case $a in
        plain) run t$r-plain 0.5.21 - --memory vram $big ;;
        new) REC_ARGS="--ring 30s" run t$r-ring-no-sums 0.5.21 sglang:-content --memory vram $big ;;
        old) KV=old REC_ARGS="--ring 30s" run t$r-ring-no-sums-old 0.5.21 sglang:-content --memory vram $big ;;
      esac
    done
  done
}

# recording's cost on VRAM throughput as an in-process A/B: every odd wave of one run unrecorded
# (sglang_pd.py --paused-waves), so both arms share the processes, NIXL agents and buffers;
# bench/paused_waves.py compares each unrecorded wave with its recorded neighbours. Arms:
# --ring 30s without and with page checksums, file recording without them; one unrecorded
# run of the same workload for the absolute figure.
step_pausedab() {
  local big="--slots 512 --page-tokens 64 --requests ${REQ:-768} --max-pages 48 --wave 8 --index-k tokens"
  run pw-plain 0.5.21 - --memory vram $big
  for r in $(seq 1 ${ROUNDS:-2}); do
    REC_ARGS="--ring 30s" run pw$r-ring-no-sums 0.5.21 sglang:-content --memory vram $big --paused-waves
  done
  REC_ARGS="--ring 30s" run pw-ring 0.5.21 sglang --memory vram $big --paused-waves
  run pw-file-no-sums 0.5.21 sglang:-content --memory vram $big --paused-waves
  python3 "$ROOT/bench/paused_waves.py" $T/pw*-ring-no-sums.json.prefill
  python3 "$ROOT/bench/paused_waves.py" $T/pw-ring.json.prefill
  python3 "$ROOT/bench/paused_waves.py" $T/pw-file-no-sums.json.prefill
  rm -rf $T/pw*.kvtrace   # big; the numbers are in the reports
}

# the method's own spread (A/A: --paused-waves on unrecorded runs, where nothing is paused)
# beside the ring without page checksums, paused whole, tap only and hooks only
step_pausedaa() {
  local big="--slots 512 --page-tokens 64 --requests ${REQ:-768} --max-pages 48 --wave 8 --index-k tokens"
  for r in $(seq 1 ${ROUNDS:-2}); do
    run aa$r-plain 0.5.21 - --memory vram $big --paused-waves
    REC_ARGS="--ring 30s" run aa$r-ring-no-sums 0.5.21 sglang:-content --memory vram $big --paused-waves
  done
  REC_ARGS="--ring 30s" run aa-ring-no-sums-tap 0.5.21 sglang:-content --memory vram $big --paused-waves tap
  REC_ARGS="--ring 30s" run aa-ring-no-sums-hooks 0.5.21 sglang:-content --memory vram $big --paused-waves hooks
  for f in $T/aa*.json.prefill; do python3 "$ROOT/bench/paused_waves.py" $f; done
  rm -rf $T/aa*.kvtrace
}

# the ring's cost on VRAM throughput (--paused-waves, no page checksums): $PACK/old vs this checkout,
# ROUNDS rounds of REQ requests, arms in turn; then this checkout with only its NIXL tap paused, and
# with only its connector hooks paused
step_tapab() {
  local big="--slots 512 --page-tokens 64 --requests ${REQ:-768} --max-pages 48 --wave 8 --index-k tokens"
  for r in $(seq 1 ${ROUNDS:-2}); do
    KV=old REC_ARGS="--ring 30s" run tapab$r-old 0.5.21 sglang:-content --memory vram $big --paused-waves
    REC_ARGS="--ring 30s" run tapab$r-new 0.5.21 sglang:-content --memory vram $big --paused-waves
  done
  REC_ARGS="--ring 30s" run tapab-new-tap 0.5.21 sglang:-content --memory vram $big --paused-waves tap
  REC_ARGS="--ring 30s" run tapab-new-hooks 0.5.21 sglang:-content --memory vram $big --paused-waves hooks
  for f in $T/tapab*.json.prefill; do echo "$f"; python3 "$ROOT/bench/paused_waves.py" $f; done
  rm -rf $T/tapab*.kvtrace
}

# the ring's cost (paused waves) against how much a request moves: the recording's cost is mostly
# per request (hooks) and per posting (tap), the transfer's per byte. Three geometries:
#   small: MLA, 2 kv + 2 index-K layers (the tapab step's; ~5 MiB a request at 48 pages max)
#   mla61: DeepSeek-V3.2-shaped, 61 MLA kv + 61 index-K layers (~30x the bytes and descriptors)
#   mha80: a 70B-class GQA model at TP 8, one KV head of 128 a rank, 80 layers (K and V regions:
#          160 descriptors a page of 16 KiB each: many small descriptors)
# mla61 also with page checksums (the full hooks, kvh64 on the GPU). REQ_BIG requests for the two big ones.
step_geom() {
  local small="--slots 512 --page-tokens 64 --requests ${REQ:-768} --max-pages 48 --wave 8 --index-k tokens"
  local mla61="--slots 400 --page-tokens 64 --requests ${REQ_BIG:-384} --max-pages 48 --wave 8 --index-k tokens --kv-layers 61 --index-layers 61"
  local mha80="--slots 400 --page-tokens 64 --requests ${REQ_BIG:-384} --max-pages 48 --wave 8 --kv-heads 1 --head-dim 128 --kv-layers 80"
  for r in $(seq 1 ${ROUNDS:-1}); do   # GEOMS: a subset, e.g. GEOMS="mla61 mha80"
    for g in ${GEOMS:-small mla61 mha80 mla61-sums}; do
      case $g in
        small) REC_ARGS="--ring 30s" run geom$r-small 0.5.21 sglang:-content --memory vram $small --paused-waves ;;
        mla61) REC_ARGS="--ring 30s" run geom$r-mla61 0.5.21 sglang:-content --memory vram $mla61 --paused-waves ;;
        mha80) REC_ARGS="--ring 30s" run geom$r-mha80 0.5.21 sglang:-content --memory vram $mha80 --paused-waves ;;
        mla61-sums) REC_ARGS="--ring 30s" run geom$r-mla61-sums 0.5.21 sglang --memory vram $mla61 --paused-waves ;;
      esac
    done
  done
  for f in $T/geom*.json.prefill; do echo "$f"; python3 "$ROOT/bench/paused_waves.py" $f; done
  rm -rf $T/geom*.kvtrace
}

# the ring's cost on VRAM throughput (--paused-waves, no page checksums), $PACK/old vs this
# checkout vs this checkout with the flush's GIL switch interval at 0.2 ms (tracer/gil.py),
# ROUNDS rounds of REQ requests, arms in turn
step_ringgil() {
  local big="--slots 512 --page-tokens 64 --requests ${REQ:-768} --max-pages 48 --wave 8 --index-k tokens"
  for r in $(seq 1 ${ROUNDS:-2}); do
    KV=old REC_ARGS="--ring 30s" run gil$r-old 0.5.21 sglang:-content --memory vram $big --paused-waves
    REC_ARGS="--ring 30s" run gil$r-new 0.5.21 sglang:-content --memory vram $big --paused-waves
    KVTRACE_BACKGROUND_SWITCH_S=0.0002 REC_ARGS="--ring 30s" run gil$r-new-switch 0.5.21 sglang:-content \
      --memory vram $big --paused-waves
  done
  for f in $T/gil*.json.prefill; do echo "$f"; python3 "$ROOT/bench/paused_waves.py" $f; done
  rm -rf $T/gil*.kvtrace
}

# SGLang's pipeline-parallel prefill: two stages, each registering half of the layers, into
# one decode that holds them all (SGLang refuses a destination with more entries than the
# source outside VRAM). With the layer ids SGLang pairs entries by (--layer-ids model: MLA kv
# and an index-K region per layer, as DeepSeek-V3.2/V4) and without them (none: a plain MLA
# pool, placed by the stage's prefill_start_layer); unrecorded first (0.5.21), then recorded; and
# 0.5.21's uniform-slot-count bug (bytes-sized index-K) under the same stages. With .gpu/old
# (another checkout): its hooks too.
step_pp() {
  nvidia-smi -L
  local g="--memory vram --kv-layers 4 --prefill-pp 2 --timeout 90"
  for v in 0.5.21 0.5.23; do
    [ $v = 0.5.21 ] && run pp2-${v//./}-ids-plain $v - $g --index-layers 4 --index-k tokens --layer-ids model
    run pp2-${v//./}-ids $v sglang $g --index-layers 4 --index-k tokens --layer-ids model
    [ $v = 0.5.21 ] && run pp2-${v//./}-noids-plain $v - $g --index-layers 0 --layer-ids none
    run pp2-${v//./}-noids $v sglang $g --index-layers 0 --layer-ids none
  done
  run pp2-0521-ids-usc 0.5.21 sglang $g --index-layers 4 --index-k bytes --index-dtype bf16 --layer-ids model
  if [ -d "$PACK/old" ]; then
    KV=old run pp2-0521-ids-oldhooks 0.5.21 sglang $g --index-layers 4 --index-k tokens --layer-ids model
    KV=old run pp2-0521-noids-oldhooks 0.5.21 sglang $g --index-layers 0 --layer-ids none
  fi
}

# NIXL VRAM throughput through SGLang's connector: bigger pages, unrecorded and recorded,
# with the DRAM twin of each in the same call
step_thru() {
  local big="--slots 512 --page-tokens 64 --requests 24 --max-pages 48 --wave 8 --index-k tokens"
  for m in vram dram; do
    run thru-$m 0.5.21 - --memory $m $big
    export KVTRACE_CHECKSUM_LOG=$T/thru-$m-rec.sums
    run thru-$m-rec 0.5.21 sglang --memory $m $big
    unset KVTRACE_CHECKSUM_LOG
    python3 - $T/thru-$m-rec.sums <<'EOF'
import collections, json, os, sys
if os.path.exists(sys.argv[1]):
    by = collections.defaultdict(lambda: [0, 0, 0.0])
    for line in open(sys.argv[1]):
        r = json.loads(line); b = by[r["by"]]; b[0] += 1; b[1] += r["bytes"]; b[2] += r["wall_s"]
    for k, (n, nb, w) in sorted(by.items()):
        print(f"   hashing by {k}: {n} calls, {nb/2**20:.1f} MiB, {w:.3f} s wall")
EOF
  done
}

for s in "$@"; do
  echo "=== step $s ($(date -u +%T))"
  "step_$s" 2>&1 | tee "$OUT/$s.txt"
  (cd /tmp && tar czf "$OUT/traces.tgz" traces)   # after each step: a later step's timeout keeps them
done
echo "=== done ($(date -u +%T)), traces.tgz $(du -h "$OUT/traces.tgz" | cut -f1)"
