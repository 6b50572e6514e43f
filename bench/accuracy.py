"""The accuracy gates of `--precision fast`, full form (`make bench-accuracy`;
the short form runs in `make test`: tests/reference/test_precision.py).

Over at least 20,000 tokens of real English prose and code the project did
not write (tests/reference/precision_eval.TEXT_SOURCES: the GPL 3 from
Debian's base-files, Python's argparse.py from libpython3.11-minimal), in
windows of --ctx tokens: perplexity of both paths, mean / p99 / max KL
divergence of fast from exact per token, top-1 agreement, the normalized MSE
of every matmul's fast output against its exact one on the real activations
of the exact forward, and the noise floor (exact and fast against the
float64 reference model on the first --ref-prefix tokens). Prints a markdown
report (for docs/benchmarks/precision.md), writes --json, and exits 1 when a
gate is missed.

    .venv/bin/python bench/accuracy.py [--tokens 20480] [--ctx 512] [--threads 2]
        [--ref-prefix 256] [--json build/accuracy.json]
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reference"))

from precision_eval import GATES, TEXT_SOURCES, evaluate, gate_failures, read_text, tokenize  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.environ.get("TRAM_MODEL", str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--build-dir", default=os.environ.get("TRAM_BUILD", str(ROOT / "build")))
    ap.add_argument("--tokens", type=int, default=20480, help="tokens evaluated (at least 20000 for the gates)")
    ap.add_argument("--ctx", type=int, default=512, help="window length in tokens")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ref-prefix", type=int, default=256, help="noise-floor tokens (float64 reference); 0: skip")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    build = pathlib.Path(a.build_dir)
    tools = lambda name: build / "tests" / "tools" / name  # noqa: E731
    ids = tokenize(tools("tokenize"), a.model, read_text())
    if len(ids) < a.tokens:
        sys.exit(f"accuracy: the text has {len(ids)} tokens, fewer than --tokens {a.tokens}")
    ids = ids[:a.tokens]
    ref = None
    if a.ref_prefix > 0:
        from llama_ref import LlamaRef
        ref = LlamaRef(a.model)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        res = evaluate(tools, a.model, ids, a.ctx, tmp, a.threads, ref, a.ref_prefix,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
    res["seconds"] = time.time() - t0
    res["text"] = TEXT_SOURCES
    res["args"] = vars(a)
    fe, nm = res["fast_vs_exact"], res["matmul_nmse"]
    res["failures"] = gate_failures(fe, nm["max"])
    if a.tokens < 20000:
        res["failures"].append(f"only {a.tokens} tokens (the gates need at least 20000)")

    print(f"Text: {', '.join(TEXT_SOURCES)}; {fe['tokens']} scored tokens in windows of {a.ctx}\n")
    print("| measure | fast vs exact | gate | exact vs float64 (noise floor) | fast vs float64 |")
    print("| --- | --- | --- | --- | --- |")
    fl, ff = res.get("exact_vs_ref"), res.get("fast_vs_ref")

    def col(s, key, fmt):
        return fmt.format(s[key]) if s else "—"

    print(f"| tokens | {fe['tokens']} | ≥ 20000 | {col(fl, 'tokens', '{}')} | {col(ff, 'tokens', '{}')} |")
    print(f"| perplexity | {fe['ppl_base']:.4f} (exact) → {fe['ppl_cand']:.4f} | | "
          f"{col(fl, 'ppl_base', '{:.4f}')} → {col(fl, 'ppl_cand', '{:.4f}')} | → {col(ff, 'ppl_cand', '{:.4f}')} |")
    print(f"| perplexity change | {100 * fe['ppl_rel_diff']:.4f} % | ≤ {100 * GATES['ppl_rel_diff_max']} % | "
          f"{col(fl, 'ppl_rel_diff', '{:.2e}')} | {col(ff, 'ppl_rel_diff', '{:.2e}')} |")
    for key, name in (("kld_mean", "mean KLD"), ("kld_p99", "p99 KLD"), ("kld_max", "max KLD")):
        gate = f"≤ {GATES['kld_mean_max']}" if key == "kld_mean" else ""
        print(f"| {name} | {fe[key]:.3e} | {gate} | {col(fl, key, '{:.3e}')} | {col(ff, key, '{:.3e}')} |")
    print(f"| top-1 agreement | {100 * fe['top1']:.3f} % | ≥ {100 * GATES['top1_min']} % | "
          f"{col(fl, 'top1', '{:.3%}')} | {col(ff, 'top1', '{:.3%}')} |")
    print(f"| matmul normalized MSE (max / mean over {nm['calls']} calls) | {nm['max']:.2e} / {nm['mean']:.2e} | "
          f"≤ {GATES['matmul_nmse_max']} | | |")
    print(f"\n{'PASS' if not res['failures'] else 'FAIL: ' + '; '.join(res['failures'])} ({res['seconds']:.0f} s)")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1))
    return 1 if res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
