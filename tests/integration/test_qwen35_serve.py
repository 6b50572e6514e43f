"""`tram serve` with Qwen3.5's hybrid (the transformers-made tiny checkpoint
of tests/reference/data/qwen35-tiny, read as the Hugging Face folder it is):
the official `openai` client gets transformers' greedy tokens; n > 1 forks
copy the recurrent state (every greedy copy is the solo answer); 32
concurrent requests on a cache small enough to preempt give their solo
answers; /metrics shows the state pool; what the engine does not do for
hybrid models yet is refused or turned off at start-up with a line saying
so (speculative decoding refused, prefix-cache hits off)."""
import concurrent.futures
import pathlib
import subprocess

import numpy as np
import pytest
import tram_server

HF = pathlib.Path(__file__).resolve().parents[1] / "reference" / "data" / "qwen35-tiny"

server = tram_server.server_fixture("--max-seqs", "32", "--block-size", "16", "--kv-cache-blocks", "12",
                                    use_external=False, model=lambda: HF)


@pytest.fixture(scope="module")
def expected():
    e = np.load(HF / "expected.npz")
    return [(e[f"prompt{i}"].tolist(), e[f"greedy{i}"].tolist()) for i in range(3)]


def complete(srv, prompt, n=1, max_tokens=12, **kw):
    r = srv.client().completions.create(model="qwen35-tiny", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                        n=n, extra_body={"return_token_ids": True, "ignore_eos": True, **kw})
    return [c.model_extra["token_ids"] for c in sorted(r.choices, key=lambda c: c.index)]


def test_openai_client_gets_transformers_greedy(server, expected):
    for prompt, greedy in expected:
        assert complete(server, prompt) == [greedy]


def test_n_copies_share_the_prompt_state(server, expected):
    for prompt, greedy in expected:
        assert complete(server, prompt, n=3) == [greedy] * 3


def test_32_concurrent_requests_are_their_solo_runs(server):
    rng = np.random.default_rng(7)
    prompts = [rng.integers(0, 96, int(rng.integers(20, 60))).tolist() for _ in range(32)]
    solo = [complete(server, p, max_tokens=64) for p in prompts]
    before = server.metric("vllm:num_preemptions_total")
    with concurrent.futures.ThreadPoolExecutor(32) as ex:
        together = list(ex.map(lambda p: complete(server, p, max_tokens=64), prompts))
    assert together == solo
    # 12 blocks of 16 tokens hold at most two sequences of up to 124 tokens (8 blocks) at their ends: with 32
    # submitted at once, each running 64 steps, some were preempted and recomputed
    assert server.metric("vllm:num_preemptions_total") > before


def test_metrics_show_the_state_pool(server):
    m = server.metrics()
    assert m["tram:recurrent_state_slots_total"][frozenset()] == 32
    assert m["tram:recurrent_state_bytes"][frozenset()] > 0
    assert m["tram:recurrent_state_slots_used"][frozenset()] == 0  # nothing runs now
    info = [dict(k) for k in m["vllm:cache_config_info"]]
    assert info[0]["enable_prefix_caching"] == "False"
    assert "prefix caching is off for this hybrid qwen35 model" in server.log()


def test_speculative_decoding_is_refused(tmp_path):
    res = subprocess.run([str(tram_server.tram_bin()), "serve", "-m", str(HF), "--port", "0", "--threads", "2",
                          "--speculative", "ngram"], capture_output=True, text=True, timeout=60,
                         env=tram_server.clean_env())
    assert res.returncode != 0
    assert "speculative decoding is not supported for hybrid qwen35 models" in res.stderr + res.stdout


def test_dashboard_shows_the_state_pool(server):
    from dashboard_util import SnapshotReader
    snaps = SnapshotReader(server)
    try:
        info = snaps.wait(timeout=30)["info"]
        assert info["state_slots"] == 32 and info["state_bytes"] > 0 and info["state_slots_used"] == 0
    finally:
        snaps.close()
