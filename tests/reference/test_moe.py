"""Mixture-of-experts families (qwen3_moe, qwen2_moe, Mixtral) against
transformers itself and the float64 reference (moe_ref.py).

The fixtures (tests/reference/data/<family>/, written by moe_fixtures.py with
transformers 5.23) are tiny random-weight checkpoints and what transformers
computed from them. Each family must give, through tram's real forward path
(tests/tools/forward.c: paged cache, attention metadata, model_forward):
- from the Hugging Face folder, transformers' logits (rel. L2 < 1e-3 at
  every position, the same argmax);
- from a GGUF file the `gguf` package writes from the same safetensors with
  llama.cpp's names and keys (stacked experts, or one tensor per expert as
  older files have them; Q/K permuted for Mixtral), the same logits bit for
  bit, and the float64 reference's (< 1e-3) — the
  reference itself agreeing with transformers;
- the same bits for every sequence whether it runs alone on one thread or
  in mixed prefill/decode batches on two, with sequences whose tokens chose
  other experts (transformers' own router choices, recorded in the fixture);
- the expert MLPs each step ran: exactly the union of those its rows chose;
- transformers' greedy tokens through the engine (`tram generate`), and
  the same through `tram serve` and the official `openai` client; greedy
  and seeded-sampled requests the same alone as arriving into mixed
  batches.
Keys and combinations tram does not run are refused at load with one line
naming them."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from gguf_copy import finish
from hf_gguf import add_f32, hparams, permute
from moe_ref import MoeRef
from safetensors.numpy import load_file, save_file
from test_forward import check_against_reference, run_plan, schedule

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
FIX = pathlib.Path(__file__).resolve().parent / "data"  # data/<family>/, as every fixture of tests/reference
FAMILIES = ["qwen3_moe", "qwen2_moe", "mixtral"]
GGUF_ARCH = {"qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe", "mixtral": "llama"}


def expected(fam):
    z = np.load(FIX / fam / "expected.npz")
    n = sum(k.startswith("seq") for k in z.files)
    return ([z[f"seq{j}"].tolist() for j in range(n)], [z[f"logits{j}"] for j in range(n)],
            [z[f"routed{j}"] for j in range(n)])


def write_gguf(fam, path, extra_keys=(), drop_keys=(), edit=None, apart=False):
    """The fixture's weights as llama.cpp's converter lays them out, written by the gguf package.
    extra_keys: (key, value) pairs added; drop_keys: keys left out; edit(tensors): changes the dict;
    apart: one tensor per expert (blk.N.ffn_gate.E.weight, older llama.cpp files) instead of stacked."""
    cfg = json.loads((FIX / fam / "config.json").read_text())
    st = load_file(FIX / fam / "model.safetensors")
    arch = GGUF_ARCH[fam]
    H, KV, L = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    E = cfg.get("num_experts") or cfg["num_local_experts"]
    t = {"token_embd.weight": st["model.embed_tokens.weight"], "output_norm.weight": st["model.norm.weight"],
         "output.weight": st["lm_head.weight"]}
    hfmap = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
             "mlp.gate.weight": "ffn_gate_inp.weight", "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
             "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
             "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
             "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
             "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight"}
    experts = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down"}
    for l in range(L):
        p = f"model.layers.{l}."
        for hf, g in hfmap.items():
            if p + hf in st:
                w = st[p + hf]
                if fam == "mixtral" and hf.startswith(("self_attn.q_proj", "self_attn.k_proj")):
                    w = permute(w, H if "q_proj" in hf else KV)
                t[f"blk.{l}.{g}"] = w.reshape(-1) if g == "ffn_gate_inp_shexp.weight" else w
        for hf, g in experts.items():
            mid = "block_sparse_moe" if fam == "mixtral" else "mlp"
            names = [f"{p}{mid}.experts.{e}.{hf}.weight" for e in range(E)]
            if names[0] in st and apart:
                t.update({f"blk.{l}.ffn_{g}.{e}.weight": st[n] for e, n in enumerate(names)})
            elif names[0] in st:
                t[f"blk.{l}.ffn_{g}_exps.weight"] = np.stack([st[n] for n in names])
    if edit:
        edit(t)
    keys = {"expert_count": E, "expert_used_count": cfg["num_experts_per_tok"]}
    if fam != "mixtral":  # llama.cpp's Qwen2MoeModel writes these; Mixtral's experts are intermediate_size wide
        keys["expert_feed_forward_length"] = cfg["moe_intermediate_size"]
    if fam == "qwen2_moe":
        keys["expert_shared_feed_forward_length"] = cfg["shared_expert_intermediate_size"]
    w = hparams(path, arch, cfg)
    for k, v in keys.items():
        if k not in drop_keys:
            w.add_uint32(f"{arch}.{k}", v)
    for k, v in extra_keys:
        (w.add_bool if isinstance(v, bool) else w.add_uint32)(f"{arch}.{k}", v)
    for name, arr in t.items():
        add_f32(w, name, arr)
    finish(w)
    return path


@pytest.mark.parametrize("fam", FAMILIES)
def test_matches_transformers_from_both_formats(fam, tool, tmp_path):
    seqs, want, _ = expected(fam)
    hf_logits, paths = run_plan(tool, tmp_path, FIX / fam, seqs, threads=1)
    assert paths == ["varlen"]
    check_against_reference(hf_logits, want)
    path = write_gguf(fam, tmp_path / f"{fam}.gguf")
    gguf_logits, _ = run_plan(tool, tmp_path, path, seqs, threads=1)
    apart_logits, _ = run_plan(tool, tmp_path, write_gguf(fam, tmp_path / "apart.gguf", apart=True), seqs, threads=1)
    for a, b, c in zip(hf_logits, gguf_logits, apart_logits):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert np.array_equal(a.view(np.uint32), c.view(np.uint32))
    ref = MoeRef(path)
    ref_logits = [ref.forward(s) for s in seqs]
    check_against_reference([r.astype(np.float32) for r in ref_logits], want)  # the reference vs transformers
    check_against_reference(gguf_logits, ref_logits)


ARITH = {"exact": {}, "fast_q8": dict(precision="fast", quantize="Q8_0")}  # fast: repacked quantized experts


@pytest.mark.parametrize("arith", list(ARITH))
@pytest.mark.parametrize("fam", FAMILIES)
def test_batch_invariant_across_experts(fam, arith, tool, tmp_path):
    seqs, _, routed = expected(fam)
    opts = ARITH[arith]
    # transformers' own choices in layer 0: the sequences' tokens spread over several experts
    # and the sequences disagree, so a batch's rows go to other experts than a row's own
    sets = [set(r.reshape(-1).tolist()) for r in routed]
    assert len(set().union(*sets)) >= 6 and len({frozenset(s) for s in sets}) == len(sets)
    alone, _ = run_plan(tool, tmp_path, FIX / fam, seqs, [[len(x) if s == k else 0 for s, x in enumerate(seqs)]
                                                          for k in range(len(seqs))], threads=1, **opts)
    steps = schedule([len(s) for s in seqs], lambda k, s, left, done: [3, 7, 4][s] if k == 0 else 1 + (k + s) % 3)
    mixed, paths = run_plan(tool, tmp_path, FIX / fam, seqs, steps, block_size=4, num_blocks=24, shuffle_seed=5,
                            threads=2, **opts)
    assert "varlen" in paths
    decode, dpaths = run_plan(tool, tmp_path, FIX / fam, seqs, schedule([len(s) for s in seqs],
                                                                         lambda k, s, left, done: 1), threads=2,
                              **opts)
    assert "decode" in dpaths
    for run in (mixed, decode):
        for g, a in zip(run, alone):
            assert np.array_equal(g.view(np.uint32), a.view(np.uint32))


@pytest.mark.parametrize("fam", FAMILIES)
def test_each_chosen_expert_runs_once_per_step(fam, tool, tmp_path):
    """Per step and sparse layer, tram runs exactly the experts its rows chose (the float64
    reference's routing), each once however many rows chose it: the expert MLPs a step ran
    (model_runner_experts_run) equal the sizes of those unions."""
    seqs, _, _ = expected(fam)
    ref = MoeRef(write_gguf(fam, tmp_path / f"{fam}.gguf"))
    routes = []
    for s in seqs:
        ref.forward(s)
        routes.append(dict(ref.trace))
    steps = schedule([len(s) for s in seqs], lambda k, s, left, done: [5, 2, 4][s] if k == 0 else 1 + (k + s) % 2)
    want, done = [], [0] * len(seqs)
    for row in steps:
        n = 0
        for p in routes[0]:
            n += len(set().union(*[set(routes[s][p][done[s]:done[s] + q].reshape(-1).tolist())
                                   for s, q in enumerate(row) if q]))
        want.append(n)
        done = [d + q for d, q in zip(done, row)]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": str(FIX / fam), "seqs": seqs, "steps": steps, "out": str(tmp_path / "l")}))
    info = json.loads(subprocess.run([str(tool("forward")), str(plan)], capture_output=True, text=True,
                                     check=True).stdout)
    assert info["experts"] == want
    assert max(want) < len(routes[0]) * ref.k * max(sum(r) for r in steps)  # rows shared experts somewhere


def greedy(fam):
    return json.loads((FIX / fam / "greedy.json").read_text())


@pytest.mark.parametrize("fam", FAMILIES)
def test_greedy_matches_transformers(fam, tram_bin, tmp_path):
    from test_engine import generate, ids_of
    g = greedy(fam)
    reqs = [{"prompt": g["prompt"], "max_tokens": len(g["greedy"]), "temperature": 0, "ignore_eos": True},
            {"prompt": "zz" + g["prompt"][::-1], "max_tokens": 5, "temperature": 0, "ignore_eos": True}]
    out, _ = generate(tram_bin, FIX / fam, tmp_path, reqs, "--max-seqs", "4")
    assert ids_of(out[0]) == [g["greedy"]]
    solo, _ = generate(tram_bin, FIX / fam, tmp_path, reqs[:1], "--max-seqs", "1")
    assert ids_of(solo[0]) == [g["greedy"]]


@pytest.mark.parametrize("fam", FAMILIES)
def test_engine_batch_invariant(fam, tram_bin, tmp_path):
    """Greedy and seeded-sampled requests give the same tokens alone (max_seqs 1) as when they
    arrive at random steps into batches of mixed prefill chunks and decode rows (the check
    tests/integration/test_model_families.py holds the dense families to)."""
    import random
    from test_model_families import check_serves_batch_invariant
    check_serves_batch_invariant(tram_bin, FIX / fam, tmp_path, random.Random(11))


def check_serves_greedy(tmp_path, folder, model_type, architectures=None):
    """`tram serve -m <checkpoint folder>` answers the official client with transformers' greedy text
    (folder/greedy.json); /model_info names model_type (and the architectures, when given)."""
    import openai
    import tram_server
    from tokenizers import Tokenizer
    g = json.loads((folder / "greedy.json").read_text())
    want = Tokenizer.from_file(str(folder / "tokenizer.json")).decode(g["greedy"])
    srv = tram_server.start(tmp_path, "--max-model-len", "128", model=folder)
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x")
        r = client.completions.create(model=srv.get("/v1/models").json()["data"][0]["id"], prompt=g["prompt"],
                                      max_tokens=len(g["greedy"]), temperature=0,
                                      extra_body={"ignore_eos": True, "return_token_ids": True})
        assert r.choices[0].model_extra["token_ids"] == g["greedy"]
        assert r.choices[0].text == want
        j = srv.get("/model_info").json()
        assert j["model_type"] == model_type
        assert architectures is None or j["architectures"] == architectures
    finally:
        assert srv.stop() == 0


def test_serves_openai_client(tmp_path):
    check_serves_greedy(tmp_path, FIX / "qwen3_moe", "qwen3moe")


def test_model_info_names_mixtral(tmp_path):
    """A llama model with experts is Mixtral's: /model_info gives model_type llama (the
    general.architecture the folder reads as) and Hugging Face's MixtralForCausalLM."""
    import tram_server
    srv = tram_server.start(tmp_path, "--max-model-len", "64", model=FIX / "mixtral")
    try:
        j = srv.get("/model_info").json()
        assert (j["model_type"], j["architectures"]) == ("llama", ["MixtralForCausalLM"])
    finally:
        assert srv.stop() == 0


def load_error(tool, tmp_path, model):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": str(model), "seqs": [[1, 2]], "out": str(tmp_path / "x")}))
    # under TRAM_BUILD=build/san: no memory error or UB on the refusal paths (leaks off: the tool exits
    # without freeing its plan; the loader's own error paths are leak-checked in test_model_load.c)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    r = subprocess.run([str(tool("forward")), str(plan)], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
    return r.stderr


def drop_expert(t):
    t["blk.0.ffn_down_exps.weight"] = t["blk.0.ffn_down_exps.weight"][:-1]


GGUF_REFUSALS = {
    "gating_func": ("qwen3_moe", dict(extra_keys=[("expert_gating_func", 2)]), "qwen3moe.expert_gating_func"),
    "weights_scale": ("qwen2_moe", dict(extra_keys=[("expert_weights_scale", 2)]), "qwen2moe.expert_weights_scale"),
    "used_over_count": ("mixtral", dict(drop_keys=["expert_used_count"], extra_keys=[("expert_used_count", 9)]),
                        "llama.expert_used_count' is 9, outside 1..8"),
    "no_expert_count": ("qwen3_moe", dict(drop_keys=["expert_count"]), "qwen3moe.expert_count' is missing"),
    "shared_on_qwen3": ("qwen3_moe", dict(extra_keys=[("expert_shared_feed_forward_length", 8)]),
                        "shared expert for qwen2moe, qwen35moe and qwen3next only"),
    "seven_experts": ("qwen3_moe", dict(edit=drop_expert), "blk.0.ffn_down_exps.weight' has shape [32, 48, 7]"),
    "apart_missing_one": ("mixtral", dict(apart=True, edit=lambda t: t.pop("blk.1.ffn_up.5.weight")),
                          "tensor 'blk.1.ffn_up.5.weight' is missing"),
    "norm_not_bool": ("qwen3_moe", dict(extra_keys=[("expert_weights_norm", 1)]), "expert_weights_norm' is not a boolean"),
}


@pytest.mark.parametrize("name", list(GGUF_REFUSALS))
def test_gguf_refusals(name, tool, tmp_path):
    fam, kw, msg = GGUF_REFUSALS[name]
    err = load_error(tool, tmp_path, write_gguf(fam, tmp_path / "bad.gguf", **kw))
    assert msg in err, err


def hf_copy(tmp_path, fam, cfg_edit=None, st_edit=None):
    d = tmp_path / fam
    d.mkdir()
    for f in (FIX / fam).iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    if cfg_edit:
        cfg = json.loads((d / "config.json").read_text())
        cfg_edit(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
    if st_edit:
        st = load_file(d / "model.safetensors")
        st_edit(st)
        save_file(st, d / "model.safetensors")
    return d


HF_REFUSALS = {
    "mlp_only_out_of_range": ("qwen3_moe", dict(cfg_edit=lambda c: c.update(mlp_only_layers=[5])),
                              "mlp_only_layers[0] is not a whole number in 0..1"),
    "config_says_sparse": ("qwen3_moe", dict(cfg_edit=lambda c: c.update(mlp_only_layers=[])),
                           "layer 1 is sparse by config.json"),
    "sparse_step_zero": ("qwen2_moe", dict(cfg_edit=lambda c: c.update(decoder_sparse_step=0)),
                         "decoder_sparse_step is not a whole number"),
    "missing_expert": ("mixtral", dict(st_edit=lambda s: s.pop("model.layers.1.block_sparse_moe.experts.3.w2.weight")),
                       "layer 1: expert 3's down matrix is missing"),
    "top_k_over_experts": ("qwen2_moe", dict(cfg_edit=lambda c: c.update(num_experts_per_tok=9)),
                           "num_experts_per_tok is not a whole number in 1..8"),
}


@pytest.mark.parametrize("name", list(HF_REFUSALS))
def test_hf_refusals(name, tool, tmp_path):
    fam, kw, msg = HF_REFUSALS[name]
    err = load_error(tool, tmp_path, hf_copy(tmp_path, fam, **kw))
    assert msg in err, err
