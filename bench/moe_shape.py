#!/usr/bin/env python3
"""Random-weight GGUF files of real mixture-of-experts shapes with fewer
layers (bench/cpu_decode.py, docs/benchmarks/moe.md), as llama.cpp's
convert_hf_to_gguf.py names their keys and tensors, so that tram and
llama.cpp's llama-server both load them:

  qwen3-30b-a3b  qwen3moe: dim 2048, 32 heads (4 KV) of 128 with q/k norms,
                 128 experts of 768, 8 per token, every matrix Q8_0
                 (Qwen3-30B-A3B has 48 layers)
  gpt-oss-20b    gpt-oss: dim 2880, 64 heads (8 KV) of 64 with q/k/v/o
                 biases and attention sinks, 32 experts of 2880, 4 per
                 token, expert biases and a router bias, sliding window 128
                 on even layers, YaRN (factor 32 of 4096); the experts
                 MXFP4 (as the gpt-oss release), the other matrices Q8_0
                 (gpt-oss-20b has 24 layers)

Both get --vocab tokens of scripts/make-random-llama.py's byte-level BPE
vocabulary (benchmarks send token ids) and an untied output. Quantized
blocks are written directly from random bytes: Q8_0 as random int8 with
one f16 scale (weights of standard deviation ~4.6/sqrt(cols), as the dense
shapes), MXFP4 as random E2M1 codes with the E8M0 scale 2^-7 (standard
deviation ~2.9·2^-7, ~1.2/sqrt(2880)); norms near 1, biases and sinks
small, so activations stay finite. Tensors are streamed to the file one at a
time (no copy of the model in memory); tensor i draws from SFC64 seeded
with (seed, i), so the bytes depend only on the options.

    .venv/bin/python bench/moe_shape.py --shape qwen3-30b-a3b --layers 7 --out build-bench/shapes/qwen3-30b-a3b-7l-Q8_0.gguf
    .venv/bin/python bench/moe_shape.py --shape gpt-oss-20b --layers 10 --out build-bench/shapes/gpt-oss-20b-10l-MXFP4.gguf
"""
import argparse
import importlib.util
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCK_BYTES = {T.Q8_0: 34, T.MXFP4: 17}  # per 32 weights


def q8(rng, *shape):
    """Q8_0 bytes of a matrix shape (..., rows, cols): per 32 elements an f16 scale then 32 int8."""
    *outer, cols = shape
    nb = cols // 32
    blocks = np.empty((*outer, nb, 34), dtype=np.uint8)
    blocks[..., :2] = np.frombuffer(np.float16(0.5 / 127 / np.sqrt(cols / 256)).tobytes(), dtype=np.uint8)
    blocks[..., 2:] = rng.integers(0, 256, (*outer, nb, 32), dtype=np.uint8)
    return blocks.reshape(*outer, nb * 34)


def mxfp4(rng, *shape):
    """MXFP4 bytes of a matrix shape (..., rows, cols): per 32 elements an E8M0 scale byte (120: 2^-7 on
    the E2M1 values) then 16 bytes of two 4-bit codes."""
    *outer, cols = shape
    nb = cols // 32
    blocks = np.empty((*outer, nb, 17), dtype=np.uint8)
    blocks[..., 0] = 120
    blocks[..., 1:] = rng.integers(0, 256, (*outer, nb, 16), dtype=np.uint8)
    return blocks.reshape(*outer, nb * 17)


def random_llama():
    """scripts/make-random-llama.py as a module (its vocabulary is the dense shapes' one)."""
    spec = importlib.util.spec_from_file_location("make_random_llama", ROOT / "scripts" / "make-random-llama.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def add_vocab(w, n_vocab, seed):
    """The byte-level BPE vocabulary of the dense shapes as llama.cpp's gpt2 tokenizer keys."""
    tokens, types, merges, special = random_llama().make_vocab(n_vocab, seed)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(special["bos"])
    w.add_eos_token_id(special["eos"])
    w.add_add_bos_token(True)


def write(path, arch, keys, tensors, n_vocab, seed):
    """A GGUF of `arch`: keys {name after "<arch>.": int | float | str}, tensors [(name, qtype, shape (numpy
    order, rows last but one), make(rng, *shape) -> array)], streamed one tensor at a time."""
    w = GGUFWriter(str(path), arch)
    for k, v in keys.items():
        (w.add_string if isinstance(v, str) else w.add_float32 if isinstance(v, float) else w.add_uint32)(
            f"{arch}.{k}", v)
    add_vocab(w, n_vocab, seed)
    for name, qt, shape, _ in tensors:
        if qt == T.F32:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
        else:
            bshape = (*shape[:-1], shape[-1] // 32 * BLOCK_BYTES[qt])
            w.add_tensor_info(name, bshape, np.dtype(np.uint8), int(np.prod(bshape)), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, (_, _, shape, make) in enumerate(tensors):
        w.write_tensor_data(np.ascontiguousarray(make(np.random.Generator(np.random.SFC64([seed, i])), *shape)))
    w.close()


def near_one(rng, *shape):
    return (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)


def small(scale):
    return lambda rng, *shape: (scale * rng.standard_normal(shape)).astype(np.float32)


def qwen3_30b_a3b(layers):
    DIM, HEADS, KV, HD, E, K, EFF = 2048, 32, 4, 128, 128, 8, 768
    keys = {"block_count": layers, "context_length": 40960, "embedding_length": DIM, "feed_forward_length": 6144,
            "attention.head_count": HEADS, "attention.head_count_kv": KV, "attention.key_length": HD,
            "attention.value_length": HD, "expert_count": E, "expert_used_count": K,
            "expert_feed_forward_length": EFF, "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 1e6}
    t = []
    for l in range(layers):
        p = f"blk.{l}."
        t += [(p + "attn_norm.weight", T.F32, (DIM,), near_one), (p + "ffn_norm.weight", T.F32, (DIM,), near_one),
              (p + "attn_q_norm.weight", T.F32, (HD,), near_one), (p + "attn_k_norm.weight", T.F32, (HD,), near_one),
              (p + "attn_q.weight", T.Q8_0, (HEADS * HD, DIM), q8), (p + "attn_k.weight", T.Q8_0, (KV * HD, DIM), q8),
              (p + "attn_v.weight", T.Q8_0, (KV * HD, DIM), q8),
              (p + "attn_output.weight", T.Q8_0, (DIM, HEADS * HD), q8),
              (p + "ffn_gate_inp.weight", T.F32, (E, DIM), small(1 / np.sqrt(DIM))),
              (p + "ffn_gate_exps.weight", T.Q8_0, (E, EFF, DIM), q8),
              (p + "ffn_up_exps.weight", T.Q8_0, (E, EFF, DIM), q8),
              (p + "ffn_down_exps.weight", T.Q8_0, (E, DIM, EFF), q8)]
    return "qwen3moe", keys, DIM, t


def gpt_oss_20b(layers):
    DIM, HEADS, KV, HD, E, K, EFF = 2880, 64, 8, 64, 32, 4, 2880
    keys = {"block_count": layers, "context_length": 131072, "embedding_length": DIM, "feed_forward_length": EFF,
            "attention.head_count": HEADS, "attention.head_count_kv": KV, "attention.key_length": HD,
            "attention.value_length": HD, "expert_count": E, "expert_used_count": K,
            "expert_feed_forward_length": EFF, "attention.sliding_window": 128,
            "attention.layer_norm_rms_epsilon": 1e-5, "rope.freq_base": 150000.0, "rope.scaling.type": "yarn",
            "rope.scaling.factor": 32.0, "rope.scaling.original_context_length": 4096}
    t = []
    for l in range(layers):
        p = f"blk.{l}."
        t += [(p + "attn_norm.weight", T.F32, (DIM,), near_one),
              (p + "post_attention_norm.weight", T.F32, (DIM,), near_one),
              (p + "attn_q.weight", T.Q8_0, (HEADS * HD, DIM), q8), (p + "attn_q.bias", T.F32, (HEADS * HD,), small(0.02)),
              (p + "attn_k.weight", T.Q8_0, (KV * HD, DIM), q8), (p + "attn_k.bias", T.F32, (KV * HD,), small(0.02)),
              (p + "attn_v.weight", T.Q8_0, (KV * HD, DIM), q8), (p + "attn_v.bias", T.F32, (KV * HD,), small(0.02)),
              (p + "attn_output.weight", T.Q8_0, (DIM, HEADS * HD), q8),
              (p + "attn_output.bias", T.F32, (DIM,), small(0.02)),
              (p + "attn_sinks.weight", T.F32, (HEADS,), small(1.0)),
              (p + "ffn_gate_inp.weight", T.F32, (E, DIM), small(1 / np.sqrt(DIM))),
              (p + "ffn_gate_inp.bias", T.F32, (E,), small(0.1)),
              (p + "ffn_gate_exps.weight", T.MXFP4, (E, EFF, DIM), mxfp4),
              (p + "ffn_gate_exps.bias", T.F32, (E, EFF), small(0.02)),
              (p + "ffn_up_exps.weight", T.MXFP4, (E, EFF, DIM), mxfp4),
              (p + "ffn_up_exps.bias", T.F32, (E, EFF), small(0.02)),
              (p + "ffn_down_exps.weight", T.MXFP4, (E, DIM, EFF), mxfp4),
              (p + "ffn_down_exps.bias", T.F32, (E, DIM), small(0.02))]
    return "gpt-oss", keys, DIM, t


SHAPES = {"qwen3-30b-a3b": qwen3_30b_a3b, "gpt-oss-20b": gpt_oss_20b}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-30b-a3b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    arch, keys, dim, layers = SHAPES[a.shape](a.layers)
    keys["vocab_size"] = a.vocab
    head = [("token_embd.weight", T.Q8_0, (a.vocab, dim), q8), ("output_norm.weight", T.F32, (dim,), near_one),
            ("output.weight", T.Q8_0, (a.vocab, dim), q8)]
    write(a.out, arch, keys, head + layers, a.vocab, a.seed)


if __name__ == "__main__":
    main()
