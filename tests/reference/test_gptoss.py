"""gpt-oss against transformers itself and the float64 reference
(gptoss_ref.py).

The fixture (tests/reference/fixtures/moe/gpt_oss/, written by
gptoss_fixtures.py with transformers 5.23) is a tiny random-weight
GptOssForCausalLM (BF16 weights) and what transformers computed from it.
Through tram's real forward path (tests/tools/forward.c: paged cache,
attention metadata, model_forward) it must give:
- from the Hugging Face folder, transformers' logits (rel. L2 < 1e-3 at
  every position, the same argmax);
- from a GGUF file the `gguf` package writes from the same weights with
  llama.cpp's gpt-oss names and keys, the same logits bit for bit, and the
  float64 reference's — the reference itself agreeing with transformers;
- logits that the learned sinks change: the reference without sinks is far
  from tram (so a forward that ignored them would fail above);
- the same bits for every sequence alone on one thread and in mixed
  prefill/decode batches on two threads, with the sequences' tokens on
  other experts (transformers' router choices, in the fixture);
- transformers' greedy tokens through `tram generate`, and through
  `tram serve` with the official `openai` client.
What tram does not run is refused at load with one line naming it."""
import json
import os
import pathlib
import subprocess
import sys

import gguf
import numpy as np
import pytest
from gguf_copy import finish
from gptoss_ref import GptOssRef
from test_forward import check_against_reference, run_plan, schedule

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
FIX = pathlib.Path(__file__).resolve().parent / "fixtures" / "moe" / "gpt_oss"


def expected():
    z = np.load(FIX / "expected.npz")
    n = sum(k.startswith("seq") for k in z.files)
    return ([z[f"seq{j}"].tolist() for j in range(n)], [z[f"logits{j}"] for j in range(n)],
            [z[f"routed{j}"] for j in range(n)])


def load_safetensors(path):
    """A safetensors file read by hand (numpy has no bfloat16): name → float32 array."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    head, base, out = json.loads(raw[8:8 + n]), 8 + n, {}
    for name, info in head.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a:base + b]
        if info["dtype"] == "BF16":
            arr = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, {"F32": np.float32, "F16": np.float16}[info["dtype"]]).astype(np.float32)
        out[name] = arr.reshape(info["shape"])
    return out


def write_gguf(path, edit=None, keys_edit=None):
    """The fixture's weights as llama.cpp's converter writes gpt-oss (its convert_hf_to_gguf.py
    GptOssModel: gate_up_proj transposed and split into gate (even) and up (odd) rows, down_proj
    transposed, sinks as attn_sinks.weight), written by the gguf package in F32."""
    cfg = json.loads((FIX / "config.json").read_text())
    st = load_safetensors(FIX / "model.safetensors")
    L = cfg["num_hidden_layers"]
    t = {"token_embd.weight": st["model.embed_tokens.weight"], "output_norm.weight": st["model.norm.weight"],
         "output.weight": st["lm_head.weight"]}
    hfmap = {"input_layernorm.weight": "attn_norm.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight",
             "self_attn.sinks": "attn_sinks.weight", "mlp.router.weight": "ffn_gate_inp.weight",
             "mlp.router.bias": "ffn_gate_inp.bias"}
    for m, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")):
        for s in ("weight", "bias"):
            hfmap[f"self_attn.{m}_proj.{s}"] = f"attn_{g}.{s}"
    for l in range(L):
        p = f"model.layers.{l}."
        for hf, g in hfmap.items():
            t[f"blk.{l}.{g}"] = st[p + hf]
        gu = st[p + "mlp.experts.gate_up_proj"].transpose(0, 2, 1)  # (E, 2F, D)
        gub = st[p + "mlp.experts.gate_up_proj_bias"]
        t[f"blk.{l}.ffn_gate_exps.weight"], t[f"blk.{l}.ffn_up_exps.weight"] = gu[:, ::2], gu[:, 1::2]
        t[f"blk.{l}.ffn_gate_exps.bias"], t[f"blk.{l}.ffn_up_exps.bias"] = gub[:, ::2], gub[:, 1::2]
        t[f"blk.{l}.ffn_down_exps.weight"] = st[p + "mlp.experts.down_proj"].transpose(0, 2, 1)
        t[f"blk.{l}.ffn_down_exps.bias"] = st[p + "mlp.experts.down_proj_bias"]
    if edit:
        edit(t)
    rp = cfg["rope_parameters"]
    a = "gpt-oss"
    keys = {"block_count": L, "context_length": cfg["max_position_embeddings"], "embedding_length": cfg["hidden_size"],
            "feed_forward_length": cfg["intermediate_size"], "attention.head_count": cfg["num_attention_heads"],
            "attention.head_count_kv": cfg["num_key_value_heads"], "attention.key_length": cfg["head_dim"],
            "attention.value_length": cfg["head_dim"], "vocab_size": cfg["vocab_size"],
            "expert_count": cfg["num_local_experts"], "expert_used_count": cfg["num_experts_per_tok"],
            "expert_feed_forward_length": cfg["intermediate_size"], "attention.sliding_window": cfg["sliding_window"],
            "rope.scaling.original_context_length": rp["original_max_position_embeddings"],
            "attention.layer_norm_rms_epsilon": float(cfg["rms_norm_eps"]), "rope.freq_base": float(rp["rope_theta"]),
            "rope.scaling.factor": float(rp["factor"]), "rope.scaling.type": "yarn"}
    if keys_edit:
        keys_edit(keys)
    w = gguf.GGUFWriter(str(path), a)
    for k, v in keys.items():
        if isinstance(v, str):
            w.add_string(f"{a}.{k}", v)
        elif isinstance(v, float):
            w.add_float32(f"{a}.{k}", v)
        else:
            w.add_uint32(f"{a}.{k}", v)
    for name, arr in t.items():
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    finish(w)
    return path


def test_matches_transformers_from_both_formats(tool, tmp_path):
    seqs, want, _ = expected()
    hf_logits, paths = run_plan(tool, tmp_path, FIX, seqs, threads=1)
    assert paths == ["varlen"]
    check_against_reference(hf_logits, want)
    path = write_gguf(tmp_path / "gpt-oss.gguf")
    gguf_logits, _ = run_plan(tool, tmp_path, path, seqs, threads=1)
    for a, b in zip(hf_logits, gguf_logits):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    ref = GptOssRef(path)
    ref_logits = [ref.forward(s) for s in seqs]
    check_against_reference([r.astype(np.float32) for r in ref_logits], want)  # the reference vs transformers
    check_against_reference(gguf_logits, ref_logits)
