"""The float64 numpy reference of gpt-oss, read from a GGUF file with the
`gguf` package (weights dequantized by gguf.quants), written from Hugging
Face's modeling_gpt_oss.py and modeling_rope_utils.py (transformers 5.23),
not from tram:

- block: x += o_proj(attn(rmsnorm(x) · input_layernorm)) (+ o bias);
  x += moe(rmsnorm(x) · post_attention_layernorm);
- attention: q, k, v with biases; RoPE on halves (rotate_half) with YaRN:
  inv_freq = interp · ramp + extrap · (1 - ramp), ramp over the
  correction range [lo, hi] of beta_fast/beta_slow (not truncated unless
  tram.rope.scaling.yarn_truncate), cos and sin times the attention factor
  0.1 ln(factor) + 1; scores q·k / sqrt(head_dim) with the causal mask (and
  the sliding window W on layers 0, 2, ...: key j seen iff i - W < j <= i),
  then the head's sink logit appended as one more column of the softmax
  and dropped after it (eager_attention_forward);
- router: logits = h · W_rᵀ + b_r; the top k; softmax over those k;
- expert e: gate = min(h · W_gᵀ + b_g, 7), up = clamp(h · W_uᵀ + b_u, ±7),
  (up + 1) · gate · sigmoid(1.702 · gate), then · W_dᵀ + b_d.

GGUF layout (llama.cpp's converter for gpt-oss): blk.N.attn_{q,k,v,output}
.{weight,bias}, blk.N.attn_sinks.weight (H,), blk.N.attn_norm,
blk.N.post_attention_norm (the MLP's input norm), blk.N.ffn_gate_inp
.{weight,bias}, blk.N.ffn_{gate,up,down}_exps.{weight,bias} (numpy
(E, F, D), (E, F, D), (E, D, F); (E, F), (E, F), (E, D))."""
import math

import gguf
import numpy as np
from gguf import quants


class GptOssRef:
    def __init__(self, path, sinks=True):
        self.reader = gguf.GGUFReader(str(path))
        f = self.reader.fields
        get = lambda k, d=None: f[k].contents() if k in f else d
        a = "gpt-oss"
        assert get("general.architecture") == a
        self.n_layers = get(f"{a}.block_count")
        self.n_heads = get(f"{a}.attention.head_count")
        self.n_kv = get(f"{a}.attention.head_count_kv")
        self.hd = get(f"{a}.attention.key_length")
        self.window = get(f"{a}.attention.sliding_window")
        self.eps = float(get(f"{a}.attention.layer_norm_rms_epsilon"))
        self.k = get(f"{a}.expert_used_count")
        self.use_sinks = sinks
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.trace = {}
        base = float(get(f"{a}.rope.freq_base"))
        factor = float(get(f"{a}.rope.scaling.factor"))
        orig = float(get(f"{a}.rope.scaling.original_context_length"))
        bf = float(get(f"{a}.rope.scaling.yarn_beta_fast", 32.0))
        bs = float(get(f"{a}.rope.scaling.yarn_beta_slow", 1.0))
        d = self.hd
        pos_freqs = base ** (np.arange(0, d, 2, dtype=np.float64) / d)
        extrap, interp = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
        corr = lambda rot: d * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = corr(bf), corr(bs)
        if get("tram.rope.scaling.yarn_truncate", 0):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, d - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(d // 2, dtype=np.float64) - lo) / (hi - lo), 0, 1)
        self.inv_freq = interp * ramp + extrap * (1 - ramp)
        self.mscale = float(get(f"{a}.rope.scaling.attn_factor", 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0))

    def w(self, name):
        t = self.tensors[name]
        return np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float64)

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x, pos):
        ang = pos[:, None].astype(np.float64) * self.inv_freq[None, :]
        cos, sin = np.cos(ang)[:, None, :] * self.mscale, np.sin(ang)[:, None, :] * self.mscale
        half = self.hd // 2
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def moe(self, p, h):
        logits = h @ self.w(p + "ffn_gate_inp.weight").T + self.w(p + "ffn_gate_inp.bias")
        ids = np.argsort(-logits, axis=1, kind="stable")[:, : self.k]
        self.trace[p] = ids
        top = np.take_along_axis(logits, ids, axis=1)
        e = np.exp(top - top.max(axis=1, keepdims=True))
        wts = e / e.sum(axis=1, keepdims=True)
        G, U, D = (self.w(p + f"ffn_{m}_exps.weight") for m in ("gate", "up", "down"))
        bg, bu, bd = (self.w(p + f"ffn_{m}_exps.bias") for m in ("gate", "up", "down"))
        out = np.zeros_like(h)
        for i in range(h.shape[0]):
            for ex, we in zip(ids[i], wts[i]):
                g = np.minimum(G[ex] @ h[i] + bg[ex], 7.0)
                u = np.clip(U[ex] @ h[i] + bu[ex], -7.0, 7.0)
                act = (u + 1) * g / (1.0 + np.exp(-1.702 * g))
                out[i] += we * (D[ex] @ act + bd[ex])
        return out

    def forward(self, tokens):
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        pos = np.arange(n)
        x = self.w("token_embd.weight")[tokens]
        H, KV, D = self.n_heads, self.n_kv, self.hd
        causal = np.triu(np.full((n, n), -np.inf), k=1)
        windowed = causal + np.tril(np.full((n, n), -np.inf), k=-self.window)
        for l in range(self.n_layers):
            p = f"blk.{l}."
            mask = windowed if l % 2 == 0 else causal
            h = self.rmsnorm(x, self.w(p + "attn_norm.weight"))
            q = (h @ self.w(p + "attn_q.weight").T + self.w(p + "attn_q.bias")).reshape(n, H, D)
            k = (h @ self.w(p + "attn_k.weight").T + self.w(p + "attn_k.bias")).reshape(n, KV, D)
            v = (h @ self.w(p + "attn_v.weight").T + self.w(p + "attn_v.bias")).reshape(n, KV, D)
            q, k = self.rope(q, pos), self.rope(k, pos)
            sinks = self.w(p + "attn_sinks.weight")
            att = np.empty((n, H, D))
            for hh in range(H):
                kv = hh // (H // KV)
                s = q[:, hh, :] @ k[:, kv, :].T / math.sqrt(D) + mask
                if self.use_sinks:
                    s = np.concatenate([s, np.full((n, 1), sinks[hh])], axis=1)
                s = s - s.max(axis=1, keepdims=True)
                e = np.exp(s)
                pr = (e / e.sum(axis=1, keepdims=True))[:, :n]
                att[:, hh, :] = pr @ v[:, kv, :]
            x = x + att.reshape(n, H * D) @ self.w(p + "attn_output.weight").T + self.w(p + "attn_output.bias")
            x = x + self.moe(p, self.rmsnorm(x, self.w(p + "post_attention_norm.weight")))
        x = self.rmsnorm(x, self.w("output_norm.weight"))
        return x @ self.w("output.weight").T
