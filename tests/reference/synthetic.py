"""Seeded random-weights GGUF models of every architecture tram runs, small
enough for `make test`, written with the `gguf` package (an independent
writer): the forward tests (test_forward.py) compare them with the float64
reference, the engine tests (tests/integration/test_model_families.py) serve
them. The vocabulary is the 95 printable ASCII characters (byte-level BPE
symbols of themselves) plus one merge, so any text without spaces tokenizes."""
import numpy as np


def add_shape(w, layers, dim, ff, heads, kv_heads, ctx=256):
    """The size keys of a GGUFWriter's architecture."""
    w.add_block_count(layers)
    w.add_context_length(ctx)
    w.add_embedding_length(dim)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)


def write_synthetic(path, arch, untied, llama3_rope, window=0, mxfp4=False):
    """A small random model of `arch` (2 layers — smollm3: 5, to reach its NoPE layer —, dim 64, 4 heads / 2 KV heads of 16 — qwen3:
    of 32, wider than dim / heads as Qwen3's are — MLP 128, vocab 96) with matrices of several
    weight types, written with the gguf package; `window` > 0 adds a sliding window; `mxfp4` makes the
    token embedding and the MLP matrices MXFP4 (gpt-oss's expert weight type), quantized by the package."""
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFWriter, quants

    rng = np.random.default_rng(1234)
    L, D, H, KV, HD, FF, V = 2, 64, 4, 2, 32 if arch in ("qwen3", "gemma3") else 16, 128, 96
    if arch == "smollm3":
        L = 5  # layer 3 is a NoPE layer ((3 + 1) % 4 == 0), layer 4 rotates again
    w = GGUFWriter(str(path), arch)
    if arch in ("qwen3", "gemma3"):
        w.add_key_length(HD)
        w.add_value_length(HD)
    if window:
        w.add_uint32(f"{arch}.attention.sliding_window", window)
    if arch == "gemma2":
        # caps small enough to bend random-weight scores and logits
        w.add_float32("gemma2.attn_logit_softcapping", 1.5)
        w.add_float32("gemma2.final_logit_softcapping", 3.0)
    if arch == "gemma3":
        # layer 0 local (base 10000, unscaled), layer 1 global (base 1e6, linear x8)
        w.add_uint32("gemma3.attention.sliding_window_pattern", 2)
        w.add_string("gemma3.rope.scaling.type", "linear")
        w.add_rope_scaling_factor(8.0)
    add_shape(w, L, D, FF, H, KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(1e6 if arch == "gemma3" else 10000.0)
    if llama3_rope:
        # every wavelength of a 16-wide head falls in a different part of Llama 3.1's band
        w.add_string(f"{arch}.rope.scaling.type", "llama3")
        w.add_rope_scaling_factor(8.0)
        w.add_float32(f"{arch}.rope.scaling.low_freq_factor", 1.0)
        w.add_float32(f"{arch}.rope.scaling.high_freq_factor", 4.0)
        w.add_rope_scaling_orig_ctx_len(64)
    if arch == "phi3":
        # LongRoPE: context 256 > original 64 picks the long factors; attention factor computed
        w.add_rope_scaling_orig_ctx_len(64)
        half = HD // 2
        w.add_tensor("rope_factors_long.weight", (1.0 + rng.random(half) * 4).astype(np.float32))
        w.add_tensor("rope_factors_short.weight", (1.0 + rng.random(half) * 0.5).astype(np.float32))
    tokens = [chr(33 + i) for i in range(V - 1)] + ["!\""]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges(["! \""])

    def add(name, rows, cols, qtype):
        x = (rng.standard_normal((rows, cols)) * (0.5 if cols == 1 else 1 / np.sqrt(cols))).astype(np.float32)
        if cols == 1:
            w.add_tensor(name, x[:, 0] + (1.0 if name.endswith("norm.weight") else 0.0))
        elif qtype == T.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quants.quantize(x, qtype), raw_dtype=qtype)

    add("token_embd.weight", V, D, T.MXFP4 if mxfp4 else T.Q8_0)
    add("output_norm.weight", D, 1, T.F32)
    if untied:
        add("output.weight", V, D, T.F16)
    for l in range(L):
        p = f"blk.{l}."
        add(p + "attn_norm.weight", D, 1, T.F32)
        if arch == "phi3":  # fused: rows Q, K, V
            add(p + "attn_qkv.weight", (H + 2 * KV) * HD, D, T.Q8_0)
        else:
            add(p + "attn_q.weight", H * HD, D, T.Q4_1)
            add(p + "attn_k.weight", KV * HD, D, T.BF16)
            add(p + "attn_v.weight", KV * HD, D, T.Q5_0)
        if arch == "qwen2":
            add(p + "attn_q.bias", H * HD, 1, T.F32)
            add(p + "attn_k.bias", KV * HD, 1, T.F32)
            add(p + "attn_v.bias", KV * HD, 1, T.F32)
        if arch in ("qwen3", "gemma3"):
            add(p + "attn_q_norm.weight", HD, 1, T.F32)
            add(p + "attn_k_norm.weight", HD, 1, T.F32)
        if arch.startswith("gemma"):
            add(p + "post_attention_norm.weight", D, 1, T.F32)
            add(p + "post_ffw_norm.weight", D, 1, T.F32)
        add(p + "attn_output.weight", D, H * HD, T.F16)
        add(p + "ffn_norm.weight", D, 1, T.F32)
        if arch == "phi3":  # fused: gate rows, then up rows
            add(p + "ffn_up.weight", 2 * FF, D, T.Q4_1)
        else:
            add(p + "ffn_gate.weight", FF, D, T.MXFP4 if mxfp4 else T.Q8_0)
            add(p + "ffn_up.weight", FF, D, T.MXFP4 if mxfp4 else T.F32)
        add(p + "ffn_down.weight", D, FF, T.MXFP4 if mxfp4 else T.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
