"""The float64 numpy reference of the mixture-of-experts families, read from
a GGUF file with the `gguf` package (weights dequantized by gguf.quants):
LlamaRef's attention and block, with the sparse MLP as Hugging Face's
modeling_qwen2_moe.py, modeling_qwen3_moe.py and modeling_mixtral.py compute
it, written from those files, not from tram:

- router: logits = h @ W_gate_inp.T (E experts); p = softmax(logits) over all
  E; the k = expert_used_count experts of highest p (torch.topk); their
  weights p, divided by their sum when norm_topk_prob (Qwen3-MoE configs,
  Qwen2-MoE's default false; Mixtral always divides);
- expert e: down_e(silu(gate_e(h)) * up_e(h)); the layer's output is the
  sum over the chosen experts of weight · expert(h);
- qwen2_moe's shared expert: + sigmoid(h @ w_shared_gate) · shared(h),
  a SwiGLU MLP of shared_expert_intermediate_size;
- a layer in mlp_only_layers (or off decoder_sparse_step) keeps the dense
  MLP: in the GGUF, a block with ffn_gate/up/down and no ffn_gate_inp.

GGUF conventions (llama.cpp's converter): experts stacked as
blk.N.ffn_{gate,up,down}_exps.weight (numpy shape (E, rows, cols)); the
router blk.N.ffn_gate_inp.weight (E, dim); the shared expert
blk.N.ffn_{gate,up,down}_shexp.weight and its gate
blk.N.ffn_gate_inp_shexp.weight (dim,); the renormalisation as the key
`<arch>.expert_weights_norm`, defaulting as llama.cpp does (qwen2moe off,
qwen3moe and llama on)."""
import numpy as np
from llama_ref import LlamaRef


class MoeRef(LlamaRef):
    def __init__(self, path, dtype=np.float64):
        super().__init__(path, dtype)
        f = self.reader.fields
        a = self.arch
        self.k = int(f[f"{a}.expert_used_count"].contents())
        key = f"{a}.expert_weights_norm"
        self.norm = bool(f[key].contents()) if key in f else a != "qwen2moe"
        self.trace = {}  # block prefix -> the expert ids (n, k) of the last forward's rows

    def route(self, p, h):
        """(ids (n, k), weights (n, k)) of block p for rows h."""
        logits = h @ self.w(p + "ffn_gate_inp.weight").T
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = e / e.sum(axis=1, keepdims=True)
        ids = np.argsort(-probs, axis=1, kind="stable")[:, : self.k]
        self.trace[p] = ids
        w = np.take_along_axis(probs, ids, axis=1)
        if self.norm:
            w = w / w.sum(axis=1, keepdims=True)
        return ids, w

    def ffn(self, p, h):
        if not self.has(p + "ffn_gate_inp.weight"):
            return super().ffn(p, h)
        silu = lambda g: g / (1.0 + np.exp(-g))
        gate, up, down = (self.w(p + f"ffn_{m}_exps.weight") for m in ("gate", "up", "down"))
        ids, w = self.route(p, h)
        out = np.zeros_like(h)
        for i in range(h.shape[0]):
            for e, we in zip(ids[i], w[i]):
                out[i] += we * (down[e] @ (silu(gate[e] @ h[i]) * (up[e] @ h[i])))
        if self.has(p + "ffn_gate_shexp.weight"):
            sh = (silu(h @ self.w(p + "ffn_gate_shexp.weight").T) * (h @ self.w(p + "ffn_up_shexp.weight").T)) @ \
                self.w(p + "ffn_down_shexp.weight").T
            g = h @ self.w(p + "ffn_gate_inp_shexp.weight").reshape(-1)
            out += (1.0 / (1.0 + np.exp(-g)))[:, None] * sh
        return out
