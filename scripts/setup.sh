#!/usr/bin/env bash
# Installs the Debian packages tram builds against, only those missing.
# Idempotent: silent and fast (one dpkg-query) when everything is there.
# Called by the Makefile through the stamp $1 (default build/.deps-ok).
set -euo pipefail

stamp=${1:-build/.deps-ok}
pkgs=(
  build-essential pkg-config
  libuv1-dev          # event loop
  libcjson-dev        # JSON
  node-llhttp         # HTTP parser: C sources in /usr/share/llhttp
  libpcre2-dev        # tokenizer pre-split regexes
  libicu-dev          # tokenizer.json's NFC normalizer (Qwen)
  libsystemd-dev      # sd_notify, socket activation
  libzmq3-dev         # KV-cache events (ZeroMQ PUB)
  libmsgpack-dev      # KV-cache events (msgpack-c)
  libcmocka-dev       # C unit tests
  clang               # libFuzzer targets
  libclang-rt-14-dev  # sanitizer and fuzzer runtimes for clang
  systemd             # systemd-analyze verify in the tests
  wrk                 # HTTP load generator for bench/
  chromium            # headless browser for the dashboard's page test (DevTools protocol)
  python3-venv
)

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# node-llhttp must ship the C sources we compile into build/.
for f in /usr/share/llhttp/llhttp.c /usr/share/llhttp/api.c \
         /usr/share/llhttp/http.c /usr/share/include/llhttp/llhttp.h; do
  [ -f "$f" ] || { echo "setup: $f missing (node-llhttp)" >&2; exit 1; }
done

mkdir -p "$(dirname "$stamp")"
touch "$stamp"
