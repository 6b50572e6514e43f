"""Hugging Face `tokenizers` on the text bench/tok_bench.c benchmarks, for
comparison: the same vocabulary and merges (read from the GGUF with the gguf
package), pre-tokenized like SmolLM2 (Digits then ByteLevel), one thread.

    build/bench/tok_bench -o /tmp/tokbench.txt
    .venv/bin/python bench/tok_bench_hf.py /tmp/tokbench.txt [MODEL.gguf]
"""
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))

import test_tokenizer as T  # noqa: E402  (the parity test's reference builder)


def best_of(n, f):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    path = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    hf = T.hf_bytelevel(T.read_vocab(model), T.smollm_pre())
    raw = open(path, "rb").read()
    text = raw.decode("utf-8", "replace")
    n = len(raw)
    ids = hf.encode(text, add_special_tokens=False).ids
    t = best_of(3, lambda: hf.encode(text, add_special_tokens=False))
    print(f"tokens: {len(ids)}")
    print(f"HF encode, one call      {n / t / 1e6:8.2f} MB/s {len(ids) / t:10.0f} tok/s")
    chunks = [raw[i:i + 4096].decode("utf-8", "replace") for i in range(0, n, 4096)]
    t = best_of(3, lambda: [hf.encode(c, add_special_tokens=False) for c in chunks])
    print(f"HF encode, 4 KiB prompts {n / t / 1e6:8.2f} MB/s")
    t = best_of(3, lambda: hf.decode(ids))
    print(f"HF decode                {n / t / 1e6:8.2f} MB/s")


if __name__ == "__main__":
    main()
