"""Writes the hybrid mixture-of-experts fixtures of test_qwen35moe.py with
transformers itself (run by hand, never by `make test`):

    /work/torchvenv/bin/python tests/reference/make_qwen35moe_fixture.py

  data/qwen35moe-tiny   Qwen3_5MoeForCausalLM (model_type qwen3_5_moe_text):
                        Qwen3.5's Gated DeltaNet and gated attention, every
                        layer's MLP a sparse block (softmax top-k, always
                        renormalised) with the sigmoid-gated shared expert;
                        transformers saves its experts stacked
                        (mlp.experts.gate_up_proj [E, 2 F, dim], down_proj).
  data/qwen3next-tiny   Qwen3NextForCausalLM: the same blocks with Qwen3-Next's
                        fused projections (in_proj_qkvz and in_proj_ba, laid
                        out per key-head group), one dense layer
                        (mlp_only_layers), experts saved one by one.

Each: three linear-attention layers and one full-attention layer, 2 key and
4 value heads in the linear layers (the grouping llama.cpp's converter
reorders), partial rotary, untied output, 8 experts of which 2 per token,
and what transformers computes in float32 (expected.npz: the logits of
three prompts, their 12 greedy tokens by generate's cached decode). The
weights are drawn wider than transformers' init (routers x3, so tokens
disagree on experts). The vocabulary is make_qwen35_fixture.py's."""
import pathlib

import torch
import transformers
from make_qwen35_fixture import VOCAB, randomize, save_fixture

DATA = pathlib.Path(__file__).resolve().parent / "data"
COMMON = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
              linear_conv_kernel_dim=4, linear_key_head_dim=8, linear_value_head_dim=8,
              linear_num_key_heads=2, linear_num_value_heads=4,
              layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
              num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24,
              bos_token_id=None, eos_token_id=96, pad_token_id=None)
FAMILIES = {
    "qwen35moe-tiny": (transformers.Qwen3_5MoeTextConfig, transformers.Qwen3_5MoeForCausalLM, {}),
    "qwen3next-tiny": (transformers.Qwen3NextConfig, transformers.Qwen3NextForCausalLM,
                       dict(intermediate_size=40, decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=True)),
}


def main():
    for i, (fam, (cfg_cls, model_cls, extra)) in enumerate(FAMILIES.items()):
        torch.manual_seed(35 + i)
        model = model_cls(cfg_cls(**dict(COMMON, **extra))).eval().to(torch.float32)
        randomize(model, 35 + i)
        out = DATA / fam
        greedy = save_fixture(model, out, 35 + i, "make_qwen35moe_fixture.py")
        print(fam, {f.name: f.stat().st_size for f in out.iterdir()}, greedy)


if __name__ == "__main__":
    main()
