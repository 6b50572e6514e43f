"""tram's forward pass against the float64 numpy reference (llama_ref.py) on
the default model, through the real engine path: paged KV cache, block
reservation, attention metadata, model_forward (tests/tools/forward.c).

Every plan runs the same four prompts in a different batch mix: alone,
mixed prefill chunks and decode rows in one step, one token per step (the
decode path), tiny blocks handed out in shuffled order, the gather
reference path. For each plan, every position of every prompt must match
the reference (logits relative L2 < 1e-3 per position, the same argmax),
and — since the kernels are batch invariant — its logits must be the same
bits as when the prompt runs alone and whole. The plans run in both matmul
precisions (--precision exact|fast); fast is held to the bitwise batch
invariance here and to the accuracy gates in test_precision.py."""
import json
import subprocess

import numpy as np
import pytest
from llama_ref import LlamaRef

PROMPTS = [
    ("The capital of France is", False),
    ("Once upon a time, in a small village by the sea, there lived", False),
    ("def fib(n):\n    return n if n < 2 else", False),
    ("<|im_start|>user\nWhat is two plus two?<|im_end|>\n<|im_start|>assistant\n", True),
]


@pytest.fixture(scope="module")
def prompts(tool, model_path):
    out = []
    for text, special in PROMPTS:
        args = [str(tool("tokenize")), "-m", str(model_path)] + (["--special"] if special else [])
        res = subprocess.run(args, input=text.encode(), capture_output=True, check=True)
        out.append(json.loads(res.stdout))
    assert all(len(p) >= 5 for p in out)
    return out


@pytest.fixture(scope="module")
def reference(default_ref, prompts):
    return [default_ref.forward(p) for p in prompts]


def run_plan(tool, tmp_path, model_path, seqs, steps=None, **opts):
    """Runs the forward tool; returns (list of [len, vocab] f32 logits per sequence, attention paths)."""
    out = tmp_path / "logits.f32"
    plan = {"model": str(model_path), "seqs": seqs, "out": str(out), **opts}
    if steps is not None:
        plan["steps"] = steps
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    res = subprocess.run([str(tool("forward")), str(plan_file)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    logits = np.fromfile(out, dtype=np.float32).reshape(info["rows"], info["n_vocab"])
    split = np.cumsum([len(s) for s in seqs])[:-1]
    return np.split(logits, split), info["paths"]


def schedule(lens, policy):
    """Steps [[tokens per sequence]] from policy(step, seq, remaining, done) until every sequence is consumed."""
    done, steps = [0] * len(lens), []
    while any(d < n for d, n in zip(done, lens)):
        k = len(steps)
        row = [min(n - d, policy(k, s, n - d, d)) if d < n else 0 for s, (d, n) in enumerate(zip(done, lens))]
        assert sum(row) > 0
        steps.append(row)
        done = [d + r for d, r in zip(done, row)]
    return steps


def check_against_reference(got, reference):
    for s, (g, want) in enumerate(zip(got, reference)):
        assert g.shape == want.shape
        assert np.isfinite(g).all()
        err = np.linalg.norm(g - want, axis=1) / np.linalg.norm(want, axis=1)
        print(f"sequence {s}: {len(err)} positions, logits rel L2 max {err.max():.2e}")  # shown with pytest -s
        assert err.max() < 1e-3, f"sequence {s}: rel L2 {err.max():.2e} at position {err.argmax()}"
        bad = np.nonzero(g.argmax(axis=1) != want.argmax(axis=1))[0]
        assert bad.size == 0, f"sequence {s}: argmax differs at positions {bad.tolist()}"


def run_alone(tool, tmp_path_factory, model_path, prompts, precision):
    """Each prompt alone in its step, prefilled whole, on one thread."""
    tmp = tmp_path_factory.mktemp("alone")
    steps = [[len(p) if s == k else 0 for s, p in enumerate(prompts)] for k in range(len(prompts))]
    # the batch mixes use 2 threads: thread count invariance
    logits, paths = run_plan(tool, tmp, model_path, prompts, steps, threads=1, precision=precision)
    assert paths == ["varlen"] * len(prompts)
    return logits


@pytest.fixture(scope="module")
def alone(tool, tmp_path_factory, model_path, prompts):
    return run_alone(tool, tmp_path_factory, model_path, prompts, "exact")


@pytest.fixture(scope="module")
def alone_fast(tool, tmp_path_factory, model_path, prompts):
    """The same with --precision fast (its accuracy: test_precision.py)."""
    return run_alone(tool, tmp_path_factory, model_path, prompts, "fast")


def test_alone_matches_reference(alone, reference):
    check_against_reference(alone, reference)
    # the reference's own sanity: " Paris" after "The capital of France is"
    assert int(reference[0][-1].argmax()) == int(alone[0][-1].argmax())


PLANS = {
    # every prompt whole in one step, default blocks
    "one_step": dict(policy=lambda k, s, left, done: left),
    # chunked prefill of different sizes, later steps mix prefill chunks and decode rows
    "mixed_chunks": dict(policy=lambda k, s, left, done: [3, 7, 4, 6][s] if k == 0 else 1 + (k + s) % 3,
                         block_size=4, shuffle_seed=7),
    # one token per sequence per step: the decode path, tiny shuffled blocks
    "decode_rows": dict(policy=lambda k, s, left, done: 1, block_size=2, shuffle_seed=12345),
    # a first chunk, then decode rows, blocks of one token, the gather reference path
    "gather_chunk_then_decode": dict(policy=lambda k, s, left, done: 4 if done == 0 else 1,
                                     block_size=1, shuffle_seed=99, gather=True),
}


@pytest.mark.parametrize("precision", ["exact", "fast"])
@pytest.mark.parametrize("name", list(PLANS))
def test_batch_mix(name, precision, tool, tmp_path, model_path, prompts, reference, request):
    alone = request.getfixturevalue("alone" if precision == "exact" else "alone_fast")
    opts = dict(PLANS[name], precision=precision)
    steps = schedule([len(p) for p in prompts], opts.pop("policy"))
    # spare blocks so that shuffled allocation scatters the sequences
    bs = opts.get("block_size", 32)
    opts["num_blocks"] = sum(-(-len(p) // bs) for p in prompts) + 8
    got, paths = run_plan(tool, tmp_path, model_path, prompts, steps, threads=2, **opts)
    assert len(paths) == len(steps)
    if any(sum(r > 0 for r in row) > 1 and max(row) == 1 for row in steps):
        assert "decode" in paths
    if precision == "exact":
        check_against_reference(got, reference)
    for s, (g, a) in enumerate(zip(got, alone)):
        diff = np.nonzero((g.view(np.uint32) != a.view(np.uint32)).any(axis=1))[0]
        assert diff.size == 0, f"{name}: sequence {s} differs bitwise from its run alone at positions {diff.tolist()}"


# ---- synthetic models: the paths the default model does not take ----------------------------

def write_synthetic(path, arch, untied, llama3_rope):
    """A small random model of `arch` (2 layers, dim 64, 4 heads / 2 KV heads of 16, MLP 128,
    vocab 96) with matrices of several weight types, written with the gguf package."""
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFWriter, quants

    rng = np.random.default_rng(1234)
    L, D, H, KV, HD, FF, V = 2, 64, 4, 2, 16, 128, 96
    w = GGUFWriter(str(path), arch)
    w.add_block_count(L)
    w.add_context_length(256)
    w.add_embedding_length(D)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    if llama3_rope:
        # every wavelength of a 16-wide head falls in a different part of Llama 3.1's band
        w.add_string(f"{arch}.rope.scaling.type", "llama3")
        w.add_rope_scaling_factor(8.0)
        w.add_float32(f"{arch}.rope.scaling.low_freq_factor", 1.0)
        w.add_float32(f"{arch}.rope.scaling.high_freq_factor", 4.0)
        w.add_rope_scaling_orig_ctx_len(64)
    tokens = [chr(33 + i) for i in range(V - 1)] + ["!\""]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges(["! \""])

    def add(name, rows, cols, qtype):
        x = (rng.standard_normal((rows, cols)) * (0.5 if cols == 1 else 1 / np.sqrt(cols))).astype(np.float32)
        if cols == 1:
            w.add_tensor(name, x[:, 0] + (1.0 if name.endswith("norm.weight") else 0.0))
        elif qtype == T.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quants.quantize(x, qtype), raw_dtype=qtype)

    add("token_embd.weight", V, D, T.Q8_0)
    add("output_norm.weight", D, 1, T.F32)
    if untied:
        add("output.weight", V, D, T.F16)
    for l in range(L):
        p = f"blk.{l}."
        add(p + "attn_norm.weight", D, 1, T.F32)
        add(p + "attn_q.weight", H * HD, D, T.Q4_1)
        add(p + "attn_k.weight", KV * HD, D, T.BF16)
        add(p + "attn_v.weight", KV * HD, D, T.Q5_0)
        if arch == "qwen2":
            add(p + "attn_q.bias", H * HD, 1, T.F32)
            add(p + "attn_k.bias", KV * HD, 1, T.F32)
            add(p + "attn_v.bias", KV * HD, 1, T.F32)
        add(p + "attn_output.weight", D, H * HD, T.F16)
        add(p + "ffn_norm.weight", D, 1, T.F32)
        add(p + "ffn_gate.weight", FF, D, T.Q8_0)
        add(p + "ffn_up.weight", FF, D, T.F32)
        add(p + "ffn_down.weight", D, FF, T.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("arch,untied,llama3_rope", [("qwen2", False, False), ("llama", True, True)],
                         ids=["qwen2_bias_neox", "llama_untied_llama3_rope"])
def test_synthetic_model(arch, untied, llama3_rope, tool, tmp_path):
    path = tmp_path / "synthetic.gguf"
    write_synthetic(path, arch, untied, llama3_rope)
    ref = LlamaRef(path)
    assert ref.neox == (arch == "qwen2")
    rng = np.random.default_rng(5)
    seqs = [rng.integers(0, 96, n).tolist() for n in (9, 23, 14)]
    want = [ref.forward(s) for s in seqs]
    steps = schedule([len(s) for s in seqs], lambda k, s, left, done: 5 if done == 0 else 1 + (k + s) % 2)
    mixed, paths = run_plan(tool, tmp_path, path, seqs, steps, block_size=4, num_blocks=16, shuffle_seed=3,
                            threads=2)
    assert "varlen" in paths
    check_against_reference(mixed, want)
    alone, _ = run_plan(tool, tmp_path, path, seqs, [[len(x) if s == k else 0 for s, x in enumerate(seqs)]
                                                      for k in range(len(seqs))], threads=1)
    for g, a in zip(mixed, alone):
        assert np.array_equal(g.view(np.uint32), a.view(np.uint32))
