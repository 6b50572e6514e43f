"""A float64 numpy reference of Gemma 4's dense text model (HF `gemma4_text`,
and the text part of a `gemma4` folder), read straight from a Hugging Face
checkpoint folder (config.json and safetensors; hf_ref.load_safetensors),
written from transformers 5.23's modeling_gemma4.py and
configuration_gemma4.py — nothing of tram's hf/ reader or of llama_ref.py.

The semantics it follows (names as in modeling_gemma4.py):
- Gemma4RMSNorm: x / sqrt(mean(x²) + eps) · w — the weight multiplies as
  stored (no 1 + w, unlike Gemma 2/3); v_norm has no weight.
- embed_tokens: embedding · sqrt(hidden_size).
- Per-layer inputs (hidden_size_per_layer_input P > 0): the token part
  embed_tokens_per_layer[ids] · sqrt(P), [T, L·P]; the context part
  per_layer_model_projection(x_embed) · hidden_size^-0.5, reshaped [T, L, P],
  RMSNorm'd by per_layer_projection_norm; the layer-l input is
  (context + token) · 2^-0.5 at [:, l, :].
- per_layer_config: per layer head_dim and num_key_value_heads (the full
  layers' global_head_dim / num_global_key_value_heads), read from the
  config's per-layer overrides keyed by layer index.
- Attention: q = q_norm(q_proj(h)) then RoPE; k = k_norm(k_proj(h)) then
  RoPE; v = v_norm(v_proj(h)), or with attention_k_eq_v on a full layer
  v = v_norm(k_proj(h)) (the raw projection, before k_norm); scores scaled
  by 1.0; causal, and on sliding layers query i sees key j iff
  i - sliding_window < j <= i; GQA.
- RoPE by layer type (rope_parameters[layer_type]): rotate_half over the
  whole head; "default": inv_freq_i = theta^(-2i/head_dim), i < head_dim/2;
  "proportional" (_compute_proportional_rope_parameters): the first
  int(partial_rotary_factor · head_dim // 2) frequencies theta^(-2i/head_dim)
  (the exponent over the whole head_dim), the rest 0 (unrotated), all
  divided by `factor` (default 1).
- num_kv_shared_layers S: layers l >= L - S ("reuse") attend over the keys
  and values of the last layer below L - S of their own layer type (that
  layer "stores" them); they have no k_proj/v_proj of their own, and with
  use_double_wide_mlp their MLP is twice intermediate_size wide.
- Block: x += post_attention_layernorm(attn(input_layernorm(x)));
  x += post_feedforward_layernorm(down(gelu_tanh(gate(h)) · up(h))),
  h = pre_feedforward_layernorm(x); then with per-layer inputs
  x += post_per_layer_input_norm(per_layer_projection(gelu_tanh(
  per_layer_input_gate(x)) · pli_l)); then x *= layer_scalar.
- enable_moe_block (Gemma4TextRouter, Gemma4TextExperts, the decoder
  layer's forward): with r the residual stream after attention and m the
  dense MLP's output as above,
    router: z = rmsnorm(r) (no weight) · router.scale · hidden_size^-0.5;
      p = softmax(z · router.projᵀ) over all num_experts; the top_k_experts
      of highest p; their p renormalised to sum 1, then each times
      router.per_expert_scale[e];
    experts: on pre_feedforward_layernorm_2(r), expert e =
      down_e(gelu_tanh(gate_e) · up_e) with [gate_e; up_e] = gate_up_proj[e]
      (gate the first half of the rows), weighted and summed;
    x += post_feedforward_layernorm(post_feedforward_layernorm_1(m)
         + post_feedforward_layernorm_2(experts)).
- Final: norm, lm_head (tied to embed_tokens unless tie_word_embeddings is
  false), final_logit_softcapping c: c · tanh(logits / c).
Not read (refused here, as by tram): use_bidirectional_attention,
attention_bias, RoPE types other than default and proportional.
"""
import json
import math
import pathlib

import numpy as np
from hf_ref import load_safetensors


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rmsnorm(x, w, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def rope(x, positions, inv_freq):
    """x [T, heads, head_dim], rotate_half over the whole head."""
    ang = positions[:, None].astype(np.float64) * inv_freq[None, :]  # [T, head_dim / 2]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rot * sin


def inv_freq_of(params, head_dim):
    kind = params.get("rope_type", "default")
    theta = float(params["rope_theta"])
    exps = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    if kind == "default":
        return theta ** -exps
    if kind == "proportional":
        n = int(float(params.get("partial_rotary_factor", 1.0)) * head_dim // 2)
        f = np.zeros(head_dim // 2)
        f[:n] = theta ** -exps[:n]
        return f / float(params.get("factor", 1.0))
    raise ValueError(f"Gemma4Ref: rope_type {kind!r} is not read by this reference")


class Gemma4Ref:
    def __init__(self, folder, dtype=np.float64):
        folder = pathlib.Path(folder)
        cfg = json.loads((folder / "config.json").read_text())
        prefix = "model."
        if cfg["model_type"] == "gemma4":  # the multimodal folder: its text model
            cfg, prefix = cfg["text_config"], "model.language_model."
        if cfg["model_type"] != "gemma4_text":
            raise ValueError(f"Gemma4Ref: model_type {cfg['model_type']!r}")
        for k in ("use_bidirectional_attention", "attention_bias"):
            if cfg.get(k):
                raise ValueError(f"Gemma4Ref: {k} is not read by this reference")
        self.cfg = cfg
        self.n_layers = L = cfg["num_hidden_layers"]
        self.dim = cfg["hidden_size"]
        self.n_heads = cfg["num_attention_heads"]
        self.eps = float(cfg["rms_norm_eps"])
        self.types = cfg["layer_types"]
        self.window = cfg["sliding_window"]
        self.ple = cfg.get("hidden_size_per_layer_input") or 0
        self.softcap = cfg.get("final_logit_softcapping") or 0.0
        self.k_eq_v = bool(cfg.get("attention_k_eq_v"))
        self.moe = bool(cfg.get("enable_moe_block"))
        self.top_k = cfg.get("top_k_experts")
        over = {int(k): v for k, v in (cfg.get("per_layer_config") or {}).items()}
        self.head_dim = [over.get(l, {}).get("head_dim", cfg["head_dim"]) for l in range(L)]
        self.kv_heads = [over.get(l, {}).get("num_key_value_heads", cfg["num_key_value_heads"]) for l in range(L)]
        first_shared = L - (cfg.get("num_kv_shared_layers") or 0)
        self.kv_source = list(range(L))
        for l in range(first_shared, L):
            self.kv_source[l] = max(j for j in range(first_shared) if self.types[j] == self.types[l])
        self.inv_freq = [inv_freq_of(cfg["rope_parameters"][self.types[l]], self.head_dim[l]) for l in range(L)]
        self.w = {}
        for f in sorted(folder.glob("*.safetensors")):
            for name, x in load_safetensors(f).items():
                if name.startswith(prefix):
                    self.w[name[len(prefix):]] = np.asarray(x, dtype=dtype)
                elif name == "lm_head.weight":
                    self.w[name] = np.asarray(x, dtype=dtype)
        tied = cfg.get("tie_word_embeddings", True)
        self.lm_head = self.w["embed_tokens.weight"] if tied else self.w["lm_head.weight"]

    def _lw(self, l, name):
        return self.w[f"layers.{l}.{name}"]

    def _attention(self, l, h, positions, kv):
        T, hd, nh = h.shape[0], self.head_dim[l], self.n_heads
        q = (h @ self._lw(l, "self_attn.q_proj.weight").T).reshape(T, nh, hd)
        q = rope(rmsnorm(q, self._lw(l, "self_attn.q_norm.weight"), self.eps), positions, self.inv_freq[l])
        if self.kv_source[l] == l:
            nkv = self.kv_heads[l]
            kp = (h @ self._lw(l, "self_attn.k_proj.weight").T).reshape(T, nkv, hd)
            full_kv = self.k_eq_v and self.types[l] == "full_attention"
            vp = kp if full_kv else (h @ self._lw(l, "self_attn.v_proj.weight").T).reshape(T, nkv, hd)
            k = rope(rmsnorm(kp, self._lw(l, "self_attn.k_norm.weight"), self.eps), positions, self.inv_freq[l])
            kv[l] = (k, rmsnorm(vp, None, self.eps))
        k, v = kv[self.kv_source[l]]
        group = nh // k.shape[1]
        out = np.empty_like(q)
        i = np.arange(T)[:, None]
        j = np.arange(T)[None, :]
        mask = j <= i
        if self.types[l] == "sliding_attention":
            mask &= j > i - self.window
        for head in range(nh):
            s = q[:, head, :] @ k[:, head // group, :].T  # scaling 1.0
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, head, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, head // group, :]
        return out.reshape(T, nh * hd) @ self._lw(l, "self_attn.o_proj.weight").T

    def _experts(self, l, r):
        """The MoE block's output [T, dim] for the residual stream r."""
        z = rmsnorm(r, None, self.eps) * self._lw(l, "router.scale") * self.dim ** -0.5
        logits = z @ self._lw(l, "router.proj.weight").T
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        h = rmsnorm(r, self._lw(l, "pre_feedforward_layernorm_2.weight"), self.eps)
        gate_up, down = self._lw(l, "experts.gate_up_proj"), self._lw(l, "experts.down_proj")
        scale = self._lw(l, "router.per_expert_scale")
        out = np.zeros_like(r)
        for t in range(r.shape[0]):
            top = np.argsort(-p[t], kind="stable")[: self.top_k]
            w = p[t, top] / p[t, top].sum() * scale[top]
            for e, we in zip(top, w):
                gu = gate_up[e] @ h[t]
                g, u = gu[: len(gu) // 2], gu[len(gu) // 2:]
                out[t] += we * (down[e] @ (gelu_tanh(g) * u))
        return out

    def hidden(self, tokens):
        """The final-normed hidden states [T, dim] of one sequence from position 0."""
        ids = np.asarray(tokens)
        T, L = len(ids), self.n_layers
        positions = np.arange(T)
        x = self.w["embed_tokens.weight"][ids] * float(np.sqrt(np.float32(self.dim)))  # a float32 buffer in HF
        if self.ple:
            P = self.ple
            tok = self.w["embed_tokens_per_layer.weight"][ids] * float(np.sqrt(np.float32(P)))
            ctx = (x @ self.w["per_layer_model_projection.weight"].T) * self.dim ** -0.5
            ctx = rmsnorm(ctx.reshape(T, L, P), self.w["per_layer_projection_norm.weight"], self.eps)
            pli = (ctx + tok.reshape(T, L, P)) * 2.0 ** -0.5
        kv = {}
        for l in range(L):
            a = self._attention(l, rmsnorm(x, self._lw(l, "input_layernorm.weight"), self.eps), positions, kv)
            x = x + rmsnorm(a, self._lw(l, "post_attention_layernorm.weight"), self.eps)
            h = rmsnorm(x, self._lw(l, "pre_feedforward_layernorm.weight"), self.eps)
            m = gelu_tanh(h @ self._lw(l, "mlp.gate_proj.weight").T) * (h @ self._lw(l, "mlp.up_proj.weight").T)
            m = m @ self._lw(l, "mlp.down_proj.weight").T
            if self.moe:
                m = rmsnorm(m, self._lw(l, "post_feedforward_layernorm_1.weight"), self.eps)
                e = self._experts(l, x)
                m = m + rmsnorm(e, self._lw(l, "post_feedforward_layernorm_2.weight"), self.eps)
            x = x + rmsnorm(m, self._lw(l, "post_feedforward_layernorm.weight"), self.eps)
            if self.ple:
                g = gelu_tanh(x @ self._lw(l, "per_layer_input_gate.weight").T) * pli[:, l, :]
                g = g @ self._lw(l, "per_layer_projection.weight").T
                x = x + rmsnorm(g, self._lw(l, "post_per_layer_input_norm.weight"), self.eps)
            x = x * self._lw(l, "layer_scalar")[0]
        return rmsnorm(x, self.w["norm.weight"], self.eps)

    def forward(self, tokens):
        """Logits [T, vocab] of one sequence from position 0."""
        logits = self.hidden(tokens) @ self.lm_head.T
        if self.softcap:
            logits = self.softcap * np.tanh(logits / self.softcap)
        return logits

    def greedy(self, tokens, n):
        out = list(tokens)
        for _ in range(n):
            out.append(int(self.forward(out)[-1].argmax()))
        return out[len(tokens):]
