"""An independent numpy implementation of the Llama-family forward pass.

It reads a GGUF file with the `gguf` Python package (weights dequantized by
gguf.quants.dequantize, never by tram's code) and computes logits in float64,
one sequence at a time, with plain dense causal attention — no paged cache, no
batching, no chunking. tram's forward must agree with it (tests/reference/).

GGUF conventions it relies on (from the GGUF/llama.cpp format, not from tram):
- tensors are stored [rows = out features, cols = in features]; y = x @ W.T
- for `general.architecture = llama`, the converter permutes Q and K so that
  RoPE rotates adjacent pairs (2i, 2i+1); `qwen2` keeps the halves layout and
  rotates (i, i + d/2) ("neox")
- no output.weight means the output projection is tied to token_embd
- `qwen3` (HF Qwen3Attention): neox RoPE, and q_norm / k_norm — an RMSNorm
  over each head's head_dim vector, same eps — applied to Q and K after the
  projections and before RoPE; head_dim from attention.key_length
- `<arch>.attention.sliding_window` W (HF masking_utils sliding_window_overlay):
  query i sees key j iff i - W < j <= i
- `gemma2` / `gemma3` (HF modeling_gemma2.py / modeling_gemma3.py): the
  embedding times sqrt(hidden_size); Gemma's RMSNorm x / rms(x) * (1 + w),
  which llama.cpp's converter stores as the weight 1 + w (so the GGUF weight
  multiplies, as for llama); input_layernorm → attention → post_attention_
  layernorm → residual, pre_feedforward_layernorm → GeGLU MLP
  (gelu_pytorch_tanh) → post_feedforward_layernorm → residual; scores scaled
  by query_pre_attn_scalar ** -0.5 with query_pre_attn_scalar = head_dim
  (the Gemma 2/3 checkpoints below 27B); gemma2: scores soft-capped
  (tanh(s / cap) * cap, before the mask) and the final logits too; sliding
  layers: gemma2 the even ones, gemma3 those with (i + 1) % pattern != 0
  (pattern 6, or attention.sliding_window_pattern); gemma3: Q/K RMSNorm per
  head before RoPE, and the sliding layers' RoPE at rope_local_base_freq
  (rope.freq_base_swa, default 10000) without the global scaling
- `phi3` (HF modeling_phi3.py): neox RoPE; qkv_proj fused (rows: Q, K, V;
  llama.cpp's attn_qkv) and gate_up_proj fused (rows: gate, up; llama.cpp's
  ffn_up); LongRoPE (HF _compute_longrope_parameters): inv_freq divided by
  long_factor when max_position_embeddings (context_length) exceeds
  original_max_position_embeddings, else short_factor, and cos / sin times
  attention_factor = sqrt(1 + ln(factor) / ln(original)) (or the file's
  rope.scaling.attn_factor). HF switches factor sets per forward on the
  sequence length; this reference, like tram and llama.cpp, fixes it from
  the context length.
- `smollm3` (HF modeling_smollm3.py, SmolLM3Attention.use_rope =
  config.no_rope_layers[layer]): the llama block, but the layers whose
  no_rope_layers flag is 0 apply no RoPE to Q and K at all. llama.cpp's
  GGUF has no key for them: it fixes NoPE at (layer + 1) % 4 == 0, as
  transformers' default list (no_rope_layer_interval 4) does.
"""
import math

import gguf
import numpy as np
from gguf import quants


class LlamaRef:
    def __init__(self, path, dtype=np.float64):
        self.reader = gguf.GGUFReader(str(path))
        self.dtype = dtype
        f = self.reader.fields
        self.arch = f["general.architecture"].contents()
        a = self.arch
        get = lambda k, d=None: f[k].contents() if k in f else d
        self.n_layers = get(f"{a}.block_count")
        self.dim = get(f"{a}.embedding_length")
        self.n_heads = get(f"{a}.attention.head_count")
        self.n_kv_heads = get(f"{a}.attention.head_count_kv", self.n_heads)
        self.head_dim = get(f"{a}.attention.key_length", self.dim // self.n_heads)
        self.window = get(f"{a}.attention.sliding_window", 0)
        self.rot_dim = get(f"{a}.rope.dimension_count", self.head_dim)
        self.eps = float(get(f"{a}.attention.layer_norm_rms_epsilon"))
        self.theta = float(get(f"{a}.rope.freq_base", 10000.0))
        self.neox = a in ("qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen2moe", "qwen3moe")
        self.gemma = a in ("gemma2", "gemma3")
        self.pattern = get(f"{a}.attention.sliding_window_pattern", {"gemma2": 2, "gemma3": 6}.get(a, 0))
        self.attn_softcap = float(get(f"{a}.attn_logit_softcapping", 0.0))
        self.final_softcap = float(get(f"{a}.final_logit_softcapping", 0.0))
        base_swa = float(get(f"{a}.rope.freq_base_swa", 10000.0 if a == "gemma3" else 0.0))
        self.no_rope = {l for l in range(self.n_layers) if a == "smollm3" and (l + 1) % 4 == 0}
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._cache = {}
        self.inv_freq = self._inv_freq(get)
        half = self.rot_dim // 2
        self.inv_freq_swa = (1.0 / base_swa ** (np.arange(half, dtype=np.float64) * 2.0 / self.rot_dim)
                             if base_swa else self.inv_freq)

    def _inv_freq(self, get):
        """RoPE inverse frequencies with the scaling the GGUF keys describe:
        `rope.scaling.type` linear (positions divided by the factor) or
        llama3 (Llama 3.1 band-wise scaling), or a `rope_freqs.weight`
        tensor of per-frequency divisors (how llama.cpp's converter stores
        Llama 3.1's scaling)."""
        a = self.arch
        half = self.rot_dim // 2
        inv = 1.0 / (self.theta ** (np.arange(half, dtype=np.float64) * 2.0 / self.rot_dim))
        kind = get(f"{a}.rope.scaling.type")
        factor = float(get(f"{a}.rope.scaling.factor", 1.0))
        if kind == "linear" or (kind is None and factor != 1.0):
            inv = inv / factor
        elif kind == "llama3":
            lo = float(get(f"{a}.rope.scaling.low_freq_factor", 1.0))
            hi = float(get(f"{a}.rope.scaling.high_freq_factor", 4.0))
            old_ctx = float(get(f"{a}.rope.scaling.original_context_length", 8192))
            wavelen = 2 * math.pi / inv
            smooth = (old_ctx / wavelen - lo) / (hi - lo)
            scaled = np.where(wavelen > old_ctx / lo, inv / factor, inv)
            mid = (wavelen <= old_ctx / lo) & (wavelen >= old_ctx / hi)
            inv = np.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
        if "rope_freqs.weight" in self.tensors:
            t = self.tensors["rope_freqs.weight"]
            inv = inv / np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(-1)[:half]
        self.mscale = 1.0
        if "rope_factors_long.weight" in self.tensors:  # phi3 LongRoPE
            orig = get(f"{a}.rope.scaling.original_context_length")
            ctx = get(f"{a}.context_length")
            t = self.tensors["rope_factors_long.weight" if ctx > orig else "rope_factors_short.weight"]
            inv = inv / np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(-1)
            factor = ctx / orig
            self.mscale = float(get(f"{a}.rope.scaling.attn_factor",
                                    math.sqrt(1 + math.log(factor) / math.log(orig)) if factor > 1 else 1.0))
        return inv

    def w(self, name):
        """The named tensor dequantized, shape (rows, cols), in self.dtype."""
        if name not in self._cache:
            t = self.tensors[name]
            x = quants.dequantize(t.data, t.tensor_type)
            self._cache[name] = np.asarray(x, dtype=self.dtype)
        return self._cache[name]

    def has(self, name):
        return name in self.tensors

    def rmsnorm(self, x, weight):
        """RMSNorm over the last axis."""
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def sliding(self, layer):
        """Whether layer `layer` has the sliding window."""
        if not self.window:
            return False
        return not self.pattern or (layer + 1) % self.pattern != 0

    def rope(self, x, positions, inv_freq=None):
        """x: (n, heads, head_dim); rotates the first rot_dim dims of each head."""
        inv_freq = self.inv_freq if inv_freq is None else inv_freq
        ang = positions[:, None].astype(np.float64) * inv_freq[None, :]  # (n, half)
        cos, sin = np.cos(ang)[:, None, :] * self.mscale, np.sin(ang)[:, None, :] * self.mscale
        out = x.copy()
        half = self.rot_dim // 2
        if self.neox:
            a, b = x[..., :half], x[..., half : 2 * half]
            out[..., :half] = a * cos - b * sin
            out[..., half : 2 * half] = a * sin + b * cos
        else:
            a, b = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]
            out[..., 0 : 2 * half : 2] = a * cos - b * sin
            out[..., 1 : 2 * half : 2] = a * sin + b * cos
        return out

    def ffn(self, p, h):
        """The MLP of block prefix p ("blk.N.") over h (n, dim)."""
        if self.has(p + "ffn_gate.weight"):
            g = h @ self.w(p + "ffn_gate.weight").T
            u = h @ self.w(p + "ffn_up.weight").T
        else:  # phi3: gate_up_proj, rows gate then up
            g, u = np.split(h @ self.w(p + "ffn_up.weight").T, 2, axis=1)
        if self.gemma:  # gelu_pytorch_tanh
            act = 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))
        else:
            act = g / (1.0 + np.exp(-g))
        return (act * u) @ self.w(p + "ffn_down.weight").T

    def forward(self, tokens):
        """Logits (len(tokens), vocab) for one sequence starting at position 0."""
        x = self.hidden(tokens)
        out = self.w("output.weight") if self.has("output.weight") else self.w("token_embd.weight")
        logits = x @ out.T
        if self.final_softcap:
            logits = np.tanh(logits / self.final_softcap) * self.final_softcap
        return logits

    def hidden(self, tokens):
        """The final-normed hidden states (len(tokens), dim), the output
        projection's input, for one sequence starting at position 0."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        pos = np.arange(n)
        x = self.w("token_embd.weight")[tokens]
        if self.gemma:
            x = x * math.sqrt(self.dim)
        H, KV, D = self.n_heads, self.n_kv_heads, self.head_dim
        group = H // KV
        causal = np.triu(np.full((n, n), -np.inf), k=1)
        windowed = causal + np.tril(np.full((n, n), -np.inf), k=-self.window) if self.window else causal
        for l in range(self.n_layers):
            p = f"blk.{l}."
            mask = windowed if self.sliding(l) else causal
            inv_freq = self.inv_freq_swa if self.sliding(l) else self.inv_freq
            h = self.rmsnorm(x, self.w(p + "attn_norm.weight"))
            if self.has(p + "attn_qkv.weight"):  # phi3: rows Q, K, V
                q, k, v = np.split(h @ self.w(p + "attn_qkv.weight").T, [H * D, H * D + KV * D], axis=1)
            else:
                q = h @ self.w(p + "attn_q.weight").T
                k = h @ self.w(p + "attn_k.weight").T
                v = h @ self.w(p + "attn_v.weight").T
            if self.has(p + "attn_q.bias"):
                q = q + self.w(p + "attn_q.bias")
                k = k + self.w(p + "attn_k.bias")
                v = v + self.w(p + "attn_v.bias")
            q, k = q.reshape(n, H, D), k.reshape(n, KV, D)
            if self.has(p + "attn_q_norm.weight"):
                q = self.rmsnorm(q, self.w(p + "attn_q_norm.weight"))
                k = self.rmsnorm(k, self.w(p + "attn_k_norm.weight"))
            if l not in self.no_rope:
                q = self.rope(q, pos, inv_freq)
                k = self.rope(k, pos, inv_freq)
            v = v.reshape(n, KV, D)
            att = np.empty((n, H, D), dtype=self.dtype)
            for hh in range(H):
                kv = hh // group
                s = q[:, hh, :] @ k[:, kv, :].T / math.sqrt(D)
                if self.attn_softcap:
                    s = np.tanh(s / self.attn_softcap) * self.attn_softcap
                s = s + mask
                s = s - s.max(axis=-1, keepdims=True)
                e = np.exp(s)
                att[:, hh, :] = (e / e.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
            o = att.reshape(n, H * D) @ self.w(p + "attn_output.weight").T
            if self.gemma:
                o = self.rmsnorm(o, self.w(p + "post_attention_norm.weight"))
            x = x + o
            h = self.rmsnorm(x, self.w(p + "ffn_norm.weight"))
            o = self.ffn(p, h)
            if self.gemma:
                o = self.rmsnorm(o, self.w(p + "post_ffw_norm.weight"))
            x = x + o
        return self.rmsnorm(x, self.w("output_norm.weight"))
