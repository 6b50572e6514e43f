"""Writes the gpt-oss fixture of tests/reference/test_gptoss.py with Hugging
Face `transformers` itself (run by hand, never by `make test`):

    /work/torchvenv/bin/python tests/reference/gptoss_fixtures.py

A tiny random-weight GptOssForCausalLM (transformers' own config and model
classes, weights from a seeded generator, saved by save_pretrained) in the
layout of every fixture (data/gpt_oss: the checkpoint, the tiny
byte-level BPE tokenizer of moe_fixtures.py, expected.npz with the logits of
every position of three token sequences in float32 and HF's router choices
of layer 0, greedy.json with 8 greedy tokens of model.generate). Chosen so
that every gpt-oss feature changes the logits: a sliding window of 8 keys
on layer 0 (the sequences run to 22 tokens), YaRN (factor 4 over an
original context of 64: the ramp lies inside the frequencies), learned
sinks of unit scale (2σ), expert pre-activations past the SwiGLU clamp of
7 (the experts' matrices ×6), biases everywhere, head_dim 64 with GQA;
every weight a bfloat16 value, saved as BF16, the logits computed in float32.
"""
import pathlib
import sys

import torch
import transformers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from moe_fixtures import finish_fixture  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "data" / "gpt_oss"
CONFIG = dict(vocab_size=98, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, num_local_experts=8, num_experts_per_tok=2, sliding_window=8,
              max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
              layer_types=["sliding_attention", "full_attention"],
              rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                               "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 64},
              bos_token_id=None, eos_token_id=97, pad_token_id=None)


def randomize(model, seed):
    """Matrices N(0, 1/fan_in) (routers ×3, experts ×6: past the clamp), norms 1 + N(0, 0.3²),
    sinks N(0, 2²), other biases N(0, 0.5²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("sinks"):
                p.copy_(2.0 * torch.randn(p.shape, generator=g))
            elif name.endswith("_bias") or name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "experts" in name:  # [E, in, out]: fan-in is dim 1
                p.copy_(6.0 * torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
            else:
                scale = 3.0 if name.endswith("router.weight") else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def main():
    torch.manual_seed(0)
    cfg = transformers.GptOssConfig(**CONFIG)
    model = transformers.GptOssForCausalLM(cfg).eval()
    randomize(model, 130)
    with torch.no_grad():  # bf16 values (half the bytes on disk), computed in float32
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    OUT.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(OUT)
    # the saved checkpoint reloaded in float32 with the modeling file's own paths: eager_attention_forward
    # (the sinks as written there) and GptOssExperts.forward's loop (the default grouped_mm kernel differs
    # from it, and from a float64 run, by up to 8e-3 in these logits on the CPU)
    model = transformers.GptOssForCausalLM.from_pretrained(OUT, dtype=torch.float32, attn_implementation="eager",
                                                           experts_implementation="eager").eval()
    assert model.config._experts_implementation == "eager" and model.config._attn_implementation == "eager"
    finish_fixture(OUT, model, model.model.layers[0].mlp.router)


if __name__ == "__main__":
    main()
