"""KV blocks that fall wholly before a sliding window are released
(scheduler/sched_plan.c, kv_seq_release_before): for a model whose every
layer has a window, a sequence holds about window + one key tile of blocks
however long it grows, so concurrent long generations fit a cache that could
not hold them whole.

The workload: three greedy generations of 240 tokens each on a seeded
random Mistral-style model (every layer's window 6 keys; blocks of 8) with a
cache of 40 blocks. Whole, the three need 93 blocks; released, about 11
each. tram must run them without one preemption — while the same lengths on
the twin model without a window (Qwen 2 layout, same sizes) do preempt —
and each output must be what the forward tool, which keeps every block,
predicts greedily over the same tokens (the released blocks were never
needed), and what the prompt gives alone."""
import json
import subprocess

import numpy as np
import pytest

PROMPTS = ["abcdef", "xyz!?", "hello"]
GEN = ["--block-size", "8", "--kv-cache-blocks", "40", "--max-seqs", "3", "--threads", "2", "--json"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from test_hf_checkpoint import tiny_tokenizer, write_pair
    tok, vocab = tiny_tokenizer()
    out = {}
    for name, arch in (("sliding", "llama"), ("full", "qwen2")):
        tmp = tmp_path_factory.mktemp(name)
        _, out[name] = write_pair(tmp, arch, tok, vocab)
    return out


def generate(tram_bin, model, prompts, tmp_path, *extra, max_tokens=240):
    lines = tmp_path / "prompts.jsonl"
    lines.write_text("".join(json.dumps({"prompt": p, "max_tokens": max_tokens, "ignore_eos": True}) + "\n"
                             for p in prompts))
    res = subprocess.run([str(tram_bin), "generate", "-m", str(model), "--prompts", str(lines), *GEN, *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    return [r["choices"][0]["token_ids"] for r in rows[:-1]], rows[-1]["stats"], res.stderr


def test_sliding_window_blocks_are_released(models, tram_bin, tool, tmp_path):
    outs, stats, log = generate(tram_bin, models["sliding"], PROMPTS, tmp_path)
    assert "blocks before the sliding window released" in log
    assert stats["preemptions"] == 0 and stats["generated_tokens"] == 3 * 240
    _, full_stats, full_log = generate(tram_bin, models["full"], PROMPTS, tmp_path)
    assert "blocks before the sliding window kept" in full_log
    assert full_stats["preemptions"] > 0  # the same lengths do not fit whole

    for prompt, out in zip(PROMPTS, outs):
        alone, _, _ = generate(tram_bin, models["sliding"], [prompt], tmp_path)
        assert alone[0] == out, prompt
        # greedy consistency with the forward tool, which keeps every block
        ids = json.loads(subprocess.run([str(tool("tokenize")), "-m", str(models["sliding"])], input=prompt.encode(),
                                        capture_output=True, check=True, timeout=60).stdout)
        seq = ids + out
        plan = {"model": str(models["sliding"]), "seqs": [seq[:-1]], "out": str(tmp_path / "l.f32"), "threads": 2,
                "block_size": 8}
        res = subprocess.run([str(tool("forward")), "-"], input=json.dumps(plan), capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        logits = np.fromfile(tmp_path / "l.f32", dtype=np.float32).reshape(len(seq) - 1, -1)
        assert logits[len(ids) - 1:].argmax(axis=1).tolist() == out, prompt


def test_release_with_speculation_and_forks(models, tram_bin, tmp_path):
    """Drafts verified past the window and rolled back, and n = 2 forks of a
    prompt whose early blocks are gone, give the plain greedy outputs."""
    want, _, _ = generate(tram_bin, models["sliding"], PROMPTS, tmp_path)
    spec, stats, _ = generate(tram_bin, models["sliding"], PROMPTS, tmp_path, "--speculative", "ngram",
                              "--num-speculative-tokens", "3")
    assert spec == want and stats["preemptions"] == 0
    lines = tmp_path / "forks.jsonl"
    lines.write_text(json.dumps({"prompt": "abcdef" * 12, "max_tokens": 150, "ignore_eos": True, "n": 2}) + "\n")
    res = subprocess.run([str(tram_bin), "generate", "-m", str(models["sliding"]), "--prompts", str(lines), *GEN],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr[-300:]
    choices = json.loads(res.stdout.splitlines()[0])["choices"]
    assert len(choices) == 2 and choices[0]["token_ids"] == choices[1]["token_ids"]
    alone, _, _ = generate(tram_bin, models["sliding"], ["abcdef" * 12], tmp_path, max_tokens=150)
    assert choices[0]["token_ids"] == alone[0]
