"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
on a real `tram serve`, through the official `anthropic` client (pinned in
tests/requirements.txt), whole and streamed, with tools, and raw HTTP for
the event framing and the error shape.

The references are independent of the Anthropic code path: the same
conversation sent as OpenAI chat messages gives the same greedy text and
token counts (the chat path is tested against jinja2 and the model
elsewhere); a conversation with tool_use and tool_result blocks counts the
tokens of the prompt Python's jinja2 renders from the equivalent OpenAI
messages (Qwen2.5's template, as test_server_tools.py); tool inputs are
checked against their schemas with `jsonschema`; the model's own tool call
comes from the real model after a few-shot conversation."""
import json

import anthropic
import httpx
import jsonschema
import pytest

from tram_server import server_fixture, start
from test_server_tools import TEMPLATE, TOOLS, jinja_render

server = server_fixture("--chat-template", str(TEMPLATE), "--max-model-len", "2048", "--special-tokens-in-input",
                        use_external=False)

Q = "What is the capital of France?"
WEATHER = {"name": "get_weather", "description": "Get the weather in a city",
           "input_schema": TOOLS[0]["function"]["parameters"]}
TIME = {"name": "get_time", "description": "The time in a time zone",
        "input_schema": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 12}}, "required": ["tz"]}}
GREEDY = {"temperature": 0}  # the SDK no longer types temperature: sent as extra_body, as Anthropic's API takes it


def client(srv, **kw):
    return anthropic.Anthropic(base_url=srv.url, api_key=kw.pop("api_key", "none"), max_retries=0, **kw)


def model(srv):
    return srv.get("/v1/models").json()["data"][0]["id"]


def chat(srv, messages, **kw):
    return srv.client().chat.completions.create(model=None, messages=messages, temperature=0, **kw)


def test_message_matches_chat(server):
    m = client(server).messages.create(model=model(server), max_tokens=20, system="Answer briefly.",
                                       messages=[{"role": "user", "content": Q}], extra_body=GREEDY)
    ref = chat(server, [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": Q}],
               max_tokens=20)
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"] and m.content[0].text == ref.choices[0].message.content
    assert m.usage.input_tokens == ref.usage.prompt_tokens and m.usage.output_tokens == ref.usage.completion_tokens
    assert m.stop_reason == {"stop": "end_turn", "length": "max_tokens"}[ref.choices[0].finish_reason]
    assert m.stop_sequence is None and m.model == model(server)
    # system as text blocks, content as text blocks: the same prompt
    blocks = client(server).messages.create(
        model=model(server), max_tokens=20, system=[{"type": "text", "text": "Answer briefly."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": Q, "cache_control": {"type": "ephemeral"}}]}],
        extra_body=GREEDY, metadata={"user_id": "u-1"})
    assert blocks.content[0].text == m.content[0].text and blocks.usage.input_tokens == m.usage.input_tokens


def test_stop_sequences_max_tokens_and_prefill(server):
    c = client(server)
    base = c.messages.create(model=model(server), max_tokens=30, messages=[{"role": "user", "content": Q}],
                             extra_body=GREEDY).content[0].text
    word = base.split()[2]
    m = c.messages.create(model=model(server), max_tokens=30, messages=[{"role": "user", "content": Q}],
                          stop_sequences=["zzz", word], extra_body=GREEDY)
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == word
    assert m.content[0].text == base[:base.index(word)]
    cut = c.messages.create(model=model(server), max_tokens=3, messages=[{"role": "user", "content": Q}],
                            extra_body=GREEDY)
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 3
    # a last assistant message is a prefill: the answer continues it (vLLM's continue_final_message)
    pre = [{"role": "user", "content": Q}, {"role": "assistant", "content": "The answer is"}]
    m = c.messages.create(model=model(server), max_tokens=10, messages=pre, extra_body=GREEDY)
    ref = server.client().chat.completions.create(model=None, messages=pre, temperature=0, max_tokens=10,
                                                  extra_body={"continue_final_message": True,
                                                              "add_generation_prompt": False})
    assert m.content[0].text == ref.choices[0].message.content and m.usage.input_tokens == ref.usage.prompt_tokens


def test_stream_matches_whole(server):
    c = client(server)
    kw = dict(model=model(server), max_tokens=16, messages=[{"role": "user", "content": Q}], extra_body=GREEDY)
    whole = c.messages.create(**kw)
    with c.messages.stream(**kw) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens
    # the framing: each event's `event:` line names its data's type, in Anthropic's order
    body = {"model": model(server), "max_tokens": 16, "stream": True, "messages": [{"role": "user", "content": Q}],
            **GREEDY}
    with server.http.stream("POST", "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = []
    for chunk in raw.strip().split("\n\n"):
        ev, data = chunk.split("\n")
        assert ev.startswith("event: ") and data.startswith("data: ")
        events.append(json.loads(data[6:]))
        assert events[-1]["type"] == ev[7:]
    types = [e["type"] for e in events]
    assert types[:4] == ["message_start", "ping", "content_block_start", "content_block_delta"]
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(types[3:-3]) == {"content_block_delta"}
    assert events[0]["message"]["usage"]["input_tokens"] == whole.usage.input_tokens
    assert events[0]["message"]["content"] == [] and events[0]["message"]["stop_reason"] is None
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == whole.content[0].text
    assert events[-2]["delta"]["stop_reason"] == whole.stop_reason


def few_shot():
    """test_server_tools.few_shot() in Anthropic's blocks: each question, the
    assistant's tool_use and the user's tool_result."""
    msgs = []
    for i, city in enumerate(["Paris", "London", "Rome"]):
        msgs += [{"role": "user", "content": f"What is the weather in {city}?"},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": f"c{i}", "name": "get_weather",
                                                    "input": {"city": city}}]}]
    return msgs + [{"role": "user", "content": "What is the weather in Berlin?"}]


def test_tool_use_from_the_model(server):
    c = client(server)
    m = c.messages.create(model=model(server), max_tokens=40, tools=[WEATHER], messages=few_shot(), extra_body=GREEDY)
    assert m.stop_reason == "tool_use"
    (tu,) = [b for b in m.content if b.type == "tool_use"]
    assert tu.name == "get_weather" and tu.input == {"city": "Berlin"} and tu.id.startswith("toolu_")
    with c.messages.stream(model=model(server), max_tokens=40, tools=[WEATHER], messages=few_shot(),
                           extra_body=GREEDY) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use" and [b.input for b in final.content if b.type == "tool_use"] == [tu.input]
    # tool_choice none: the tools are not shown, the output is text
    none = c.messages.create(model=model(server), max_tokens=40, tools=[WEATHER], tool_choice={"type": "none"},
                             messages=few_shot(), extra_body=GREEDY)
    assert [b.type for b in none.content] == ["text"] and none.stop_reason != "tool_use"


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_forces_a_call(server, stream):
    c = client(server)
    kw = dict(model=model(server), max_tokens=60, tools=[WEATHER, TIME], messages=[{"role": "user", "content": Q}],
              extra_body=GREEDY)
    for choice in [{"type": "tool", "name": "get_time"}, {"type": "any"}, {"type": "any",
                                                                           "disable_parallel_tool_use": True}]:
        if stream:
            with c.messages.stream(tool_choice=choice, **kw) as s:
                raw = [e.type for e in s]
                m = s.get_final_message()
            assert "content_block_start" in raw and raw[-1] == "message_stop"
        else:
            m = c.messages.create(tool_choice=choice, **kw)
        uses = [b for b in m.content if b.type == "tool_use"]
        assert m.stop_reason == "tool_use" and uses and all(b.type == "tool_use" for b in m.content)
        if choice["type"] == "tool":
            assert [b.name for b in uses] == ["get_time"]
        if choice.get("disable_parallel_tool_use"):
            assert len(uses) == 1
        for b in uses:
            jsonschema.validate(b.input, {"get_weather": WEATHER, "get_time": TIME}[b.name]["input_schema"])
    # a forced call cut by max_tokens: Anthropic's incomplete tool use — stop_reason max_tokens and the call as
    # the last block (its docs: retry with a higher max_tokens), input {} as its partial arguments are no object;
    # streamed, those partial arguments come as input_json_delta pieces
    cut_kw = {**kw, "max_tokens": 3, "tool_choice": {"type": "tool", "name": "get_time"}}
    cut = c.messages.create(**cut_kw)
    assert cut.stop_reason == "max_tokens" and [(b.type, b.name) for b in cut.content] == [("tool_use", "get_time")]
    assert cut.content[0].input == {} and cut.content[0].id.startswith("toolu_") and cut.usage.output_tokens == 3
    body = {k: v for k, v in cut_kw.items() if k != "extra_body"} | GREEDY | {"stream": True}
    with server.http.stream("POST", "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [(b["type"], b["name"]) for b in starts] == [("tool_use", "get_time")]
    partial = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    assert partial.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(partial)  # cut: not a whole object
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["max_tokens"]
    # a forced call cut by a stop sequence (its first '"') is no tool use: its text as a text block, stop_reason
    # stop_sequence; streamed, the tool_use block already open ends with stop_reason stop_sequence too
    stop_kw = {**kw, "stop_sequences": ['"'], "tool_choice": {"type": "tool", "name": "get_time"}}
    stopped = c.messages.create(**stop_kw)
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == '"'
    assert [b.type for b in stopped.content] == ["text"] and stopped.content[0].text.strip() == "{"
    body = {k: v for k, v in stop_kw.items() if k != "extra_body"} | GREEDY | {"stream": True}
    with server.http.stream("POST", "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["stop_sequence"]


def test_tool_blocks_render_as_the_template_does(server):
    """tool_use and tool_result blocks (and system, consecutive turns) are
    the chat messages a client of the OpenAI API would send: count_tokens
    equals the token count of jinja2's rendering of those messages."""
    convo = [{"role": "user", "content": "What is the weather in Oslo?"},
             {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                               {"type": "tool_use", "id": "t1", "name": "get_weather",
                                                "input": {"city": "Oslo"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                                          {"type": "text", "text": "And tomorrow?"}]},
             {"role": "user", "content": "Be brief."}]
    openai_msgs = [{"role": "system", "content": "You help."},
                   {"role": "user", "content": "What is the weather in Oslo?"},
                   {"role": "assistant", "content": "Let me look.", "tool_calls": [
                       {"id": "t1", "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}]},
                   {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
                   {"role": "user", "content": "And tomorrow?\nBe brief."}]
    want = server.tokenize(prompt=jinja_render(openai_msgs, TOOLS), add_special_tokens=False)
    n = client(server).messages.count_tokens(model=model(server), system="You help.", tools=[WEATHER],
                                             messages=convo)
    assert n.input_tokens == len(want)
    m = client(server).messages.create(model=model(server), max_tokens=1, system="You help.", tools=[WEATHER],
                                       messages=convo, extra_body=GREEDY)
    assert m.usage.input_tokens == len(want)
    # is_error marks the result; without tools (tool_choice none) the template gets none
    err = [{**convo[2], "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "no network"}], "is_error": True}]}]
    bad = [{**openai_msgs[3], "content": "Error: no network"}]
    want = server.tokenize(prompt=jinja_render(openai_msgs[:3] + bad, None), add_special_tokens=False)
    n = client(server).messages.count_tokens(model=model(server), system="You help.", tools=[WEATHER],
                                             tool_choice={"type": "none"}, messages=convo[:2] + err)
    assert n.input_tokens == len(want)


@pytest.mark.parametrize("body,param", [
    ({"max_tokens": None}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking"),
    ({"temperature": 1.5}, "temperature"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"metadata": {"user_id": "u", "x": 1}}, "metadata.x"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "bot", "content": "x"}]}, "messages[0].role"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0]"),
    ({"tools": [{"name": "f"}]}, "tools[0]"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ({"stop_sequences": [""]}, "stop_sequences[0]"),
])
def test_errors_are_anthropics(server, body, param):
    req = {"model": model(server), "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], **body}
    req = {k: v for k, v in req.items() if v is not None}
    r = server.post("/v1/messages", json=req)
    assert r.status_code == 400, r.text
    e = r.json()
    assert e["type"] == "error" and e["error"]["type"] == "invalid_request_error"
    assert e["error"]["message"].startswith(param), e
    if not req.get("max_tokens"):
        return  # the client itself asks for max_tokens
    with pytest.raises(anthropic.BadRequestError) as err:  # the client reads it as Anthropic's
        client(server).messages.create(**{k: v for k, v in req.items() if k in ("model", "messages", "max_tokens")},
                                       extra_body={k: v for k, v in req.items()
                                                   if k not in ("model", "messages", "max_tokens")})
    assert err.value.body["error"]["type"] == "invalid_request_error"


def test_other_statuses_are_anthropics(server):
    with pytest.raises(anthropic.NotFoundError) as e:
        client(server).messages.create(model="claude-nope", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["error"]["type"] == "not_found_error"
    r = server.post("/v1/messages", json={"model": model(server), "max_tokens": 4, "messages": []},
                    headers={"anthropic-version": "2023-01-01"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("anthropic-version")
    r = server.post("/v1/messages/nope", json={})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = server.post("/v1/messages", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["type"] == "error"
    r = server.post("/v1/messages/count_tokens", json={"model": model(server), "max_tokens": 4,
                                                       "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("max_tokens")
    # the OpenAI routes keep OpenAI's shape
    r = server.post("/v1/chat/completions", json={"messages": []})
    assert r.status_code == 400 and "param" in r.json()["error"]


def test_api_key_as_x_api_key(tmp_path):
    srv = start(tmp_path, "--api-keys", "k1")
    try:
        ok = client(srv, api_key="k1").messages.create(model=model_of(srv, "k1"), max_tokens=2,
                                                        messages=[{"role": "user", "content": "hi"}])
        assert ok.type == "message"
        with pytest.raises(anthropic.AuthenticationError) as e:
            client(srv, api_key="wrong").messages.create(model="m", max_tokens=2,
                                                         messages=[{"role": "user", "content": "hi"}])
        assert e.value.status_code == 401 and e.value.body["error"]["type"] == "authentication_error"
        # Bearer works for it too, and x-api-key for the OpenAI routes
        bearer = anthropic.Anthropic(base_url=srv.url, auth_token="k1", max_retries=0)
        assert bearer.messages.count_tokens(model=model_of(srv, "k1"),
                                            messages=[{"role": "user", "content": "hi"}]).input_tokens > 0
        r = httpx.get(srv.url + "/v1/models", headers={"x-api-key": "k1"})
        assert r.status_code == 200
    finally:
        assert srv.stop() == 0


def model_of(srv, key):
    return httpx.get(srv.url + "/v1/models", headers={"authorization": f"Bearer {key}"}).json()["data"][0]["id"]
