#!/bin/sh
# bench/cpu_goals.sh — every goal of issue 29 in one side-by-side run, tram
# against llama.cpp's llama-server (`make bench-cpu-goals`;
# docs/benchmarks/cpu-decode.md). One command: bench/cpu_decode.py writes any
# missing shape model (scripts/make-random-llama.py, then llama.cpp's
# llama-quantize for the K-quants), runs each part below with the read probe
# after each model, and this script then profiles one run of each goal kind.
#
#   nice -n -20 bench/cpu_goals.sh
#   BUILD=build OUT=build/cpu-goals PERF=0 PARTS="decode-8b prefill-512" LLAMA_2T=0 bench/cpu_goals.sh
#
# Sized for 2 cores shared with other work (about 40 minutes at a load of
# 10-20; DEC, S8, S32, PF below change the sizes):
#   decode, 1 stream, 1 and 2 threads, one request of a 32-token prompt and
#     32 output tokens after a warm-up (TPOT over 31 gaps): SmolLM2-1.7B
#     shape Q4_0, Q4_K_M, Q8_0, Q5_K_M, Q6_K; Llama-3.1-8B shape Q4_0; the
#     default model; Gemma 3 270M Q4_K_M; Llama-3.2-3B shape Q4_0, Q4_K_M;
#   8 and 32 streams, 1.7B shape Q4_0, 2 threads: 12 requests on 8 streams
#     (32 + 32 tokens), 40 on 32 streams (32 + 16), so new prompts arrive
#     while the others decode;
#   the 512-token prefill, 1.7B shape Q4_0, 1 and 2 threads (TTFT, 1 request);
#   with PERF=1 (default), `perf record -e cpu-clock` of tram alone, from the
#     end of the warm-up to the last token, for one run of each kind: decode
#     at 1.7B and at 8B (1 thread), the 32-stream mixed steps (2 threads),
#     the 512-token prefill (1 thread).
# Outputs in $OUT: one markdown table and JSON per part (cpu_decode.py's
# columns), perf-*.txt reports, report.md (machine, load, commands, tables).
# shellcheck disable=SC2086 # DEC, S8, S32, PF are lists of options
set -eu
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/cpu-goals}
PERF=${PERF:-1}
PY=${PY:-.venv/bin/python}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
GEMMA3=${GEMMA3:-models/gemma-3-270m-q4_k_m.gguf}
mkdir -p "$OUT"
REPORT=$OUT/report.md

{
  echo "# issue 29 goals: one side-by-side run"
  echo
  echo "- started $(date -u '+%Y-%m-%d %H:%M:%S') UTC, tram $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) cores, flags:$(grep -m1 -o -w -e avx2 -e avx512f -e avx512_vnni -e avx_vnni /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "- nice: $(nice)"
} >"$REPORT"

# part NAME ARGS...: one cpu_decode.py run, its table appended to the report
part() {
  name=$1
  shift
  echo "$(date -u +%H:%M:%S) $name: $*" >&2
  {
    echo
    echo "## $name"
    echo
    echo "    $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "    $PY bench/cpu_decode.py $*"
    echo
  } >>"$REPORT"
  "$PY" bench/cpu_decode.py --build-dir "$BUILD" --out "$OUT/$name.md" --json "$OUT/$name.json" "$@" >/dev/null
  cat "$OUT/$name.md" >>"$REPORT"
}

# sizes: DEC (single-stream decode), S8 / S32 (8 / 32 streams), PF (prefill) and its threads
DEC=${DEC:---requests 1 --prompt 32 --tokens 32}
S8=${S8:---requests 12 --prompt 32 --tokens 32}
S32=${S32:---requests 40 --prompt 32 --tokens 16}
PF=${PF:---requests 1 --prompt 512 --tokens 8}
PF_THREADS=${PF_THREADS:-1,2}
# PARTS: the parts to run (default all); LLAMA_2T=0: single-stream decode at
# 2 threads runs tram alone (on a loaded machine llama.cpp's spinning threads
# collapse at 2 threads: docs/benchmarks/methodology.md)
PARTS=${PARTS:-decode-1.7b decode-8b streams-8 streams-32 prefill-512 decode-real decode-1.7b-k decode-3b}
LLAMA_2T=${LLAMA_2T:-1}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
# dec NAME ARGS...: single-stream decode at 1 and 2 threads
dec() {
  name=$1
  shift
  if [ "$LLAMA_2T" = 1 ]; then
    part "$name" --threads 1,2 --streams 1 $DEC "$@"
  else
    part "$name" --threads 1 --streams 1 $DEC "$@"
    part "$name-2t" --threads 2 --streams 1 --servers tram $DEC "$@"
  fi
}
want decode-1.7b && dec decode-1.7b --shapes smollm2-1.7b --types Q4_0,Q4_K_M,Q8_0
want decode-8b && dec decode-8b --shapes llama3.1-8b --types Q4_0 --ready-timeout 300
want streams-8 && part streams-8 --shapes smollm2-1.7b --types Q4_0 --threads 2 --streams 8 $S8
want streams-32 && part streams-32 --shapes smollm2-1.7b --types Q4_0 --threads 2 --streams 32 $S32
want prefill-512 && part prefill-512 --shapes smollm2-1.7b --types Q4_0 --threads $PF_THREADS --streams 1 $PF
want decode-real && dec decode-real --shapes "" --model "$MODEL" --model "$GEMMA3"
want decode-1.7b-k && dec decode-1.7b-k --shapes smollm2-1.7b --types Q5_K_M,Q6_K
want decode-3b && dec decode-3b --shapes llama3.2-3b --types Q4_0,Q4_K_M

if [ "$PERF" = 1 ]; then
  # tram alone, profiled from the end of the warm-up to the last token
  prof() {
    name=$1
    shift
    part "profile-$name" --servers tram --perf "$OUT/perf-$name" "$@"
  }
  prof decode-1.7b --shapes smollm2-1.7b --types Q4_0 --threads 1 --streams 1 --requests 1 --prompt 16 --tokens 48
  prof decode-8b --shapes llama3.1-8b --types Q4_0 --threads 1 --streams 1 --requests 1 --prompt 16 --tokens 16 \
    --ready-timeout 300
  prof streams-32 --shapes smollm2-1.7b --types Q4_0 --threads 2 --streams 32 $S32
  prof prefill-512 --shapes smollm2-1.7b --types Q4_0 --threads 1 --streams 1 $PF
  for f in "$OUT"/perf-*/*.txt; do
    {
      echo
      echo "## $f (top symbols)"
      echo
      grep -E '^ +[0-9]' "$f" | head -15 | sed 's/^/    /'
    } >>"$REPORT"
  done
fi
echo "$(date -u +%H:%M:%S) done: $REPORT" >&2
