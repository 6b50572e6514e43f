#!/usr/bin/env bash
# tests/gpu/run-on-device.sh LOGDIR — on a GPU machine, in one call of
# about 6.5 minutes (BUDGET seconds, default 390: with the machine's start,
# 1-2 minutes, a first call and a rerun fit 15 minutes of device time), the
# steps in the order of what a first run is worth, each under its own
# timeout (at most what is left of the budget; skipped with under 20 s
# left). Each GPU check group runs as its own process (an abort costs one
# group); after a step hangs (its timeout), every later GPU step is skipped
# (a hang repeats); memcheck runs last. With OUT_DIR set (the device tool's
# $OUT), each step's row is appended to OUT_DIR/steps.txt and the logs are
# re-packed into OUT_DIR/gpu-logs.tgz as the step ends, so a call cut short
# still returns everything up to its last step.
#
#   probe     nvcc, cuBLAS (wherever the toolkit keeps it: the folders of
#             the toolkit, the system's, ldconfig's, a pip wheel's; the
#             unversioned libcublas.so, else the versioned name), gcc, the GPU
#   build     `make gpu-tests` for the GPU at hand, NVWERROR= (nvcc hands
#             --Werror to the host compiler; another gcc warns elsewhere),
#             warnings not fatal in the C either, cuBLAS as probed
#   quick-G   CUDA_LAUNCH_BLOCKING=1 gpu_check --quick check G, for each
#             group G of ops weights attn sample graph families: every
#             kernel vs float64 with every launch waited for (an error names its
#             kernel); attn holds the padded-row and learned-sink cases,
#             graph the capture/replay and capture-fallback cases, families
#             Gated DeltaNet, the experts' sum and clamped SwiGLU
#   check-G   CUDA_LAUNCH_BLOCKING=1 gpu_check check G: the full checks
#   bench     gpu_check bench: kernel timings against the copy and cuBLAS
#             GEMM ceilings measured in the same run (a skewed decode batch
#             and a sampling timing among them)
#   sdpa      tests/gpu/sdpa_baseline.py: PyTorch SDPA (flash, cuDNN, ...)
#             on the same attention shapes
#   model     model_check on the default model's first 10 blocks
#             ($CARRY/smollm2-10l.gguf): CUDA vs CPU logits, greedy outputs
#             across batch compositions, the matmul probe
#   model-q35, model-q35moe, model-q3next
#             model_check on the hybrid fixtures ($CARRY/qwen35-tiny.gguf,
#             qwen35moe-tiny.gguf, qwen3next-tiny.gguf: Gated DeltaNet
#             layers beside attention, with a recurrent-state pool): the
#             same checks, a few seconds each. The two with experts do not
#             fail the run: a random mixture's near-tied router logits may
#             pick other experts under the GPU's bf16 GEMM than under the
#             CPU's (docs/benchmarks/cuda.md); their logs say how far
#   e2e       engine_bench on the random Llama-3-8B-shaped model (written in
#             the background from the start: scripts/make-random-llama.py)
#   roofline  the model file's bytes / the copy rate bench measured: the
#             least time a decode step can take reading the weights once,
#             and the output tokens/s that caps at each concurrency
#   e2e-nogr  engine_bench --no-graphs on one concurrency (what graphs give)
#   model8b   model_check on that model, if time is left
#   memcheck  compute-sanitizer --tool memcheck on the quick checks, last,
#             with what is left of the budget
#
# The tables come last: failure lines, the kernel table, the SDPA table, the
# end-to-end table, then one row per step (status, seconds, a note).
#
# DRY_RUN=1: the CPU-side dry run (`make test` runs it): the probe for real,
# the build as `make -n` (its commands, not run), the SDPA script's --dry;
# every step that needs a GPU is listed with its command and status "dry".
#
# Knobs: BUDGET, BUILD, CARRY (default build/gpu-carry, made by
# tests/gpu/prepare-carry.sh), DEVICE (cuda), BIG_MODEL, BIG_ARGS, E2E_ARGS,
# NOGRAPH_ARGS, MODEL8B_ARGS, CUDA_ARCHS, PYTHON (python3: numpy; torch for
# sdpa), DRY_RUN, CUBLAS_DIRS (folders to look for cuBLAS in, instead of
# the default places), OUT_DIR, BUILT=1 (a rerun on the same machine: keep
# the programs the first call built, no build step), LIMIT_CAP (no step
# longer than this many seconds; tests). Logs: LOGDIR/<step>.log,
# machine.txt, genmodel.log, bench-table.md, sdpa-table.md, steps.txt.
#
# Exit status: 0 when the probe found nvcc, the build, the kernel checks and
# the model checks passed (a model8b timeout does not count; timings and
# the sanitizer never do); in a dry run, when the probe and the build plan
# passed.
set -uo pipefail

logdir=${1:?usage: tests/gpu/run-on-device.sh LOGDIR}
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
cd "$(dirname "$0")/../.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH
BUDGET=${BUDGET:-390}
OUT_DIR=${OUT_DIR:-}
BUILT=${BUILT:-0}
LIMIT_CAP=${LIMIT_CAP:-0}
GROUPS_=(ops weights attn sample graph families)
BUILD=${BUILD:-build/gpu-device}
CARRY=${CARRY:-build/gpu-carry}
DEVICE=${DEVICE:-cuda}
DRY_RUN=${DRY_RUN:-0}
BIG_MODEL=${BIG_MODEL:-/tmp/tram-gpu/llama8b-random.gguf}
BIG_ARGS=${BIG_ARGS:-}
E2E_ARGS=${E2E_ARGS:--c 8,64,256 -p 128 -o 128 --max-seqs 256 --max-batch-tokens 4096 --kv-cache-mb 16384}
NOGRAPH_ARGS=${NOGRAPH_ARGS:--c 8,64 -p 128 -o 128 --max-seqs 256 --max-batch-tokens 4096 --kv-cache-mb 16384 --no-graphs}
# 32 random blocks: an exact bf16 pipeline is already ~0.9e-2 from float64
# (tests/gpu/bf16_ideal.py on a narrower 32-block random model), so 2e-2
MODEL8B_ARGS=${MODEL8B_ARGS:---seqs 4 --prompt 32 --gen 8 --tol 2e-2}
PYTHON=${PYTHON:-python3}
SMALL_MODEL=$CARRY/smollm2-10l.gguf
bin=$BUILD/tests/gpu
rows=()
failed=0
hung=          # the step that timed out, if one did
: >"$logdir/steps.txt"

# ship: the rows so far and the logs, into OUT_DIR (when set), at once
ship() {
  [ -n "$OUT_DIR" ] || return 0
  mkdir -p "$OUT_DIR"
  cp "$logdir/steps.txt" "$OUT_DIR/steps.txt.tmp" && mv "$OUT_DIR/steps.txt.tmp" "$OUT_DIR/steps.txt"
  tar -czf "$OUT_DIR/gpu-logs.tgz.tmp" -C "$(dirname "$logdir")" "$(basename "$logdir")" 2>/dev/null &&
    mv "$OUT_DIR/gpu-logs.tgz.tmp" "$OUT_DIR/gpu-logs.tgz"
  local t
  for t in bench-table.md sdpa-table.md; do [ -s "$logdir/$t" ] && cp "$logdir/$t" "$OUT_DIR/"; done
  return 0
}

row() {
  rows+=("$(printf '%-13s %-9s %5s  %s' "$@")")
  printf '%s\n' "${rows[${#rows[@]} - 1]}" >>"$logdir/steps.txt"
  ship
}

# step NAME LIMIT MUST GPU COMMAND... — output in LOGDIR/NAME.log. MUST: 1
# a failure or timeout fails the run, 2 a failure does but a timeout does
# not, 0 neither. GPU: 1 when the step needs a GPU (a dry run lists it).
step() {
  local name=$1 limit=$2 must=$3 gpu=$4
  shift 4
  local log="$logdir/$name.log"
  if [ "$DRY_RUN" = 1 ] && [ "$gpu" = 1 ]; then
    echo "+ $*" >"$log"
    row "$name" dry - "$*"
    return 0
  fi
  if [ "$gpu" = 1 ] && [ -n "$hung" ]; then
    row "$name" skipped - "$hung hung before it (a hang repeats)"
    [ "$must" = 1 ] && failed=1
    return 0
  fi
  local left=$((BUDGET - SECONDS - 5))
  if [ "$left" -lt 20 ]; then
    row "$name" skipped - "no time left in the budget"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  [ "$LIMIT_CAP" -gt 0 ] && [ "$limit" -gt "$LIMIT_CAP" ] && limit=$LIMIT_CAP
  local t0=$SECONDS rc
  echo "+ $*" >"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local st=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    st=timeout rc=124
    [ "$gpu" = 1 ] && hung=$name
  elif [ $rc -ne 0 ]; then st="FAIL($rc)"; fi
  if [ "$st" != ok ] && { [ "$must" = 1 ] || { [ "$must" = 2 ] && [ $rc -ne 124 ]; }; }; then failed=1; fi
  local note
  note=$(grep -E '^checks:|ERROR SUMMARY|error:|Error [0-9]' "$log" | tail -1)
  row "$name" "$st" $((SECONDS - t0)) "$note"
  return $rc
}

# skip NAME WHY MUST — a step that cannot run; MUST 1 fails the run.
skip() {
  row "$1" skipped - "$2"
  [ "$3" = 1 ] && failed=1
}

# --- probe: what this machine has (every probe under a timeout) ----------------
# cuBLAS: the first folder holding libcublas.so (the link name), else the
# newest versioned libcublas.so.N (linked by that name); the header from the
# toolkit, or beside a pip wheel's library.
probe_cublas() {
  local nvcc_home=$1 d f dirs=()
  if [ -n "${CUBLAS_DIRS:-}" ]; then
    read -r -a dirs <<<"$CUBLAS_DIRS"
  else
    [ -n "$nvcc_home" ] && dirs+=("$nvcc_home/lib64" "$nvcc_home/lib" "$nvcc_home"/targets/*/lib)
    dirs+=(/usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64)
    while read -r f; do dirs+=("$(dirname "$f")"); done < <(timeout 5 ldconfig -p 2>/dev/null |
      awk '/libcublas\.so/ { print $NF }')
    d=$(timeout 10 "$PYTHON" -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
    [ -n "$d" ] && dirs+=("$d")
  fi
  cublas_dir='' cublas_lib=''
  for d in "${dirs[@]}"; do
    if [ -e "$d/libcublas.so" ]; then cublas_dir=$d cublas_lib=libcublas.so; break; fi
  done
  if [ -z "$cublas_dir" ]; then
    for d in "${dirs[@]}"; do
      f=$(for g in "$d"/libcublas.so.[0-9]*; do [[ $g =~ libcublas\.so\.[0-9]+$ ]] && echo "$g"; done | sort -V | tail -1)
      if [ -n "$f" ]; then cublas_dir=$d cublas_lib=$(basename "$f"); break; fi
    done
  fi
  cublas_inc=
  for d in "$nvcc_home/include" "$cublas_dir/../include" /usr/include; do
    if [ -n "$d" ] && [ -f "$d/cublas_v2.h" ]; then cublas_inc=$(cd "$d" && pwd); break; fi
  done
}

probe_t0=$SECONDS
nvcc_path=$(command -v nvcc || true)
nvcc_home=
[ -n "$nvcc_path" ] && nvcc_home=$(cd "$(dirname "$(readlink -f "$nvcc_path")")/.." && pwd)
probe_cublas "$nvcc_home"
gpu_line=$(timeout 20 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
cc=$(echo "$gpu_line" | awk -F', ' '{ print $2 }' | tr -d ' .')
{
  date -u
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo 'no git here')"
  echo "nvcc: ${nvcc_path:-not found}"
  [ -n "$nvcc_path" ] && timeout 10 nvcc --version | tail -2
  echo "cuBLAS: ${cublas_lib:-not found}${cublas_dir:+ in $cublas_dir}, header: ${cublas_inc:-not found}"
  echo "gcc: $(timeout 10 gcc --version 2>/dev/null | head -1)"
  echo "GPU: ${gpu_line:-none}"
  [ -n "$gpu_line" ] && timeout 20 nvidia-smi
  echo "compute-sanitizer: $(command -v compute-sanitizer || echo 'not found')"
  echo "cpus: $(nproc)"
  free -g
  df -h /tmp .
  timeout 20 "$PYTHON" -c 'import numpy; print("numpy", numpy.__version__)'
  timeout 30 "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$logdir/machine.txt" 2>&1
cat "$logdir/machine.txt" >"$logdir/probe.log"
probe_note="nvcc ${nvcc_home:-MISSING}; cuBLAS ${cublas_lib:-MISSING}${cublas_dir:+ ($cublas_dir)}; $(gcc -dumpfullversion 2>/dev/null | sed 's/^/gcc /'); GPU ${gpu_line:-none}"
if [ -z "$nvcc_path" ] || [ -z "$cublas_lib" ]; then
  row probe FAIL $((SECONDS - probe_t0)) "$probe_note"
  failed=1
else
  row probe ok $((SECONDS - probe_t0)) "$probe_note"
fi
echo "probe: $probe_note"

# e2e_note LOG: output tokens/s (wall) per concurrency of an engine_bench log
e2e_note() {
  awk '/^ *[0-9]+ / { printf "%sC=%s: %s gen/s", n++ ? ", " : "", $1, $3 }' "$1" 2>/dev/null
}

# roofline: a decode step reads every weight once, so it takes at least the
# weights' bytes (the model file's size, within its metadata) over the copy
# rate bench measured; C sequences then make at most C tokens a step.
roofline() {
  if [ "$DRY_RUN" = 1 ]; then
    row roofline dry - "model bytes / copy_gbs of bench.log"
    return 0
  fi
  local gbs bytes
  gbs=$(awk '/^copy_gbs:/ { print $2 }' "$logdir/bench.log" 2>/dev/null | tail -1)
  bytes=$(stat -c %s "$BIG_MODEL" 2>/dev/null)
  if [ -z "$gbs" ] || [ -z "$bytes" ]; then
    row roofline skipped - "no copy rate in bench.log or no model"
    return 0
  fi
  row roofline ok - "$(awk -v b="$bytes" -v g="$gbs" 'BEGIN {
    ms = b / (g * 1e9) * 1e3
    printf "%.2f GB / %.0f GB/s = %.2f ms a decode step: at most", b / 1e9, g, ms
    n = split("8 64 256", c, " ")
    for (i = 1; i <= n; i++) printf " C=%d: %.0f", c[i], c[i] / ms * 1e3
    printf " gen/s" }')"
}

# --- the 8.5 GB model, written while the build runs (the CPUs are shared) ------
gen_pid=
if [ "$DRY_RUN" != 1 ] && [ -n "$gpu_line" ]; then
  mkdir -p "$(dirname "$BIG_MODEL")"
  (
    t0=$SECONDS
    if [ -f "$BIG_MODEL.done" ]; then
      echo "reusing $BIG_MODEL"
    else
      rm -f "$BIG_MODEL"
      # shellcheck disable=SC2086
      timeout $((BUDGET / 2)) "$PYTHON" scripts/make-random-llama.py "$BIG_MODEL" --jobs 6 $BIG_ARGS &&
        touch "$BIG_MODEL.done"
    fi
    echo $((SECONDS - t0)) >"$logdir/genmodel.secs"
  ) >"$logdir/genmodel.log" 2>&1 &
  gen_pid=$!
fi

# --- build: for the GPU at hand only (half the compile time) -------------------
archs=${CUDA_ARCHS:-}
[ -z "$archs" ] && [ -n "$cc" ] && archs="-gencode arch=compute_$cc,code=sm_$cc"
pcre2=
[ -f "$CARRY/pcre2/lib/libpcre2-8.so.0" ] && pcre2=$CARRY/pcre2
if [ "$cublas_lib" = libcublas.so ]; then
  cublas_libs="-L$cublas_dir -lcublas -Xlinker -rpath=$cublas_dir"
else
  cublas_libs="-L$cublas_dir -Xlinker -l:$cublas_lib -Xlinker -rpath=$cublas_dir"
fi
make_args=(-k -j"$(nproc)" gpu-tests BUILD="$BUILD" PCRE2_DIR="$pcre2" V=1 NVWERROR=
  GPU_WARN="-Wall -Wextra -Wno-unused-parameter" CUBLAS_LIBS="$cublas_libs"
  CUBLAS_CFLAGS="${cublas_inc:+-I$cublas_inc}")
[ -n "$archs" ] && make_args+=(CUDA_ARCHS="$archs")
if [ "$BUILT" = 1 ]; then
  row build kept - "BUILT=1: the programs in $bin"
elif [ -z "$nvcc_path" ] || [ -z "$cublas_lib" ]; then
  skip build "no nvcc or no cuBLAS (probe.log)" 1
elif [ "$DRY_RUN" = 1 ]; then
  # the plan: every command the build would run (the GPU programs linked
  # with the probed cuBLAS), none run
  step build 60 1 0 make -n -B "${make_args[@]}"
  links=$(grep -c -F -- "$cublas_libs" "$logdir/build.log")
  werror=$(grep -c -- '--Werror' "$logdir/build.log")
  if [ "$links" -lt 3 ] || [ "$werror" -ne 0 ]; then
    row plan FAIL - "$links of 3 links with the probed cuBLAS, $werror commands with --Werror"
    failed=1
  else
    row plan ok - "3 links with the probed cuBLAS, no --Werror"
  fi
else
  step build 300 1 0 make "${make_args[@]}"
fi

# --- kernels ---------------------------------------------------------------------
have() { [ "$DRY_RUN" = 1 ] || [ -x "$1" ]; }
if have "$bin/gpu_check"; then
  for g in "${GROUPS_[@]}"; do
    step "quick-$g" 30 1 1 env CUDA_LAUNCH_BLOCKING=1 "$bin/gpu_check" --quick check "$g"
  done
  for g in "${GROUPS_[@]}"; do
    step "check-$g" 60 1 1 env CUDA_LAUNCH_BLOCKING=1 "$bin/gpu_check" check "$g"
  done
  step bench 90 0 1 "$bin/gpu_check" bench --table "$logdir/bench-table.md"
else
  skip quick "gpu_check did not build" 1
fi
if [ "$DRY_RUN" = 1 ]; then
  step sdpa 30 1 0 "$PYTHON" tests/gpu/sdpa_baseline.py --dry
else
  step sdpa 45 0 1 "$PYTHON" tests/gpu/sdpa_baseline.py --table "$logdir/sdpa-table.md"
fi

# --- the model and the engine ----------------------------------------------------
if ! have "$bin/model_check"; then
  skip model "model_check did not build (PCRE2? see build.log)" 1
elif [ "$DRY_RUN" != 1 ] && [ ! -s "$SMALL_MODEL" ]; then
  skip model "no $SMALL_MODEL: run tests/gpu/prepare-carry.sh and carry $CARRY" 1
else
  step model 60 1 1 "$bin/model_check" --dev "$DEVICE" -m "$SMALL_MODEL"
fi

# the hybrid fixtures (tests/gpu/prepare-carry.sh writes them into CARRY)
# (NAME:FIXTURE:MUST: the mixtures' router flips do not fail the run)
for h in q35:qwen35-tiny:1 q35moe:qwen35moe-tiny:0 q3next:qwen3next-tiny:0; do
  IFS=: read -r hname hfix hmust <<<"$h"
  f=$CARRY/$hfix.gguf
  if ! have "$bin/model_check"; then
    skip "model-$hname" "model_check did not build (PCRE2? see build.log)" 1
  elif [ "$DRY_RUN" != 1 ] && [ ! -s "$f" ]; then
    skip "model-$hname" "no $f: run tests/gpu/prepare-carry.sh and carry $CARRY" 1
  else
    step "model-$hname" 30 "$hmust" 1 "$bin/model_check" --dev "$DEVICE" -m "$f"
  fi
done

big=0
if [ -n "$gen_pid" ]; then
  wait "$gen_pid"
  gen_rc=$?
  gen_secs=$(cat "$logdir/genmodel.secs" 2>/dev/null || echo -)
  rm -f "$logdir/genmodel.secs"
  if [ -f "$BIG_MODEL.done" ]; then
    row genmodel ok "$gen_secs" "$(tail -1 "$logdir/genmodel.log")"
    big=1
  else
    row genmodel "FAIL($gen_rc)" "$gen_secs" "$(tail -1 "$logdir/genmodel.log")"
  fi
fi
if [ "$DRY_RUN" = 1 ] || { [ $big = 1 ] && [ -x "$bin/engine_bench" ]; }; then
  # shellcheck disable=SC2086
  step e2e 120 0 1 "$bin/engine_bench" --device "$DEVICE" -m "$BIG_MODEL" $E2E_ARGS
  [ "$DRY_RUN" = 1 ] || row e2e-rate - - "$(e2e_note "$logdir/e2e.log")"
  roofline
  # shellcheck disable=SC2086
  step e2e-nogr 60 0 1 "$bin/engine_bench" --device "$DEVICE" -m "$BIG_MODEL" $NOGRAPH_ARGS
  [ "$DRY_RUN" = 1 ] || row nogr-rate - - "graphs off: $(e2e_note "$logdir/e2e-nogr.log")"
  # shellcheck disable=SC2086
  step model8b 90 2 1 "$bin/model_check" --dev "$DEVICE" -m "$BIG_MODEL" $MODEL8B_ARGS
else
  skip e2e "no 8B-shaped model or no engine_bench" 0
fi

# --- memcheck, last: whatever the budget has left --------------------------------
if ! have "$bin/gpu_check"; then
  skip memcheck "gpu_check did not build" 0
elif [ "$DRY_RUN" = 1 ] || [ -n "$hung" ] || command -v compute-sanitizer >/dev/null 2>&1; then
  step memcheck 120 0 1 compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/gpu_check" --quick check
else
  skip memcheck "compute-sanitizer not found" 0
fi

# --- the tables, last ----------------------------------------------------------------
echo
echo "=== GPU run${DRY_RUN:+ (DRY_RUN=$DRY_RUN)}: full logs in $logdir ==="
grep -E '^(FAIL|WARN)' "$logdir"/quick-*.log "$logdir"/check-*.log "$logdir"/model.log "$logdir"/model-*.log \
  "$logdir/model8b.log" \
  2>/dev/null | cut -c1-600 | head -30
grep -E 'ERROR SUMMARY' "$logdir/memcheck.log" 2>/dev/null
for t in bench-table.md sdpa-table.md; do
  if [ -s "$logdir/$t" ]; then
    echo
    cat "$logdir/$t"
  fi
done
if [ -s "$logdir/e2e.log" ] && [ "$DRY_RUN" != 1 ]; then
  echo
  echo "end to end (engine_bench, $DEVICE, $BIG_MODEL):"
  grep -E '^ *(C |[0-9]+ )' "$logdir/e2e.log"
  if [ -s "$logdir/e2e-nogr.log" ]; then
    echo "graphs off:"
    grep -E '^ *(C |[0-9]+ )' "$logdir/e2e-nogr.log"
  fi
fi
echo
printf '%-13s %-9s %5s  %s\n' step status secs note
printf '%s\n' "${rows[@]}"
ship
exit $failed
