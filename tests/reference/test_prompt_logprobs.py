"""Prompt logprobs of a real `tram serve` against the float64 numpy reference
(llama_ref.py): OpenAI's scoring idiom (completions echo + logprobs +
max_tokens 0) and vLLM's prompt_logprobs (completions and chat), through the
official `openai` client, sync and async. Each prompt token's logprob must
be the reference's log_softmax of the row before it, its rank the
reference's, and the alternatives the reference's most likely tokens; a
prompt longer than one engine step (chunked) and a prompt the prefix cache
already holds must give the same numbers."""
import asyncio
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
from tram_server import server_fixture  # noqa: E402

# max_batch_tokens 64: the long prompt is computed in several chunks
server = server_fixture("--max-batch-tokens", "64", use_external=False)

SHORT = "The capital of France is Paris, and the capital of Italy is"
LONG = ("Once upon a time, in a small village by the sea, there lived an old fisherman and his wife. " * 4).strip()
TOL = 2e-2  # logprob units; the forward matches the reference to ~1e-3 relative


def ref_logprobs(ref, ids):
    z = ref.forward(ids)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))  # [len, vocab] float64


def check_entry(lp, pos, tok, logprob, rank=None, alts=(), tol=TOL):
    """One prompt token at pos against row pos-1 of the reference."""
    row = lp[pos - 1]
    assert abs(logprob - row[tok]) < tol, (pos, logprob, row[tok])
    if rank is not None:
        want = 1 + int((row > row[tok]).sum())
        near = int((np.abs(row - row[tok]) < tol).sum()) - 1  # near ties may order either way
        assert abs(rank - want) <= near, (pos, rank, want)
    order = np.argsort(-row)
    for k, (alt_id, alt_lp) in enumerate(alts):
        assert abs(alt_lp - row[alt_id]) < tol
        if row[order[k]] - row[order[k + 1]] > tol and (k == 0 or row[order[k - 1]] - row[order[k]] > tol):
            assert alt_id == order[k], (pos, k)


def test_echo_scoring_idiom(server, default_ref):
    ids = server.tokenize(prompt=SHORT)
    lp = ref_logprobs(default_ref, ids)
    r = server.client().completions.create(model=None, prompt=SHORT, echo=True, logprobs=2, max_tokens=0)
    c = r.choices[0]
    assert c.text == SHORT and r.usage.completion_tokens == 0 and c.finish_reason == "length"
    L = c.logprobs
    assert len(L.tokens) == len(ids) and L.token_logprobs[0] is None and L.top_logprobs[0] is None
    assert "".join(L.tokens) == SHORT and L.text_offset[0] == 0
    assert all(L.text_offset[i + 1] == L.text_offset[i] + len(L.tokens[i]) for i in range(len(ids) - 1))
    for p in range(1, len(ids)):
        check_entry(lp, p, ids[p], L.token_logprobs[p])
        assert len(L.top_logprobs[p]) <= 2
    # with generated tokens too: the prompt's entries lead, the output's follow
    g = server.client().completions.create(model=None, prompt=SHORT, echo=True, logprobs=1, max_tokens=3,
                                           temperature=0)
    gl = g.choices[0].logprobs
    assert len(gl.tokens) == len(ids) + 3 and gl.token_logprobs[1:len(ids)] == L.token_logprobs[1:]
    assert g.choices[0].text == SHORT + "".join(gl.tokens[len(ids):])


def vllm_entries(plp, ids):
    """vLLM's [None, {id: {logprob, rank, decoded_token}}]: (logprob, rank, {id: entry}) per position."""
    assert plp[0] is None and len(plp) == len(ids)
    out = []
    for p in range(1, len(ids)):
        d = {int(k): v for k, v in plp[p].items()}
        out.append((d[ids[p]]["logprob"], d[ids[p]]["rank"], d))
    return out


@pytest.mark.parametrize("text", [SHORT, LONG])
def test_vllm_prompt_logprobs_completions(server, default_ref, text):
    ids = server.tokenize(prompt=text)
    lp = ref_logprobs(default_ref, ids)
    for attempt in range(2):  # the second finds the prompt in the prefix cache: all rows still computed
        r = server.client().completions.create(model=None, prompt=text, max_tokens=1, temperature=0,
                                               extra_body={"prompt_logprobs": 3})
        plp = r.model_extra.get("prompt_logprobs") or r.choices[0].model_extra["prompt_logprobs"]
        for p, (logprob, rank, d) in enumerate(vllm_entries(plp, ids), start=1):
            alts = sorted((v["rank"], i, v["logprob"]) for i, v in d.items() if i != ids[p] or rank <= 3)
            assert [a[0] for a in alts] == list(range(1, 4))  # the 3 likeliest, the prompt token among them or not
            check_entry(lp, p, ids[p], logprob, rank, [(i, l) for _, i, l in alts])
            assert d[ids[p]]["decoded_token"] == server.post("/detokenize", json={"tokens": [ids[p]]}).json()["prompt"]
    if text == LONG:
        assert len(ids) > 64  # more than one step's tokens


def test_vllm_prompt_logprobs_chat_async(server, default_ref):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    ids = server.tokenize(messages=msgs)
    lp = ref_logprobs(default_ref, ids)

    async def go():
        c = server.async_client()
        r = await c.chat.completions.create(model=None, messages=msgs, max_tokens=1, temperature=0,
                                            extra_body={"prompt_logprobs": 0})
        await c.close()
        return r

    r = asyncio.run(go())
    plp = r.model_extra["prompt_logprobs"]
    assert r.usage.prompt_tokens == len(ids)
    for p, (logprob, rank, d) in enumerate(vllm_entries(plp, ids), start=1):
        check_entry(lp, p, ids[p], logprob, rank)
        assert set(d) == {ids[p]}  # 0 alternatives: the prompt token alone


def test_prompt_logprobs_refused_with_stream(server):
    r = server.post("/v1/completions", json={"prompt": SHORT, "prompt_logprobs": 1, "stream": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt_logprobs"
