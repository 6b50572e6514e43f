#!/usr/bin/env python3
"""Prefill and decode speed of one stream at the client, for a server whose
output tokens render no text (docs/benchmarks/hybrid.md: the random-weight
Qwen3.5-2B-shape model's vocabulary is mostly control tokens, so streamed
chunks carry no text and bench/cpu_decode.py's chunk timing sees nothing).

Non-streaming greedy requests of --prompt random ids from [0, --ids) (the
tokens that render text), each prompt new (no prefix-cache hit), eos
ignored, one at a time, through bench/multiturn_ttft.py's `complete`: per
rep one request of max_tokens 1 (its wall time: the prefill and one token)
and one of max_tokens 1 + --tokens. Prints the wall times. The decode time
per token is read from the servers' own logs, not from the difference of
the two (two prompts' prefills differ by more than 32 decode steps on a
loaded machine): tram's request line (TPOT = (total_ms − ttft_ms) /
(output_tokens − 1)), llama-server's "eval time" line
(docs/benchmarks/hybrid.md has the commands).

    .venv/bin/python bench/hybrid_speed.py --url http://127.0.0.1:8080 [--llama]
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multiturn_ttft import complete  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--llama", action="store_true", help="the server is llama.cpp's llama-server")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--ids", type=int, default=96, help="prompt ids drawn from [0, ids)")
    ap.add_argument("--seed", type=int, default=512)
    ap.add_argument("--once", action="store_true",
                    help="only the request of 1 + --tokens (a long prompt's prefill then comes from the server's log)")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    complete(a.url, rng.integers(0, a.ids, 16).tolist(), 2, a.llama)  # warm-up
    prefill = []
    for _ in range(a.reps):
        t1 = None
        if not a.once:
            t1, _ = complete(a.url, rng.integers(0, a.ids, a.prompt).tolist(), 1, a.llama)
        tn, out = complete(a.url, rng.integers(0, a.ids, a.prompt).tolist(), 1 + a.tokens, a.llama)
        assert len(out) == 1 + a.tokens, f"{len(out)} tokens came back"
        if t1 is None:
            print(f"{a.prompt} prompt tokens: {1 + a.tokens} tokens {tn:.2f} s", flush=True)
            continue
        prefill.append(t1)
        print(f"{a.prompt} prompt tokens: 1 token {t1:.2f} s; {1 + a.tokens} tokens {tn:.2f} s", flush=True)
    if prefill:
        print(f"median prefill + 1 token: {statistics.median(prefill):.2f} s")


if __name__ == "__main__":
    main()
