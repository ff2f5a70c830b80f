#!/usr/bin/env bash
# Record SGLang's driver (tests/engines/sglang_pd.py) with an engines venv's kvtrace hooks, then
# replay each trace (bench/replay_verdicts.py: recorded/eager/lazy, conflicts and pct seeds 0-29).
# Compare hooks before/after by passing two engines venvs (each sees its own checkout's kvtrace).
#
#   bash bench/sglang_handoff.sh OUTDIR ENGINES_VENV TAG [RUNS]
#
# Per run: 0.5.23 bytes-sized bf16 index-K and 0.5.21 tokens-sized index-K, both --slots 16
# (prefill reuses freed source pages), and 0.5.21 bytes-sized bf16 (its misaddressed index-K).
set -euo pipefail
OUT=$1; EV=$(cd "$2" && pwd); TAG=$3; RUNS=${4:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
DRV=$HERE/tests/engines/sglang_pd.py
mkdir -p "$OUT"; cd "$OUT"
rec() {  # rec NAME SGLANG ARGS...
  local n=$1 s=$2; shift 2
  local pp=""; [ "$s" = 0.5.23 ] && pp=$EV/sglang-0.5.23
  rm -rf "$n.kvtrace" "$n".json*
  echo "$n: $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "$n: %U s user %e s wall" env -u PYTHONPATH ${pp:+PYTHONPATH=$pp} "$EV/bin/python" -m kvtrace \
    record --hooks sglang -o "$n.kvtrace" -- "$EV/bin/python" "$DRV" "$@" --report "$n.json" > "$n.out" 2>&1
  grep -E "^(decode|kvtrace record):" "$n.out" || tail -3 "$n.out"
}
traces=()
for i in $(seq 1 "$RUNS"); do
  rec "$TAG-23-$i" 0.5.23 --index-k bytes --index-dtype bf16 --slots 16 --seed $((6 + i))
  rec "$TAG-21-$i" 0.5.21 --index-k tokens --slots 16 --seed $((6 + i))
  rec "$TAG-21bug-$i" 0.5.21 --index-k bytes --index-dtype bf16 --seed $((6 + i))
  traces+=("$TAG-23-$i.kvtrace" "$TAG-21-$i.kvtrace" "$TAG-21bug-$i.kvtrace")
done
"$HERE/.venv/bin/python" "$HERE/bench/replay_verdicts.py" "${traces[@]}"
