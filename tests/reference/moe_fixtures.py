"""Writes the mixture-of-experts fixtures of tests/reference/test_moe.py with
Hugging Face `transformers` itself (run by hand, never by `make test`):

    /work/torchvenv/bin/python tests/reference/moe_fixtures.py

For each family (qwen3_moe, qwen2_moe, mixtral) a tiny random-weight
checkpoint — transformers' own config class and model class, weights drawn
from a seeded generator (scaled so that the router spreads the tokens over
its experts), saved by save_pretrained — with a tiny byte-level BPE
tokenizer (the `tokenizers` package), and what transformers computes from
it in float32: expected.npz (the logits of every position of three token
sequences, and HF's router choices of layer 0) and greedy.json (a text
prompt's ids and the 8 tokens model.generate picks greedily). The files
stay small (well under 1 MB a family) so the tests read them without torch.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

OUT = pathlib.Path(__file__).resolve().parent / "data"  # one folder per family, as every fixture of tests/reference
SEQS = [[5, 17, 60, 33, 2, 90, 41, 41, 7, 12, 80, 3], list(range(30, 52)), [93, 1, 64, 8, 8, 70, 25]]
PROMPT = "MoE:experts{route}"

COMMON = dict(vocab_size=98, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
              num_experts_per_tok=2, bos_token_id=None, eos_token_id=97, pad_token_id=None)
FAMILIES = {
    # layer 1 dense (mlp_only_layers): the mix of sparse and dense layers; renormalised top-k
    "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                  dict(num_experts=8, moe_intermediate_size=32, intermediate_size=64, norm_topk_prob=True,
                       mlp_only_layers=[1], decoder_sparse_step=1, rope_theta=1000000.0)),
    # the sigmoid-gated shared expert, top-k weights as routed, Q/K/V biases
    "qwen2_moe": (transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM,
                  dict(num_experts=8, moe_intermediate_size=32, intermediate_size=64,
                       shared_expert_intermediate_size=40, norm_topk_prob=False, qkv_bias=True)),
    # Llama attention (Q/K permuted for GGUF), 8 experts of intermediate_size, top 2 renormalised
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM,
                dict(num_local_experts=8, intermediate_size=32, rope_theta=1000000.0)),
}


def tokenizer():
    """95 printable ASCII symbols, 'Ġ', one merge ("!" + '"'), two specials (ids 96, 97)."""
    vocab = [chr(33 + i) for i in range(94)] + ["Ġ", "!\""]
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(vocab)}, [("!", "\"")]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True) for t in ["<|endoftext|>", "<|im_end|>"]])
    return tk


def randomize(model, seed):
    """Weights of unit scale: matrices N(0, 1/cols) (routers ×3, so that tokens disagree on experts),
    norms 1 + N(0, 0.3²), biases N(0, 0.5²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                scale = 3.0 if name.endswith(("mlp.gate.weight", "block_sparse_moe.gate.weight")) else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def run(model, tk, router):
    """What transformers computes: the logits of SEQS, the experts `router` (a module whose output's
    third item is the chosen ids) picked for them, PROMPT's ids and its 8 greedy tokens."""
    routed, logits = [], []
    with torch.no_grad():
        for s in SEQS:
            captured = {}
            h = router.register_forward_hook(lambda m, a, o: captured.__setitem__("idx", o[2]))
            logits.append(model(torch.tensor([s])).logits[0].float().numpy())
            h.remove()
            routed.append(captured["idx"].numpy().astype(np.int32))
        prompt_ids = tk.encode(PROMPT).ids
        gen = model.generate(torch.tensor([prompt_ids]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return logits, routed, prompt_ids, gen[0, len(prompt_ids):].tolist()


def save_expected(out, logits, routed, prompt_ids, greedy):
    """expected.npz (SEQS, their logits, the router choices) and greedy.json into out; the folder's bytes."""
    np.savez_compressed(out / "expected.npz", **{f"seq{j}": np.asarray(s, np.int32) for j, s in enumerate(SEQS)},
                        **{f"logits{j}": l for j, l in enumerate(logits)},
                        **{f"routed{j}": r for j, r in enumerate(routed)})
    (out / "greedy.json").write_text(json.dumps({"prompt": PROMPT, "prompt_ids": prompt_ids, "greedy": greedy,
                                                 "transformers": transformers.__version__,
                                                 "torch": torch.__version__}) + "\n")
    return sum(f.stat().st_size for f in out.iterdir())


def finish_fixture(out, model, router):
    """The tokenizer files, then what transformers computes (run) into expected.npz and greedy.json."""
    tk = tokenizer()
    tk.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>",
                                                           "tokenizer_class": "PreTrainedTokenizerFast"}))
    logits, routed, prompt_ids, greedy = run(model, tk, router)
    size = save_expected(out, logits, routed, prompt_ids, greedy)
    print(f"{out.name}: {size} bytes, greedy {greedy}", file=sys.stderr)


def main():
    torch.manual_seed(0)
    for i, (fam, (cfg_cls, model_cls, extra)) in enumerate(FAMILIES.items()):
        kw = dict(COMMON, **extra)
        cfg = cfg_cls(**kw)
        model = model_cls(cfg).eval()
        randomize(model, 100 + i)
        out = OUT / fam
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        # router choices of layer 0 (the tests check that sequences disagree on experts)
        finish_fixture(out, model, model.model.layers[0].mlp.gate)


if __name__ == "__main__":
    main()
