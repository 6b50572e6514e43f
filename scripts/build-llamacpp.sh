#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (the benchmark peer) on this machine from
# the PyPI sdist of llama-cpp-python pinned in bench/peer-requirements.txt.
#
# Why the sdist and not `pip install llama-cpp-python[server]`: the package's
# Python server (llama_cpp/server/app.py) runs every request behind one lock,
# so it has no parallel slots; the sdist vendors the whole llama.cpp tree
# (vendor/llama.cpp, tools/server included), and llama.cpp's own server has
# slots and continuous batching. The llama.cpp commit it vendors is read from
# the sdist's CHANGELOG and baked into `llama-server --version`.
#
# Output (git-ignored): $PEER_DIR/bin/llama-server, $PEER_DIR/bin/llama-quantize
# (bench/shapes.py makes the K-quant shape models with it), $PEER_DIR/VERSION, and the
# build log $PEER_DIR/build.log. Idempotent: does nothing when the binary for
# the pinned version is there. Knobs: PEER_DIR (default .bench-peer),
# JOBS (default 2), PIP (default .venv/bin/pip, else pip3).
set -euo pipefail

cd "$(dirname "$0")/.."
peer_dir=${PEER_DIR:-.bench-peer}
jobs=${JOBS:-2}
pin=$(grep -E '^[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*' bench/peer-requirements.txt | head -1)
[ -n "$pin" ] || { echo "build-llamacpp: no name==version line in bench/peer-requirements.txt" >&2; exit 1; }
pkg_version=${pin#*==}
stamp="$peer_dir/VERSION"

if [ -x "$peer_dir/bin/llama-server" ] && [ -x "$peer_dir/bin/llama-quantize" ] && [ -f "$stamp" ] &&
   grep -qx "llama-cpp-python $pkg_version" <(head -1 "$stamp"); then
  exit 0
fi

pip=${PIP:-}
if [ -z "$pip" ]; then
  if [ -x .venv/bin/pip ]; then pip=.venv/bin/pip; else pip=pip3; fi
fi
# cmake is needed only here, so it is installed here (Debian), not by setup.sh.
if ! command -v cmake >/dev/null; then
  echo "build-llamacpp: installing cmake (Debian package)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends cmake >/dev/null ||
    { DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends cmake >/dev/null; } ||
    { echo "build-llamacpp: cannot install cmake" >&2; exit 1; }
fi
for tool in cmake g++ tar; do
  command -v "$tool" >/dev/null || { echo "build-llamacpp: $tool is missing (apt-get install cmake g++)" >&2; exit 1; }
done

mkdir -p "$peer_dir/src"
log="$peer_dir/build.log"
: > "$log"
start=$(date +%s)
echo "build-llamacpp: llama-server from the $pin sdist into $peer_dir/ (log: $log; 10-30 min on 2 cores)"

sdist=$(ls "$peer_dir"/src/llama_cpp_python-"$pkg_version".tar.gz 2>/dev/null || true)
if [ -z "$sdist" ]; then
  "$pip" download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    -d "$peer_dir/src" "$pin" >>"$log" 2>&1
  sdist="$peer_dir/src/llama_cpp_python-$pkg_version.tar.gz"
fi
srcdir="$peer_dir/src/llama_cpp_python-$pkg_version"
[ -d "$srcdir" ] || tar -xzf "$sdist" -C "$peer_dir/src"
llama="$srcdir/vendor/llama.cpp"
[ -f "$llama/tools/server/CMakeLists.txt" ] ||
  { echo "build-llamacpp: $sdist has no vendor/llama.cpp/tools/server" >&2; exit 1; }
commit=$(grep -oE 'ggml-org/llama\.cpp@[0-9a-f]+' "$srcdir/CHANGELOG.md" | head -1 | cut -d@ -f2)
commit=${commit:-unknown}

# Native CPU build, static, only the server: no web UI (it would be fetched
# from the network), no HTTPS, no tests or examples.
cmake -S "$llama" -B "$peer_dir/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_COMMIT="$commit" >>"$log" 2>&1 ||
  { echo "build-llamacpp: cmake configure failed; see $log" >&2; tail -20 "$log" >&2; exit 1; }
cmake --build "$peer_dir/build" --target llama-server llama-quantize -j "$jobs" >>"$log" 2>&1 ||
  { echo "build-llamacpp: build failed; see $log" >&2; tail -20 "$log" >&2; exit 1; }

mkdir -p "$peer_dir/bin"
cp "$peer_dir/build/bin/llama-server" "$peer_dir/build/bin/llama-quantize" "$peer_dir/bin/"
secs=$(( $(date +%s) - start ))
{
  echo "llama-cpp-python $pkg_version"
  echo "llama.cpp commit $commit"
  echo "build seconds $secs"
  "$peer_dir/bin/llama-server" --version 2>&1 | head -3
} > "$stamp"
echo "build-llamacpp: done in ${secs}s: $peer_dir/bin/llama-server (llama.cpp $commit)"
