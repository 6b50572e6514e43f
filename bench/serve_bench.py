#!/usr/bin/env python3
"""bench/serve_bench.py — `tram serve` on the default model, measured from
outside:

  1. requests/s of GET /health over 64 keep-alive connections (wrk), the
     HTTP path with the engine loaded but idle;
  2. what the server adds to each streamed token outside the engine: S
     concurrent streams of T tokens, then tram's own account at exit (loop
     time per engine event: JSON chunk, SSE framing, write; and the mean
     delay from the engine posting an event to its bytes reaching the
     socket), next to the client-side token rate.

Usage: .venv/bin/python bench/serve_bench.py [--seconds 10] [--streams 16] [--tokens 64]
Environment: TRAM_BIN (build/tram), TRAM_MODEL (the default model).
"""
import argparse
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("serve_bench: wrk is not installed (apt-get install wrk)")
    binary = os.environ.get("TRAM_BIN", str(ROOT / "build" / "tram"))
    model = os.environ.get("TRAM_MODEL", str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    log = pathlib.Path(tempfile.mkdtemp()) / "tram.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAM_", "NOTIFY_SOCKET", "LISTEN_"))}
    with open(log, "wb") as f:
        p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "--threads", str(a.threads),
                              "--max-connections", "1024", "--max-seqs", str(max(16, a.streams))],
                             stdout=f, stderr=subprocess.STDOUT, env=env)
    try:
        port = None
        for _ in range(600):
            m = re.search(r"listening on \S+ \(port (\d+)\)", log.read_text())
            if m and "ready:" in log.read_text():
                port = int(m.group(1))
                break
            time.sleep(0.05)
        assert port, log.read_text()
        url = f"http://127.0.0.1:{port}"
        print(f"== load average: {open('/proc/loadavg').read().split()[:3]}")
        print(f"== wrk -t2 -c64 -d{a.seconds}s --latency {url}/health")
        sys.stdout.flush()
        subprocess.run(["wrk", "-t2", "-c64", f"-d{a.seconds}s", "--latency", f"{url}/health"], check=True)

        print(f"== {a.streams} concurrent streams of {a.tokens} tokens (greedy, ignore_eos)")
        body = {"prompt": "Once upon a time", "max_tokens": a.tokens, "temperature": 0, "ignore_eos": True,
                "stream": True}
        counts = []

        def one():
            n = 0
            with httpx.Client(base_url=url, timeout=600) as c:
                with c.stream("POST", "/v1/completions", json=body) as r:
                    for line in r.iter_lines():
                        n += line.startswith("data: {")
            counts.append(n)

        t0 = time.monotonic()
        ts = [threading.Thread(target=one) for _ in range(a.streams)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.monotonic() - t0
        print(f"{sum(counts)} chunks in {dt:.2f} s: {a.streams * a.tokens / dt:.1f} tokens/s over all streams")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    for line in log.read_text().splitlines():
        if "stopped" in line:
            print(line)


if __name__ == "__main__":
    main()
