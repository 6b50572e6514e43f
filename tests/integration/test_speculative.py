"""Speculative decoding (n-gram prompt lookup) on the real default model,
driven through `tram generate --json`: the token ids of every request are
the same with and without `--speculative ngram`, for greedy and seeded
sampling requests, alone, in mixed batches with plain decodes and prefill
chunks arriving at random steps, and with preemptions in a tiny cache; the
drafts are really verified (draft and accepted counters), and after every
run every block is free again (generate() checks it).

The reference is tram's own plain decoding, which test_engine.py checks
against solo runs and tests/reference against a float64 numpy model.
Random choices are seeded (printed; replay with TRAM_TEST_SEED)."""
import json
import os
import random
import subprocess

import pytest

from prometheus_client.parser import text_string_to_metric_families
from test_engine import WORDS, clean_env, generate, ids_of, seed
from tram_server import server_fixture

spec_server = server_fixture("--speculative", "ngram", "--served-model-name", "spec", use_external=False)

SPEC = ("--speculative", "ngram", "--num-speculative-tokens", "4", "--speculative-max-batch", "16")


def passage(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def workload(rng, n):
    """Requests that copy or edit a given text (where drafts pay), greedy
    and seeded sampling, next to plain random prompts."""
    reqs = []
    for i in range(n):
        text = passage(rng, rng.randint(12, 30))
        kind = i % 3
        if kind == 0:
            r = {"prompt": f"Repeat the following text exactly, twice: {text}", "chat": True}
        elif kind == 1:
            r = {"prompt": f"Rewrite this in capital letters: {text}", "chat": True}
        else:
            r = {"prompt": passage(rng, rng.randint(3, 10)).capitalize()}
        r.update(max_tokens=rng.randint(16, 40), arrive_step=rng.randint(0, 10))
        if i % 2:
            r.update(temperature=rng.choice([0.5, 0.8]), top_k=rng.choice([0, 40]), seed=rng.randrange(2**53))
        reqs.append(r)
    return reqs


def test_alone_greedy_and_seeded(tram_bin, model_path, tmp_path):
    """Identical outputs always; drafts kept on a passage the model copies
    (a passage of random words is not always copied: up to 3 are drawn)."""
    rng = random.Random(seed())
    for kind in ("greedy", "seeded"):
        kept = False
        for _ in range(3):
            text = passage(rng, 40)
            r = {"prompt": f"Repeat the following text exactly: {text}", "chat": True, "max_tokens": 64}
            if kind == "seeded":
                r.update(temperature=0.7, seed=rng.randrange(2**53))
            (plain,), _ = generate(tram_bin, model_path, tmp_path, [r])
            (spec,), st = generate(tram_bin, model_path, tmp_path, [r], *SPEC)
            assert ids_of(spec) == ids_of(plain), r
            assert st["spec_drafts"] > 0 and st["spec_accepted_tokens"] <= st["spec_draft_tokens"]
            # fewer steps than tokens: drafts were kept
            if st["spec_accepted_tokens"] > 0 and st["steps"] < len(ids_of(plain)[0]):
                kept = True
                break
        assert kept, kind


def test_mixed_batches_with_random_arrivals(tram_bin, model_path, tmp_path):
    rng = random.Random(seed())
    reqs = workload(rng, 12)
    plain, _ = generate(tram_bin, model_path, tmp_path, reqs, "--max-seqs", "8", "--max-batch-tokens", "48")
    spec, st = generate(tram_bin, model_path, tmp_path, reqs, "--max-seqs", "8", "--max-batch-tokens", "48", *SPEC)
    for r, a, b in zip(reqs, plain, spec):
        assert ids_of(b) == ids_of(a), r
    assert st["spec_accepted_tokens"] > 0
    assert st["step_seqs"] > st["steps"]                # batches of several sequences


def test_preemption_mid_speculation(tram_bin, model_path, tmp_path):
    rng = random.Random(seed())
    args = ("--kv-cache-blocks", "10", "--block-size", "8", "--max-seqs", "6", "--max-batch-tokens", "40")
    for _ in range(4):  # a random workload may happen to fit: draw another until one preempts
        reqs = workload(rng, 8)
        plain, _ = generate(tram_bin, model_path, tmp_path, reqs, *args)
        spec, st = generate(tram_bin, model_path, tmp_path, reqs, *args, *SPEC)
        for r, a, b in zip(reqs, plain, spec):
            assert ids_of(b) == ids_of(a), r
        if st["preemptions"] > 0 and st["spec_drafts"] > 0:
            break
    assert st["preemptions"] > 0 and st["spec_drafts"] > 0


def test_large_batch_turns_it_off(tram_bin, model_path, tmp_path):
    rng = random.Random(seed())
    reqs = [{"prompt": f"Repeat exactly: {passage(rng, 20)}", "chat": True, "max_tokens": 12} for _ in range(6)]
    runs = {}
    for max_batch in (2, 16):
        out, runs[max_batch] = generate(tram_bin, model_path, tmp_path, reqs, "--speculative", "ngram",
                                        "--speculative-max-batch", max_batch, "--max-seqs", "6")
    # six run together until the first ones end: none speculates while more than two run
    assert runs[2]["spec_drafts"] <= runs[2]["steps"] * 2
    assert runs[2]["spec_drafts"] < runs[16]["spec_drafts"]


def test_speculation_under_sanitizers(model_path, tmp_path):
    """Drafts, rollbacks, preemptions and a cancel through the ASan+UBSan
    build: no report, every block back."""
    san = os.environ.get("TRAM_SAN_BIN")
    if not san or not os.path.exists(san):
        pytest.skip("no sanitizer build (TRAM_SAN_BIN): `make test` sets it")
    text = "one two three four five six seven eight nine ten"
    reqs = [{"prompt": f"Repeat exactly: {text}", "chat": True, "max_tokens": 20},
            {"prompt": f"Repeat exactly: {text}", "chat": True, "max_tokens": 20, "temperature": 0.8, "seed": 3,
             "arrive_step": 1},
            {"prompt": f"Repeat exactly: {text} {text}", "chat": True, "max_tokens": 30, "cancel_after": 6}]
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    env = clean_env(ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    p = subprocess.run([san, "generate", "-m", str(model_path), "--prompts", str(f), "--json", "--threads", "2",
                        "--kv-cache-blocks", "16", "--block-size", "8", "--log-level", "warn", *SPEC],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0 and "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr[-3000:]
    stats = json.loads(p.stdout.splitlines()[-1])["stats"]
    assert stats["kv_blocks_used"] == 0 and stats["requests_finished"] == 3 and stats["spec_drafts"] > 0


def test_metrics_under_vllm_names(spec_server):
    """vLLM's spec_decode counters (prometheus_client names counter families
    without "_total"), against what the greedy request's output implies."""
    client = spec_server.client()
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    r = client.chat.completions.create(model="spec", messages=[{"role": "user", "content": f"Repeat exactly: {text}"}],
                                       max_tokens=40, temperature=0)
    fams = {f.name: f for f in text_string_to_metric_families(spec_server.get("/metrics").text)}

    def total(family):
        got = [s for s in fams[family].samples if s.name == family + "_total"]
        for s in got:
            assert s.labels["model_name"] == "spec" and s.labels["engine"] == "0", s
        return got

    drafts, = total("vllm:spec_decode_num_drafts")
    proposed, = total("vllm:spec_decode_num_draft_tokens")
    accepted, = total("vllm:spec_decode_num_accepted_tokens")
    per_pos = {int(s.labels["position"]): s.value for s in total("vllm:spec_decode_num_accepted_tokens_per_pos")}
    assert drafts.value > 0 and 0 < accepted.value <= proposed.value <= 4 * drafts.value
    assert sum(per_pos.values()) == accepted.value
    assert sorted(per_pos) == list(range(len(per_pos))) and len(per_pos) <= 4
    assert all(per_pos[i] >= per_pos[i + 1] for i in range(len(per_pos) - 1))  # a draft is kept after its predecessors
    # every verification round but the request's last emits accepted + 1 tokens
    assert r.usage.completion_tokens >= accepted.value + 1


def test_per_request_switch(tmp_path):
    """tram's `speculative` request field: false decodes plainly on a
    speculating server (no drafts, same tokens); true on a server without
    speculation is refused, since nothing would honour it. A fresh server:
    one that other tests have used may have measured a draft row's cost
    high enough (on a loaded machine) that it drafts nothing for a while."""
    from tram_server import start
    spec_server = start(tmp_path, "--speculative", "ngram", "--served-model-name", "spec")
    try:
        _per_request_switch(spec_server, tmp_path)
    finally:
        assert spec_server.stop() == 0


def _per_request_switch(spec_server, tmp_path):
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"
    body = {"model": "spec", "messages": [{"role": "user", "content": f"Repeat exactly: {text}"}],
            "max_tokens": 40, "temperature": 0}

    def drafts():
        return spec_server.metric("vllm:spec_decode_num_drafts_total")

    before = drafts()
    plain = spec_server.post("/v1/chat/completions", json={**body, "speculative": False}).json()
    assert drafts() == before
    spec = spec_server.post("/v1/chat/completions", json=body).json()
    assert drafts() > before
    assert plain["choices"][0]["message"]["content"] == spec["choices"][0]["message"]["content"]
    bad = spec_server.post("/v1/chat/completions", json={**body, "speculative": "no"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "speculative"
    from tram_server import start
    srv = start(tmp_path)
    try:
        r = srv.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, "speculative": True})
        assert r.status_code == 400 and r.json()["error"]["param"] == "speculative"
        assert srv.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, "speculative": False}).status_code == 200
    finally:
        assert srv.stop() == 0
