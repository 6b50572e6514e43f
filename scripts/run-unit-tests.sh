#!/usr/bin/env bash
# Runs every cmocka test binary in a folder, each in its own process with a
# time limit, and prints one summary line. Exit status: number of failed
# binaries (capped at 1 for make).
set -uo pipefail

dir=${1:?usage: run-unit-tests.sh BUILD/tests [timeout-seconds]}
limit=${2:-600}
failed=()
ran=0
for t in "$dir"/test_*; do
  [ -x "$t" ] || continue
  ran=$((ran + 1))
  echo "== $t"
  if ! timeout --kill-after=10 "$limit" "$t"; then
    failed+=("$(basename "$t")")
  fi
done
if [ "$ran" -eq 0 ]; then
  echo "unit tests: no test binaries in $dir" >&2
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "unit tests ($dir): ${#failed[@]} of $ran binaries FAILED: ${failed[*]}"
  exit 1
fi
echo "unit tests ($dir): all $ran binaries passed"
