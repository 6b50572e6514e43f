#!/usr/bin/env python3
"""A random-weight GGUF of Qwen3-30B-A3B's shape with few layers (bench/,
docs/benchmarks/moe.md): qwen3moe, dim 2048, 32 heads (4 KV) of 128, 128
experts of 768 (8 per token), weights renormalised, every matrix Q8_0
(blocks of random int8 with one f16 scale, written directly: no float copy
of the model is ever built), norms F32, vocabulary --vocab.

    .venv/bin/python bench/moe_shape.py --layers 4 --out build-bench/qwen3-30b-a3b-4l.gguf
"""
import argparse

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter

DIM, HEADS, KV, HD, E, K, EFF, FF = 2048, 32, 4, 128, 128, 8, 768, 6144


def q8(rng, *shape):
    """Q8_0 bytes of a matrix shape (..., rows, cols): per 32 elements an f16 scale then 32 int8."""
    *outer, cols = shape
    nb = cols // 32
    blocks = np.empty((*outer, nb, 34), dtype=np.uint8)
    blocks[..., :2] = np.frombuffer(np.float16(0.5 / 127 / np.sqrt(cols / 256)).tobytes(), dtype=np.uint8)
    blocks[..., 2:] = rng.integers(0, 256, (*outer, nb, 32), dtype=np.uint8)
    return blocks.reshape(*outer, nb * 34)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(30)
    w = GGUFWriter(a.out, "qwen3moe")
    w.add_block_count(a.layers)
    w.add_context_length(4096)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_uint32("qwen3moe.vocab_size", a.vocab)
    w.add_uint32("qwen3moe.expert_count", E)
    w.add_uint32("qwen3moe.expert_used_count", K)
    w.add_uint32("qwen3moe.expert_feed_forward_length", EFF)
    w.add_float32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32("qwen3moe.rope.freq_base", 1e6)
    qt = lambda name, arr: w.add_tensor(name, arr, raw_dtype=T.Q8_0)
    ones = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    qt("token_embd.weight", q8(rng, a.vocab, DIM))
    qt("output.weight", q8(rng, a.vocab, DIM))
    w.add_tensor("output_norm.weight", ones(DIM))
    for l in range(a.layers):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", ones(DIM))
        w.add_tensor(p + "ffn_norm.weight", ones(DIM))
        w.add_tensor(p + "attn_q_norm.weight", ones(HD))
        w.add_tensor(p + "attn_k_norm.weight", ones(HD))
        qt(p + "attn_q.weight", q8(rng, HEADS * HD, DIM))
        qt(p + "attn_k.weight", q8(rng, KV * HD, DIM))
        qt(p + "attn_v.weight", q8(rng, KV * HD, DIM))
        qt(p + "attn_output.weight", q8(rng, DIM, HEADS * HD))
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.standard_normal((E, DIM)) / np.sqrt(DIM)).astype(np.float32))
        qt(p + "ffn_gate_exps.weight", q8(rng, E, EFF, DIM))
        qt(p + "ffn_up_exps.weight", q8(rng, E, EFF, DIM))
        qt(p + "ffn_down_exps.weight", q8(rng, E, DIM, EFF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
