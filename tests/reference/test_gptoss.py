"""gpt-oss against transformers itself and the float64 reference
(gptoss_ref.py).

The fixture (tests/reference/data/gpt_oss/, written by
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
import pathlib
import sys

import gguf
import numpy as np
import pytest
from gguf_copy import finish
from gptoss_ref import GptOssRef
from test_forward import check_against_reference, run_plan, schedule

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
FIX = pathlib.Path(__file__).resolve().parent / "data" / "gpt_oss"


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


def write_gguf(path, edit=None, keys_edit=None, experts=None):
    """The fixture's weights as llama.cpp's converter writes gpt-oss (its convert_hf_to_gguf.py
    GptOssModel: gate_up_proj transposed and split into gate (even) and up (odd) rows, down_proj
    transposed, sinks as attn_sinks.weight), written by the gguf package in F32; experts: a
    gguf.GGMLQuantizationType the expert matrices are quantized to by the gguf package (MXFP4, as
    the gpt-oss GGUF release stores them)."""
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
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if experts is not None and name.endswith("_exps.weight"):
            w.add_tensor(name, gguf.quants.quantize(arr, experts), raw_dtype=experts)
        else:
            w.add_tensor(name, arr)
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


def test_sinks_change_the_logits(tool, tmp_path):
    """A forward that ignored the learned sinks would be caught: the float64 reference without
    them is far from tram (and from transformers), with them within 1e-5."""
    seqs, _, _ = expected()
    path = write_gguf(tmp_path / "gpt-oss.gguf")
    got, _ = run_plan(tool, tmp_path, path, seqs, threads=1)
    for sinks, lo, hi in ((True, 0, 1e-5), (False, 5e-2, np.inf)):
        ref = GptOssRef(path, sinks=sinks)
        err = max((np.linalg.norm(g - r, axis=1) / np.linalg.norm(r, axis=1)).max()
                  for g, r in zip(got, (ref.forward(s) for s in seqs)))
        assert lo <= err < hi, (sinks, err)


ARITH = {"exact": {}, "fast_q8": dict(precision="fast", quantize="Q8_0")}  # fast: repacked quantized experts


@pytest.mark.parametrize("arith", list(ARITH))
def test_batch_invariant(arith, tool, tmp_path):
    """Each sequence alone on one thread = the same sequence in mixed prefill chunks and in decode
    steps on two threads, bit for bit: sinks, windows and experts included (the sequences' tokens
    chose different experts in transformers' own routing)."""
    seqs, _, routed = expected()
    sets = [set(r.reshape(-1).tolist()) for r in routed]
    assert len(set().union(*sets)) >= 6 and len({frozenset(s) for s in sets}) == len(sets)
    opts = ARITH[arith]
    alone, _ = run_plan(tool, tmp_path, FIX, seqs, [[len(x) if s == k else 0 for s, x in enumerate(seqs)]
                                                    for k in range(len(seqs))], threads=1, **opts)
    steps = schedule([len(s) for s in seqs], lambda k, s, left, done: [3, 7, 4][s] if k == 0 else 1 + (k + s) % 3)
    mixed, paths = run_plan(tool, tmp_path, FIX, seqs, steps, block_size=4, num_blocks=24, shuffle_seed=5,
                            threads=2, **opts)
    assert "varlen" in paths
    decode, dpaths = run_plan(tool, tmp_path, FIX, seqs, schedule([len(s) for s in seqs],
                                                                   lambda k, s, left, done: 1), threads=2, **opts)
    assert "decode" in dpaths
    for run in (mixed, decode):
        for g, a in zip(run, alone):
            assert np.array_equal(g.view(np.uint32), a.view(np.uint32))


def test_greedy_matches_transformers(tram_bin, tmp_path):
    from test_engine import generate, ids_of
    g = json.loads((FIX / "greedy.json").read_text())
    reqs = [{"prompt": g["prompt"], "max_tokens": len(g["greedy"]), "temperature": 0, "ignore_eos": True},
            {"prompt": "zz" + g["prompt"][::-1], "max_tokens": 5, "temperature": 0, "ignore_eos": True}]
    out, _ = generate(tram_bin, FIX, tmp_path, reqs, "--max-seqs", "4")
    assert ids_of(out[0]) == [g["greedy"]]


def test_engine_batch_invariant(tram_bin, tmp_path):
    import random
    from test_model_families import check_serves_batch_invariant
    check_serves_batch_invariant(tram_bin, FIX, tmp_path, random.Random(30))


def test_serves_openai_client(tmp_path):
    """`tram serve -m <gpt_oss folder>` answers the official client with transformers' greedy text,
    and /model_info names gpt-oss and GptOssForCausalLM."""
    from test_moe import check_serves_greedy
    check_serves_greedy(tmp_path, FIX, "gpt-oss", ["GptOssForCausalLM"])


def load_error(tool, tmp_path, model):
    from test_moe import load_error as moe_load_error
    return moe_load_error(tool, tmp_path, model)


def hf_copy(tmp_path, cfg_edit):
    d = tmp_path / "gpt_oss"
    d.mkdir()
    for f in FIX.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((d / "config.json").read_text())
    cfg_edit(cfg)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def rope_edit(**kw):
    return lambda c: c["rope_parameters"].update(kw)


HF_REFUSALS = {
    "mxfp4": (lambda c: c.update(quantization_config={"quant_method": "mxfp4"}), "quantization_config (mxfp4)"),
    "layer_types": (lambda c: c.update(layer_types=["full_attention", "sliding_attention"]),
                    "layer_types[0] is not \"sliding_attention\""),
    "swiglu_limit": (lambda c: c.update(swiglu_limit=5.0), "swiglu_limit must be 7"),
    "no_attention_bias": (lambda c: c.update(attention_bias=False), "attention_bias false"),
    "yarn_mscale": (rope_edit(mscale=1.0, mscale_all_dim=1.0), "rope_parameters.mscale"),
    "yarn_no_factor": (lambda c: c["rope_parameters"].pop("factor"), "rope_parameters.factor is missing"),
    "rope_longrope": (rope_edit(rope_type="longrope"), "rope_parameters type \"longrope\" is not one tram runs"),
    "rope_missing": (lambda c: c.pop("rope_parameters"), "rope_scaling / rope_parameters is missing"),
    "yarn_truncate_not_bool": (rope_edit(truncate="no"), "rope_parameters.truncate is not a boolean"),
}


def v4_rope(c):
    """The released gpt-oss config.json's form (transformers 4): rope_theta at the top, rope_scaling."""
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta")
    c["rope_scaling"] = rp


def test_transformers4_config_form(tool, tmp_path):
    """rope_scaling and a top-level rope_theta (how openai/gpt-oss-20b's config.json spells them) give
    the same bits as transformers 5's rope_parameters; YaRN's truncate left out (transformers'
    default: the range rounded) changes them."""
    seqs, _, _ = expected()
    want, _ = run_plan(tool, tmp_path, FIX, seqs, threads=1)
    got, _ = run_plan(tool, tmp_path, hf_copy(tmp_path, v4_rope), seqs, threads=1)
    for a, b in zip(got, want):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    d = tmp_path / "rounded"
    d.mkdir()
    rounded, _ = run_plan(tool, d, hf_copy(d, lambda c: c["rope_parameters"].pop("truncate")), seqs, threads=1)
    assert not np.array_equal(rounded[1], want[1])


@pytest.mark.parametrize("name", list(HF_REFUSALS))
def test_hf_refusals(name, tool, tmp_path):
    edit, msg = HF_REFUSALS[name]
    err = load_error(tool, tmp_path, hf_copy(tmp_path, edit))
    assert msg in err, err


GGUF_REFUSALS = {
    "no_sinks": (dict(edit=lambda t: t.pop("blk.1.attn_sinks.weight")), "tensor 'blk.1.attn_sinks.weight' is missing"),
    "sinks_shape": (dict(edit=lambda t: t.update({"blk.0.attn_sinks.weight": np.zeros(3, np.float32)})),
                    "tensor 'blk.0.attn_sinks.weight' has shape [3], the hyper-parameters need [4]"),
    "no_expert_bias": (dict(edit=lambda t: t.pop("blk.0.ffn_down_exps.bias")),
                       "tensor 'blk.0.ffn_down_exps.bias' is missing"),
    "no_router_bias": (dict(edit=lambda t: t.pop("blk.1.ffn_gate_inp.bias")),
                       "tensor 'blk.1.ffn_gate_inp.bias' is missing"),
    "rope_linear": (dict(keys_edit=lambda k: k.update({"rope.scaling.type": "longrope"})),
                    "gpt-oss.rope.scaling.type' is \"longrope\""),
    "yarn_no_factor": (dict(keys_edit=lambda k: k.pop("rope.scaling.factor")),
                       "gpt-oss.rope.scaling.factor' is missing"),
    "unknown_key": (dict(keys_edit=lambda k: k.update({"rope.scaling.yarn_log_multiplier": 0.1})),
                    "gpt-oss.rope.scaling.yarn_log_multiplier' is not something tram handles"),
}


@pytest.mark.parametrize("name", list(GGUF_REFUSALS))
def test_gguf_refusals(name, tool, tmp_path):
    kw, msg = GGUF_REFUSALS[name]
    err = load_error(tool, tmp_path, write_gguf(tmp_path / "bad.gguf", **kw))
    assert msg in err, err


def test_mxfp4_experts(tool, tmp_path):
    """Experts in MXFP4 (what the gpt-oss GGUF release stores; quantized here by the gguf package):
    tram's logits are the float64 reference's on the same file (dequantized by the gguf package),
    rel. L2 < 1e-3 and the same argmax, not the F32 file's, and the same bits alone on one thread as
    in mixed prefill/decode batches on two."""
    seqs, _, _ = expected()
    path = write_gguf(tmp_path / "mxfp4.gguf", experts=gguf.GGMLQuantizationType.MXFP4)
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(str(path)).tensors}
    assert types["blk.1.ffn_down_exps.weight"] == gguf.GGMLQuantizationType.MXFP4
    alone, _ = run_plan(tool, tmp_path, path, seqs, [[len(x) if s == k else 0 for s, x in enumerate(seqs)]
                                                     for k in range(len(seqs))], threads=1)
    ref = GptOssRef(path)
    check_against_reference(alone, [ref.forward(s) for s in seqs])
    f32, _ = run_plan(tool, tmp_path, write_gguf(tmp_path / "f32.gguf"), seqs, threads=1)
    assert max(np.abs(a - b).max() for a, b in zip(alone, f32)) > 1e-2  # the experts' rounding shows
    steps = schedule([len(s) for s in seqs], lambda k, s, left, done: [3, 7, 4][s] if k == 0 else 1 + (k + s) % 3)
    mixed, paths = run_plan(tool, tmp_path, path, seqs, steps, block_size=4, num_blocks=24, shuffle_seed=5,
                            threads=2)
    assert "varlen" in paths and "decode" in paths
    for g, a in zip(mixed, alone):
        assert np.array_equal(g.view(np.uint32), a.view(np.uint32))
