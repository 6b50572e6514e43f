#!/usr/bin/env python3
"""A random-weight GGUF of Qwen3.5-2B's shape (bench/, docs/benchmarks/hybrid.md):
qwen35 as llama.cpp's converter writes it (tests/reference/qwen35_gguf.py
names the keys and tensors), 24 layers — three Gated DeltaNet layers then
one gated full-attention layer, six times — dim 2048, MLP 6144, attention 8
heads (2 KV) of 256 with a quarter rotated, Gated DeltaNet 16 key and 16
value heads of 128 with a conv of 4, vocabulary 248320, output tied to the
embedding. Every matrix Q8_0 (random int8 blocks with one f16 scale,
written directly by bench/moe_shape.py's q8), norms and the small
per-head vectors F32. The vocabulary is the tiny fixture's 98 tokens
(tests/reference/data/qwen35-tiny/tokenizer.json) padded with control
tokens: benchmarks send token ids.

    .venv/bin/python bench/qwen35_shape.py --out build-bench/qwen35-2b-shape.gguf
"""
import argparse
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from moe_shape import q8

DIM, FF, LAYERS, INTERVAL = 2048, 6144, 24, 4
HEADS, KV, HD = 8, 2, 256
HK, HV, DK, DV, CONV = 16, 16, 128, 128, 4
VOCAB = 248320
TINY = pathlib.Path(__file__).resolve().parents[1] / "tests" / "reference" / "data" / "qwen35-tiny"


def vocab():
    tok = json.loads((TINY / "tokenizer.json").read_text())
    names, types = [""] * VOCAB, [3] * VOCAB
    for t, i in tok["model"]["vocab"].items():
        names[i], types[i] = t, 1
    for a in tok["added_tokens"]:
        names[a["id"]], types[a["id"]] = a["content"], 3
    for i in range(len(tok["model"]["vocab"]) + len(tok["added_tokens"]), VOCAB):
        names[i] = f"<|pad_{i}|>"
    merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    return names, types, merges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(31)
    w = GGUFWriter(a.out, "qwen35")
    w.add_block_count(LAYERS)
    w.add_context_length(262144)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e7)
    w.add_rope_dimension_count(HD // 4)
    w.add_rope_dimension_sections([11, 11, 10, 0])
    w.add_ssm_conv_kernel(CONV)
    w.add_ssm_state_size(DK)
    w.add_ssm_group_count(HK)
    w.add_ssm_time_step_rank(HV)
    w.add_ssm_inner_size(DV * HV)
    w.add_full_attention_interval(INTERVAL)
    names, types, merges = vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(names)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(96)
    qt = lambda name, rows, cols: w.add_tensor(name, q8(rng, rows, cols), raw_dtype=T.Q8_0)
    ones = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    qt("token_embd.weight", VOCAB, DIM)
    w.add_tensor("output_norm.weight", ones(DIM))
    conv_dim = 2 * HK * DK + HV * DV
    for l in range(LAYERS):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", ones(DIM))
        w.add_tensor(p + "post_attention_norm.weight", ones(DIM))
        if (l + 1) % INTERVAL:  # Gated DeltaNet
            qt(p + "attn_qkv.weight", conv_dim, DIM)
            qt(p + "attn_gate.weight", HV * DV, DIM)
            qt(p + "ssm_beta.weight", HV, DIM)
            qt(p + "ssm_alpha.weight", HV, DIM)
            w.add_tensor(p + "ssm_conv1d.weight", (0.3 * rng.standard_normal((conv_dim, CONV))).astype(np.float32))
            w.add_tensor(p + "ssm_a", (-np.exp(rng.uniform(-1, 1, HV))).astype(np.float32))
            w.add_tensor(p + "ssm_dt.bias", rng.uniform(0, 1, HV).astype(np.float32))
            w.add_tensor(p + "ssm_norm.weight", ones(DV))
            qt(p + "ssm_out.weight", DIM, HV * DV)
        else:  # gated full attention: q_proj gives the queries and the output gate
            qt(p + "attn_q.weight", 2 * HEADS * HD, DIM)
            qt(p + "attn_k.weight", KV * HD, DIM)
            qt(p + "attn_v.weight", KV * HD, DIM)
            qt(p + "attn_output.weight", DIM, HEADS * HD)
            w.add_tensor(p + "attn_q_norm.weight", ones(HD))
            w.add_tensor(p + "attn_k_norm.weight", ones(HD))
        qt(p + "ffn_gate.weight", FF, DIM)
        qt(p + "ffn_up.weight", FF, DIM)
        qt(p + "ffn_down.weight", DIM, FF)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
