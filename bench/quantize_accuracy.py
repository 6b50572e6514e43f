"""The accuracy of `--quantize`, full form (the short form runs in `make
test`: tests/reference/test_quantize_accuracy.py): the default model written
unquantized (tests/reference/quant_eval.unquantized_copy, F16 matrices) and
loaded as stored and with each quantize type, over --tokens tokens of real
English prose and code (precision_eval.TEXT_SOURCES) in windows of --ctx:
perplexity, mean / p99 / max KL divergence from the unquantized forward,
top-1 agreement. Prints a markdown table (for docs/models.md).

    .venv/bin/python bench/quantize_accuracy.py [--tokens 4096] [--ctx 512] [--threads 2]
        [--types Q8_0,Q4_0,Q4_1]
"""
import argparse
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reference"))

from precision_eval import read_text, tokenize  # noqa: E402
from quant_eval import evaluate, unquantized_copy  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.environ.get("TRAM_MODEL", str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--build-dir", default=os.environ.get("TRAM_BUILD", str(ROOT / "build")))
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--types", default="Q8_0,Q4_0,Q4_1")
    a = ap.parse_args()
    tools = pathlib.Path(a.build_dir) / "tests" / "tools"
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        f16 = pathlib.Path(tmp) / "model-f16.gguf"
        unquantized_copy(a.model, f16)
        ids = tokenize(tools / "tokenize", f16, read_text())[:a.tokens]
        res = evaluate(tools / "forward", f16, ids, a.ctx, a.types.split(","), tmp, a.threads,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"`--quantize` against the unquantized (F16) copy of {pathlib.Path(a.model).name}, "
          f"{len(ids)} tokens in windows of {a.ctx}, {time.time() - t0:.0f} s\n")
    print("| --quantize | perplexity (F16 → quantized) | mean KLD | p99 KLD | max KLD | top-1 agreement |")
    print("| --- | --- | --- | --- | --- | --- |")
    for t, s in res.items():
        print(f"| {t.lower()} | {s['ppl_base']:.3f} → {s['ppl_cand']:.3f} | {s['kld_mean']:.2e} | "
              f"{s['kld_p99']:.2e} | {s['kld_max']:.2e} | {100 * s['top1']:.2f} % |")


if __name__ == "__main__":
    main()
