"""Tool calling on a real `tram serve` with --chat-template (the Qwen2.5
template from tests/integration/data/templates: the default model's own has
no tools) and the official `openai` client, sync and async, whole and
streamed.

What is end to end and what is not: the prompt a request with `tools`,
assistant `tool_calls` and `tool` messages renders is checked token for
token against Python's jinja2 rendering the same template; the tool call
itself comes from the real model, which (135M parameters, never trained on
tools) calls the tool when a few-shot conversation shows it how — so the
parsing into `tool_calls`, the ids, finish_reason "tool_calls" and the
streamed deltas are checked on real output. The parsers' other formats
(Llama 3.x, Mistral) are unit-tested on model-format strings
(tests/unit/test_oai_tool_parse.c)."""
import asyncio
import json
import pathlib

import jinja2
import jsonschema
import jinja2.ext
import openai
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tram_server import assemble_tool_call, server_fixture

TEMPLATE = pathlib.Path(__file__).parent / "data" / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
# --special-tokens-in-input: the reference prompts below are rendered by jinja2 and sent as text
server = server_fixture("--chat-template", str(TEMPLATE), "--max-model-len", "2048", "--special-tokens-in-input",
                        use_external=False)

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def call(i, city):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]}


def few_shot(city="Berlin"):
    msgs = []
    for i, c in enumerate(["Paris", "London", "Rome"]):
        msgs += [{"role": "user", "content": f"What is the weather in {c}?"}, call(i, c)]
    return msgs + [{"role": "user", "content": f"What is the weather in {city}?"}]


def jinja_render(messages, tools, add_generation_prompt=True):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    msgs = []
    for m in messages:  # as transformers/vLLM hand them to templates: arguments as objects
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**tc, "function": {**tc["function"], "arguments": json.loads(
                tc["function"]["arguments"])}} for tc in m["tool_calls"]]
        msgs.append(m)
    return env.from_string(TEMPLATE.read_text()).render(messages=msgs, tools=tools,
                                                        add_generation_prompt=add_generation_prompt)


def test_prompt_with_tools_matches_jinja2(server):
    msgs = few_shot()[:2] + [{"role": "tool", "tool_call_id": "c0", "content": "sunny, 21 C"},
                             {"role": "assistant", "content": "It is sunny."}, {"role": "user", "content": "Thanks"}]
    want = server.tokenize(prompt=jinja_render(msgs, TOOLS), add_special_tokens=False)
    assert server.tokenize(messages=msgs, tools=TOOLS) == want
    without = server.tokenize(prompt=jinja_render(msgs, None), add_special_tokens=False)
    assert server.tokenize(messages=msgs) == without and len(without) < len(want)
    r = server.client().chat.completions.create(model=None, messages=msgs, tools=TOOLS, max_tokens=1)
    assert r.usage.prompt_tokens == len(want)
    none = server.client().chat.completions.create(model=None, messages=msgs, tools=TOOLS, tool_choice="none",
                                                   max_tokens=1)
    assert none.usage.prompt_tokens == len(without)  # tool_choice none: the tools are not shown


def test_tool_call_from_the_model(server):
    r = server.client().chat.completions.create(model=None, messages=few_shot(), tools=TOOLS, temperature=0,
                                                max_tokens=40)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None
    (tc,) = c.message.tool_calls
    assert tc.type == "function" and tc.function.name == "get_weather" and tc.id
    assert json.loads(tc.function.arguments) == {"city": "Berlin"}
    # without tools the same output is plain text
    plain = server.client().chat.completions.create(model=None, messages=few_shot(), temperature=0, max_tokens=40)
    assert plain.choices[0].message.tool_calls is None and "<tool_call>" in plain.choices[0].message.content


def test_tool_call_streamed_as_openai_does(server):
    body = {"messages": few_shot(), "tools": TOOLS, "temperature": 0, "max_tokens": 40, "stream": True}
    with server.http.stream("POST", "/v1/chat/completions", json=body) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
    deltas = [e["choices"][0]["delta"] for e in events]
    assert deltas[0]["role"] == "assistant"
    calls = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert calls[0] == [{"index": 0, "id": calls[0][0]["id"], "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]
    assert calls[1] == [{"index": 0, "function": {"arguments": '{"city":"Berlin"}'}}]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    # the openai client assembles the same call from the stream (async)

    async def go():
        c = server.async_client()
        stream = await c.chat.completions.create(model=None, messages=few_shot("Madrid"), tools=TOOLS,
                                                 temperature=0, max_tokens=40, stream=True)
        out = await assemble_tool_call(stream)
        await c.close()
        return out

    name, args, finish = asyncio.run(go())
    assert name == "get_weather" and json.loads(args) == {"city": "Madrid"} and finish == "tool_calls"


def test_text_answer_with_tools_and_refusals(server):
    msgs = [{"role": "user", "content": "Say hello."}]
    r = server.client().chat.completions.create(model=None, messages=msgs, tools=TOOLS, temperature=0, max_tokens=8)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content
    streamed = list(server.client().chat.completions.create(model=None, messages=msgs, tools=TOOLS, temperature=0,
                                                            max_tokens=8, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == r.choices[0].message.content
    # text streams token by token with tools on too (held back only where a call may begin)
    assert sum(1 for c in streamed if c.choices and c.choices[0].delta.content) > 1
    bad = server.post("/v1/chat/completions", json={"messages": msgs, "tools": [{"type": "code_interpreter"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tools[0]"


def two_city_shots():
    msgs = []
    for i, (a, b) in enumerate([("Paris", "Lyon"), ("London", "Leeds"), ("Rome", "Milan")]):
        msgs += [{"role": "user", "content": f"What is the weather in {a} and in {b}?"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{i}{k}", "type": "function",
                      "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}
                     for k, c in enumerate((a, b))]}]
    return msgs + [{"role": "user", "content": "What is the weather in Oslo and in Bern?"}]


def test_parallel_tool_calls(server):
    kw = dict(model=None, messages=two_city_shots(), tools=TOOLS, temperature=0, max_tokens=80)
    both = server.client().chat.completions.create(**kw).choices[0].message.tool_calls
    assert [json.loads(t.function.arguments)["city"] for t in both] == ["Oslo", "Bern"]
    assert len({t.id for t in both}) == 2
    one = server.client().chat.completions.create(**kw, parallel_tool_calls=False).choices[0].message.tool_calls
    assert len(one) == 1 and one[0].function.arguments == both[0].function.arguments
    chunks = list(server.client().chat.completions.create(**kw, stream=True))
    idx = [tc.index for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert idx == [0, 0, 1, 1]


TWO = TOOLS + [{"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 12}}, "required": ["tz"]}}}]


def check_call(tc):
    """A call of one of TWO, its arguments valid under that tool's schema."""
    tool = next(t for t in TWO if t["function"]["name"] == tc.function.name)
    jsonschema.validate(json.loads(tc.function.arguments), tool["function"]["parameters"])
    assert tc.id and tc.type == "function"


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_required_forces_calls(server, stream):
    """Without a few-shot hint the small model answers in text; "required"
    makes its output calls (vLLM's form: a JSON list of {name, parameters})."""
    msgs = [{"role": "user", "content": "Say hello."}]
    for seed in range(3):
        kw = dict(model=None, messages=msgs, tools=TWO, tool_choice="required", temperature=1.0, seed=seed,
                  max_tokens=120)
        if stream:
            chunks = list(server.client().chat.completions.create(stream=True, **kw))
            calls = {}
            for c in chunks:
                for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
                    e = calls.setdefault(d.index, {"id": d.id, "name": "", "args": ""})
                    e["name"] += d.function.name or ""
                    e["args"] += d.function.arguments or ""
            assert chunks[-1].choices[0].finish_reason == "tool_calls" and calls
            for e in calls.values():
                tool = next(t for t in TWO if t["function"]["name"] == e["name"])
                jsonschema.validate(json.loads(e["args"]), tool["function"]["parameters"])
        else:
            r = server.client().chat.completions.create(**kw)
            ch = r.choices[0]
            assert ch.finish_reason == "tool_calls" and ch.message.content is None and ch.message.tool_calls
            for tc in ch.message.tool_calls:
                check_call(tc)
    one = server.client().chat.completions.create(model=None, messages=msgs, tools=TWO, tool_choice="required",
                                                  parallel_tool_calls=False, temperature=0, max_tokens=120)
    assert len(one.choices[0].message.tool_calls) == 1


def test_tool_choice_named_forces_that_function(server):
    msgs = [{"role": "user", "content": "What is the weather in Oslo?"}]
    choice = {"type": "function", "function": {"name": "get_time"}}
    r = server.client().chat.completions.create(model=None, messages=msgs, tools=TWO, tool_choice=choice,
                                                temperature=0, max_tokens=60)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and calls[0].function.name == "get_time"
    check_call(calls[0])


DEFS_TOOL = [{"type": "function", "function": {
    "name": "set_place", "description": "Remember a place",
    "parameters": {"type": "object", "properties": {"place": {"$ref": "#/$defs/Place"}}, "required": ["place"],
                   "additionalProperties": False,
                   "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                                       "required": ["city"], "additionalProperties": False}}}}}]


def test_tool_choice_required_with_defs(server):
    """vLLM's tool tests: tools whose parameters use $defs/$ref under
    tool_choice "required" (the wrapper once lost the $defs: a 400)."""
    r = server.client().chat.completions.create(model=None, messages=[{"role": "user", "content": "Paris"}],
                                                tools=DEFS_TOOL + TWO, tool_choice="required", temperature=0,
                                                max_tokens=120)
    for tc in r.choices[0].message.tool_calls:
        tool = next(t for t in DEFS_TOOL + TWO if t["function"]["name"] == tc.function.name)
        jsonschema.validate(json.loads(tc.function.arguments), tool["function"]["parameters"])


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_named_cut_by_max_tokens_keeps_the_call(server, stream):
    """vLLM's test_named_tool_use: a forced call cut by max_tokens comes
    back in tool_calls with its partial arguments (the prefix of the output
    the grammar allowed), finish_reason "length", no content."""
    msgs = [{"role": "user", "content": "What is the weather in Oslo?"}]
    choice = {"type": "function", "function": {"name": "get_weather"}}
    kw = dict(model=None, messages=msgs, tools=TWO, tool_choice=choice, temperature=0, max_tokens=3)
    whole = server.client().chat.completions.create(**kw).choices[0]
    assert whole.finish_reason == "length" and whole.message.content is None
    (tc,) = whole.message.tool_calls
    assert tc.function.name == "get_weather" and tc.id and tc.function.arguments.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(tc.function.arguments)  # cut: not a whole object
    if stream:
        chunks = list(server.client().chat.completions.create(stream=True, **kw))
        args = "".join(d.function.arguments or "" for c in chunks if c.choices
                       for d in c.choices[0].delta.tool_calls or [])
        assert args == tc.function.arguments and chunks[-1].choices[0].finish_reason == "length"
        assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize("body,param", [
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TWO, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
    ({"tools": TWO, "tool_choice": {"type": "function"}}, "tool_choice"),
    ({"tools": TWO, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
])
def test_tool_choice_errors(server, body, param):
    r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], **body})
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text


# ---- the Responses API's function tools ---------------------------------------------

RESP_TOOLS = [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
               "parameters": t["function"]["parameters"]} for t in TWO]


def resp_few_shot(city="Berlin", outputs=False):
    """few_shot() as Responses input items: function_call items for the
    assistant's calls (and with outputs, each call's function_call_output)."""
    items = []
    for i, c in enumerate(["Paris", "London", "Rome"]):
        items += [{"role": "user", "content": f"What is the weather in {c}?"},
                  {"type": "function_call", "call_id": f"c{i}", "name": "get_weather",
                   "arguments": json.dumps({"city": c})}]
        if outputs:
            items.append({"type": "function_call_output", "call_id": f"c{i}", "output": "sunny"})
    return items + [{"role": "user", "content": f"What is the weather in {city}?"}]


def test_responses_items_render_as_chat_messages(server):
    """function_call / function_call_output items reach the template as the
    assistant tool_calls and tool messages chat sends."""
    chat = []
    for i, c in enumerate(["Paris", "London", "Rome"]):
        chat += [{"role": "user", "content": f"What is the weather in {c}?"}, call(i, c),
                 {"role": "tool", "tool_call_id": f"c{i}", "content": "sunny"}]
    chat.append({"role": "user", "content": "What is the weather in Berlin?"})
    want = server.client().chat.completions.create(model=None, messages=chat, tools=TWO, max_tokens=1)
    r = server.client().responses.create(model=None, input=resp_few_shot(outputs=True), tools=RESP_TOOLS,
                                         max_output_tokens=1)
    assert r.usage.input_tokens == want.usage.prompt_tokens


def test_responses_function_call_from_the_model(server):
    r = server.client().responses.create(model=None, input=resp_few_shot(), tools=RESP_TOOLS, temperature=0,
                                         max_output_tokens=40)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and json.loads(calls[0].arguments) == {"city": "Berlin"}
    assert calls[0].call_id and calls[0].status == "completed"
    with server.client().responses.stream(model=None, input=resp_few_shot(), tools=RESP_TOOLS, temperature=0,
                                          max_output_tokens=40) as st:
        kinds = [e.type for e in st]
        final = st.get_final_response()
    assert "response.function_call_arguments.done" in kinds and "response.output_text.delta" not in kinds
    assert [o.type for o in final.output] == ["function_call"]
    assert final.output[0].arguments == calls[0].arguments


def test_responses_tool_choice_forces_calls(server):
    r = server.client().responses.create(model=None, input="Say hello.", tools=RESP_TOOLS, tool_choice="required",
                                         temperature=0, max_output_tokens=120)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls
    for c in calls:
        tool = next(t for t in RESP_TOOLS if t["name"] == c.name)
        jsonschema.validate(json.loads(c.arguments), tool["parameters"])
    r = server.client().responses.create(model=None, input="Say hello.", tools=RESP_TOOLS,
                                         tool_choice={"type": "function", "name": "get_time"}, max_output_tokens=60)
    assert [o.name for o in r.output if o.type == "function_call"] == ["get_time"]
    bad = server.post("/v1/responses", json={"input": "hi", "tools": [{"type": "web_search"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tools[0]"
