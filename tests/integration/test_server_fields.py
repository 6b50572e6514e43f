"""Every request field beyond OpenAI's core that tram reads takes effect (a
value that must change the output changes it) or is refused with a 400 that
names it: vLLM's min_tokens, include_stop_str_in_output,
truncate_prompt_tokens, skip_special_tokens, continue_final_message,
add_generation_prompt, stream_options.continuous_usage_stats, /tokenize's
return_token_strs, and the refused ones (use_beam_search,
return_tokens_as_token_ids, ...); return_token_ids has its own file
(test_return_token_ids.py). Through the official `openai` client (sync and async,
extra_body for vLLM's fields) and raw HTTP where the client hides the wire.
Greedy and short: the model runs on two shared cores."""
import asyncio
import time

import gguf
import pytest

from tram_server import model_path, server_fixture

server = server_fixture()

HI = [{"role": "user", "content": "Say hi"}]
PROMPT = "The capital of France is"


def chat(server, messages=HI, max_tokens=60, **extra):
    return server.client().chat.completions.create(model=None, messages=messages, max_tokens=max_tokens,
                                                   temperature=0, extra_body=extra or None)


def complete(server, prompt=PROMPT, max_tokens=16, **extra):
    return server.client().completions.create(model=None, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                              extra_body=extra or None)


def test_min_tokens_holds_back_the_end(server):
    plain = chat(server)
    n = plain.usage.completion_tokens
    assert plain.choices[0].finish_reason == "stop" and n < 50  # the model ends by itself
    held = chat(server, min_tokens=n + 8)
    assert held.usage.completion_tokens >= n + 8
    assert held.choices[0].message.content.startswith(plain.choices[0].message.content)
    assert len(held.choices[0].message.content) > len(plain.choices[0].message.content)


def test_min_tokens_holds_back_stop_strings_and_ids(server):
    text = complete(server).choices[0].text  # " Paris.\n\nThe answer is: ..."
    assert text.startswith(" Paris")
    early = complete(server, stop=[" Paris"])
    assert early.choices[0].text == "" and early.choices[0].finish_reason == "stop"
    late = complete(server, stop=[" Paris"], min_tokens=3)
    assert late.choices[0].text.startswith(" Paris") and late.usage.completion_tokens >= 3
    first = server.tokenize(prompt=" Paris", add_special_tokens=False)[0]
    assert complete(server, stop_token_ids=[first]).usage.completion_tokens == 1
    assert complete(server, stop_token_ids=[first], min_tokens=4).usage.completion_tokens >= 4


def test_include_stop_str_in_output(server):
    r = complete(server, stop=["answer"])
    assert r.choices[0].finish_reason == "stop" and r.choices[0].stop_reason == "answer"
    assert not r.choices[0].text.endswith("answer")
    inc = complete(server, stop=["answer"], include_stop_str_in_output=True).choices[0]
    assert inc.text == r.choices[0].text + "answer" and inc.stop_reason == "answer"
    chunks = server.sse("/v1/completions", {"prompt": PROMPT, "max_tokens": 16, "temperature": 0, "stream": True,
                                             "stop": ["answer"], "include_stop_str_in_output": True})
    assert "".join(c["choices"][0]["text"] for c in chunks) == inc.text


def test_truncate_prompt_tokens_keeps_the_last(server):
    long = "Once upon a time there was a dragon who lived in a cave. " + PROMPT
    ids = server.tokenize(prompt=long)
    r = complete(server, prompt=long, truncate_prompt_tokens=5)
    assert r.usage.prompt_tokens == 5 < len(ids)
    same = complete(server, prompt=ids[-5:])
    assert r.choices[0].text == same.choices[0].text
    assert complete(server, prompt=long).usage.prompt_tokens == len(ids)
    c = chat(server, max_tokens=2, truncate_prompt_tokens=4)
    assert c.usage.prompt_tokens == 4


def test_skip_special_tokens_false_shows_control_tokens(server):
    kw = dict(max_tokens=45, ignore_eos=True)  # the model ends its turn within 45 tokens and goes on
    shown = chat(server, skip_special_tokens=False, **kw).choices[0].message.content
    hidden = chat(server, **kw).choices[0].message.content
    assert "<|im_end|>" in shown and "<|im_end|>" not in hidden


def test_add_generation_prompt_changes_the_prompt(server):
    on = chat(server, max_tokens=4)
    off = chat(server, max_tokens=4, add_generation_prompt=False)
    with_gp = server.tokenize(messages=HI)
    without = server.tokenize(messages=HI, add_generation_prompt=False)
    assert on.usage.prompt_tokens == len(with_gp) and off.usage.prompt_tokens == len(without) < len(with_gp)


def test_continue_final_message(server):
    msgs = [{"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "The capital of France is"}]
    closed = server.tokenize(messages=msgs, add_generation_prompt=False)
    open_ = server.tokenize(messages=msgs, add_generation_prompt=False, continue_final_message=True)
    assert closed[:len(open_)] == open_ and len(open_) < len(closed)
    tail = server.post("/detokenize", json={"tokens": closed[len(open_):]}).json()["prompt"]
    assert tail.startswith("<|im_end|>")
    r = chat(server, messages=msgs, max_tokens=8, add_generation_prompt=False, continue_final_message=True)
    assert r.usage.prompt_tokens == len(open_)
    assert r.choices[0].message.content.startswith(" Paris")
    bad = server.post("/v1/chat/completions", json={"messages": msgs, "continue_final_message": True})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "continue_final_message"


def test_continuous_usage_stats(server):
    body = {"messages": HI, "max_tokens": 5, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    chunks = server.sse("/v1/chat/completions", body)
    prompt = len(server.tokenize(messages=HI))
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert all(c["usage"]["prompt_tokens"] == prompt for c in chunks)
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == 5
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == prompt + 5
    plain = server.sse("/v1/chat/completions", {**body, "stream_options": {"include_usage": True}})
    assert all(c["usage"] is None for c in plain[:-1])


def test_cached_tokens_from_the_prefix_cache(server):
    prompt = f"{time.time_ns()} " + "word " * 100  # new to this server's cache
    first = complete(server, prompt=prompt, max_tokens=1)
    again = complete(server, prompt=prompt, max_tokens=1)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < again.usage.prompt_tokens


def test_return_token_strs(server):
    vocab = gguf.GGUFReader(str(model_path())).fields["tokenizer.ggml.tokens"].contents()
    r = server.post("/tokenize", json={"prompt": "Hello world, tram!", "return_token_strs": True}).json()
    assert r["token_strs"] == [vocab[t] for t in r["tokens"]]
    assert server.post("/tokenize", json={"prompt": "Hello"}).json()["token_strs"] is None


@pytest.mark.parametrize("path,field,value", [
    ("/v1/completions", "use_beam_search", True),
    ("/v1/completions", "return_tokens_as_token_ids", True),
    ("/v1/completions", "guided_decoding_backend", "xgrammar"),
    ("/v1/chat/completions", "use_beam_search", True),
    ("/v1/chat/completions", "echo", True),
    ("/v1/chat/completions", "web_search_options", {"x": 1}),
])
def test_refused_fields_name_themselves(server, path, field, value):
    body = {"prompt": PROMPT} if path == "/v1/completions" else {"messages": HI}
    r = server.post(path, json={**body, "max_tokens": 1, field: value})
    assert r.status_code == 400
    e = r.json()["error"]
    assert e["param"] == field and e["code"] == "unsupported_parameter" and field in e["message"]


def test_async_client_with_vllm_fields(server):
    async def go():
        c = server.async_client()
        plain = await c.completions.create(model=None, prompt=PROMPT, max_tokens=16, temperature=0,
                                           stop=["answer"], extra_body={"include_stop_str_in_output": True})
        stream = await c.chat.completions.create(model=None, messages=HI, max_tokens=60, temperature=0, stream=True,
                                                 extra_body={"min_tokens": 50})
        text = "".join([ch.choices[0].delta.content or "" async for ch in stream if ch.choices])
        await c.close()
        return plain, text

    plain, text = asyncio.run(go())
    assert plain.choices[0].text.endswith("answer")
    assert len(text) > len(chat(server).choices[0].message.content)
