#!/usr/bin/env bash
# tests/gpu/run-on-device.sh LOGDIR — on a GPU machine: builds the CUDA
# checks with the CUDA toolkit alone (`make gpu-tests`), runs every check,
# times the issue's goals, then runs the quick checks under compute-sanitizer
# (memcheck, then racecheck) with whatever time is left. Full logs go to
# LOGDIR; a short table is printed last. Fits in about 8 minutes on an H200
# (BUDGET seconds, default 470; each step gets at most what is left).
#
# Exit status: 0 when the build and the checks passed (the sanitizer rows say
# whether they ran and what they found: on some machines compute-sanitizer
# refuses the device).
set -uo pipefail

logdir=${1:?usage: tests/gpu/run-on-device.sh LOGDIR}
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
BUDGET=${BUDGET:-470}
BUILD=${BUILD:-build/gpu-device}
bin=$BUILD/tests/gpu/gpu_check
rows=()
failed=0

# Build for the GPU at hand only (half the compile time); both targets if
# the GPU cannot be asked.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
archs=${CUDA_ARCHS:-}
if [ -z "$archs" ] && [ -n "$cc" ]; then archs="-gencode arch=compute_$cc,code=sm_$cc"; fi

# step NAME LIMIT LOG MUST_PASS COMMAND...
step() {
  local name=$1 limit=$2 log=$3 must=$4
  shift 4
  local left=$((BUDGET - SECONDS - 5))
  if [ "$left" -lt 20 ]; then
    rows+=("$(printf '%-10s %-8s %5s  %s' "$name" skipped - "no time left in the budget")")
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS rc
  timeout "$limit" "$@" >"$logdir/$log" 2>&1
  rc=$?
  local st=ok
  if [ $rc -eq 124 ]; then st=timeout; elif [ $rc -ne 0 ]; then st="FAIL($rc)"; fi
  if [ "$st" != ok ] && [ "$must" = 1 ]; then failed=1; fi
  local note
  note=$(grep -E '^checks:|ERROR SUMMARY|RACECHECK SUMMARY|error' "$logdir/$log" | tail -1)
  rows+=("$(printf '%-10s %-8s %5s  %s' "$name" "$st" $((SECONDS - t0)) "$note")")
  return $rc
}

{
  date -u
  nvidia-smi
  nvcc --version
} >"$logdir/machine.txt" 2>&1

if [ -n "$archs" ]; then
  step build 300 build.log 1 make -j"$(nproc)" gpu-tests BUILD="$BUILD" CUDA_ARCHS="$archs" V=1
else
  step build 300 build.log 1 make -j"$(nproc)" gpu-tests BUILD="$BUILD" V=1
fi
if [ -x "$bin" ]; then
  step check 180 check.log 1 "$bin" check
  step bench 150 bench.log 0 "$bin" bench --table "$logdir/bench-table.md"
  if command -v compute-sanitizer >/dev/null 2>&1; then
    step memcheck 120 memcheck.log 0 compute-sanitizer --tool memcheck --error-exitcode 99 "$bin" --quick check
    step racecheck 90 racecheck.log 0 compute-sanitizer --tool racecheck --error-exitcode 99 "$bin" --quick check
  else
    rows+=("$(printf '%-10s %-8s %5s  %s' sanitizer skipped - "compute-sanitizer not found")")
  fi
fi

echo
echo "=== GPU checks: full logs in $logdir ==="
grep -E '^(FAIL|WARN)' "$logdir/check.log" 2>/dev/null | head -20
if [ -s "$logdir/bench-table.md" ]; then
  echo
  cat "$logdir/bench-table.md"
fi
echo
printf '%-10s %-8s %5s  %s\n' step status secs note
printf '%s\n' "${rows[@]}"
exit $failed
