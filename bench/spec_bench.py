"""Single-stream speculative decoding benchmark: `tram generate` on one
prompt at a time, greedy, with `--speculative off` and `--speculative
ngram` (or `--method draft`: `--speculative draft` with `--draft-model`,
by default the model itself) run alternately (side by side, so the
machine's load hits both alike), on workloads where prompt lookup should pay
(copying or editing a given text, code with repetition) and where it should
not (a short story from a one-line prompt; a prompt of random words): there
the adaptive k must keep the cost small.

Reports per workload: decode tokens/s of each (tokens after the first over
the time after the first; median of the runs), their ratio,
steps, drafts proposed and the acceptance rate; checks that the token ids
are the same. Usage:
  .venv/bin/python bench/spec_bench.py [--tram build/tram] [--model M]
      [--method ngram|draft] [--draft-model D] [--workloads edit,code,...]
      [--rounds 3] [--max-tokens 160] [--threads 2] [-- extra tram settings]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile

PARAGRAPH = (
    "The river town of Ashford grew up around a mill that ground wheat for three valleys. Every spring the "
    "river flooded the lower streets, and every summer the town council promised a new wall to keep it out. "
    "The wall was never built, because the merchants on the high street did not want to pay for a wall that "
    "would only protect the houses of the millers and the fishermen below them.")

CODE = '''def area_of_square(side):
    return side * side


def area_of_rectangle(width, height):
    return width * height


def perimeter_of_square(side):
    return 4 * side


def perimeter_of_rectangle(width, height):
    return 2 * width + 2 * height
'''

WORDS = ("river mountain city music garden winter engine library ocean market bridge story number quickly slowly "
         "bright quiet ancient modern small large red green blue golden paper stone the a of and to in").split()

TOPICS = ("a lighthouse keeper", "the history of bread", "a trip to the moon", "why cats sleep so much",
          "a dragon who learns to cook", "the first day at a new school", "a storm at sea", "an old clock")

WORKLOADS = {
    "edit": [f"Rewrite the following paragraph in the present tense:\n\n{PARAGRAPH}",
             f"Repeat the following paragraph exactly:\n\n{PARAGRAPH}"],
    "code": [f"Add a docstring to each function of this Python code and repeat the code:\n\n{CODE}",
             f"Rename every parameter `side` to `length` in this code:\n\n{CODE}"],
    "story": [f"Write a short story about {t}." for t in random.Random(7).sample(TOPICS, 2)],
    "random": [" ".join(random.Random(i).choice(WORDS) for _ in range(24)) for i in range(2)],
}


def run(args, prompt, spec):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps({"prompt": prompt, "chat": True, "max_tokens": args.max_tokens}) + "\n")
    try:
        cmd = [args.tram, "generate", "-m", args.model, "--prompts", f.name, "--json", "--threads", str(args.threads),
               "--log-level", "warn", "--speculative", spec, *args.extra]
        if spec == "draft":
            cmd += ["--draft-model", args.draft_model or args.model]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAM_")}
        p = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    finally:
        os.unlink(f.name)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    st = lines[-1]["stats"]
    t = lines[0]["times"]
    ids = lines[0]["choices"][0]["token_ids"]
    st["decode_tok_s"] = (len(ids) - 1) / ((t["total_ms"] - t["ttft_ms"]) / 1e3)  # after the first token
    return ids, st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tram", default="build/tram")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--method", choices=("ngram", "draft"), default="ngram")
    ap.add_argument("--draft-model", default=None, help="--method draft: the draft model (default: the model)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, of " + ", ".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    m = args.method
    print(f"| workload | tokens | off decode tok/s | {m} decode tok/s | ratio | steps off / {m} | drafts "
          "| accepted / proposed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.workloads.split(","):
        prompts = WORKLOADS[name]
        rate = {"off": [], m: []}
        tokens = steps_off = steps_on = drafts = proposed = accepted = 0
        for _ in range(args.rounds):
            for prompt in prompts:
                ids = {}
                for spec in ("off", m):
                    ids[spec], st = run(args, prompt, spec)
                    rate[spec].append(st["decode_tok_s"])
                    if spec == "off":
                        steps_off += st["steps"]
                        tokens += st["generated_tokens"]
                    else:
                        steps_on += st["steps"]
                        drafts += st["spec_drafts"]
                        proposed += st["spec_draft_tokens"]
                        accepted += st["spec_accepted_tokens"]
                if ids["off"] != ids[m]:
                    raise SystemExit(f"{name}: outputs differ with speculation")
        off, on = statistics.median(rate["off"]), statistics.median(rate[m])
        acc = f"{accepted / proposed:.0%}" if proposed else "-"
        print(f"| {name} | {tokens} | {off:.1f} | {on:.1f} | {on / off:.2f}x | {steps_off} / {steps_on} | {drafts} "
              f"| {accepted} / {proposed} ({acc}) |")


if __name__ == "__main__":
    main()
