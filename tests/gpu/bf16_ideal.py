#!/usr/bin/env python3
"""How far from float64 the logits of an *exact* bf16 pipeline are: the
error budget of the CUDA backend's design, to set model_check's tolerances
with (docs/benchmarks/cuda.md).

The pipeline is tests/reference/llama_ref.py's float64 forward with what the
CUDA backend rounds to bf16 rounded, round to nearest even, and nothing
else: every weight matrix (dequantized to bf16 at load), every matmul input
(the backend rounds x before cublasGemmEx), Q and K after RoPE and V (the
bf16 KV cache and attention inputs). Norms, softmax, SiLU, residuals and
matmul accumulation stay exact. A correct GPU backend cannot do better
than this against the CPU backend (which is within 1e-6 of float64).

Usage: bf16_ideal.py MODEL.gguf [--lens 12,48] [--seed 1]
Prints, per random prompt, the relative L2 of the logits over all rows,
per row (max, mean) and how many rows keep their argmax.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from llama_ref import LlamaRef  # noqa: E402


def bf16(x):
    """x rounded to bf16 (nearest even), as float64."""
    u = np.array(x, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


class Bf16Matrix(np.ndarray):
    """A bf16 weight: `x @ W.T` rounds x first (Python gives a subclass's
    reflected operator priority); its rows (an embedding lookup) are plain."""

    round_out = False

    def __getitem__(self, i):
        return np.asarray(self)[i]

    def __rmatmul__(self, x):
        y = bf16(x) @ np.asarray(self)
        return bf16(y) if self.round_out else y


class Bf16Out(Bf16Matrix):
    round_out = True  # attn_v: V goes to the bf16 cache


class Bf16Ref(LlamaRef):
    def w(self, name):
        x = super().w(name)
        if x.ndim != 2:
            return x  # norms stay f32 on the device
        return bf16(x).view(Bf16Out if name.endswith("attn_v.weight") else Bf16Matrix)

    def rope(self, x, positions):
        return bf16(super().rope(x, positions))  # Q and K as attention reads them


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--lens", default="12,48", help="prompt lengths")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    exact, rounded = LlamaRef(a.model), Bf16Ref(a.model)
    vocab = exact.w("token_embd.weight").shape[0]
    rng = np.random.default_rng(a.seed)
    for n in (int(x) for x in a.lens.split(",")):
        tokens = rng.integers(vocab // 100, vocab - vocab // 100, n)
        want, got = exact.forward(tokens), rounded.forward(tokens)
        rows = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
        print(f"{a.model}: {n} tokens: rel L2 {np.linalg.norm(got - want) / np.linalg.norm(want):.3g} over all rows, "
              f"per row max {rows.max():.3g} (position {rows.argmax()}) mean {rows.mean():.3g}; "
              f"argmax kept on {(got.argmax(1) == want.argmax(1)).sum()} of {n}")


if __name__ == "__main__":
    main()
