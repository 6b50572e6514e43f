#!/usr/bin/env bash
# bench/http_bench.sh — requests/s of GET /health over 64 connections (wrk),
# and the server time per streamed SSE event, against build/bench/http_bench
# (tram's HTTP layer, no engine). Usage: bench/http_bench.sh [SECONDS] [EVENTS]
set -euo pipefail

BUILD=${BUILD:-build}
secs=${1:-10}
events=${2:-200000}
bin=$BUILD/bench/http_bench
command -v wrk >/dev/null || { echo "http_bench: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$bin" ] || { echo "http_bench: build $bin first (make)" >&2; exit 1; }

log=$(mktemp)
"$bin" 0 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q listening "$log" && break; sleep 0.1; done
port=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -1)

echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== wrk -t2 -c64 -d${secs}s http://127.0.0.1:$port/health"
wrk -t2 -c64 -d"${secs}s" --latency "http://127.0.0.1:$port/health"

echo "== one stream of $events SSE events (curl, read as fast as it can)"
t0=$(date +%s.%N)
bytes=$(curl -sN "http://127.0.0.1:$port/stream?n=$events" | wc -c)
t1=$(date +%s.%N)
echo "received $bytes bytes in $(echo "$t1 - $t0" | bc) s"
kill -INT "$pid"
wait "$pid" || true
grep stream "$log"
