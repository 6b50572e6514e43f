#!/usr/bin/env bash
# The body of `make test`, after the Makefile has built everything: the C unit
# tests (plain and under ASan/UBSan, the fuzz targets building beside them),
# a short run of each fuzz target, then the pytest suites against the real
# model (the sweeps marked `long` are left to `make test-long`, PYTEST_MARKS
# picks others). Runs every stage even when an earlier one fails, then prints a summary
# and exits non-zero if anything failed.
set -uo pipefail

BUILD=${BUILD:-build}
VENV=${VENV:-.venv}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
GEMMA3=${GEMMA3:-models/gemma-3-270m-q4_k_m.gguf}
results=()
status=0

stage() {
  local name=$1; shift
  echo
  echo "=================== $name ==================="
  local t0=$SECONDS
  "$@"
  local rc=$?
  local dt=$((SECONDS - t0))
  if [ $rc -eq 0 ]; then results+=("PASS  $name (${dt}s)"); else results+=("FAIL  $name (${dt}s, exit $rc)"); status=1; fi
}

# ASan: report leaks too; UBSan: stop at the first error with a trace.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The fuzz targets build (clang, one compiler at a time) in the background
# while the C unit tests run (one binary at a time): two CPUs busy, not one.
fuzz_pid=
fuzz_log=$(mktemp)
trap 'rm -f "$fuzz_log"' EXIT
if ls tests/fuzz/fuzz_*.c >/dev/null 2>&1; then
  make --no-print-directory fuzz >"$fuzz_log" 2>&1 &
  fuzz_pid=$!
fi
fuzz_smoke() {
  local t0=$SECONDS
  if ! wait "$fuzz_pid"; then
    cat "$fuzz_log"
    echo "fuzz targets: the build failed"
    return 1
  fi
  echo "(the fuzz targets' build ended $((SECONDS - t0)) s into this stage; it began with the unit tests)"
  TRAM_FUZZ_MODEL="$MODEL" scripts/run-fuzz-smoke.sh
}

stage "include seams (docs/architecture.md)" python3 scripts/check-seams.py
stage "C unit tests" scripts/run-unit-tests.sh "$BUILD/tests"
stage "C unit tests under ASan+UBSan" scripts/run-unit-tests.sh "$BUILD/san/tests"
if [ -n "$fuzz_pid" ]; then
  stage "fuzz targets (short run)" fuzz_smoke
fi
# pytest exits 5 when it collects nothing: that is a failure here too.
stage "pytest" env TRAM_BUILD="$BUILD" TRAM_BIN="$BUILD/tram" TRAM_SAN_BIN="$BUILD/san/tram" TRAM_MODEL="$MODEL" \
  TRAM_GEMMA3="$GEMMA3" "$VENV/bin/pytest" -q -p no:cacheprovider -m "${PYTEST_MARKS:-not long}" \
  $(ls -d tests/integration tests/reference 2>/dev/null)

echo
echo "=================== summary ==================="
printf '%s\n' "${results[@]}"
exit $status
