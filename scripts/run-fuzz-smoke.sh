#!/usr/bin/env bash
# A short run of every libFuzzer target over its seed corpus (and random
# inputs after), so the targets never rot: build/fuzz/fuzz_X with
# tests/fuzz/corpus/fuzz_X/, FUZZ_SMOKE_RUNS executions each (default 20000)
# or 60 s, FUZZ_SMOKE_JOBS targets at a time (default: the CPUs; each target
# is one process). Long runs are `make fuzz-long`.
set -uo pipefail
runs=${FUZZ_SMOKE_RUNS:-20000}
jobs=${FUZZ_SMOKE_JOBS:-$(nproc 2>/dev/null || echo 1)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# One target: its exit status and log into $logs/NAME.{rc,log}.
one() {
  local f=$1 name work corpus
  name=$(basename "$f")
  corpus=tests/fuzz/corpus/$name
  work=$(mktemp -d)
  if [ -d "$corpus" ]; then
    "$f" -runs="$runs" -max_total_time=60 "$work" "$corpus" >"$logs/$name.log" 2>&1
  else
    "$f" -runs="$runs" -max_total_time=60 "$work" >"$logs/$name.log" 2>&1
  fi
  echo $? >"$logs/$name.rc"
  rm -rf "$work"
}

targets=()
for f in build/fuzz/fuzz_*; do
  [ -x "$f" ] && targets+=("$f")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz smoke: no fuzz targets built" >&2; exit 1; }

running=0
for f in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  one "$f" &
  running=$((running + 1))
done
wait

status=0
for f in "${targets[@]}"; do
  name=$(basename "$f")
  rc=$(cat "$logs/$name.rc" 2>/dev/null || echo "?")
  if [ "$rc" != 0 ]; then
    status=1
    echo "FAIL $name (exit $rc)"; tail -40 "$logs/$name.log"
  else
    echo "ok   $name: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$logs/$name.log" | tail -1)"
  fi
done
exit $status
