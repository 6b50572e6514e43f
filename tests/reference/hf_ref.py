"""The float64 numpy reference read straight from a Hugging Face checkpoint
folder (config.json and safetensors, read from the format's layout), with
Hugging Face's conventions rather than GGUF's: tensor names as
transformers' modeling_*.py define them, Q/K rows in HF's order (RoPE
rotates the halves of each head, `rotate_half`), the per-layer flags of
config.json as the model classes read them. The forward is LlamaRef's
(llama_ref.py), which this fills with the HF checkpoint's weights under the
GGUF names it reads; nothing of tram's hf/ reader is used.

Families:
- smollm3 (modeling_smollm3.py): the Llama block; SmolLM3Attention applies
  RoPE only where config.no_rope_layers[layer] is 1 (any list: this
  reference follows the config, tram the fixed step llama.cpp uses);
  rope_parameters.rope_theta (transformers 5) or rope_theta; tied
  embeddings by default.
"""
import json
import pathlib

import numpy as np
from llama_ref import LlamaRef


def load_safetensors(path):
    """{name: float32 array} of a .safetensors file (F32, F16 or BF16), read
    from its documented layout (8-byte header length, JSON header, data):
    the `safetensors` package's numpy loader has no bfloat16."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        buf = np.frombuffer(data[a:b], dtype={"F32": np.float32, "F16": np.float16, "BF16": np.uint16}[t["dtype"]])
        if t["dtype"] == "BF16":  # the high half of an f32
            buf = (buf.astype(np.uint32) << 16).view(np.float32)
        out[name] = buf.astype(np.float32).reshape(t["shape"])
    return out

# HF name (within model.layers.N.) -> the GGUF name LlamaRef reads (within blk.N.)
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight"}


class HfRef(LlamaRef):
    def __init__(self, folder, dtype=np.float64):
        folder = pathlib.Path(folder)
        cfg = json.loads((folder / "config.json").read_text())
        if cfg["model_type"] != "smollm3":
            raise ValueError(f"HfRef: model_type {cfg['model_type']!r} is not one this reference reads")
        self.dtype = dtype
        self.arch = cfg["model_type"]
        self.n_layers = cfg["num_hidden_layers"]
        self.dim = cfg["hidden_size"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv_heads = cfg.get("num_key_value_heads") or self.n_heads
        self.head_dim = cfg.get("head_dim") or self.dim // self.n_heads
        self.rot_dim = self.head_dim
        self.eps = float(cfg["rms_norm_eps"])
        rope = cfg.get("rope_parameters") or {}
        self.theta = float(rope.get("rope_theta", cfg.get("rope_theta", 2000000.0)))
        if rope.get("rope_type", "default") != "default" or cfg.get("rope_scaling"):
            raise ValueError("HfRef: RoPE scaling is not read by this reference")
        if cfg.get("use_sliding_window"):
            raise ValueError("HfRef: use_sliding_window is not read by this reference")
        self.window, self.pattern = 0, 0
        self.neox = True  # HF's rotate_half on Q/K rows as stored
        self.gemma = False
        self.attn_softcap = self.final_softcap = 0.0
        flags = cfg.get("no_rope_layers")
        if flags is None:
            step = cfg.get("no_rope_layer_interval", 4)
            flags = [int((l + 1) % step != 0) for l in range(self.n_layers)]
        self.no_rope = {l for l, f in enumerate(flags) if not f}
        weights = {}
        for f in sorted(folder.glob("*.safetensors")):
            weights.update(load_safetensors(f))
        self._cache = {}
        for name, x in weights.items():
            if name.startswith("model.layers."):
                layer, rest = name[len("model.layers."):].split(".", 1)
                gg = f"blk.{layer}." + LAYER_NAMES[rest]
            else:
                gg = GLOBAL_NAMES[name]
            self._cache[gg] = np.asarray(x, dtype=dtype)
        self.tensors = dict.fromkeys(self._cache)
        half = self.rot_dim // 2
        self.inv_freq = 1.0 / (self.theta ** (np.arange(half, dtype=np.float64) * 2.0 / self.rot_dim))
        self.inv_freq_swa = self.inv_freq
        self.mscale = 1.0
