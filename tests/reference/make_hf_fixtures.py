"""Writes the Hugging Face fixtures of the model families tram runs from
checkpoints that transformers itself makes: a tiny random-weight model per
family (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, all written by transformers' and tokenizers'
save_pretrained), and what transformers computes with it in float64 — each
prompt's logits at every position and its greedy continuation
(model.generate) — into tests/reference/data/<family>/expected.npz.

It needs torch and transformers (5.23), which `make test` does not have:

    /work/torchvenv/bin/python tests/reference/make_hf_fixtures.py

and the outputs are committed (well under 1 MB each); the tests
(tests/reference/test_hf_families.py) only read them. Rerunning it rewrites
them from the same seeds.

Families:
  smollm3  SmolLM3ForCausalLM in bfloat16, 5 layers (layer 3 is a NoPE layer:
           no_rope_layers from transformers' default interval of 4), GQA
           4/2 heads of 16, tied embeddings, a RoPE base low enough that
           every frequency turns within the prompts; the tokenizer is a
           byte-level BPE trained here with Llama 3's pre-tokenizer (the one
           SmolLM3's tokenizer.json has) and SmolLM3's ChatML specials; the
           chat template is SmolLM3's (tests/integration/data/templates/
           HuggingFaceTB-SmolLM3-3B.jinja).
  gemma4   Gemma4ForCausalLM (gemma4_text) in bfloat16, 6 layers covering
           every feature of the dense text model: layer_types sliding,
           sliding, full, sliding, sliding, full with a sliding window of 8
           (shorter than the prompts); per-layer head_dim (16 on the sliding
           layers, 32 on the full ones: per_layer_config) and KV heads (2,
           and 1 on the full layers: num_global_key_value_heads);
           attention_k_eq_v (the full layers' values are their keys'
           projection); num_kv_shared_layers 2 (layer 4 reads layer 3's K/V,
           layer 5 layer 2's) with use_double_wide_mlp (those two have twice
           the MLP width); per-layer inputs (hidden_size_per_layer_input 8);
           the sliding layers' default RoPE (base 100) and the full layers'
           proportional RoPE (partial_rotary_factor 0.25, base 1000); the
           layer_scalar buffers and every RMSNorm weight away from 1; final
           logit soft-capping 30. Byte-level BPE with Gemma 4's specials
           (<pad> 0, <eos> 1, <bos> 2, <|turn> and <turn|>, ...), BOS first
           in every prompt (add_bos_token, as Gemma's tokenizers); the chat template is Gemma 4's
           (tests/integration/data/templates/google-gemma-4.jinja).
  gemma4_moe  Gemma4ForCausalLM with enable_moe_block (the 26B-A4B's layer:
           the dense MLP and a mixture of experts side by side), in
           bfloat16, 3 layers (sliding, sliding, full; heads of 16 and 32,
           K = V on the full layer), 8 experts of width 16, top 2, beside an
           MLP of 64; the router's scale and per_expert_scale and every
           RMSNorm weight away from 1; no per-layer inputs or KV sharing
           (the dense fixture covers those); gemma4's tokenizer and template.
"""
import json
import pathlib
import sys

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (Gemma4ForCausalLM, Gemma4TextConfig, PreTrainedTokenizerFast, SmolLM3Config,
                          SmolLM3ForCausalLM)

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data"
TEMPLATES = HERE.parent / "integration" / "data" / "templates"

# Llama 3's (and SmolLM3's) Split regex, as in their tokenizer.json
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "Once upon a time, in a small village by the sea, there lived an old fisherman.",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.",
    "Knowledge Cutoff Date: June 2025. Today Date: 06 December 2026. Reasoning Mode: /think",
    "## Metadata\n\n## Custom Instructions\n\nWhat is two plus two? It is 4.",
]

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "def fib(n):\n    return n if n < 2 else",
]
NEW_TOKENS = 12


def byte_level_tokenizer(specials, vocab_size):
    """A byte-level BPE (every byte a symbol, so any text tokenizes) trained on CORPUS."""
    tk = Tokenizer(models.BPE(ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(CORPUS, trainer)
    return tk


def perturb_norms(model, gen):
    """RMSNorm weights away from 1, so that a norm read wrongly shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.2)


def expected(model, prompts_ids):
    """float64 logits of every position, and the greedy continuation, per prompt."""
    out = {}
    with torch.no_grad():
        for i, ids in enumerate(prompts_ids):
            x = torch.tensor([ids])
            out[f"ids_{i}"] = np.array(ids, dtype=np.int32)
            out[f"logits_{i}"] = model(x).logits[0].numpy().astype(np.float32)
            g = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=NEW_TOKENS,
                               min_new_tokens=NEW_TOKENS, pad_token_id=0)
            out[f"greedy_{i}"] = g[0, len(ids):].numpy().astype(np.int32)
    return out


def smollm3():
    out = DATA / "smollm3"
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<|im_start|>", "<|im_end|>", "<|end_of_text|>"]
    tk = byte_level_tokenizer(specials, 360)
    template = (TEMPLATES / "HuggingFaceTB-SmolLM3-3B.jinja").read_text()
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|im_end|>",
                                   chat_template=template)
    fast.save_pretrained(out)
    eos = tk.token_to_id("<|im_end|>")
    cfg = SmolLM3Config(vocab_size=tk.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=5,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, rms_norm_eps=1e-6,
                        initializer_range=0.1, bos_token_id=None, eos_token_id=eos, pad_token_id=eos,
                        tie_word_embeddings=True)
    torch.manual_seed(32)
    model = SmolLM3ForCausalLM(cfg).eval()
    perturb_norms(model, torch.Generator().manual_seed(33))
    assert cfg.no_rope_layers == [1, 1, 1, 0, 1], cfg.no_rope_layers
    model.to(torch.bfloat16).save_pretrained(out)  # as SmolLM3 ships (and half the bytes)
    # the expectations from the saved weights, reloaded in float64 (a model cast down and up again would carry
    # its RoPE inv_freq buffer rounded to bfloat16)
    model = SmolLM3ForCausalLM.from_pretrained(out, dtype=torch.float64).eval()
    ids = [fast(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    np.savez_compressed(out / "expected.npz", **expected(model, ids))
    print(f"smollm3: vocab {cfg.vocab_size}, prompts of {[len(i) for i in ids]} tokens -> {out}")


GEMMA4_SPECIALS = ["<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
                   "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
                   '<|"|>']


GEMMA4_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
               "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000.0}}


def gemma4_model(cfg, seed, more=None):
    """A random Gemma 4 model of cfg (torch seed `seed`) with its RMSNorm weights and layer_scalar buffers away
    from 1 (generator seed + 1), and more(layer, generator) applied to each layer after its layer_scalar."""
    torch.manual_seed(seed)
    model = Gemma4ForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    perturb_norms(model, gen)
    with torch.no_grad():
        for layer in model.model.layers:  # away from 1, so that a scalar skipped shows
            layer.layer_scalar.copy_(0.5 + torch.rand(1, generator=gen))
            if more:
                more(layer, gen)
    return model


def gemma4_save(model, out, fast, bos, **load):
    """Saves model in bfloat16 into out, reloads it in float64 (with `load`'s options) and writes what it computes
    from the prompts (BOS first)."""
    model.to(torch.bfloat16).save_pretrained(out)
    model = Gemma4ForCausalLM.from_pretrained(out, dtype=torch.float64, **load).eval()
    ids = [[bos] + fast(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    np.savez_compressed(out / "expected.npz", **expected(model, ids))
    print(f"{out.name}: vocab {model.config.vocab_size}, prompts of {[len(i) for i in ids]} tokens -> {out}")
    return model


def gemma4_tokenizer(out):
    """The byte-level BPE with Gemma 4's specials and chat template, saved into out with add_bos_token (Gemma's
    tokenizers put <bos> first): (tokenizer, fast tokenizer, (bos, eos, end-of-turn ids))."""
    tk = byte_level_tokenizer(GEMMA4_SPECIALS, 360)
    template = (TEMPLATES / "google-gemma-4.jinja").read_text()
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<turn|>", pad_token="<pad>",
                                   chat_template=template)
    fast.save_pretrained(out)
    tcfg = json.loads((out / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps({**tcfg, "add_bos_token": True}, indent=2) + "\n")
    bos, eos, turn_end = tk.token_to_id("<bos>"), tk.token_to_id("<eos>"), tk.token_to_id("<turn|>")
    assert (tk.token_to_id("<pad>"), eos, bos) == (0, 1, 2)
    return tk, fast, (bos, eos, turn_end)


def gemma4():
    out = DATA / "gemma4"
    out.mkdir(parents=True, exist_ok=True)
    tk, fast, (bos, eos, turn_end) = gemma4_tokenizer(out)
    types = ["sliding_attention", "sliding_attention", "full_attention"] * 2
    cfg = Gemma4TextConfig(
        vocab_size=tk.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
        attention_k_eq_v=True, layer_types=types, sliding_window=8, num_kv_shared_layers=2,
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=tk.get_vocab_size(), use_double_wide_mlp=True,
        final_logit_softcapping=30.0, max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.1,
        rope_parameters=GEMMA4_ROPE,
        bos_token_id=bos, eos_token_id=[eos, turn_end], pad_token_id=0, tie_word_embeddings=True)
    assert cfg.kv_sharing_modes == [None, None, "store", "store", "reuse", "reuse"], cfg.kv_sharing_modes
    gemma4_save(gemma4_model(cfg, 42), out, fast, bos)


def gemma4_moe():
    out = DATA / "gemma4_moe"
    out.mkdir(parents=True, exist_ok=True)
    tk, fast, (bos, eos, turn_end) = gemma4_tokenizer(out)
    cfg = Gemma4TextConfig(
        vocab_size=tk.get_vocab_size(), hidden_size=64, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
        attention_k_eq_v=True, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        sliding_window=8, num_kv_shared_layers=0, hidden_size_per_layer_input=0,
        enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=16,
        final_logit_softcapping=30.0, max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.1,
        rope_parameters=GEMMA4_ROPE,
        bos_token_id=bos, eos_token_id=[eos, turn_end], pad_token_id=0, tie_word_embeddings=True)
    def router_scales(layer, gen):  # away from 1, so that a scale skipped shows
        layer.router.scale.copy_(0.5 + torch.rand(layer.router.scale.shape, generator=gen))
        layer.router.per_expert_scale.copy_(0.5 + torch.rand(layer.router.per_expert_scale.shape, generator=gen))

    model = gemma4_model(cfg, 52, router_scales)
    # the experts' eager loop (the default grouped_mm has no float64)
    model = gemma4_save(model, out, fast, bos, experts_implementation="eager")
    assert model.config._experts_implementation == "eager"


if __name__ == "__main__":
    torch.set_num_threads(1)
    for fam in sys.argv[1:] or ["smollm3"]:
        globals()[fam]()
