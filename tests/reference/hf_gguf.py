"""The one writer of a Hugging Face folder as a GGUF file, with the `gguf`
package, in llama.cpp's converter conventions (convert_hf_to_gguf.py): the
pieces every family shares. Each family's converter (qwen35_gguf.py,
test_hf_families.py's SmolLM3, test_moe.py's MoE families) opens a writer
here, adds the keys and tensor renames of its own, and ends with
gguf_copy.finish():

  - hparams: the size keys TextModel.set_gguf_parameters writes from
    config.json (block_count, context_length, embedding_length,
    feed_forward_length, head counts, key/value length where the config
    names head_dim, vocab_size, rms epsilon, rope freq_base);
  - add_bpe_vocab: a byte-level BPE tokenizer.json as the gpt2 tokenizer
    model (tokens, added tokens as type 3, merges, eos, and the chat
    template of chat_template.jinja where the folder has one);
  - permute: LlamaModel's Q/K row permutation;
  - add_f32: a tensor as F32; gguf_copy.finish writes and closes the file;
  - write_gemma4: a whole Gemma 4 folder as conversion/gemma.py's
    Gemma4Model writes it (the family whose keys and tensors differ most
    from the folder's)."""
import json
import pathlib

import gguf
import numpy as np


def permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf permute: Hugging Face's rotate-half rows → adjacent pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hparams(path, arch, cfg):
    """A GGUFWriter for `path` of `arch` holding config.json's (cfg's) size keys."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    if cfg.get("intermediate_size") is not None:  # find_hparam(optional): Qwen3.5-MoE has none
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    if cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    rope = cfg["rope_parameters"]
    w.add_rope_freq_base(rope.get("full_attention", rope)["rope_theta"])  # TextModel's: the full layers'
    return w


def first(v):
    """An id, or the first of a list of ids (config.json's eos_token_id)."""
    return v[0] if isinstance(v, list) else v


def add_bpe_vocab(w, folder, cfg, pre):
    """The folder's byte-level BPE tokenizer.json as llama.cpp's gpt2 tokenizer keys (pre: its pre-tokenizer
    name), one token per id below cfg's vocab_size; eos from cfg, the chat template from chat_template.jinja."""
    folder = pathlib.Path(folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    names = [""] * cfg["vocab_size"]
    for t, i in tok["model"]["vocab"].items():
        names[i] = t
    added = {a["id"] for a in tok["added_tokens"]}
    for a in tok["added_tokens"]:
        names[a["id"]] = a["content"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(names)
    w.add_token_types([3 if i in added else 1 for i in range(len(names))])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    if cfg.get("eos_token_id") is not None:
        w.add_eos_token_id(first(cfg["eos_token_id"]))
    if (folder / "chat_template.jinja").exists():
        w.add_chat_template((folder / "chat_template.jinja").read_text())


def add_f32(w, name, x):
    """Tensor `name` as F32 (a contiguous copy of x)."""
    w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))



# Gemma 4's tensor names (llama.cpp's gguf-py MODEL_ARCH.GEMMA4), by the name after "model.layers.N."
GEMMA4_LAYER = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "per_layer_input_gate": "inp_gate", "per_layer_projection": "proj", "post_per_layer_input_norm": "post_norm",
    "layer_scalar": "layer_output_scale",
    # the MoE block (enable_moe_block): the converter's modify_tensors and gguf-py's tensor map
    "router.proj": "ffn_gate_inp", "router.scale": "ffn_gate_inp.scale", "router.per_expert_scale":
    "ffn_down_exps.scale", "experts.gate_up_proj": "ffn_gate_up_exps", "experts.down_proj": "ffn_down_exps",
    "pre_feedforward_layernorm_2": "pre_ffw_norm_2", "post_feedforward_layernorm_1": "post_ffw_norm_1",
    "post_feedforward_layernorm_2": "post_ffw_norm_2",
}
GEMMA4_GLOBAL = {
    "embed_tokens": "token_embd", "embed_tokens_per_layer": "per_layer_token_embd",
    "per_layer_model_projection": "per_layer_model_proj", "per_layer_projection_norm": "per_layer_proj_norm",
    "norm": "output_norm",
}


def write_gemma4(folder, path, tensors, pre="smaug-bpe"):
    """A Gemma 4 folder (config.json, tokenizer files; tensors: its safetensors by name, the text model's) as
    llama.cpp's converter writes general.architecture gemma4 (conversion/gemma.py Gemma4Model, read for facts):
    the full layers' head size as key_length and the sliding ones' as key_length_swa, head_count_kv and (with
    use_double_wide_mlp) feed_forward_length per layer, sliding_window_pattern a bool per layer (true =
    sliding), rope.freq_base the full layers' and freq_base_swa the sliding ones', rope.dimension_count the
    whole heads and the full layers' proportional RoPE as rope_freqs.weight (1 for the int(head_dim · partial
    / 2) pairs that turn, 1e30 for the others), norms as stored (norm_shift 0), layer_scalar as
    layer_output_scale.weight; weights as F32. The tokenizer: this repo's fixtures hold a byte-level BPE that
    the converter's Gemma 4 vocabulary (LlamaHfVocab: byte_fallback only) would refuse, so it is written as
    the gpt2 model (`pre`), with Gemma 4's add_bos_token."""
    folder = pathlib.Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    n, types = cfg["num_hidden_layers"], cfg["layer_types"]
    plc = {int(k): v for k, v in (cfg.get("per_layer_config") or {}).items()}
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    hd_full = cfg.get("global_head_dim") or plc[full[0]]["head_dim"]
    kv_full = cfg.get("num_global_key_value_heads") or plc[full[0]]["num_key_value_heads"]
    shared = cfg["num_kv_shared_layers"]
    w = hparams(path, "gemma4", cfg)
    w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    w.add_sliding_window(cfg["sliding_window"])
    w.add_shared_kv_layers(shared)
    w.add_embedding_length_per_layer_input(cfg.get("hidden_size_per_layer_input") or 0)
    w.add_sliding_window_pattern([t == "sliding_attention" for t in types])
    w.add_key_length(hd_full)
    w.add_value_length(hd_full)
    w.add_key_length_swa(cfg["head_dim"])
    w.add_value_length_swa(cfg["head_dim"])
    if cfg.get("use_double_wide_mlp"):
        ff = cfg["intermediate_size"]
        w.add_feed_forward_length([ff if i < n - shared else 2 * ff for i in range(n)])
    w.add_head_count_kv([cfg["num_key_value_heads"] if t == "sliding_attention" else kv_full for t in types])
    w.add_rope_dimension_count(hd_full)
    w.add_rope_dimension_count_swa(cfg["head_dim"])
    w.add_rope_freq_base_swa(cfg["rope_parameters"]["sliding_attention"]["rope_theta"])
    if cfg.get("enable_moe_block"):  # TextModel's expert keys, and Gemma4Model's expert width
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["top_k_experts"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    add_bpe_vocab(w, folder, cfg, pre)
    tcfg = json.loads((folder / "tokenizer_config.json").read_text())
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_add_bos_token(bool(tcfg.get("add_bos_token", True)))
    turning = int(hd_full * cfg["rope_parameters"]["full_attention"]["partial_rotary_factor"] / 2)
    add_f32(w, "rope_freqs.weight", [1.0] * turning + [1e30] * (hd_full // 2 - turning))
    for name, x in sorted(tensors.items()):
        name = name.replace("model.language_model.", "model.")
        if name.startswith("model.layers."):
            layer, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{layer}.{GEMMA4_LAYER[rest.removesuffix('.weight')]}"
            gname += "" if gname.endswith(".scale") else ".weight"
        elif name == "lm_head.weight":
            if cfg.get("tie_word_embeddings", True):
                continue
            gname = "output.weight"
        else:
            gname = GEMMA4_GLOBAL[name[len("model."):].removesuffix(".weight")] + ".weight"
        add_f32(w, gname, x)
    return w
