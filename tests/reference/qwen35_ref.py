"""A float64 numpy reference of Qwen3.5's hybrid text model, written from the
Gated DeltaNet paper (Yang, Kautz, Hatamizadeh, "Gated Delta Networks:
Improving Mamba2 with Delta Rule", 2024: S_t = S_{t-1} α_t (I − β_t k_t k_tᵀ)
+ β_t v_t k_tᵀ, o_t = S_t q_t) and the Hugging Face modeling semantics
(transformers' modeling_qwen3_5: the depthwise causal conv1d with SiLU, q/k L2
norm and the 1/sqrt(d_k) query scale, α_t = exp(−exp(A_log) · softplus(a +
dt_bias)), β_t = sigmoid(b), the gated RMSNorm, the gated full attention with
per-head q/k norms and partial neox RoPE, zero-centred RMSNorms (1 + w)).

It reads the Hugging Face checkpoint (config.json + model.safetensors) and
keeps Hugging Face's value-head order (value head h reads key head
h // (Hv / Hk)). The state is written in the paper's orientation (S maps
keys to values: S [d_v, d_k]), not in the kernels' [d_k, d_v], and the
convolution over the whole padded sequence (not a cached window), so the
reference shares no layout with tram's C code.

    Qwen35Ref(hf_dir).forward(ids)        -> [len, vocab] float64 logits
    Qwen35Ref(hf_dir).forward(ids, chunk) -> the same, the state carried
                                             across chunks of `chunk` tokens

The mixture-of-experts forms (qwen3_5_moe_text, qwen3_next), from
transformers' Qwen3_5MoeSparseMoeBlock / Qwen3NextSparseMoeBlock (that is,
Qwen2MoeSparseMoeBlock): p = softmax(h · W_gateᵀ) over all experts, the
top k (num_experts_per_tok) with their p, divided by their sum (Qwen3.5-MoE
always; Qwen3-Next when norm_topk_prob, default true), each expert
down(silu(gate(h)) · up(h)) weighted and summed, plus sigmoid(h ·
w_shared_gate) · shared_expert(h); a layer of mlp_only_layers (or off
decoder_sparse_step) keeps the dense MLP. Qwen3-Next's linear layer fuses
its projections (Qwen3NextGatedDeltaNet.fix_query_key_value_ordering):
in_proj_qkvz's rows per key head g are [q_g, k_g, v of its r = Hv / Hk
value heads, z of them], in_proj_ba's are [β of its r value heads, α of
them]; the rest of the block is Qwen3.5's.
"""
import json
import pathlib

import numpy as np
from safetensors.numpy import load_file


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def l2norm(x, eps=1e-6):
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


class Qwen35Ref:
    def __init__(self, hf_dir):
        d = pathlib.Path(hf_dir)
        c = json.loads((d / "config.json").read_text())
        self.c = c
        self.w = {k: v.astype(np.float64) for k, v in load_file(str(d / "model.safetensors")).items()}
        self.L = c["num_hidden_layers"]
        self.types = c["layer_types"]
        self.eps = c["rms_norm_eps"]
        self.H, self.KV, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        rp = c["rope_parameters"]
        self.rot = int(self.hd * rp.get("partial_rotary_factor", 1.0))
        self.inv_freq = 1.0 / rp["rope_theta"] ** (np.arange(0, self.rot, 2) / self.rot)
        self.Hk, self.Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        self.K = c["linear_conv_kernel_dim"]
        self.k_used = c.get("num_experts_per_tok", 0)
        self.renorm = c["model_type"] != "qwen3_next" or c.get("norm_topk_prob", True)
        self.trace = {}  # layer prefix -> the expert ids (T, k) of the last chunk's rows

    def projections(self, p, x):
        """mix [T, C] = [q of every key head, k of every key head, v], z [T, Hv, dv], b, a [T, Hv]."""
        T = x.shape[0]
        if p + "in_proj_qkvz.weight" not in self.w:
            return (x @ self.W(p + "in_proj_qkv.weight").T,
                    (x @ self.W(p + "in_proj_z.weight").T).reshape(T, self.Hv, self.dv),
                    x @ self.W(p + "in_proj_b.weight").T, x @ self.W(p + "in_proj_a.weight").T)
        r = self.Hv // self.Hk
        qkvz = (x @ self.W(p + "in_proj_qkvz.weight").T).reshape(T, self.Hk, -1)
        q, k = qkvz[..., :self.dk], qkvz[..., self.dk:2 * self.dk]
        v, z = qkvz[..., 2 * self.dk:2 * self.dk + r * self.dv], qkvz[..., 2 * self.dk + r * self.dv:]
        ba = (x @ self.W(p + "in_proj_ba.weight").T).reshape(T, self.Hk, 2 * r)
        mix = np.concatenate([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], axis=1)
        return mix, z.reshape(T, self.Hv, self.dv), ba[..., :r].reshape(T, -1), ba[..., r:].reshape(T, -1)

    def expert(self, p, e):
        """Expert e's (gate, up, down) matrices: one tensor each, or slices of the stacked ones."""
        if p + "experts.gate_up_proj" in self.w:
            gu = self.W(p + "experts.gate_up_proj")[e]
            f = gu.shape[0] // 2
            return gu[:f], gu[f:], self.W(p + "experts.down_proj")[e]
        return tuple(self.W(p + f"experts.{e}.{m}_proj.weight") for m in ("gate", "up", "down"))

    def mlp(self, p, h):
        if p + "gate.weight" not in self.w:  # a dense layer
            return (silu(h @ self.W(p + "gate_proj.weight").T) * (h @ self.W(p + "up_proj.weight").T)) @ \
                self.W(p + "down_proj.weight").T
        logits = h @ self.W(p + "gate.weight").T
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ids = np.argsort(-probs, axis=1, kind="stable")[:, :self.k_used]
        self.trace[p] = ids
        w = np.take_along_axis(probs, ids, axis=1)
        if self.renorm:
            w = w / w.sum(-1, keepdims=True)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            for e, we in zip(ids[t], w[t]):
                g, u, d = self.expert(p, e)
                out[t] += we * (d @ (silu(g @ h[t]) * (u @ h[t])))
        sh = p + "shared_expert."
        shared = (silu(h @ self.W(sh + "gate_proj.weight").T) * (h @ self.W(sh + "up_proj.weight").T)) @ \
            self.W(sh + "down_proj.weight").T
        return out + sigmoid(h @ self.W(p + "shared_expert_gate.weight").T) * shared

    def W(self, name):
        return self.w[name]

    def norm1(self, x, name):  # zero-centred: 1 + w
        return rmsnorm(x, 1.0 + self.W(name), self.eps)

    def rope(self, x, pos):  # x [T, heads, hd]; neox halves on the first rot dims
        ang = pos[:, None] * self.inv_freq[None, :]  # [T, rot/2]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        h = self.rot // 2
        x1, x2 = x[..., :h], x[..., h:self.rot]
        out = x.copy()
        out[..., :h] = x1 * cos - x2 * sin
        out[..., h:self.rot] = x2 * cos + x1 * sin
        return out

    def attention(self, p, x, pos, cache):
        T = x.shape[0]
        qg = (x @ self.W(p + "q_proj.weight").T).reshape(T, self.H, 2 * self.hd)
        q, gate = qg[..., :self.hd], qg[..., self.hd:].reshape(T, -1)
        k = (x @ self.W(p + "k_proj.weight").T).reshape(T, self.KV, self.hd)
        v = (x @ self.W(p + "v_proj.weight").T).reshape(T, self.KV, self.hd)
        q = self.rope(self.norm1(q, p + "q_norm.weight"), pos)
        k = self.rope(self.norm1(k, p + "k_norm.weight"), pos)
        cache["k"] = np.concatenate([cache.get("k", np.zeros((0, self.KV, self.hd))), k])
        cache["v"] = np.concatenate([cache.get("v", np.zeros((0, self.KV, self.hd))), v])
        K, V = cache["k"], cache["v"]
        n = K.shape[0]
        out = np.zeros((T, self.H, self.hd))
        for h in range(self.H):
            kv = h // (self.H // self.KV)
            s = q[:, h] @ K[:, kv].T / np.sqrt(self.hd)  # [T, n]
            s = np.where(np.arange(n)[None, :] <= pos[:, None], s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, h] = (s / s.sum(-1, keepdims=True)) @ V[:, kv]
        out = out.reshape(T, -1) * sigmoid(gate)
        return out @ self.W(p + "o_proj.weight").T

    def deltanet(self, p, x, st):
        T = x.shape[0]
        mix, z, b, a = self.projections(p, x)  # mix [T, C]
        C = mix.shape[1]
        w = self.W(p + "conv1d.weight").reshape(C, self.K)
        hist = st.get("conv", np.zeros((self.K - 1, C)))  # the inputs before this chunk
        full = np.concatenate([hist, mix])  # [K - 1 + T, C]
        conv = np.stack([np.sum(full[t:t + self.K] * w.T, axis=0) for t in range(T)])
        st["conv"] = full[-(self.K - 1):]
        conv = silu(conv)
        kd = self.Hk * self.dk
        q = conv[:, :kd].reshape(T, self.Hk, self.dk)
        k = conv[:, kd:2 * kd].reshape(T, self.Hk, self.dk)
        v = conv[:, 2 * kd:].reshape(T, self.Hv, self.dv)
        q = l2norm(q) / np.sqrt(self.dk)
        k = l2norm(k)
        alpha = np.exp(-np.exp(self.W(p + "A_log")) * softplus(a + self.W(p + "dt_bias")))  # [T, Hv]
        beta = sigmoid(b)
        S = st.get("S", np.zeros((self.Hv, self.dv, self.dk)))  # the paper's S: keys -> values
        o = np.zeros((T, self.Hv, self.dv))
        group = self.Hv // self.Hk
        for t in range(T):
            for h in range(self.Hv):
                kh = h // group
                kt, qt = k[t, kh], q[t, kh]
                # S_t = S_{t-1} α (I − β k kᵀ) + β v kᵀ
                S[h] = alpha[t, h] * (S[h] - beta[t, h] * np.outer(S[h] @ kt, kt)) + beta[t, h] * np.outer(v[t, h], kt)
                o[t, h] = S[h] @ qt
        st["S"] = S
        o = rmsnorm(o, self.W(p + "norm.weight"), self.eps) * silu(z)
        return o.reshape(T, -1) @ self.W(p + "out_proj.weight").T

    def forward(self, ids, chunk=None):
        ids = np.asarray(ids)
        chunk = chunk or len(ids)
        states = [dict() for _ in range(self.L)]
        out = []
        for c0 in range(0, len(ids), chunk):
            tok = ids[c0:c0 + chunk]
            pos = np.arange(c0, c0 + len(tok), dtype=np.float64)
            x = self.W("model.embed_tokens.weight")[tok]
            for l in range(self.L):
                p = f"model.layers.{l}."
                h = self.norm1(x, p + "input_layernorm.weight")
                if self.types[l] == "linear_attention":
                    x = x + self.deltanet(p + "linear_attn.", h, states[l])
                else:
                    x = x + self.attention(p + "self_attn.", h, pos, states[l])
                h = self.norm1(x, p + "post_attention_layernorm.weight")
                x = x + self.mlp(p + "mlp.", h)
            x = self.norm1(x, "model.norm.weight")
            head = self.w.get("lm_head.weight", self.W("model.embed_tokens.weight"))
            out.append(x @ head.T)
        return np.concatenate(out)
