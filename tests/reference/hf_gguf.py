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
  - add_f32: a tensor as F32; gguf_copy.finish writes and closes the file."""
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
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    if cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    return w


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
        w.add_eos_token_id(cfg["eos_token_id"])
    if (folder / "chat_template.jinja").exists():
        w.add_chat_template((folder / "chat_template.jinja").read_text())


def add_f32(w, name, x):
    """Tensor `name` as F32 (a contiguous copy of x)."""
    w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))

