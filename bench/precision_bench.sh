#!/usr/bin/env bash
# bench/precision_bench.sh — `--precision exact` against `fast`, side by side
# in one run, with the existing C benchmarks (docs/benchmarks/precision.md):
#   1. build/bench/matmul_bench --precision both (per-type matmuls and the
#      default model's matmul step; ends with the fast/exact ratios);
#   2. build/bench/model_bench, exact then fast, ROUNDS times interleaved
#      (whole forward: decode 1 row, decode 32 rows, prefill 512);
#   3. build/bench/engine_bench, exact then fast, ROUNDS times interleaved
#      (the engine at concurrency 1 and 32, 128 prompt + 128 output tokens).
# Then the fast/exact ratios of steps 2 and 3 (best of the rounds, cpu-time:
# on a shared machine the wall time measures the neighbours).
#
#   bench/precision_bench.sh [THREADS] [ROUNDS]     (defaults 1 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-1}
ROUNDS=${2:-2}
B=${TRAM_BUILD:-build}
M=${TRAM_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "# precision_bench: $T thread(s), $ROUNDS round(s), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$B/bench/matmul_bench" -t "$T" --quick --precision both
for r in $(seq "$ROUNDS"); do
  for p in exact fast; do
    "$B/bench/model_bench" -m "$M" -t "$T" -i 5 --precision "$p" | tee -a "$out/model-$p"
    "$B/bench/engine_bench" -m "$M" -t "$T" -c 1,32 -p 128 -o 128 --kv-cache-mb 256 --precision "$p" |
      tee -a "$out/engine-$p"
  done
done
# best (smallest) cpu-time per line kind, then fast / exact
best() { # file pattern field -> the smallest value of that field over the lines matching pattern
  grep -E "$2" "$1" | sed -E "$3" | sort -g | head -1
}
echo
echo "## fast / exact (best of $ROUNDS rounds, cpu-time)"
echo
echo "| measure | exact | fast | fast speed-up |"
echo "| --- | --- | --- | --- |"
for kind in "decode 1 row" "decode 32 rows" "prefill 512"; do
  e=$(best "$out/model-exact" "^$kind" 's/.*wall \([^)]*\), *([0-9.]+) ms cpu-time.*/\1/')
  f=$(best "$out/model-fast" "^$kind" 's/.*wall \([^)]*\), *([0-9.]+) ms cpu-time.*/\1/')
  echo "| model_bench $kind, ms cpu | $e | $f | $(awk -v e="$e" -v f="$f" 'BEGIN { printf "%.2f×", e / f }') |"
done
for c in 1 32; do
  # engine_bench columns: C wall gen/s-wall gen/s-cpu ...: the highest gen/s cpu
  e=$(awk -v c="$c" '$1 == c { print $4 }' "$out/engine-exact" | sort -g | tail -1)
  f=$(awk -v c="$c" '$1 == c { print $4 }' "$out/engine-fast" | sort -g | tail -1)
  echo "| engine_bench C=$c, output tok/s cpu | $e | $f | $(awk -v e="$e" -v f="$f" 'BEGIN { printf "%.2f×", f / e }') |"
done
