"""Every architecture tram runs, served through the engine (`tram generate
--json`) on its seeded random-weights model (tests/reference/synthetic.py):
each request's tokens, greedy and seeded-sampled, must be the same when it
runs alone (max_seqs 1) as when it arrives at a random step into batches
of mixed prefill chunks and decode rows — the batch invariance the default
model is held to in test_engine.py. The forward's numbers are checked
against the float64 reference in tests/reference/test_forward.py."""
import pathlib
import random
import sys

import pytest
from test_engine import generate, ids_of, seed
from tram_server import start

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from synthetic import write_synthetic  # noqa: E402

FAMILIES = {
    "qwen3": dict(arch="qwen3", untied=False, llama3_rope=False),
    # Mistral-style: llama with a sliding window shorter than most prompts
    "llama_sliding_window": dict(arch="llama", untied=True, llama3_rope=False, window=6),
    "gemma2": dict(arch="gemma2", untied=False, llama3_rope=False, window=6),
    "gemma3": dict(arch="gemma3", untied=False, llama3_rope=False, window=6),
    "phi3": dict(arch="phi3", untied=True, llama3_rope=False, window=6),
    "smollm3": dict(arch="smollm3", untied=False, llama3_rope=False),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_serves_batch_invariant(family, tram_bin, tmp_path):
    model = tmp_path / f"{family}.gguf"
    write_synthetic(model, **FAMILIES[family])
    check_serves_batch_invariant(tram_bin, model, tmp_path, random.Random(seed()))


def check_serves_batch_invariant(tram_bin, model, tmp_path, rng):
    """10 requests, every other one seeded-sampled: the same tokens alone as arriving into mixed
    batches (also the mixtures of experts' check, tests/reference/test_moe.py)."""
    reqs = []
    for i in range(10):
        prompt = "".join(chr(rng.randint(33, 126)) for _ in range(rng.randint(3, 40)))
        r = {"prompt": prompt, "max_tokens": 6, "ignore_eos": True}
        if i % 2:
            r.update(temperature=1.0, top_k=20, seed=rng.randrange(2**53))
        reqs.append(r)
    solo, _ = generate(tram_bin, model, tmp_path, reqs, "--max-seqs", "1", "--no-prefix-caching")
    arriving = [{**r, "arrive_step": rng.randint(0, 8)} for r in reqs]
    out, stats = generate(tram_bin, model, tmp_path, arriving, "--max-seqs", "8", "--max-batch-tokens", "16",
                          "--block-size", "8")
    for r, o, s in zip(arriving, out, solo):
        assert ids_of(o) == ids_of(s), r
        assert len(ids_of(o)[0]) == 6
    assert stats["step_seqs"] > stats["steps"]
    assert stats["varlen_steps"] > 0 and stats["decode_steps"] > 0


# Hugging Face's causal-LM class of each architecture (config.json
# `architectures`, transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
HF_CLASS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM", "phi3": "Phi3ForCausalLM",
            "smollm3": "SmolLM3ForCausalLM"}


@pytest.mark.parametrize("arch", list(HF_CLASS))
def test_model_info_names_the_architecture(arch, tmp_path):
    """/model_info and /server_info (sglang-router reads them) give the file's
    general.architecture as model_type and Hugging Face's class for it."""
    model = tmp_path / f"{arch}.gguf"
    write_synthetic(model, arch=arch, untied=arch != "qwen3", llama3_rope=False)
    srv = start(tmp_path, "--max-model-len", "64", model=model)
    try:
        for path in ("/model_info", "/server_info"):
            j = srv.get(path).json()
            assert (j["model_type"], j["architectures"]) == (arch, [HF_CLASS[arch]]), path
    finally:
        assert srv.stop() == 0
