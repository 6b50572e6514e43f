"""Serving throughput of structured output (issue 16): 16 concurrent chat
requests, each with its own JSON Schema from tests/grammar/schemas.json
(`response_format: json_schema`), against the same 16 requests without a
schema — same prompts, and the same output length per request (the
unconstrained one gets max_tokens = min_tokens = the tokens the constrained
one produced, ignore_eos) — so the difference is the cost of the grammar
masks and nothing else. Rounds alternate constrained / unconstrained on one
server (side by side: the machine's load hits both alike); the first
constrained round compiles every schema (cold), later ones find them in the
cache of compiled grammars (warm).

Reports per round: output tokens, wall time from the first request sent to
the last answer, tokens/s; then the median ratio constrained/unconstrained
over the warm rounds. Usage:
  .venv/bin/python bench/structured_bench.py [--tram build/tram] [--model M]
      [--rounds 4] [--clients 16] [--max-tokens 128] [--threads 2]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import pathlib
import re
import statistics
import subprocess
import tempfile
import time

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = json.loads((ROOT / "tests" / "grammar" / "schemas.json").read_text())


def start(tram: str, model: str, threads: int, clients: int, log: pathlib.Path) -> tuple[subprocess.Popen, str]:
    cmd = [tram, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "--threads", str(threads),
           "--max-seqs", str(clients), "--max-model-len", "2048"]
    f = open(log, "wb")
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"listening on [\d.]+:\d+ \(port (\d+)\)", log.read_text(errors="replace"))
        if m:
            url = f"http://127.0.0.1:{m.group(1)}"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return p, url
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    p.kill()
    raise SystemExit(f"tram did not start: see {log}")


def one(url: str, body: dict) -> dict:
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=600)
    r.raise_for_status()
    return r.json()


def run_round(url: str, bodies: list[dict]) -> tuple[list[dict], float]:
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(len(bodies)) as ex:
        out = list(ex.map(lambda b: one(url, b), bodies))
    return out, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tram", default=str(ROOT / "build" / "tram"))
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    schemas = [e for e in CORPUS if e["name"].startswith("api-")][: a.clients]
    schemas += CORPUS[: a.clients - len(schemas)]
    prompts = [f"Write one example JSON value for '{e['name']}'." for e in schemas]
    base = lambda i: {"messages": [{"role": "user", "content": prompts[i]}], "temperature": 0}  # noqa: E731
    constrained = [{**base(i), "max_tokens": a.max_tokens,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "x", "schema": schemas[i]["schema"]}}}
                   for i in range(a.clients)]
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start(a.tram, a.model, a.threads, a.clients, pathlib.Path(tmp) / "tram.log")
        try:
            rows, ratios = [], []
            for rnd in range(a.rounds):
                outs, t_c = run_round(url, constrained)
                lens = [o["usage"]["completion_tokens"] for o in outs]
                free = [{**base(i), "max_tokens": n, "min_tokens": n, "ignore_eos": True} for i, n in enumerate(lens)]
                outs_f, t_f = run_round(url, free)
                assert [o["usage"]["completion_tokens"] for o in outs_f] == lens
                n = sum(lens)
                rows.append((rnd, "cold" if rnd == 0 else "warm", n, t_c, n / t_c, t_f, n / t_f))
                if rnd > 0:
                    ratios.append((n / t_c) / (n / t_f))
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"{a.clients} concurrent chat requests, temperature 0, max_tokens {a.max_tokens}, --threads {a.threads}\n")
    print("| round | schemas | output tokens | constrained s | tok/s | unconstrained s | tok/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rnd, kind, n, tc, rc, tf, rf in rows:
        print(f"| {rnd} | {kind} | {n} | {tc:.2f} | {rc:.1f} | {tf:.2f} | {rf:.1f} | {rc / rf:.3f} |")
    if ratios:
        print(f"\nmedian warm ratio (constrained / unconstrained throughput): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
