#!/usr/bin/env bash
# The README's main job: set up, record a production-like PD session on real NIXL (CPU),
# check the trace against the format contract, and print its summary and findings.
# The session runs a production-like configuration: 64 concurrent multi-turn sessions, bf16 index_k whose
# page size differs from the kv pool's, and the uniform-slot-count bug injected.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${OUT:-out}
mkdir -p "$OUT"
K=.venv/bin/kvtrace
$K record --workload production-dsv4 --index-k bf16 --inject uniform-slot-count -o "$OUT/session.kvtrace" --force
$K validate "$OUT/session.kvtrace"
$K info "$OUT/session.kvtrace"
# exit status 1 from check means "findings at error level" — expected for this buggy session
$K check "$OUT/session.kvtrace" || true
echo
echo "Next: kvtrace tui $OUT/session.kvtrace    |  kvtrace replay $OUT/session.kvtrace --scheduler pct --seed 1 -o $OUT/replay.kvtrace"
