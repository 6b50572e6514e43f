#!/usr/bin/env python3
"""The multi-turn TTFT series of docs/benchmarks/hybrid.md: a chat of
random token ids — a system prompt of --system tokens, then per turn a
user message of --user tokens and a greedy answer of --answer tokens
(eos ignored) — sent as token-id prompts to /v1/completions, one request
at a time. Each turn is sent twice: first with max_tokens 1 (its wall time
is the turn's TTFT: the prompt's prefill and the first token), then with
max_tokens --answer for the answer the next turn's prompt carries.

  record: runs every turn 1..--turns on a server at --url and writes the
          conversation (each turn's prompt ids) and the TTFTs to --out;
  replay: sends only the max_tokens-1 request of the --at turns of a
          recorded conversation (a server without prefix caching computes
          each from scratch; nothing else matters to it).

    .venv/bin/python bench/multiturn_ttft.py record --url http://127.0.0.1:8080 --out build-bench/conv.json
    .venv/bin/python bench/multiturn_ttft.py replay --url ... --conv build-bench/conv.json --at 1,5,10,20
"""
import argparse
import json
import time

import numpy as np
import requests


def complete(url, prompt, max_tokens, llama):
    """(wall seconds, answer ids) of one greedy request."""
    t = time.perf_counter()
    if llama:  # llama-server's own endpoint takes token ids and returns them
        r = requests.post(f"{url}/completion", json={"prompt": prompt, "n_predict": max_tokens, "temperature": 0,
                                                     "ignore_eos": True, "cache_prompt": True,
                                                     "return_tokens": True}, timeout=3600)
        r.raise_for_status()
        return time.perf_counter() - t, r.json().get("tokens", [])
    r = requests.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": max_tokens,
                                                     "temperature": 0, "ignore_eos": True,
                                                     "return_token_ids": True}, timeout=3600)
    r.raise_for_status()
    j = r.json()
    return time.perf_counter() - t, j["choices"][0]["token_ids"]


def record(a):
    rng = np.random.default_rng(a.seed)
    ids = lambda n: rng.integers(0, a.vocab, n).tolist()
    prompt, turns = ids(a.system), []
    for t in range(1, a.turns + 1):
        prompt = prompt + ids(a.user)
        ttft, _ = complete(a.url, prompt, 1, a.llama)
        _, answer = complete(a.url, prompt, a.answer, a.llama)
        turns.append({"turn": t, "prompt_tokens": len(prompt), "ttft_s": round(ttft, 4), "prompt": prompt})
        print(f"turn {t:2d}: {len(prompt):5d} prompt tokens, TTFT {ttft * 1e3:8.1f} ms", flush=True)
        prompt = prompt + answer
    with open(a.out, "w") as f:
        json.dump({"args": {k: v for k, v in vars(a).items() if k not in ("func",)}, "turns": turns}, f)


def replay(a):
    conv = json.load(open(a.conv))["turns"]
    for t in map(int, a.at.split(",")):
        c = conv[t - 1]
        ttft, _ = complete(a.url, c["prompt"], 1, a.llama)
        print(f"turn {t:2d}: {c['prompt_tokens']:5d} prompt tokens, TTFT {ttft * 1e3:8.1f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", required=True)
    r.add_argument("--turns", type=int, default=20)
    r.add_argument("--system", type=int, default=256)
    r.add_argument("--user", type=int, default=48)
    r.add_argument("--answer", type=int, default=48)
    r.add_argument("--vocab", type=int, default=96, help="ids drawn from [0, vocab)")
    r.add_argument("--seed", type=int, default=31)
    r.set_defaults(func=record)
    p = sub.add_parser("replay")
    p.add_argument("--conv", required=True)
    p.add_argument("--at", default="1,5,10,20")
    p.set_defaults(func=replay)
    for s in (r, p):
        s.add_argument("--url", required=True)
        s.add_argument("--llama", action="store_true", help="the server is llama.cpp's llama-server")
    a = ap.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
