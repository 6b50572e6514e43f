"""The OpenAI-compatible API of a real `tram serve` on the default model,
through the official `openai` client (and httpx where the client hides the
raw answer): completions and chat, plain and streaming, n > 1, several
prompts, token-id prompts, echo, logprobs, stop strings, seeds, usage
against /tokenize, /v1/models, /tokenize and /detokenize against the model
file's tokenizer (the `gguf` package), and the error answers.

Outputs are short (a few tokens): the model runs on two shared cores."""
import json

import gguf
import httpx
import openai
import pytest

from tram_server import model_path, server_fixture, start

server = server_fixture()

PROMPT = "The capital of France is"
CHAT = [{"role": "user", "content": "Name three colours."}]


def greedy(server, prompt=PROMPT, n_tokens=8, **kw):
    return server.client().completions.create(model=None, prompt=prompt, max_tokens=n_tokens, temperature=0,
                                              **kw)


# --- completions ------------------------------------------------------------------------


def test_completion_plain_and_usage_matches_tokenize(server):
    r = greedy(server)
    c = r.choices[0]
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert c.index == 0 and c.finish_reason == "length" and c.text
    assert r.usage.prompt_tokens == len(server.tokenize(prompt=PROMPT))
    assert r.usage.completion_tokens == 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + 8
    assert r.model == server.get("/v1/models").json()["data"][0]["id"]


def test_completion_stream_equals_plain(server):
    plain = greedy(server).choices[0].text
    chunks = list(server.client().completions.create(prompt=PROMPT, max_tokens=8, temperature=0, stream=True,
                                                     model=None))
    assert len({c.id for c in chunks}) == 1
    assert "".join(c.choices[0].text for c in chunks) == plain
    assert [c.choices[0].finish_reason for c in chunks][-1] == "length"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


def test_stream_usage_chunk_and_done(server):
    body = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    with server.http.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    assert all("usage" in o and o["usage"] is None for o in objs[:-1])
    assert objs[-1]["choices"] == [] and objs[-1]["usage"]["completion_tokens"] == 4
    assert objs[-1]["usage"]["prompt_tokens"] == len(server.tokenize(prompt=PROMPT))


def test_several_prompts_and_n(server):
    prompts = [PROMPT, "One, two, three,"]
    solo = [greedy(server, p, 4).choices[0].text for p in prompts]
    r = server.client().completions.create(model=None, prompt=prompts, n=2, max_tokens=4, temperature=0)
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    by_index = {c.index: c.text for c in r.choices}
    # choice index = prompt index * n + i; greedy, so both choices of a prompt agree with its solo run
    assert [by_index[0], by_index[1], by_index[2], by_index[3]] == [solo[0], solo[0], solo[1], solo[1]]
    assert r.usage.prompt_tokens == sum(len(server.tokenize(prompt=p)) for p in prompts)
    assert r.usage.completion_tokens == 16


def test_token_id_prompts_and_echo(server):
    ids = server.tokenize(prompt=PROMPT)
    text = greedy(server).choices[0].text
    r = server.client().completions.create(model=None, prompt=[ids, ids], max_tokens=8, temperature=0)
    assert [c.text for c in r.choices] == [text, text]
    e = greedy(server, echo=True).choices[0].text
    assert e == PROMPT + text


def test_n_sampled_choices_stream(server):
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 1.0, "seed": 7, "n": 3, "stream": True}
    with server.http.stream("POST", "/v1/completions", json=body) as r:
        objs = [json.loads(l[6:]) for l in r.iter_lines() if l.startswith("data: {")]
    texts, finished = {}, {}
    for o in objs:
        for c in o["choices"]:
            texts[c["index"]] = texts.get(c["index"], "") + c["text"]
            if c["finish_reason"]:
                finished[c["index"]] = c["finish_reason"]
    assert set(finished) == {0, 1, 2}
    whole = server.client().completions.create(model=None, prompt=PROMPT, max_tokens=6, temperature=1.0, seed=7,
                                               n=3)
    assert {c.index: c.text for c in whole.choices} == texts  # the same seed, streamed or not


def test_seed_reproducibility(server):
    def sample(seed):
        return server.client().completions.create(model=None, prompt=PROMPT, max_tokens=10, temperature=1.0,
                                                  top_p=0.95, seed=seed).choices[0].text

    a, b = sample(1234), sample(1234)
    assert a == b
    assert len({sample(s) for s in (1, 2, 3, 4)}) > 1  # and the seed matters


def test_completion_logprobs(server):
    r = greedy(server, logprobs=3)
    c = r.choices[0]
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 8
    assert "".join(lp.tokens) == c.text  # no stop string, no special token in 8 greedy tokens
    assert lp.text_offset == [sum(len(t.encode()) for t in lp.tokens[:i]) for i in range(8)]
    for tok, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 3 and logprob <= 0
        best = max(top.values())
        assert top[tok] == pytest.approx(logprob) and logprob == pytest.approx(best)  # greedy: the argmax


def test_stop_strings(server):
    full = greedy(server, n_tokens=16).choices[0].text
    stop = full[len(full) // 2:len(full) // 2 + 2]
    assert stop.strip(), full
    r = server.client().completions.create(model=None, prompt=PROMPT, max_tokens=16, temperature=0, stop=[stop, "zzz"])
    c = r.choices[0]
    assert c.finish_reason == "stop" and stop not in c.text
    assert c.text == full[:full.index(stop)]
    assert c.model_extra.get("stop_reason") == stop


def test_stop_token_ids_stop_reason(server):
    # the engine decides the reason once: a stop_token_ids match is vLLM's stop_reason (the id), an
    # end-of-generation token is a plain "stop" with stop_reason null
    full = greedy(server, n_tokens=8).choices[0].text
    ids = server.post("/tokenize", json={"prompt": full, "add_special_tokens": False}).json()["tokens"]
    stop_id = ids[2]
    c = greedy(server, n_tokens=8, extra_body={"stop_token_ids": [stop_id]}).choices[0]
    assert c.finish_reason == "stop" and c.model_extra.get("stop_reason") == stop_id
    assert full.startswith(c.text) and len(c.text) < len(full)
    r = server.client().chat.completions.create(model=None, messages=CHAT, max_tokens=200, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "stop" and ch.model_extra.get("stop_reason") is None


# --- chat -----------------------------------------------------------------------------------


def test_chat_plain_and_usage_matches_tokenize(server):
    r = server.client().chat.completions.create(model=None, messages=CHAT, max_tokens=8, temperature=0)
    m = r.choices[0].message
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert m.role == "assistant" and m.content
    assert r.usage.prompt_tokens == len(server.tokenize(messages=CHAT))
    assert r.usage.completion_tokens == 8 or r.choices[0].finish_reason == "stop"


def test_chat_stream(server):
    model = server.get("/v1/models").json()["data"][0]["id"]
    plain = server.client().chat.completions.create(model=model, messages=CHAT, max_tokens=8, temperature=0)
    chunks = list(server.client().chat.completions.create(model=model, messages=CHAT, max_tokens=8, temperature=0,
                                                          stream=True, stream_options={"include_usage": True}))
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:-1])
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == plain.choices[0].finish_reason and not any(finishes[:-1])
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == plain.usage.prompt_tokens


def test_chat_logprobs(server):
    model = server.get("/v1/models").json()["data"][0]["id"]
    r = server.client().chat.completions.create(model=model, messages=CHAT, max_tokens=6, temperature=0,
                                                logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert len(e.top_logprobs) == 2 and e.logprob <= 0
        assert e.logprob == pytest.approx(e.top_logprobs[0].logprob)  # greedy
        assert bytes(e.bytes) == e.token.encode()
    joined = "".join(e.token for e in content)
    assert joined.startswith(r.choices[0].message.content)


# --- the other endpoints --------------------------------------------------------------------


@pytest.fixture(scope="module")
def vocab():
    r = gguf.GGUFReader(str(model_path()))
    return r.fields["tokenizer.ggml.tokens"].contents()


def test_models(server):
    d = server.get("/v1/models").json()
    m = d["data"][0]
    assert d["object"] == "list" and m["object"] == "model" and m["owned_by"] == "tram"
    assert m["max_model_len"] == 1024 and m["root"].endswith(".gguf")
    assert server.client().models.list().data[0].id == m["id"]


def test_tokenize_detokenize(server, vocab):
    text = "Hello world, tram!"
    r = server.post("/tokenize", json={"prompt": text}).json()
    assert r["count"] == len(r["tokens"]) and r["max_model_len"] == 1024
    # byte-level BPE: the stored token texts spell the input ('Ġ' is a space)
    assert "".join(vocab[t] for t in r["tokens"]).replace("Ġ", " ") == text
    assert server.post("/detokenize", json={"tokens": r["tokens"]}).json()["prompt"] == text


def test_health(server):
    r = server.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


# --- errors ---------------------------------------------------------------------------------


def error_of(r):
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}
    return e


def test_bad_parameter_names_the_field(server):
    r = server.post("/v1/completions", json={"prompt": "x", "temperature": 3})
    assert r.status_code == 400 and error_of(r)["param"] == "temperature"
    r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})
    assert r.status_code == 400 and error_of(r)["param"].startswith("messages[0].content[0]")
    r = server.post("/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_json"
    with pytest.raises(openai.BadRequestError):
        server.client().completions.create(model=None, prompt=PROMPT, max_tokens=0)


def test_prompt_longer_than_context(server):
    prompt = "hello " * 1100
    n = len(server.tokenize(prompt=prompt))
    r = server.post("/v1/completions", json={"prompt": prompt, "max_tokens": 4})
    e = error_of(r)
    assert r.status_code == 400 and "1024" in e["message"] and str(n) in e["message"]
    r = server.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2000})
    assert r.status_code == 400 and "1024" in error_of(r)["message"]
    r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": prompt}]})
    assert r.status_code == 400 and "1024" in error_of(r)["message"]


def test_unknown_model_path_and_method(server):
    r = server.post("/v1/completions", json={"prompt": "x", "model": "gpt-4"})
    assert r.status_code == 404 and error_of(r)["param"] == "model"
    assert server.get("/v1/nothing").status_code == 404
    r = server.get("/v1/completions")
    assert r.status_code == 405 and "POST" in r.headers["allow"]


def test_body_too_large(server):
    r = server.post("/v1/completions", content=b"x" * (3 << 20), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert server.get("/health").status_code == 200


def test_api_keys_and_queue_full(tmp_path):
    """401 without the key (/health public); 429 when the waiting queue is
    full; 503 while draining."""
    srv = start(tmp_path, "--api-keys", "k1,k2", "--max-seqs", "1", "--max-waiting", "1")
    try:
        assert srv.get("/health").status_code == 200
        assert srv.get("/v1/models").status_code == 401
        assert srv.get("/v1/models", headers={"authorization": "Bearer nope"}).status_code == 401
        assert srv.get("/v1/models", headers={"authorization": "Bearer k2"}).status_code == 200
        with pytest.raises(openai.AuthenticationError):
            srv.client(api_key="wrong").models.list()
        c = srv.client(api_key="k1")
        long = {"prompt": PROMPT, "max_tokens": 1000, "temperature": 0, "ignore_eos": True, "stream": True}
        h = {"authorization": "Bearer k1"}
        with httpx.Client(base_url=srv.url, timeout=60) as a, httpx.Client(base_url=srv.url, timeout=60) as b:
            with a.stream("POST", "/v1/completions", json=long, headers=h) as running:
                lines = running.iter_lines()  # kept: a discarded iterator closes the connection
                next(lines)  # admitted and running
                with b.stream("POST", "/v1/completions", json=long, headers=h) as waiting:
                    assert waiting.status_code == 200  # queued: the one waiting slot
                    with pytest.raises(openai.RateLimitError):
                        c.completions.create(model=None, prompt=PROMPT, max_tokens=2)
                    r = srv.post("/v1/completions", json={"prompt": "x"}, headers=h)
                    assert r.status_code == 429 and r.headers.get("retry-after")
    finally:
        assert srv.stop() == 0
