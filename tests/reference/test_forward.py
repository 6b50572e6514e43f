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
from synthetic import write_synthetic

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

SYNTHETIC = {
    "qwen2_bias_neox": ("qwen2", False, False, 0),
    "llama_untied_llama3_rope": ("llama", True, True, 0),
    "qwen3_qk_norm": ("qwen3", False, False, 0),
    # Mistral-style: a window smaller than every sequence, not a multiple of the block size
    "llama_sliding_window_6": ("llama", True, False, 6),
    # layer 0 local (window 6), layer 1 global; soft-capped scores and logits; GeGLU, post-norms
    "gemma2_softcap_local_global": ("gemma2", False, False, 6),
    # layer 0 local (base 10000), layer 1 global (base 1e6, linear x8); Q/K norms
    "gemma3_local_global_rope": ("gemma3", False, False, 6),
    # fused QKV and gate/up, LongRoPE long factors and attention factor, a window on every layer
    "phi3_fused_longrope": ("phi3", True, False, 6),
    # layer 3 of 5 without RoPE (llama.cpp's NoPE step of 4), llama pairing elsewhere
    "smollm3_nope_layer": ("smollm3", False, False, 0),
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_model(name, tool, tmp_path):
    arch, untied, llama3_rope, window = SYNTHETIC[name]
    path = tmp_path / "synthetic.gguf"
    write_synthetic(path, arch, untied, llama3_rope, window)
    ref = LlamaRef(path)
    assert ref.neox == (arch not in ("llama", "smollm3")) and ref.window == window
    rng = np.random.default_rng(5)
    seqs = [rng.integers(0, 96, n).tolist() for n in (9, 23, 14)]
    want = [ref.forward(s) for s in seqs]
    if ref.no_rope:  # smollm3: turning the NoPE layer too must change the logits, or the test proves nothing
        ref.no_rope = set()
        roped = ref.forward(seqs[1])
        assert np.linalg.norm(roped - want[1]) / np.linalg.norm(want[1]) > 1e-2
    check_synthetic(tool, tmp_path, path, seqs, want)


def check_synthetic(tool, tmp_path, path, seqs, want, precision="exact"):
    """seqs in a mixed batch (prefill chunks and decode rows, tiny shuffled blocks, 2 threads) match the
    reference logits `want` and are bitwise what each gives alone on 1 thread."""
    steps = schedule([len(s) for s in seqs], lambda k, s, left, done: 5 if done == 0 else 1 + (k + s) % 2)
    mixed, paths = run_plan(tool, tmp_path, path, seqs, steps, block_size=4, num_blocks=16, shuffle_seed=3,
                            threads=2, precision=precision)
    assert "varlen" in paths
    check_against_reference(mixed, want)
    alone, _ = run_plan(tool, tmp_path, path, seqs, [[len(x) if s == k else 0 for s, x in enumerate(seqs)]
                                                      for k in range(len(seqs))], threads=1, precision=precision)
    for g, a in zip(mixed, alone):
        assert np.array_equal(g.view(np.uint32), a.view(np.uint32))


@pytest.mark.parametrize("precision", ["exact", "fast"])
def test_mxfp4_model(tool, tmp_path, precision):
    """A llama whose token embedding (tied: the output projection too) and MLP matrices are MXFP4, quantized
    by the gguf package: tram's logits against the float64 reference on the package's dequantization (the
    MXFP4 lookup, the exact path's and the fast path's matmuls), batch and thread invariant."""
    path = tmp_path / "mxfp4.gguf"
    write_synthetic(path, "llama", False, False, mxfp4=True)
    ref = LlamaRef(path)
    mx = sorted(n for n, t in ref.tensors.items() if t.tensor_type.name == "MXFP4")
    assert mx == ["blk.0.ffn_down.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.1.ffn_down.weight",
                  "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight", "token_embd.weight"]
    rng = np.random.default_rng(39)
    seqs = [rng.integers(0, 96, n).tolist() for n in (9, 23, 14)]
    check_synthetic(tool, tmp_path, path, seqs, [ref.forward(s) for s in seqs], precision)
