"""`tram serve` with Qwen3.5's hybrid (the transformers-made tiny checkpoint
of tests/reference/data/qwen35-tiny, read as the Hugging Face folder it is):
the official `openai` client gets transformers' greedy tokens; n > 1 forks
copy the recurrent state (every greedy copy is the solo answer); 32
concurrent requests on a cache small enough to preempt give their solo
answers; /metrics shows the state pool. Speculative decoding with the
hybrid is test_qwen35_spec.py's.

Prefix caching keeps snapshots of the recurrent state at prefix-cache
blocks: a prompt sharing a cached prefix restores the state and computes
only its new tokens (usage's cached_tokens, /metrics), with the very tokens
and logprobs of a server that computes every prompt from scratch
(`--state-snapshot-bytes 0`, which turns prefix caching off for hybrids):
a repeated prompt, a multi-turn conversation whose turn k + 1 reuses turn
k's prompt and answer, and n > 1 requests sharing a prefix on a cache small
enough to evict and preempt."""
import concurrent.futures
import pathlib
import subprocess

import numpy as np
import pytest
import tram_server

HF = pathlib.Path(__file__).resolve().parents[1] / "reference" / "data" / "qwen35-tiny"

server = tram_server.server_fixture("--max-seqs", "32", "--block-size", "16", "--kv-cache-blocks", "12",
                                    use_external=False, model=lambda: HF)
# the same engine computing every prompt from scratch: no snapshots, so no prefix caching for the hybrid
# room for one snapshot (16.9 KB each at this model's shape): every new one drops the last (LRU)
one_snap = tram_server.server_fixture("--max-seqs", "32", "--block-size", "16", "--kv-cache-blocks", "12",
                                      "--state-snapshot-bytes", "20K", use_external=False, model=lambda: HF)
scratch = tram_server.server_fixture("--max-seqs", "32", "--block-size", "16", "--kv-cache-blocks", "12",
                                     "--state-snapshot-bytes", "0", use_external=False, model=lambda: HF)


@pytest.fixture(scope="module")
def expected():
    e = np.load(HF / "expected.npz")
    return [(e[f"prompt{i}"].tolist(), e[f"greedy{i}"].tolist()) for i in range(3)]


def complete(srv, prompt, n=1, max_tokens=12, **kw):
    r = srv.client().completions.create(model="qwen35-tiny", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                        n=n, extra_body={"return_token_ids": True, "ignore_eos": True, **kw})
    return [c.model_extra["token_ids"] for c in sorted(r.choices, key=lambda c: c.index)]


def create(srv, prompt, max_tokens=20, n=1):
    """A greedy completion with logprobs: (token ids per choice, logprobs per choice, cached_tokens)."""
    r = srv.client().completions.create(model="qwen35-tiny", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                        n=n, logprobs=1,
                                        extra_body={"return_token_ids": True, "ignore_eos": True})
    ch = sorted(r.choices, key=lambda c: c.index)
    return ([c.model_extra["token_ids"] for c in ch], [c.logprobs.token_logprobs for c in ch],
            r.usage.prompt_tokens_details.cached_tokens)


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
    assert info[0]["enable_prefix_caching"] == "True"
    # the default 512M holds more snapshots of this tiny model than there are blocks: one per block at most
    assert m["tram:recurrent_snapshots_total"][frozenset()] == 12
    # the state bytes: 32 slots and the scratch state
    assert m["tram:recurrent_snapshot_bytes"][frozenset()] == 12 * m["tram:recurrent_state_bytes"][frozenset()] / 33
    # a snapshot lives only with its block (the earlier tests evicted many)
    assert m["tram:recurrent_snapshots_used"][frozenset()] <= m["tram:prefix_cache_blocks"][frozenset()]


def test_without_snapshot_memory_prefix_caching_is_off(scratch):
    info = [dict(k) for k in scratch.metrics()["vllm:cache_config_info"]]
    assert info[0]["enable_prefix_caching"] == "False"
    assert "prefix caching is off for this hybrid qwen35 model: state_snapshot_bytes (0) holds no snapshot" in \
        scratch.log()


def test_repeated_prompt_restores_the_state(server, scratch):
    prompt = np.random.default_rng(11).integers(0, 96, 45).tolist()
    ref = create(scratch, prompt)
    assert ref[2] == 0
    restored = server.metric("tram:recurrent_snapshots_restored_total")
    first = create(server, prompt)
    assert first[:2] == ref[:2] and first[2] == 0
    again = create(server, prompt)
    # the state at 32 tokens (the last full block before the prompt's last token) is restored: 13 tokens computed
    assert again[2] == 32
    assert again[:2] == ref[:2]  # the same tokens and the very same logprobs as computing it all
    assert server.metric("tram:recurrent_snapshots_restored_total") == restored + 1


def test_multi_turn_conversation_reuses_each_turn(server, scratch):
    """Turn k + 1's prompt is turn k's prompt, its answer and a new message:
    it restores the state at turn k's last full block (its answer's end)
    and computes only the rest, with the tokens of a from-scratch run."""
    rng = np.random.default_rng(12)
    prompt, out = rng.integers(0, 96, 30).tolist(), 20
    for turn in range(4):
        ids, lps, cached = create(server, prompt, max_tokens=out)
        rids, rlps, rcached = create(scratch, prompt, max_tokens=out)
        assert (ids, lps) == (rids, rlps) and rcached == 0
        if turn > 0:  # the previous turn computed prev_len + out - 1 tokens; its snapshot is at their last block
            assert cached == (prev_len + out - 1) // 16 * 16, (turn, cached, prev_len)
            assert len(prompt) - cached < 16 + 12 + 1  # what is computed does not grow with the conversation
        prev_len = len(prompt)
        prompt = prompt + ids[0] + rng.integers(0, 96, 12).tolist()


def test_one_snapshot_drops_the_least_recently_used(one_snap, scratch):
    """With room for one snapshot each new one drops the last: a prompt
    whose snapshot was dropped is computed in full, a conversation's next
    turn finds the newest; every answer is still the from-scratch one."""
    assert one_snap.metric("tram:recurrent_snapshots_total") == 1
    rng = np.random.default_rng(14)
    a, b = rng.integers(0, 96, 45).tolist(), rng.integers(0, 96, 45).tolist()
    ref_a, ref_b = create(scratch, a)[:2], create(scratch, b)[:2]
    assert create(one_snap, a)[:2] == ref_a
    assert create(one_snap, b)[:2] == ref_b  # b's snapshots dropped a's
    again_a = create(one_snap, a)
    assert again_a[:2] == ref_a and again_a[2] == 0  # a's blocks may be cached, its state is not: no hit
    # that run kept its state at 32 (the prompt), then at 48 and 64 (its answer), each dropping the last: the
    # next turn of the conversation finds the newest, at 64 (45 + 19 computed tokens)
    turn = a + again_a[0][0] + rng.integers(0, 96, 10).tolist()
    got = create(one_snap, turn)
    assert got[:2] == create(scratch, turn)[:2] and got[2] == 64
    assert one_snap.metric("tram:recurrent_snapshots_dropped_total") > 0
    assert one_snap.metric("tram:recurrent_snapshots_used") == 1


def test_shared_prefix_with_n_and_preemption(server, scratch):
    """16 requests of n = 2 sharing a 40-token prefix, all at once on 12
    blocks of 16 tokens: preempted, forked, evicting one another's blocks
    and snapshots, and every choice is the from-scratch answer."""
    rng = np.random.default_rng(13)
    prefix = rng.integers(0, 96, 40).tolist()
    prompts = [prefix + rng.integers(0, 96, int(rng.integers(3, 30))).tolist() for _ in range(16)]
    solo = [create(scratch, p, max_tokens=48, n=2)[:2] for p in prompts]
    create(server, prefix + [1], max_tokens=1)  # the prefix is cached, its state at 32 kept
    before = {k: server.metric(k) for k in ("vllm:num_preemptions_total", "tram:recurrent_snapshots_restored_total")}
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        together = list(ex.map(lambda p: create(server, p, max_tokens=48, n=2), prompts))
    assert [t[:2] for t in together] == solo
    assert server.metric("vllm:num_preemptions_total") > before["vllm:num_preemptions_total"]
    assert server.metric("tram:recurrent_snapshots_restored_total") > before["tram:recurrent_snapshots_restored_total"]
    m = server.metrics()
    assert m["tram:recurrent_snapshots_used"][frozenset()] <= m["tram:prefix_cache_blocks"][frozenset()]


def test_dashboard_shows_the_state_pool(server):
    from dashboard_util import SnapshotReader
    snaps = SnapshotReader(server)
    try:
        info = snaps.wait(timeout=30)["info"]
        assert info["state_slots"] == 32 and info["state_bytes"] > 0 and info["state_slots_used"] == 0
        assert info["state_snapshots"] == 12 and 0 <= info["state_snapshots_used"] <= 12
    finally:
        snaps.close()
