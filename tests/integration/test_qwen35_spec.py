"""Speculative decoding with Qwen3.5's hybrid as the target (the
transformers-made tiny checkpoint of tests/reference/data/qwen35-tiny)
through `tram serve` and the official `openai` client.

A verification step runs a sequence's decoded token and its k drafts as
k + 1 rows; the Gated DeltaNet kernels keep the recurrent state after each
row, and the slot takes the state after the last accepted one (vLLM's way
for Mamba-style layers; cache/kv_state.h). The reference is the same
server's engine without speculation (test_qwen35_serve.py checks that one
against transformers): every greedy token and logprob must be the same,
on repetitive prompts where n-gram drafts are both accepted and rejected
(the vllm:spec_decode_* counters say both happened), with n = 2, with
prefix-cache hits restoring snapshots taken among speculated tokens (a
multi-turn conversation), with preemptions while speculating, with stop
strings and with structured output; and with a draft model (a 1-layer
random Llama given the fixture's vocabulary) — and with hybrid draft
models (the fixture as its own draft, and the Qwen3.5-MoE fixture), whose
recurrent states the draft proposer keeps in a pool of its own."""
import concurrent.futures
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tram_server

HF = pathlib.Path(__file__).resolve().parents[1] / "reference" / "data" / "qwen35-tiny"
ARGS = ("--max-seqs", "8", "--block-size", "16", "--kv-cache-blocks", "64")
SPEC = ("--speculative", "ngram", "--num-speculative-tokens", "4", "--speculative-max-batch", "8")

plain = tram_server.server_fixture(*ARGS, use_external=False, model=lambda: HF)
spec = tram_server.server_fixture(*ARGS, *SPEC, use_external=False, model=lambda: HF)
# 12 blocks of 16 tokens for 4 running sequences of up to 124 tokens: preemptions while speculating
small = tram_server.server_fixture("--max-seqs", "4", "--block-size", "16", "--kv-cache-blocks", "12", *SPEC,
                                   use_external=False, model=lambda: HF)

COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")


def counters(srv):
    return {k: srv.metric(k) for k in COUNTERS}


def create(srv, prompt, max_tokens=48, n=1, **kw):
    """A greedy completion with logprobs: (token ids per choice, logprobs per choice, cached_tokens, texts)."""
    r = srv.client().completions.create(model="qwen35-tiny", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                        n=n, logprobs=1, extra_body={"return_token_ids": True, "ignore_eos": True,
                                                                     **kw})
    ch = sorted(r.choices, key=lambda c: c.index)
    return ([c.model_extra["token_ids"] for c in ch], [c.logprobs.token_logprobs for c in ch],
            r.usage.prompt_tokens_details.cached_tokens, [c.text for c in ch])


def repetitive(rng, n):
    """Prompts a tiny random model continues in loops: a short random motif repeated, and random text."""
    out = []
    for i in range(n):
        motif = rng.integers(0, 96, int(rng.integers(2, 7))).tolist()
        out.append(motif * int(rng.integers(4, 10)) if i % 4 else rng.integers(0, 96, 30).tolist())
    return out


def forced(srv, text, shown=None):
    """A chat completion whose answer a JSON schema forces to be {"a": text} (up to whitespace), `shown` (default
    text) quoted in the prompt: the n-gram drafts inside the string are the tokens the masked sampler must take,
    up to where text differs from what the prompt shows (drafts partly accepted). Then "b", a free string: its
    tokens and logprobs are the model's own, from the recurrent state the forced part left."""
    schema = {"type": "object", "properties": {"a": {"enum": [text]}, "b": {"type": "string", "maxLength": 12}},
              "required": ["a", "b"], "additionalProperties": False}
    r = srv.client().chat.completions.create(
        model="qwen35-tiny", max_tokens=80, temperature=0, logprobs=True,
        messages=[{"role": "user", "content": f'{{"a": "{shown or text}"}}'}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    c = r.choices[0]
    return c.message.content, [t.logprob for t in c.logprobs.content]


def test_ngram_greedy_is_plain_decoding(plain, tmp_path):
    """Random models rarely continue a prompt's n-grams, so plain prompts give rejected drafts; an answer forced
    by a schema to repeat the prompt's text gives accepted ones (the mask leaves one token, the drafts are it).
    The engine speculates while its measured cost of a draft row says it pays (sched_spec.c), and at this tiny
    model's 0.1 ms steps a loaded machine's scheduling noise can make it stop: each round runs on a fresh server
    (the cost at its optimistic start, the forced answer first), until both kinds of drafts were seen."""
    rng = np.random.default_rng(41)
    prompts = repetitive(rng, 8)
    texts = ["ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789abcdefghij", "The quick brown fox jumps"]
    texts += ["".join(rng.permutation(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"))[:30]) for _ in range(3)]
    accepted = rejected = 0
    for i, text in enumerate(texts):
        (tmp_path / str(i)).mkdir()
        srv = tram_server.start(tmp_path / str(i), *ARGS, *SPEC, model=HF)
        try:
            before = counters(srv)
            want = forced(plain, text)
            assert json.loads(want[0])["a"] == text
            assert forced(srv, text) == want
            # every 5th character changed: rounds that verify across a change keep the drafts before it only,
            # and the sequence continues from the kept state of the last accepted row
            edited = "".join(str(k % 10) if k % 5 == 4 else ch for k, ch in enumerate(text))
            want = forced(plain, edited, text)
            assert json.loads(want[0])["a"] == edited
            assert forced(srv, edited, text) == want
            for p in prompts[2 * (i % 4):2 * (i % 4) + 2]:
                want = create(plain, p)
                got = create(srv, p)
                assert got[0] == want[0]
                assert got[1] == want[1]  # the logprobs too: the verified rows are bitwise the plain decode's
            after = counters(srv)
        finally:
            assert srv.stop() == 0
        a = after[COUNTERS[2]] - before[COUNTERS[2]]
        d = after[COUNTERS[1]] - before[COUNTERS[1]]
        print(f"ngram on qwen35-tiny, round {i}: {a:.0f} of {d:.0f} draft tokens accepted")
        accepted, rejected = accepted + a, rejected + d - a
        if i >= 1 and accepted > 0 and rejected > 0:
            break
    assert accepted > 0  # drafts kept: the state of an accepted row was taken ...
    assert rejected > 0  # ... and drafts rejected: the state after the last accepted row


def test_n2_and_concurrent_requests(plain, spec):
    rng = np.random.default_rng(42)
    prompts = repetitive(rng, 8)
    for p in prompts[:3]:
        want = create(plain, p)[0][0]
        assert create(spec, p, n=2)[0] == [want, want]
    solo = [create(plain, p)[0] for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        together = list(ex.map(lambda p: create(spec, p)[0], prompts))
    assert together == solo


def test_multi_turn_restores_snapshots_taken_while_speculating(plain, spec):
    """Each turn's prompt is the last turn's prompt and answer plus new tokens: it hits the prefix cache up to a
    snapshot a speculating decode took (the state at exactly its block's end, from the kept state of the row that
    ended it), and its answer is plain decoding's."""
    rng = np.random.default_rng(43)
    convo = (rng.integers(0, 96, 5).tolist() * 6)[:27]
    restored = spec.metric("tram:recurrent_snapshots_restored_total")
    hits = 0
    for turn in range(4):
        want = create(plain, convo, max_tokens=40)
        got = create(spec, convo, max_tokens=40)
        assert got[:2] == want[:2]
        hits += got[2]
        convo = convo + got[0][0] + rng.integers(0, 96, 3).tolist()
    assert hits > 0
    assert spec.metric("tram:recurrent_snapshots_restored_total") > restored


def test_preempted_while_speculating(plain, small):
    rng = np.random.default_rng(44)
    prompts = [(rng.integers(0, 96, 3).tolist() * 20)[: int(rng.integers(20, 60))] for _ in range(8)]
    solo = [create(plain, p, max_tokens=64)[0] for p in prompts]
    before, pre = counters(small), small.metric("vllm:num_preemptions_total")
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        together = list(ex.map(lambda p: create(small, p, max_tokens=64)[0], prompts))
    assert together == solo
    assert small.metric("vllm:num_preemptions_total") > pre
    assert small.metric(COUNTERS[1]) > before[COUNTERS[1]]


def test_stop_strings_with_speculation(plain, spec):
    rng = np.random.default_rng(45)
    for p in repetitive(rng, 6)[1:4]:
        text = create(plain, p, max_tokens=40)[3][0]
        stop = text[10:13]
        want = plain.client().completions.create(model="qwen35-tiny", prompt=p, max_tokens=40, temperature=0,
                                                 stop=[stop], extra_body={"ignore_eos": True})
        got = spec.client().completions.create(model="qwen35-tiny", prompt=p, max_tokens=40, temperature=0,
                                               stop=[stop], extra_body={"ignore_eos": True})
        assert got.choices[0].text == want.choices[0].text
        assert got.choices[0].finish_reason == want.choices[0].finish_reason == "stop"


def test_structured_output_with_speculation(plain, spec):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 8}},
              "required": ["a", "b"], "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    for prompt in ("{\"a\": 1, \"b\": \"x\"} {\"a\": 1, \"b\": \"x\"} ", "aaaa bbbb aaaa bbbb "):
        outs = [srv.client().chat.completions.create(model="qwen35-tiny", max_tokens=60, temperature=0,
                                                     messages=[{"role": "user", "content": prompt}],
                                                     response_format=rf).choices[0] for srv in (plain, spec)]
        assert outs[0].message.content == outs[1].message.content
        if outs[0].finish_reason == "stop":
            json.loads(outs[0].message.content)


def transformer_draft(path):
    """A 1-layer random Llama GGUF (F32, written with the `gguf` package) with the fixture's vocabulary: its
    tokenizer keys copied from the fixture's GGUF form, so tram accepts it as a draft of the hybrid."""
    import gguf
    sys.path.insert(0, str(HF.parents[1]))
    from qwen35_gguf import write_gguf
    src = gguf.GGUFReader(str(write_gguf(HF, path.with_suffix(".target.gguf"))))
    rng = np.random.default_rng(31)
    V, D, H, KV, FF = 98, 32, 4, 2, 64
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1), w.add_context_length(512), w.add_embedding_length(D), w.add_feed_forward_length(FF)
    w.add_head_count(H), w.add_head_count_kv(KV), w.add_layer_norm_rms_eps(1e-6), w.add_rope_freq_base(10000.0)
    for key, field in src.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    hd = D // H
    shapes = {"token_embd.weight": (V, D), "output.weight": (V, D), "blk.0.attn_q.weight": (D, D),
              "blk.0.attn_k.weight": (KV * hd, D), "blk.0.attn_v.weight": (KV * hd, D),
              "blk.0.attn_output.weight": (D, D), "blk.0.ffn_gate.weight": (FF, D), "blk.0.ffn_up.weight": (FF, D),
              "blk.0.ffn_down.weight": (D, FF)}
    for name, shape in shapes.items():
        w.add_tensor(name, (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32))
    for name in ("output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"):
        w.add_tensor(name, np.ones(D, np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    return path


def same_as_plain(plain, srv, prompts):
    """srv's greedy tokens and logprobs are plain's: alone and with n = 2 for the first 3 prompts, and all of them
    at once."""
    for p in prompts[:3]:
        want = create(plain, p)
        assert create(srv, p)[:2] == want[:2]
        assert create(srv, p, n=2)[:2] == (want[0] * 2, want[1] * 2)
    solo = [create(plain, p)[:2] for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as ex:
        assert list(ex.map(lambda p: create(srv, p)[:2], prompts)) == solo


def test_draft_model_with_a_hybrid_target(plain, tmp_path):
    """A transformer draft proposing for the hybrid: every greedy token and logprob is plain decoding's, alone,
    with n = 2 and for concurrent requests, and the drafts were verified (the counters moved)."""
    draft = transformer_draft(tmp_path / "draft.gguf")
    srv = tram_server.start(tmp_path, *ARGS, "--speculative", "draft", "--draft-model", str(draft),
                            "--num-speculative-tokens", "3", "--speculative-max-batch", "8", model=HF)
    try:
        before = counters(srv)
        same_as_plain(plain, srv, repetitive(np.random.default_rng(46), 6))
        assert srv.metric(COUNTERS[1]) > before[COUNTERS[1]]
    finally:
        assert srv.stop() == 0


HYBRID_DRAFTS = {"self": HF, "moe": HF.parent / "qwen35moe-tiny"}


def hybrid_draft(tmp_path, draft, *args):
    """A server of the fixture speculating with a hybrid draft: the fixture itself or the Qwen3.5-MoE one, as
    llama.cpp's converter writes them (a draft model is a GGUF file)."""
    sys.path.insert(0, str(HF.parents[1]))
    from qwen35_gguf import write_gguf
    path = write_gguf(HYBRID_DRAFTS[draft], tmp_path / f"{draft}-draft.gguf")
    return tram_server.start(tmp_path, *args, "--speculative", "draft", "--draft-model", str(path),
                             "--num-speculative-tokens", "3", "--speculative-max-batch", "8", model=HF)


@pytest.mark.parametrize("draft", sorted(HYBRID_DRAFTS))
def test_hybrid_draft_model(plain, tmp_path, draft):
    """A hybrid draft (its own recurrent-state pool, scheduler/sched_draft.c): the fixture as its own draft, and
    the Qwen3.5-MoE fixture (another hybrid with the same vocabulary). Every greedy token and logprob is plain
    decoding's — alone, with n = 2, for 8 concurrent requests, with stop strings — and the drafts were verified;
    the model drafting for itself proposes what it decodes, so (up to its GGUF and folder forms' rounding)
    every draft is accepted: a draft state left one token off by a rollback would propose other tokens."""
    srv = hybrid_draft(tmp_path, draft, *ARGS)
    try:
        prompts = repetitive(np.random.default_rng(47), 8)
        before = counters(srv)
        same_as_plain(plain, srv, prompts)
        for p in prompts[4:7]:
            stop = create(plain, p, max_tokens=40)[3][0][10:13]
            want, got = (s.client().completions.create(model="qwen35-tiny", prompt=p, max_tokens=40, temperature=0,
                                                       stop=[stop], extra_body={"ignore_eos": True})
                         for s in (plain, srv))
            assert got.choices[0].text == want.choices[0].text
            assert got.choices[0].finish_reason == want.choices[0].finish_reason == "stop"
        after = counters(srv)
    finally:
        assert srv.stop() == 0
    proposed = after[COUNTERS[1]] - before[COUNTERS[1]]
    accepted = after[COUNTERS[2]] - before[COUNTERS[2]]
    print(f"{draft} draft for qwen35-tiny: {accepted:.0f} of {proposed:.0f} draft tokens accepted")
    assert after[COUNTERS[0]] > before[COUNTERS[0]] and proposed > 0
    if draft == "self":
        assert accepted >= 0.95 * proposed


def test_hybrid_draft_preempted_and_evicted(plain, tmp_path):
    """The self-draft on 12 target blocks for 4 running sequences of up to 124 tokens (preemptions while
    speculating) and a draft cache of 6 blocks (4,096 bytes each: draft states freed with the blocks of idle
    sequences, and the next catch-up starting again from position 0): tokens and logprobs are plain decoding's."""
    srv = hybrid_draft(tmp_path, "self", "--max-seqs", "4", "--block-size", "16", "--kv-cache-blocks", "12",
                       "--draft-kv-cache-bytes", str(6 * 4096))
    try:
        rng = np.random.default_rng(44)
        prompts = [(rng.integers(0, 96, 3).tolist() * 20)[: int(rng.integers(20, 60))] for _ in range(8)]
        solo = [create(plain, p, max_tokens=64)[:2] for p in prompts]
        before, pre = counters(srv), srv.metric("vllm:num_preemptions_total")
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            together = list(ex.map(lambda p: create(srv, p, max_tokens=64)[:2], prompts))
        assert together == solo
        assert srv.metric("vllm:num_preemptions_total") > pre
        proposed = srv.metric(COUNTERS[1]) - before[COUNTERS[1]]
        accepted = srv.metric(COUNTERS[2]) - before[COUNTERS[2]]
        assert proposed > 0 and accepted >= 0.95 * proposed
    finally:
        assert srv.stop() == 0


def test_kv_budget_counts_the_kept_states(tmp_path):
    """The recurrent-state pool (a slot per sequence, speculation's kept states, a scratch) comes out of
    kv_cache_bytes before the KV cache is sized (as vLLM counts Mamba states in its KV budget): with the same
    budget, the speculating server has 32 more slots (k 4 x speculative batch 8) and fewer KV blocks, both numbers
    on /metrics adding up to the budget; a budget the states fill is refused at start, naming the settings."""
    budget = 1 << 20
    seen = {}
    for name, extra in (("plain", ()), ("spec", SPEC)):
        (tmp_path / name).mkdir()
        srv = tram_server.start(tmp_path / name, "--max-seqs", "8", "--block-size", "16", "--kv-cache-bytes",
                                str(budget), *extra, model=HF)
        try:
            seen[name] = (int(srv.metric("tram:kv_cache_blocks_total")),
                          int(srv.metric("tram:recurrent_state_bytes")))
            assert create(srv, [1, 2, 3, 4] * 5, max_tokens=8)[0]  # it serves
        finally:
            assert srv.stop() == 0
    (blocks_plain, states_plain), (blocks_spec, states_spec) = seen["plain"], seen["spec"]
    slot = (states_spec - states_plain) // 32
    assert slot > 0 and states_plain == slot * (8 + 1) and states_spec == slot * (8 + 32 + 1)
    assert blocks_spec < blocks_plain
    # one block: K and V of the one full-attention layer, 2 KV heads of 16, 16 tokens, f16 or f32 elements
    assert any(blocks_plain == (budget - states_plain) // b and blocks_spec == (budget - states_spec) // b
               for b in (2 * 2 * 16 * 16 * 2, 2 * 2 * 16 * 16 * 4))
    # 48 sequences fit without speculation; their 48 + 8 x 8 kept + 1 states do not
    cmd = [str(tram_server.tram_bin()), "serve", "-m", str(HF), "--port", "0", "--threads", "2", "--max-seqs", "48",
           "--kv-cache-bytes", str(budget), "--speculative", "ngram", "--num-speculative-tokens", "8",
           "--speculative-max-batch", "8"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=tram_server.clean_env())
    assert res.returncode != 0
    out = res.stderr + res.stdout
    assert "raise kv_cache_bytes, or lower max_seqs, num_speculative_tokens or speculative_max_batch" in out



def test_default_kv_budget_leaves_the_states_on_top(tmp_path):
    """kv_cache_bytes left at its default (512M) is the KV cache's alone: the states come on top, so the defaults
    start any size of hybrid; the same 512M given on the command line is the total, the states out of it."""
    seen = {}
    for name, extra in (("default", ()), ("given", ("--kv-cache-bytes", "512M"))):
        (tmp_path / name).mkdir()
        srv = tram_server.start(tmp_path / name, "--max-seqs", "8", "--block-size", "16", *extra, *SPEC, model=HF)
        try:
            seen[name] = (int(srv.metric("tram:kv_cache_blocks_total")),
                          int(srv.metric("tram:recurrent_state_bytes")))
        finally:
            assert srv.stop() == 0
    (blocks_default, states), (blocks_given, states_given) = seen["default"], seen["given"]
    assert states == states_given > 0
    assert any(blocks_default == (512 << 20) // b and blocks_given == ((512 << 20) - states) // b
               for b in (2 * 2 * 16 * 16 * 2, 2 * 2 * 16 * 16 * 4))
