#!/usr/bin/env bash
# tests/gpu/prepare-carry.sh [DIR] — on this (CPU) machine: puts into DIR
# (default build/gpu-carry, ignored by git with the rest of build/) what a
# bare GPU machine needs for tests/gpu/run-on-device.sh beyond the working
# tree, within the device tool's 64 MiB carry limit:
#
#   pcre2/include/pcre2.h, pcre2/lib/libpcre2-8.so.0
#       PCRE2 for the tokenizer (model_check and engine_bench link it):
#       Debian's libpcre2-dev and libpcre2-8-0, unpacked with dpkg -x
#       (`apt-get download`; without network, the same files as installed
#       here). The library needs only glibc 2.14.
#   smollm2-10l.gguf
#       the default model's first 10 of 30 blocks (tests/gpu/truncate_gguf.py):
#       its real weights, tokenizer and shapes, 54 MB. The whole model
#       (98 MB; 93 MB under zstd -9) does not fit.
#   qwen35-tiny.gguf, qwen35moe-tiny.gguf, qwen3next-tiny.gguf
#       the hybrid fixtures of tests/reference/data/ (random-weight Hugging
#       Face checkpoints) as llama.cpp's converter writes them
#       (tests/reference/qwen35_gguf.py), under 1 MB each: the GPU build
#       reads GGUF files only (TRAM_NO_HF, the Makefile's CUDA part).
#
# The random Llama-3-8B-shaped model is not carried: run-on-device.sh writes
# it there (scripts/make-random-llama.py, 8.5 GB).
#
# Then, from the device tool: run with carry ["build/gpu-carry"] (see
# docs/benchmarks/cuda.md for the exact call).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/gpu-carry}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
layers=10
py=${PYTHON:-.venv/bin/python}
mkdir -p "$dir/pcre2/include" "$dir/pcre2/lib"

# --- PCRE2 ---------------------------------------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if (cd "$tmp" && apt-get download libpcre2-8-0 libpcre2-dev) >"$tmp/apt.log" 2>&1; then
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/root"; done
  root=$tmp/root
  src="$(cd "$tmp" && ls ./*.deb | xargs -n1 basename | tr '\n' ' ')"
else
  echo "prepare-carry: apt-get download failed (see below); taking the installed files" >&2
  tail -3 "$tmp/apt.log" >&2
  root=
  src="installed: $(dpkg-query -W -f '${Package} ${Version}, ' libpcre2-8-0 libpcre2-dev)"
fi
lib=$(ls "$root"/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0.* | head -1)
cp "$root/usr/include/pcre2.h" "$dir/pcre2/include/pcre2.h"
cp "$lib" "$dir/pcre2/lib/libpcre2-8.so.0" # a plain file under its soname (links travel badly)
echo "$src" >"$dir/pcre2/SOURCE"

# --- the default model, truncated ----------------------------------------------------
out=$dir/smollm2-${layers}l.gguf
if [ ! -s "$out" ] || [ "$model" -nt "$out" ] || [ tests/gpu/truncate_gguf.py -nt "$out" ]; then
  "$py" tests/gpu/truncate_gguf.py "$model" "$out" --layers "$layers"
fi

# --- the hybrid fixtures, as GGUF files ------------------------------------------------
for name in qwen35-tiny qwen35moe-tiny qwen3next-tiny; do
  hf=tests/reference/data/$name
  out=$dir/$name.gguf
  if [ ! -s "$out" ] || [ "$hf/model.safetensors" -nt "$out" ] || [ tests/reference/qwen35_gguf.py -nt "$out" ]; then
    PYTHONPATH=tests/reference "$py" -c 'import sys; from qwen35_gguf import write_gguf; write_gguf(*sys.argv[1:])' \
      "$hf" "$out.tmp"
    mv "$out.tmp" "$out"
  fi
done

# --- what will travel -------------------------------------------------------------
carry=$(du -sb "$dir" | cut -f1)
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
total=$((carry + tree))
printf 'prepare-carry: %s holds %.1f MiB, the working tree %.1f MiB: %.1f of 64 MiB\n' "$dir" \
  "$(echo "$carry / 1048576" | bc -l)" "$(echo "$tree / 1048576" | bc -l)" "$(echo "$total / 1048576" | bc -l)"
if [ "$total" -gt $((62 * 1048576)) ]; then
  echo "prepare-carry: too close to the 64 MiB limit: remove untracked files, or lower layers" >&2
  exit 1
fi
