"""Writes tests/reference/data/qwen35-tiny/: a tiny random-weight Qwen3.5
text checkpoint made by transformers itself (Qwen3_5ForCausalLM), and the
logits and greedy tokens transformers computes for it (expected.npz).

    /work/torchvenv/bin/python tests/reference/make_qwen35_fixture.py

Needs torch and transformers (>= 5.x, which has qwen3_5); `make test` only
reads the files it writes. The shape keeps every feature of the block:
three Gated DeltaNet layers and one gated full-attention layer
(layer_types), fewer linear key heads than value heads (2 and 4: the
grouping llama.cpp's converter reorders), partial rotary (a quarter of the
head), untied output. The weights are drawn wider than transformers' init
(which sets the norms to 0 and the projections to std 0.02) so that every
tensor moves the logits. The vocabulary is the 98-token byte-level BPE of
tests/integration/test_hf_checkpoint.py's tiny_tokenizer."""
import json
import pathlib

import numpy as np
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

OUT = pathlib.Path(__file__).resolve().parent / "data" / "qwen35-tiny"
VOCAB = 98


def tokenizer():
    vocab = [chr(33 + i) for i in range(94)] + ["Ġ", "!\""]
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(vocab)}, [("!", "\"")]))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True) for t in ["<|endoftext|>", "<|im_end|>"]])
    return tk


def randomize(model, seed):
    """Weights wider than transformers' init, drawn in parameter order from one seeded generator; routers
    (mlp.gate, the experts' fixtures) x3 so that tokens disagree on experts."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                continue  # transformers' log(uniform(0.01, 16)): a real decay range
            if name.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif name.endswith("linear_attn.norm.weight"):  # the gated norm: w, not 1 + w
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.2)
            elif "norm" in name:  # zero-centred norms: 1 + w
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
            elif "conv1d" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.4)
            else:
                scale = 3.0 if name.endswith("mlp.gate.weight") else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=g) / np.sqrt(p.shape[-1]))


def save_fixture(model, out, seed, script):
    """model's folder into out (save_pretrained, the tokenizer files), and what transformers computes for it
    (expected.npz: three seeded prompts, their logits, their 12 greedy tokens by generate's cached decode).
    Returns the greedy tokens."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer().save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|endoftext|>", "add_bos_token": False,
         "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}))
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, VOCAB, n).tolist() for n in (5, 13, 40)]
    logits, greedy = [], []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p])
            logits.append(model(ids).logits[0].numpy().astype(np.float32))
            gen = model.generate(ids, max_new_tokens=12, do_sample=False, use_cache=True)
            greedy.append(gen[0, len(p):].tolist())
    np.savez(out / "expected.npz", **{f"prompt{i}": np.array(p, np.int32) for i, p in enumerate(prompts)},
             **{f"logits{i}": x for i, x in enumerate(logits)},
             **{f"greedy{i}": np.array(t, np.int32) for i, t in enumerate(greedy)})
    (out / "README").write_text(f"Made by tests/reference/{script} (transformers "
                                f"{__import__('transformers').__version__}, torch {torch.__version__}).\n")
    return greedy


def main():
    torch.manual_seed(31)
    cfg = Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        bos_token_id=None, eos_token_id=96, pad_token_id=None)
    model = Qwen3_5ForCausalLM(cfg).eval().to(torch.float32)
    randomize(model, 31)
    save_fixture(model, OUT, 31, "make_qwen35_fixture.py")
    print({f.name: f.stat().st_size for f in OUT.iterdir()})


if __name__ == "__main__":
    main()
