"""Smaller divergences from OpenAI and vLLM, on a server with aliases, CORS,
an API key and a default max_tokens: --served-model-name with aliases and
GET /v1/models/{id}, 64-bit seeds, logprobs: 0, logprobs trimmed with the
text by a stop string, system_fingerprint, --default-max-tokens, and CORS
preflights (answered without the API key). The official `openai` client
(sync and async) and raw HTTP for the headers."""
import asyncio

import httpx
import openai
import pytest

from tram_server import server_fixture

KEY = "compat-key"
ORIGIN = "https://app.example"
server = server_fixture("--served-model-name", "smol, alias-1,org/alias-2", "--allowed-origins", ORIGIN,
                        "--api-keys", KEY, "--default-max-tokens", "7", use_external=False)

PROMPT = "The capital of France is"
AUTH = {"Authorization": f"Bearer {KEY}"}


def client(server):
    return server.client(api_key=KEY)


def test_names_and_model_retrieve(server):
    ids = [m.id for m in client(server).models.list().data]
    assert ids == ["smol", "alias-1", "org/alias-2"]
    for name in ids:
        m = client(server).models.retrieve(name)
        assert m.id == name and m.object == "model"
    with pytest.raises(openai.NotFoundError):
        client(server).models.retrieve("other")
    r = client(server).completions.create(model="org/alias-2", prompt=PROMPT, max_tokens=2, temperature=0)
    assert r.model == "smol"  # responses name the first name, as vLLM
    with pytest.raises(openai.NotFoundError):
        client(server).completions.create(model="alias", prompt=PROMPT, max_tokens=2)


def sample(server, seed):
    return client(server).completions.create(model=None, prompt=PROMPT, max_tokens=12, temperature=1.0,
                                             seed=seed).choices[0].text


def test_64_bit_seeds(server):
    top = sample(server, 2**64 - 1)
    assert top == sample(server, -1)  # taken modulo 2^64
    assert top == sample(server, 2**64 - 1)
    assert sample(server, 2**63 - 1) == sample(server, -(2**63) - 1 + 2**64)
    outs = {sample(server, s) for s in (2**64 - 2, 2**63 + 5, 2**53 + 1, 2**53 + 2)}
    assert len(outs) >= 3  # seeds beyond 2^53 are not rounded together
    bad = httpx.post(server.url + "/v1/completions", headers={**AUTH, "Content-Type": "application/json"},
                     content=b'{"prompt": "x", "seed": 18446744073709551616}')
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "seed"
    assert "18446744073709551616" in bad.json()["error"]["message"]


def test_logprobs_zero_and_stop_trim(server):
    c = client(server)
    zero = c.completions.create(model=None, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=0)
    one = c.completions.create(model=None, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=1)
    assert zero.choices[0].logprobs.token_logprobs == one.choices[0].logprobs.token_logprobs
    assert len(zero.choices[0].logprobs.tokens) == 5
    cut = c.completions.create(model=None, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=1, stop=".")
    ch = cut.choices[0]
    assert ch.text == " Paris" and ch.finish_reason == "stop"
    assert "".join(ch.logprobs.tokens) == ch.text  # the "." that was cut has no entry
    assert all(o < len(ch.text) for o in ch.logprobs.text_offset)


def test_system_fingerprint(server):
    c = client(server)
    a = c.completions.create(model=None, prompt=PROMPT, max_tokens=1)
    b = c.chat.completions.create(model=None, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    assert a.system_fingerprint and a.system_fingerprint.startswith("fp_")
    assert a.system_fingerprint == b.system_fingerprint
    chunks = list(c.chat.completions.create(model=None, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                            stream=True))
    assert {ch.system_fingerprint for ch in chunks} == {a.system_fingerprint}


def test_default_max_tokens(server):
    msgs = [{"role": "user", "content": "Tell me a long story about a dragon."}]
    r = client(server).chat.completions.create(model=None, messages=msgs, temperature=0)
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length"
    longer = client(server).chat.completions.create(model=None, messages=msgs, temperature=0, max_tokens=12)
    assert longer.usage.completion_tokens == 12
    # completions keep OpenAI's own default (16)
    assert client(server).completions.create(model=None, prompt="Once upon a time", temperature=0,
                                             extra_body={"ignore_eos": True}).usage.completion_tokens == 16


def test_cors_preflight_and_headers(server):
    pre = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    r = server.http.options("/v1/chat/completions", headers=pre)  # no API key: a browser sends none
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in r.headers["access-control-allow-methods"]
    assert r.headers["access-control-allow-headers"] == "authorization, content-type"
    bad = server.http.options("/v1/chat/completions", headers={**pre, "Origin": "https://evil.example"})
    assert bad.status_code == 403 and "access-control-allow-origin" not in bad.headers
    # an OPTIONS that is no preflight is an ordinary request: it needs the key
    assert server.http.options("/v1/models", headers={"Origin": ORIGIN}).status_code == 401
    ok = server.http.post("/v1/completions", headers={**AUTH, "Origin": ORIGIN},
                          json={"prompt": PROMPT, "max_tokens": 1})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ORIGIN
    denied = server.http.post("/v1/completions", headers={"Origin": ORIGIN}, json={"prompt": PROMPT})
    assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == ORIGIN
    plain = server.http.get("/v1/models", headers=AUTH)
    assert "access-control-allow-origin" not in plain.headers


def test_async_client_alias(server):
    async def go():
        c = server.async_client(api_key=KEY)
        m = await c.models.retrieve("alias-1")
        r = await c.chat.completions.create(model="alias-1", messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=3, temperature=0)
        await c.close()
        return m, r

    m, r = asyncio.run(go())
    assert m.id == "alias-1" and r.model == "smol" and r.usage.completion_tokens <= 3
