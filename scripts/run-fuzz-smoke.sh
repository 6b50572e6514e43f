#!/usr/bin/env bash
# A short run of every libFuzzer target over its seed corpus (and random
# inputs after), so the targets never rot: build/fuzz/fuzz_X with
# tests/fuzz/corpus/fuzz_X/. Long runs are done by hand (see docs).
set -uo pipefail
runs=${FUZZ_SMOKE_RUNS:-20000}
status=0
n=0
for f in build/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus=tests/fuzz/corpus/$name
  work=$(mktemp -d)
  n=$((n + 1))
  if [ -d "$corpus" ]; then
    "$f" -runs="$runs" -max_total_time=60 "$work" "$corpus" >"$work.log" 2>&1
  else
    "$f" -runs="$runs" -max_total_time=60 "$work" >"$work.log" 2>&1
  fi
  rc=$?
  if [ $rc -ne 0 ]; then
    status=1
    echo "FAIL $name (exit $rc)"; tail -40 "$work.log"
  else
    echo "ok   $name: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$work.log" | tail -1)"
  fi
  rm -rf "$work" "$work.log"
done
[ $n -gt 0 ] || { echo "fuzz smoke: no fuzz targets built" >&2; exit 1; }
exit $status
