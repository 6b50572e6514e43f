"""n > 1 with speculative decoding: the children of a request are forked
from the lead at its first sampled token (each child samples its own first
token from that row, and gets its own copy of the K/V blocks and, on a
hybrid, of the recurrent state). When a prompt's last chunk is one token
(a chunked prefill cut by max_batch_tokens, or a hybrid's prompt cut at its
last full block for the snapshot there), the lead runs that token as a
running decode, and it may speculate there: its first token is then
sampled by verification.

Here prompts of 2 blocks of 16 + 1 tokens, whose tail repeats an earlier
4-gram (so `--speculative ngram` has drafts for that step), run with
max_batch_tokens 32 (the transformer's last chunk is the 33rd token; the
hybrid's too, cut at its last full block), with n = 2 and n = 3, greedy
and seeded (temperature 0.8), on a server with and one without
speculation: every choice's tokens and logprobs must be the same. For the
transformer default model (SmolLM2) and for the hybrid qwen35-tiny."""
import pathlib

import numpy as np
import pytest
import tram_server

HF = pathlib.Path(__file__).resolve().parents[1] / "reference" / "data" / "qwen35-tiny"
ARGS = ("--max-seqs", "8", "--block-size", "16", "--kv-cache-blocks", "64", "--max-batch-tokens", "32")
SPEC = ("--speculative", "ngram", "--num-speculative-tokens", "4", "--speculative-max-batch", "8")

plain_tf = tram_server.server_fixture(*ARGS, use_external=False)
spec_tf = tram_server.server_fixture(*ARGS, *SPEC, use_external=False)
plain_hy = tram_server.server_fixture(*ARGS, use_external=False, model=lambda: HF)
spec_hy = tram_server.server_fixture(*ARGS, *SPEC, use_external=False, model=lambda: HF)


def prompts(vocab, count, seed):
    """33-token prompts (2 blocks of 16 + 1) ending in a 4-gram seen earlier in the prompt."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        p = rng.integers(10, vocab, 33).tolist()
        p[29:33] = p[5:9]
        out.append(p)
    return out


def run(srv, prompt, n, temperature):
    client = srv.client()
    r = client.completions.create(model=client.models.list().data[0].id, prompt=prompt, max_tokens=24, n=n, temperature=temperature,
                                        seed=1234, logprobs=1,
                                        extra_body={"return_token_ids": True, "ignore_eos": True})
    ch = sorted(r.choices, key=lambda c: c.index)
    assert len(ch) == n
    return ([c.model_extra["token_ids"] for c in ch], [c.logprobs.token_logprobs for c in ch],
            r.usage.prompt_tokens_details.cached_tokens)


def check(plain, spec, vocab, seed):
    drafts0 = spec.metric("vllm:spec_decode_num_drafts_total")
    ps = iter(prompts(vocab, 12, seed))
    for n in (2, 3):
        for temperature in (0, 0.8, 0.8):
            p = next(ps)  # a new prompt each time: no prefix-cache hit
            want = run(plain, p, n, temperature)
            got = run(spec, p, n, temperature)
            assert got[2] == want[2] == 0
            assert got[0] == want[0], (n, temperature)
            assert got[1] == want[1], (n, temperature)
            if temperature:
                assert len({tuple(t) for t in got[0]}) > 1, "seeded choices differ from each other"
    assert spec.metric("vllm:spec_decode_num_drafts_total") > drafts0


def test_n_with_speculation_transformer(plain_tf, spec_tf):
    check(plain_tf, spec_tf, 4000, 31)


def test_n_with_speculation_hybrid(plain_hy, spec_hy):
    check(plain_hy, spec_hy, 96, 32)
