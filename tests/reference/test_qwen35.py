"""Qwen3.5's hybrid (Gated DeltaNet + gated attention) through tram's real
forward path (tests/tools/forward.c: paged cache for the attention layers,
the recurrent-state pool for the others, model_forward), against
transformers' own logits and the float64 numpy reference.

The fixture (data/qwen35-tiny, made by make_qwen35_fixture.py with
transformers 5.23) is read twice: as the Hugging Face folder it is (hf/) and
as the GGUF file llama.cpp's converter makes of it (qwen35_gguf.py: tiled
value heads, −exp(A_log), 1 + w norms). Both must give transformers' logits
(relative L2 < 1e-3 per prompt, the same argmax everywhere), and agree with
each other. The reference itself is checked against transformers first, so
a wrong reference cannot pass a wrong tram.

The recurrent form runs the same arithmetic on every path, so chunked
prefill, token-by-token decoding and any batch mix must give the very bits
of the whole prompt run alone: 32 sequences in mixed steps included. The
chunked form of the delta rule (whole 64-row chunks of a step; the forward
tool's "gdn_chunked", off in serving) gives the same logits within
rounding. A
prefix-cache hit (the attention layers' blocks shared, the recurrent state
restored from the snapshot kept at the shared prefix's end) computes only the
new tokens, with the very bits of computing the whole prompt."""
import json
import pathlib
import subprocess

import numpy as np
import pytest
from gguf_copy import finish, open_copy
from qwen35_gguf import write_gguf
from qwen35_ref import Qwen35Ref
from hybrid_checks import chunks_are_whole, greedy_is, mixed_steps_are_solo, prefix_hit_is_whole
from test_forward import run_plan

HF = pathlib.Path(__file__).resolve().parent / "data" / "qwen35-tiny"


@pytest.fixture(scope="module")
def expected():
    e = np.load(HF / "expected.npz")
    return [(e[f"prompt{i}"].tolist(), e[f"logits{i}"], e[f"greedy{i}"].tolist()) for i in range(3)]


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    return write_gguf(HF, tmp_path_factory.mktemp("qwen35") / "qwen35-tiny.gguf")


@pytest.fixture(scope="module")
def ref():
    return Qwen35Ref(HF)


def rel(x, y):
    return float(np.linalg.norm(np.asarray(x, np.float64) - y) / np.linalg.norm(y))


def run(tool, tmp_path, model, seqs, steps=None, **opts):
    return run_plan(tool, tmp_path, model, seqs, steps, **{"threads": 2, **opts})[0]


def test_reference_is_transformers(expected, ref):
    for prompt, logits, _ in expected:
        mine = ref.forward(prompt)
        assert rel(mine, logits) < 1e-4
        assert (mine.argmax(-1) == logits.argmax(-1)).all()
        assert np.abs(ref.forward(prompt, chunk=6) - mine).max() < 1e-10  # the state carries across chunks


@pytest.mark.parametrize("form", ["gguf", "hf"])
def test_logits_match_transformers(tool, tmp_path, expected, ref, gguf_path, form):
    model = gguf_path if form == "gguf" else HF
    got = run(tool, tmp_path, model, [p for p, _, _ in expected])
    for (prompt, logits, _), g in zip(expected, got):
        assert rel(g, logits) < 1e-3, form
        assert rel(g, ref.forward(prompt)) < 1e-3, form
        assert (g.argmax(-1) == logits.argmax(-1)).all(), form


def test_gguf_and_hf_forms_agree(tool, tmp_path, expected, gguf_path):
    seqs = [p for p, _, _ in expected]
    a, b = run(tool, tmp_path, gguf_path, seqs), run(tool, tmp_path, HF, seqs)
    for x, y in zip(a, b):
        assert rel(x, y) < 1e-5


def test_greedy_is_transformers(tool, tmp_path, expected, gguf_path):
    greedy_is(lambda *a, **k: run(tool, tmp_path, *a, **k), gguf_path, expected)


def test_chunked_prefill_and_decode_are_the_whole_prompt(tool, tmp_path, expected, gguf_path):
    chunks_are_whole(lambda *a, **k: run(tool, tmp_path, *a, **k), gguf_path, [p for p, _, _ in expected])


@pytest.mark.parametrize("form", ["gguf", "hf"])
def test_chunked_form_is_the_recurrent_one(tool, tmp_path, ref, gguf_path, form):
    """Prompts longer than the delta rule's chunk (64 rows): run whole, each
    sequence's step runs its 64-row chunks in the chunked form and the rest
    recurrent; token by token, or a 64-row prefill then decodes, other rows
    run recurrent. Every way is the float64 reference (rel. L2 < 1e-3) and
    the all-recurrent run within 1e-5 (rounding, not bits: the forms add in
    different orders, and the whole run must differ somewhere, or no chunk
    ran)."""
    model = gguf_path if form == "gguf" else HF
    rng = np.random.default_rng(64)
    seqs = [rng.integers(0, 98, k).tolist() for k in (150, 64, 97)]  # 2 chunks + 22; 1 chunk; 1 chunk + 33
    n = [len(s) for s in seqs]
    whole = run(tool, tmp_path, model, seqs, gdn_chunked=1)
    recurrent = run(tool, tmp_path, model, seqs, steps=[[1 if t < k else 0 for k in n] for t in range(max(n))])
    prefill = [[64, 64, 64]] + [[1 if 64 + t < k else 0 for k in n] for t in range(max(n) - 64)]
    prefill_decode = run(tool, tmp_path, model, seqs, steps=prefill, gdn_chunked=1)
    assert np.array_equal(run(tool, tmp_path, model, seqs)[0], recurrent[0])  # serving runs the recurrent form
    for s, w, r, p in zip(seqs, whole, recurrent, prefill_decode):
        want = ref.forward(s)
        for g in (w, r, p):
            assert rel(g, want) < 1e-3, form
        assert rel(w, r) < 1e-5 and rel(p, r) < 1e-5, form
    assert not np.array_equal(whole[0], recurrent[0])


@pytest.mark.parametrize("form", ["gguf", "hf"])
def test_prefix_cache_hit_is_the_whole_prompt(tool, tmp_path, gguf_path, form):
    """b shares a's first 32 tokens: when a has computed them, its blocks are
    published and its state kept; b matches the blocks, restores the state
    and computes only its own 13 tokens (in a chunk and decodes, beside a's
    tail): every row bit-identical to b computed alone from its first token."""
    model = gguf_path if form == "gguf" else HF
    a, b = prefix_hit_is_whole(lambda *x, **k: run(tool, tmp_path, *x, **k), model, 31)
    # b starting before a has computed the shared tokens finds nothing cached: refused, not computed wrong
    plan = {"model": str(model), "seqs": [a, b], "out": str(tmp_path / "x.f32"), "block_size": 16,
            "prefix": [[1, 0, 32]], "steps": [[20, 0], [0, 10], [21, 0], [0, 3]]}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    res = subprocess.run([str(tool("forward")), str(tmp_path / "p.json")], capture_output=True, text=True)
    assert res.returncode != 0 and "found no cached blocks or snapshot" in res.stderr


def test_32_sequences_are_their_solo_runs(tool, tmp_path, gguf_path):
    mixed_steps_are_solo(lambda *a, **k: run(tool, tmp_path, *a, **k), gguf_path, 32, 8, 32)


@pytest.mark.parametrize("key, value, message", [
    ("qwen35.nextn_predict_layers", 1, "multi-token-prediction"),
    # every layer full attention: no recurrent state (was a SIGFPE sizing the snapshot area at start)
    ("qwen35.full_attention_interval", 1, "no layer is recurrent"),
])
def test_mtp_layers_and_bad_keys_are_refused(tool, tmp_path, gguf_path, key, value, message):
    """A checkpoint with multi-token-prediction layers, or with no recurrent layer, is refused by name, not run
    wrong (nor crashed on)."""
    out = tmp_path / "bad.gguf"
    r, w = open_copy(gguf_path, out)
    w.kv_data[0].pop(key, None)
    w.add_uint32(key, value)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data).reshape([int(x) for x in reversed(t.shape)]))
    finish(w)
    plan = {"model": str(out), "seqs": [[1, 2]], "out": str(tmp_path / "x.f32")}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    res = subprocess.run([str(tool("forward")), str(tmp_path / "p.json")], capture_output=True, text=True)
    assert res.returncode != 0
    assert key.split(".", 1)[1] in res.stderr and message in res.stderr, res.stderr


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"][::-1]},
     "layer_types must put full_attention on every n-th layer"),
    ({"linear_num_value_heads": 3}, "value heads a multiple of key heads"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0}}, "rope_parameters type \"yarn\""),
    ({"hidden_act": "gelu"}, "activation \"gelu\""),
    ({"layer_types": ["full_attention"] * 4}, "no layer is recurrent"),
])
def test_hf_config_faults_are_named(tool, tmp_path, change, message):
    d = tmp_path / "ckpt"
    d.mkdir()
    for f in HF.iterdir():
        (d / f.name).symlink_to(f)
    cfg = json.loads((HF / "config.json").read_text())
    cfg.update(change)
    (d / "config.json").unlink()
    (d / "config.json").write_text(json.dumps(cfg))
    plan = {"model": str(d), "seqs": [[1, 2]], "out": str(tmp_path / "x.f32")}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    res = subprocess.run([str(tool("forward")), str(tmp_path / "p.json")], capture_output=True, text=True)
    assert res.returncode != 0
    assert message in res.stderr, res.stderr
