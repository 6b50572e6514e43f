"""Slow readers beside normal streams (issue 17, item 3): how much engine work
clients that never read their streams take, and whether the streams that
read keep their throughput.

    .venv/bin/python bench/slow_readers.py [--stuck 8] [--n 4] [--readers 8] [--tokens 128]

Phase A: `--readers` streams that read, alone. Phase B: `--stuck` streams of
n completions (3,000 tokens asked) whose clients never read (a 4 KiB receive
window) are started first; once the engine has gone quiet (they are paused),
the same readers run again. Printed as a markdown table: the readers'
aggregate tokens/s in each phase, the tokens the stuck streams generated
before they were paused, the paused sequences, KV blocks held, tram's RSS.
"""
import argparse
import json
import pathlib
import socket
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tram_server import start  # noqa: E402


def stuck_stream(host, port, body):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return s


def readers(srv, n, tokens):
    """n streams that read; returns (chunks with text received, seconds). A
    chunk may hold more than one token (text held back until it is valid
    UTF-8): the engine generated n * tokens (ignore_eos)."""
    got = []

    def one():
        c = srv.client()
        chunks = c.completions.create(model=None, prompt="Count to a hundred:", max_tokens=tokens, stream=True,
                                      extra_body={"ignore_eos": True})
        got.append(sum(1 for ch in chunks if ch.choices and ch.choices[0].text is not None))

    t0 = time.monotonic()
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(got), time.monotonic() - t0


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def quiet(srv):
    """Waits until the generated-token counter stops moving; returns it."""
    before = srv.metric("vllm:generation_tokens_total")
    while True:
        time.sleep(1.0)
        now = srv.metric("vllm:generation_tokens_total")
        if now == before:
            return now
        before = now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stuck", type=int, default=8)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--tmp", default="/tmp/tram-slow-readers")
    a = ap.parse_args()
    srv = start(a.tmp, "--slow-client-timeout", "600s", "--max-model-len", "4096")
    host, port = srv.host_port
    stuck = []
    try:
        readers(srv, 2, 8)  # warm-up
        tok_a, sec_a = readers(srv, a.readers, a.tokens)
        g0 = quiet(srv)
        body = {"prompt": "Write a long story:", "max_tokens": 3000, "n": a.n, "ignore_eos": True, "stream": True}
        stuck = [stuck_stream(host, port, body) for _ in range(a.stuck)]
        time.sleep(2.0)
        g1 = quiet(srv)
        paused = srv.metric("tram:num_sequences_paused")
        blocks = srv.metric("tram:kv_cache_blocks_used")
        rss1 = rss_mib(srv.proc.pid)
        tok_b, sec_b = readers(srv, a.readers, a.tokens)
        g2 = quiet(srv)
        rss2 = rss_mib(srv.proc.pid)
        for s in stuck:  # their clients leave: cancelled
            s.close()
        stuck = []
        time.sleep(1.0)
        tok_c, sec_c = readers(srv, a.readers, a.tokens)  # alone again: the drift of a shared machine
        print(f"| readers alone: text chunks/s | beside {a.stuck} stuck streams of n={a.n} | alone again | tokens the "
              f"stuck ones generated | of them during the readers' run | sequences paused | KV blocks held | "
              f"tram RSS (MiB) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        print(f"| {tok_a / sec_a:.1f} ({tok_a} in {sec_a:.1f} s) | {tok_b / sec_b:.1f} ({tok_b} in {sec_b:.1f} s) "
              f"| {tok_c / sec_c:.1f} | {g1 - g0:.0f} | {g2 - g1 - a.readers * a.tokens:.0f} | {paused:.0f} | {blocks:.0f} "
              f"| {rss1:.0f} → {rss2:.0f} |")
    finally:
        for s in stuck:
            s.close()
        srv.stop()


if __name__ == "__main__":
    main()
