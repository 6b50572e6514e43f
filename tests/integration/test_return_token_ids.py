"""vLLM's return_token_ids: completions choices carry the output's
`token_ids` and their prompt's `prompt_token_ids`; chat choices carry
`token_ids` and the response its top-level `prompt_token_ids`; streamed
chunks carry each delta's ids and the first chunk of a choice the prompt's.

The ids are checked against an independent tokenizer: Hugging Face
`tokenizers` built from the GGUF's vocabulary and merges (as
test_tokenizer.py builds it), and against /tokenize. Raw HTTP where the
wire format matters, the official `openai` client (extra_body) where a
client would use it. Greedy and short: the model runs on shared cores."""

import pytest

from test_tokenizer import hf_bytelevel, read_vocab, smollm_pre
from tram_server import server_fixture

server = server_fixture()

PROMPT = "The capital of France is"
HI = [{"role": "user", "content": "Say hi"}]


@pytest.fixture(scope="module")
def ref(model_path):
    vocab = read_vocab(model_path)
    return hf_bytelevel(vocab, smollm_pre()), vocab["eos"]


def encode(tk, text):
    return tk.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("prompt", [PROMPT, "def fib(n):", "Once upon a time"])
def test_completion_ids_are_the_text_and_the_prompt(server, ref, prompt):
    tk, _ = ref
    r = server.post("/v1/completions", json={"prompt": prompt, "max_tokens": 24, "temperature": 0,
                                             "return_token_ids": True}).json()
    c = r["choices"][0]
    assert c["finish_reason"] == "length" and len(c["token_ids"]) == r["usage"]["completion_tokens"] == 24
    assert tk.decode(c["token_ids"]) == c["text"]
    assert c["token_ids"] == encode(tk, c["text"])  # these greedy outputs are the canonical encoding
    assert c["prompt_token_ids"] == encode(tk, prompt) == server.tokenize(prompt=prompt)
    assert "prompt_token_ids" not in r  # completions: on the choice, as vLLM's CompletionResponseChoice


def test_without_the_field_nothing_is_added(server):
    for body in ({}, {"return_token_ids": False}):
        r = server.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 2, "temperature": 0, **body}).json()
        assert "token_ids" not in r["choices"][0] and "prompt_token_ids" not in r["choices"][0]
        ch = server.post("/v1/chat/completions", json={"messages": HI, "max_tokens": 2, **body}).json()
        assert "token_ids" not in ch["choices"][0] and "prompt_token_ids" not in ch


def test_completion_stream_deltas_add_up(server):
    body = {"prompt": PROMPT, "max_tokens": 20, "temperature": 0, "return_token_ids": True}
    whole = server.post("/v1/completions", json=body).json()["choices"][0]
    chunks = server.sse("/v1/completions", {**body, "stream": True})
    assert chunks[0]["choices"][0]["prompt_token_ids"] == whole["prompt_token_ids"]
    assert all("prompt_token_ids" not in c["choices"][0] for c in chunks[1:])
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == whole["token_ids"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["text"]


def test_echo_chunk_carries_the_prompt_ids(server, ref):
    tk, _ = ref
    chunks = server.sse("/v1/completions", {"prompt": PROMPT, "max_tokens": 3, "temperature": 0, "echo": True,
                                             "stream": True, "return_token_ids": True})
    first = chunks[0]["choices"][0]
    assert first["text"] == PROMPT and first["token_ids"] == [] and first["prompt_token_ids"] == encode(tk, PROMPT)
    assert len([t for c in chunks for t in c["choices"][0]["token_ids"]]) == 3


def test_each_prompt_and_choice_has_its_own(server, ref):
    tk, _ = ref
    prompts = [PROMPT, "Once upon a time"]
    r = server.post("/v1/completions", json={"prompt": prompts, "n": 2, "max_tokens": 6, "seed": 3,
                                             "return_token_ids": True}).json()
    assert len(r["choices"]) == 4
    for c in r["choices"]:
        assert c["prompt_token_ids"] == encode(tk, prompts[c["index"] // 2])
        assert len(c["token_ids"]) == 6 and tk.decode(c["token_ids"]) == c["text"]


def test_chat_through_the_openai_client(server, ref):
    tk, eos = ref
    r = server.client().chat.completions.create(model=None, messages=HI, max_tokens=60, temperature=0,
                                                extra_body={"return_token_ids": True})
    c = r.choices[0]
    assert c.finish_reason == "stop" and c.token_ids[-1] == eos  # the end-of-turn token is an output token
    assert len(c.token_ids) == r.usage.completion_tokens
    assert tk.decode(c.token_ids, skip_special_tokens=True) == c.message.content
    want = server.post("/tokenize", json={"messages": HI}).json()["tokens"]
    assert r.prompt_token_ids == want and len(want) == r.usage.prompt_tokens
    assert "prompt_token_ids" not in (c.model_extra or {})  # chat: at the top level only


def test_chat_stream_through_the_openai_client(server):
    client = server.client()
    kw = dict(model=None, messages=HI, max_tokens=40, temperature=0, extra_body={"return_token_ids": True})
    whole = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(stream=True, **kw))
    assert chunks[0].prompt_token_ids == whole.prompt_token_ids
    assert all(getattr(ch, "prompt_token_ids", None) is None for ch in chunks[1:])
    ids = [t for ch in chunks for t in (ch.choices[0].token_ids or [])]
    assert ids == whole.choices[0].token_ids
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == whole.choices[0].message.content


def test_return_tokens_as_token_ids_is_still_refused(server):
    r = server.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 1, "logprobs": 1,
                                             "return_tokens_as_token_ids": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "return_tokens_as_token_ids"
    r = server.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 1, "return_token_ids": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "return_token_ids"


def test_tool_call_stream_ids_add_up(ref, tmp_path):
    """With tools, a stream's ids come whole with the finish chunk (the text
    is held while it may be a call): they still add up to the whole
    response's."""
    import tram_server
    from test_server_tools import TEMPLATE, TOOLS, few_shot
    srv = tram_server.start(tmp_path, "--chat-template", str(TEMPLATE), "--max-model-len", "2048")
    try:
        kw = dict(model=None, messages=few_shot(), tools=TOOLS, temperature=0, max_tokens=40,
                  extra_body={"return_token_ids": True})
        whole = srv.client().chat.completions.create(**kw)
        assert whole.choices[0].finish_reason == "tool_calls"
        chunks = list(srv.client().chat.completions.create(stream=True, **kw))
        assert all(ch.choices[0].token_ids is not None for ch in chunks)  # [] where a chunk adds none
        assert [t for ch in chunks for t in ch.choices[0].token_ids] == whole.choices[0].token_ids
        assert chunks[0].prompt_token_ids == whole.prompt_token_ids
        assert len(whole.choices[0].token_ids) == whole.usage.completion_tokens
    finally:
        assert srv.stop() == 0
