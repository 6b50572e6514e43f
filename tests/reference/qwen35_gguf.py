"""A Qwen3.5 Hugging Face checkpoint (config.json + model.safetensors +
tokenizer.json) written as llama.cpp's converter writes it (its
conversion/qwen.py: Qwen3_5TextModel over _LinearAttentionVReorderBase and
Qwen3NextModel), with the `gguf` package:

  - names: input_layernorm → attn_norm, post_attention_layernorm →
    post_attention_norm, linear_attn.in_proj_qkv → attn_qkv, in_proj_z →
    attn_gate, in_proj_a → ssm_alpha, in_proj_b → ssm_beta, conv1d →
    ssm_conv1d, A_log → ssm_a, dt_bias → ssm_dt.bias, norm → ssm_norm,
    out_proj → ssm_out, self_attn.* → attn_{q,k,v,output,q_norm,k_norm};
  - A_log becomes −exp(A_log); the conv1d weight is squeezed to [C, K];
    every RMSNorm weight but linear_attn.norm gets its 1 added;
  - with fewer key heads than value heads, the value heads go from grouped
    (by key head) to tiled order in the V rows of in_proj_qkv and of the
    conv1d, in_proj_z, in_proj_a/b, A_log, dt_bias and out_proj's columns;
  - keys: qwen35.ssm.{conv_kernel, state_size, group_count, time_step_rank,
    inner_size}, attention.recurrent_layers (layer_types as booleans),
    full_attention_interval, rope.dimension_count (head_dim ·
    partial_rotary_factor), rope.dimension_sections [11, 11, 10, 0].

The experts' forms, as the same converter writes them: qwen3_5_moe_text →
qwen35moe (Qwen3_5MoeTextModel, the value heads tiled as qwen35's) and
qwen3_next → qwen3next (Qwen3NextModel: no tiling, no dimension_sections,
in_proj_qkvz split into attn_qkv [q of every key head; k; v] and attn_gate
(z), in_proj_ba kept as ssm_ba); Qwen2MoeModel's experts: one expert's
matrices stacked into blk.N.ffn_{gate,up,down}_exps (a stacked gate_up_proj
split into its gate and up halves), mlp.gate → ffn_gate_inp, the shared
expert → ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp [dim]; keys
expert_count, expert_used_count, expert_feed_forward_length,
expert_shared_feed_forward_length, and expert_weights_norm (norm_topk_prob;
Qwen3.5-MoE always renormalises).
"""
import json
import pathlib

import numpy as np
from gguf_copy import finish
from hf_gguf import add_bpe_vocab, add_f32, hparams
from safetensors.numpy import load_file

LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "linear_attn.in_proj_qkv.weight": "attn_qkv.weight",
    "linear_attn.in_proj_z.weight": "attn_gate.weight",
    "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
    "linear_attn.in_proj_b.weight": "ssm_beta.weight",
    "linear_attn.conv1d.weight": "ssm_conv1d.weight",
    "linear_attn.A_log": "ssm_a",
    "linear_attn.dt_bias": "ssm_dt.bias",
    "linear_attn.norm.weight": "ssm_norm.weight",
    "linear_attn.out_proj.weight": "ssm_out.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "linear_attn.in_proj_ba.weight": "ssm_ba.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
}
ARCH = {"qwen3_5_text": "qwen35", "qwen3_5_moe_text": "qwen35moe", "qwen3_next": "qwen3next"}


def tiled(x, axis, hk, per_k, width):
    """Value heads along `axis` from grouped [k0: v0..v_{r-1}, k1: ...] to tiled [v0 of every k, v1 ...]."""
    shape = list(x.shape)
    y = x.reshape(shape[:axis] + [hk, per_k, width] + shape[axis + 1:])
    return np.swapaxes(y, axis, axis + 1).reshape(shape)


def split_qkvz(x, hk, per_k, dk, dv):
    """Qwen3NextModel.modify_tensors: in_proj_qkvz rows [q, k, v, z] per key head → (attn_qkv, attn_gate)."""
    y = x.reshape(hk, 2 * dk + 2 * per_k * dv, -1)
    q, k = y[:, :dk], y[:, dk:2 * dk]
    v, z = y[:, 2 * dk:2 * dk + per_k * dv], y[:, 2 * dk + per_k * dv:]
    flat = lambda t: t.reshape(-1, x.shape[1])
    return np.concatenate([flat(q), flat(k), flat(v)]), flat(z)


def experts(w, c):
    """The per-expert (or stacked) matrices of every sparse layer as {blk.N.ffn_*_exps.weight: (E, rows, cols)},
    and the names they came from."""
    out, used = {}, set()
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}.mlp.experts."
        if p + "gate_up_proj" in w:
            gu = w[p + "gate_up_proj"]
            f = gu.shape[1] // 2
            out.update({f"blk.{layer}.ffn_gate_exps.weight": gu[:, :f], f"blk.{layer}.ffn_up_exps.weight": gu[:, f:],
                        f"blk.{layer}.ffn_down_exps.weight": w[p + "down_proj"]})
            used |= {p + "gate_up_proj", p + "down_proj"}
            continue
        if p + "0.gate_proj.weight" not in w:
            continue
        for m in ("gate", "up", "down"):
            names = [f"{p}{e}.{m}_proj.weight" for e in range(c["num_experts"])]
            out[f"blk.{layer}.ffn_{m}_exps.weight"] = np.stack([w[n] for n in names])
            used |= set(names)
    return out, used


def write_gguf(hf_dir, path):
    d = pathlib.Path(hf_dir)
    c = json.loads((d / "config.json").read_text())
    w = load_file(str(d / "model.safetensors"))
    arch = ARCH[c["model_type"]]
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    per_k = hv // hk
    rp = c["rope_parameters"]
    g = hparams(path, arch, c)
    g.add_rope_dimension_count(int(c["head_dim"] * rp.get("partial_rotary_factor", 0.25)))
    if arch != "qwen3next":
        g.add_rope_dimension_sections([11, 11, 10, 0])
    if c.get("num_experts"):
        g.add_expert_count(c["num_experts"])
        g.add_expert_used_count(c["num_experts_per_tok"])
        g.add_expert_feed_forward_length(c["moe_intermediate_size"])
        g.add_expert_shared_feed_forward_length(c["shared_expert_intermediate_size"])
        g.add_expert_weights_norm(arch == "qwen35moe" or bool(c.get("norm_topk_prob", True)))
    g.add_ssm_conv_kernel(c["linear_conv_kernel_dim"])
    g.add_ssm_state_size(dk)
    g.add_ssm_group_count(hk)
    g.add_ssm_time_step_rank(hv)
    g.add_ssm_inner_size(dv * hv)
    interval = [t == "full_attention" for t in c["layer_types"]].index(True) + 1
    g.add_array(f"{arch}.attention.recurrent_layers", [t == "linear_attention" for t in c["layer_types"]])
    g.add_full_attention_interval(interval)
    add_bpe_vocab(g, d, c, "smollm")
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    stacks, used = experts(w, c)
    for name, x in stacks.items():
        add_f32(g, name, x)
    for n in sorted(set(w) - used):
        x = w[n].astype(np.float32)
        if n.endswith("in_proj_qkvz.weight"):
            qkv, z = split_qkvz(x, hk, per_k, dk, dv)
            blk = "blk." + n.split(".")[2]
            add_f32(g, blk + ".attn_qkv.weight", qkv)
            add_f32(g, blk + ".attn_gate.weight", z)
            continue
        if n.endswith("shared_expert_gate.weight"):
            x = x.reshape(-1)
        if n in top:
            name = top[n]
        else:
            layer, rest = n[len("model.layers."):].split(".", 1)
            name = f"blk.{layer}.{LAYER[rest]}"
        if n.endswith(".A_log"):
            x = -np.exp(x)
        if "conv1d" in n:
            x = x.reshape(x.shape[0], x.shape[-1])
        if n.endswith("norm.weight") and not n.endswith("linear_attn.norm.weight"):
            x = x + np.float32(1.0)
        if hk != hv and "linear_attn." in n and arch != "qwen3next":  # _LinearAttentionVReorderBase only
            kd = 2 * hk * dk
            if ".in_proj_qkv." in n or ".conv1d." in n:
                x = np.concatenate([x[:kd], tiled(x[kd:], 0, hk, per_k, dv)])
            elif ".in_proj_z." in n:
                x = tiled(x, 0, hk, per_k, dv)
            elif ".in_proj_a." in n or ".in_proj_b." in n or n.endswith((".A_log", ".dt_bias")):
                x = tiled(x, 0, hk, per_k, 1)
            elif ".out_proj." in n:
                x = tiled(x, 1, hk, per_k, dv)
        add_f32(g, name, x)
    finish(g)
    return path
