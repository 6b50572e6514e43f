#!/usr/bin/env bash
# `make fuzz-long`: every libFuzzer target (build/fuzz/fuzz_X) run at depth
# over its corpus, FUZZ_LONG_RUNS executions each (default 10^7) or
# FUZZ_LONG_SECONDS of time each (default 1800), whichever ends first, on
# FUZZ_LONG_JOBS processes (default 1); then the new inputs are merged back
# into tests/fuzz/corpus/fuzz_X (only inputs that add coverage: -merge=1), so
# that make test's short run starts from what the long runs found. A crash
# leaves its reproducer as build/fuzz-long/fuzz_X/crash-* and fails.
# FUZZ_LONG_TARGETS="fuzz_http fuzz_json_strict" limits the targets.
set -uo pipefail
runs=${FUZZ_LONG_RUNS:-10000000}
secs=${FUZZ_LONG_SECONDS:-1800}
jobs=${FUZZ_LONG_JOBS:-1}
status=0
for f in build/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  if [ -n "${FUZZ_LONG_TARGETS:-}" ] && [[ " $FUZZ_LONG_TARGETS " != *" $name "* ]]; then continue; fi
  corpus=tests/fuzz/corpus/$name
  out=build/fuzz-long/$name
  mkdir -p "$corpus" "$out/new"
  echo "== $name: up to $runs runs or $secs s ($jobs job(s))"
  (cd "$out" && "../../../$f" -runs="$runs" -max_total_time="$secs" -jobs="$jobs" -workers="$jobs" \
     -print_final_stats=1 new "../../../$corpus") >"$out/run.log" 2>&1
  rc=$?
  grep -h -E "^(Done|stat::number_of_executed_units)" "$out"/run.log "$out"/fuzz-*.log 2>/dev/null | tail -2
  if [ $rc -ne 0 ]; then
    status=1
    echo "FAIL $name (exit $rc): see $out/run.log"; tail -30 "$out/run.log"
    continue
  fi
  before=$(ls "$corpus" | wc -l)
  "$f" -merge=1 "$corpus" "$out/new" >"$out/merge.log" 2>&1 || { status=1; echo "FAIL $name: merge"; }
  echo "   corpus $corpus: $before → $(ls "$corpus" | wc -l) inputs"
done
exit $status
