"""The hybrids with experts — Qwen3.5-MoE (qwen35moe) and Qwen3-Next
(qwen3next): Gated DeltaNet and gated attention beside a mixture-of-experts
MLP with its sigmoid-gated shared expert — through tram's real forward path
(tests/tools/forward.c: the paged cache for the attention layers, the
recurrent-state pool for the others, the experts routed on the host),
against transformers' own logits and the float64 numpy reference.

The fixtures (data/qwen35moe-tiny, data/qwen3next-tiny, made by
make_qwen35moe_fixture.py with transformers 5.23) are read as the Hugging
Face folders they are (hf/: Qwen3-Next's fused in_proj_qkvz split, its
in_proj_ba kept whole) and as the GGUF files llama.cpp's converter makes of
them (qwen35_gguf.py: stacked experts; tiled value heads for qwen35moe, not
for qwen3next). Both must give transformers' logits (rel. L2 < 1e-3, the
same argmax) and transformers' greedy tokens; the reference is checked
against transformers first. Every kernel is batch-invariant (the routing
included: per row), so chunked prefill, decodes, any batch mix and a
prefix-cache hit (the recurrent state restored from its snapshot) give the
very bits of the prompt run alone. What tram does not run is refused by
name: a layer pattern other than full_attention_interval's, a hybrid
layer without its router or its fused β/α, experts of the wrong shape."""
import json
import pathlib
import subprocess

import numpy as np
import pytest
from gguf_copy import finish, open_copy
from qwen35_gguf import write_gguf
from qwen35_ref import Qwen35Ref
from safetensors.numpy import load_file, save_file
from hybrid_checks import chunks_are_whole, greedy_is, mixed_steps_are_solo, prefix_hit_is_whole
from test_forward import run_plan

DATA = pathlib.Path(__file__).resolve().parent / "data"
FAMILIES = ["qwen35moe-tiny", "qwen3next-tiny"]


@pytest.fixture(scope="module", params=FAMILIES)
def fam(request):
    return request.param


@pytest.fixture(scope="module")
def expected(fam):
    e = np.load(DATA / fam / "expected.npz")
    return [(e[f"prompt{i}"].tolist(), e[f"logits{i}"], e[f"greedy{i}"].tolist()) for i in range(3)]


@pytest.fixture(scope="module")
def gguf_path(fam, tmp_path_factory):
    return write_gguf(DATA / fam, tmp_path_factory.mktemp(fam) / f"{fam}.gguf")


@pytest.fixture(scope="module")
def ref(fam):
    return Qwen35Ref(DATA / fam)


def rel(x, y):
    return float(np.linalg.norm(np.asarray(x, np.float64) - y) / np.linalg.norm(y))


def run(tool, tmp_path, model, seqs, steps=None, **opts):
    return run_plan(tool, tmp_path, model, seqs, steps, **{"threads": 2, **opts})[0]


def refused(tool, tmp_path, model):
    """The forward tool's stderr for a model it must refuse."""
    plan = {"model": str(model), "seqs": [[1, 2]], "out": str(tmp_path / "x.f32")}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    res = subprocess.run([str(tool("forward")), str(tmp_path / "p.json")], capture_output=True, text=True)
    assert res.returncode != 0
    return res.stderr


def test_reference_is_transformers(fam, expected, ref):
    for prompt, logits, _ in expected:
        mine = ref.forward(prompt)
        assert rel(mine, logits) < 1e-4
        assert (mine.argmax(-1) == logits.argmax(-1)).all()
        assert np.abs(ref.forward(prompt, chunk=6) - mine).max() < 1e-10  # the state carries across chunks
    # the routers spread the tokens: rows of one prompt disagree on experts in every sparse layer
    for p, ids in ref.trace.items():
        assert len({tuple(r) for r in ids}) > 1, p


@pytest.mark.parametrize("form", ["gguf", "hf"])
def test_logits_match_transformers(tool, tmp_path, fam, expected, ref, gguf_path, form):
    model = gguf_path if form == "gguf" else DATA / fam
    got = run(tool, tmp_path, model, [p for p, _, _ in expected])
    for (prompt, logits, _), g in zip(expected, got):
        assert rel(g, logits) < 1e-3, form
        assert rel(g, ref.forward(prompt)) < 1e-3, form
        assert (g.argmax(-1) == logits.argmax(-1)).all(), form


def test_gguf_and_hf_forms_agree(tool, tmp_path, fam, expected, gguf_path):
    seqs = [p for p, _, _ in expected]
    for x, y in zip(run(tool, tmp_path, gguf_path, seqs), run(tool, tmp_path, DATA / fam, seqs)):
        assert rel(x, y) < 1e-5


def test_greedy_is_transformers(tool, tmp_path, expected, gguf_path):
    greedy_is(lambda *a, **k: run(tool, tmp_path, *a, **k), gguf_path, expected)


def test_chunked_prefill_decode_and_batches_are_the_whole_prompt(tool, tmp_path, expected, gguf_path):
    go = lambda *a, **k: run(tool, tmp_path, *a, **k)  # noqa: E731
    chunks_are_whole(go, gguf_path, [p for p, _, _ in expected])
    mixed_steps_are_solo(go, gguf_path, 16, 6, 16)


@pytest.mark.parametrize("form", ["gguf", "hf"])
def test_prefix_cache_hit_is_the_whole_prompt(tool, tmp_path, fam, gguf_path, form):
    """b shares a's first 32 tokens: a's blocks published and its state kept
    there, b restores it and computes only its own 13 tokens, every row
    bit-identical to b computed alone."""
    model = gguf_path if form == "gguf" else DATA / fam
    prefix_hit_is_whole(lambda *a, **k: run(tool, tmp_path, *a, **k), model, 35)


def test_stacked_experts_folder_is_the_per_expert_one(tool, tmp_path):
    """Qwen3.5-MoE's experts as transformers 5 holds them in memory
    (mlp.experts.gate_up_proj [E, 2 F, dim], down_proj [E, dim, F]): the
    same logits as the per-expert files save_pretrained wrote."""
    src = DATA / "qwen35moe-tiny"
    e = np.load(src / "expected.npz")
    expected = [(e[f"prompt{i}"].tolist(), e[f"logits{i}"], None) for i in range(3)]
    w = load_file(str(src / "model.safetensors"))
    cfg = json.loads((src / "config.json").read_text())
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}.mlp.experts."
        ex = range(cfg["num_experts"])
        w[p + "gate_up_proj"] = np.stack([np.concatenate([w.pop(f"{p}{e}.gate_proj.weight"),
                                                          w.pop(f"{p}{e}.up_proj.weight")]) for e in ex])
        w[p + "down_proj"] = np.stack([w.pop(f"{p}{e}.down_proj.weight") for e in ex])
    d = tmp_path / "stacked"
    d.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (d / f.name).symlink_to(f)
    save_file(w, str(d / "model.safetensors"))
    seqs = [p for p, _, _ in expected]
    got = run(tool, tmp_path, d, seqs)
    assert all(rel(g, e) < 1e-3 for g, (_, e, _) in zip(got, expected))
    assert all(np.array_equal(g, h) for g, h in zip(got, run(tool, tmp_path, src, seqs)))
    # a stack of the wrong width is named
    w["model.layers.0.mlp.experts.down_proj"] = w["model.layers.0.mlp.experts.down_proj"][:, :, :-1].copy()
    save_file(w, str(d / "model.safetensors"))
    assert "mlp.experts.down_proj': not of the shape config.json gives" in refused(tool, tmp_path, d)


def rewrite(src, dst, keys=(), edit=None):
    """src's GGUF copied to dst with keys [(name, value)] set (replacing src's), tensors through edit."""
    r, w = open_copy(src, dst)
    arch = r.fields["general.architecture"].contents()
    for name, value in keys:
        w.add_array(f"{arch}.{name}", value) if isinstance(value, list) else w.add_uint32(f"{arch}.{name}", value)
    t = {x.name: np.array(x.data).reshape([int(n) for n in reversed(x.shape)]) for x in r.tensors}
    if edit:
        edit(t)
    for name, x in t.items():
        w.add_tensor(name, x)
    finish(w)
    return dst


def test_malformed_gguf_is_refused_by_name(tool, tmp_path, fam, gguf_path):
    arch = "qwen3next" if fam.startswith("qwen3next") else "qwen35moe"
    bad = rewrite(gguf_path, tmp_path / "a.gguf", keys=[("attention.recurrent_layers", [True, False, True, False])])
    assert f"key '{arch}.attention.recurrent_layers' makes layer 1 attention, which full_attention_interval 4" \
           in refused(tool, tmp_path, bad)
    bad = rewrite(gguf_path, tmp_path / "b.gguf", edit=lambda t: t.pop("blk.2.ffn_gate_inp.weight"))
    assert "tensor 'blk.2.ffn_gate_inp.weight' is missing" in refused(tool, tmp_path, bad) or arch == "qwen3next"
    bad = rewrite(gguf_path, tmp_path / "c.gguf", edit=lambda t: t.pop("blk.0.ffn_up_shexp.weight"))
    assert "tensor 'blk.0.ffn_up_shexp.weight' is missing" in refused(tool, tmp_path, bad)
    if arch == "qwen3next":  # beta and alpha only as the fused ssm_ba
        def split_ba(t):
            ba = t.pop("blk.0.ssm_ba.weight")
            t["blk.0.ssm_beta.weight"], t["blk.0.ssm_alpha.weight"] = ba[:4], ba[4:]
        assert "tensor 'blk.0.ssm_ba.weight' is missing" in refused(
            tool, tmp_path, rewrite(gguf_path, tmp_path / "d.gguf", edit=split_ba))

        def fused_in(t):  # llama.cpp's first qwen3next files: one ssm_in for q, k, v and z
            t["blk.0.ssm_in.weight"] = np.concatenate([t.pop("blk.0.attn_qkv.weight"), t.pop("blk.0.attn_gate.weight")])
        assert "tensor 'blk.0.ssm_in.weight': a fused in_proj_qkvz of llama.cpp's first qwen3next GGUFs" in refused(
            tool, tmp_path, rewrite(gguf_path, tmp_path / "e.gguf", edit=fused_in))
    else:  # no dense MLP width: a layer's MLP is its experts
        def dense(t):
            t["blk.1.ffn_gate.weight"] = np.zeros((16, 32), np.float32)
        assert "tensor 'blk.1.ffn_gate.weight' is not part of the qwen35moe architecture" in refused(
            tool, tmp_path, rewrite(gguf_path, tmp_path / "d.gguf", edit=dense))


@pytest.mark.parametrize("change, message", [
    ({"linear_num_key_heads": 4}, "in_proj_qkvz.weight' is not [linear_num_key_heads"),
    ({"mlp_only_layers": [7]}, "mlp_only_layers[0] is not a whole number in 0..3"),
    ({"shared_expert_intermediate_size": None}, "shared_expert_intermediate_size is missing"),
])
def test_hf_config_faults_are_named(tool, tmp_path, change, message):
    src = DATA / "qwen3next-tiny"
    d = tmp_path / "ckpt"
    d.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (d / f.name).symlink_to(f)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(change)
    (d / "config.json").write_text(json.dumps(cfg))
    assert message in refused(tool, tmp_path, d)
