"""Reasoning (thinking) models on a real `tram serve`, through the official
`openai` client: the default model served with a template that opens the
assistant turn with <think> (as DeepSeek-R1's and Qwen3-Thinking's do), so
its real output is reasoning until the thinking budget makes the server
force "</think>", then the answer.

The split is checked against the model's raw output: the response's
token ids (return_token_ids) decoded by /detokenize, split by the
reference below (written from vLLM's and llama.cpp's documented behaviour,
not from tram's code). Also: the stream (reasoning deltas strictly before
content deltas, the same text as whole), a reasoning cut by max_tokens,
chat_template_kwargs and reasoning_effort reaching the template and their
400s, structured output applying to the answer only, a forced tool call
after the reasoning, the Responses API's reasoning item and events, and
Qwen3's own template (auto: qwen3; enable_thinking false closes the block
in the prompt)."""
import json
import pathlib

import jsonschema
import openai
import pytest

from tram_server import server_fixture

DATA = pathlib.Path(__file__).parent / "data"
THINK = DATA / "reasoning" / "think-chatml.jinja"
QWEN3 = DATA / "templates" / "Qwen-Qwen3-0.6B.jinja"

server = server_fixture("--chat-template", str(THINK), "--max-model-len", "2048", use_external=False)
plain = server_fixture("--max-model-len", "2048", use_external=False)
qwen3 = server_fixture("--chat-template", str(QWEN3), "--max-model-len", "2048", use_external=False)
budget3 = server_fixture("--chat-template", str(THINK), "--reasoning-budget", "3", use_external=False)
parser_off = server_fixture("--chat-template", str(THINK), "--reasoning-parser", "none", use_external=False)

Q = [{"role": "user", "content": "What is the capital of France?"}]
CLOSE = "\n</think>"  # what a spent budget forces (the white space after it is the model's)


def ref_split(raw, opened):
    """The reference: with the prompt ending in <think> (opened) the output
    is reasoning up to </think> (all of it when never closed), the rest is
    the answer; without, an output that does not start with <think> is all
    answer. White space right after a tag is not part of either side;
    empty sides are None."""
    if not opened:
        body = raw.lstrip()
        if not body.startswith("<think>"):
            return None, body or None
        raw = body[len("<think>"):]
    reasoning, sep, content = raw.partition("</think>")
    reasoning, content = reasoning.lstrip(), content.lstrip()
    return reasoning or None, content or None


def raw_output(srv, choice):
    """The output's text: its token ids decoded, less the end-of-generation token (SmolLM2's <|im_end|>)
    a "stop" may end with (its text is not output)."""
    text = srv.post("/detokenize", json={"tokens": choice.token_ids}).json()["prompt"]
    return text.removesuffix("<|im_end|>") if choice.finish_reason == "stop" else text


def ask(srv, **kw):
    body = {"model": None, "messages": Q, "max_tokens": 40, "temperature": 0}
    body.update(kw)
    extra = {k: body.pop(k) for k in ("thinking_token_budget", "chat_template_kwargs", "return_token_ids") if k in body}
    return srv.client().chat.completions.create(**body, extra_body=extra)


@pytest.mark.parametrize("budget", [0, 1, 5, 12])
def test_budget_forces_the_close_and_the_split_matches_the_raw_output(server, budget):
    r = ask(server, thinking_token_budget=budget, return_token_ids=True, max_tokens=48)
    c = r.choices[0]
    raw = raw_output(server, c)
    close_ids = server.tokenize(prompt=CLOSE, add_special_tokens=False)
    ids = list(c.token_ids)
    if CLOSE in raw:  # the budget was spent before the model ended its output: the close is forced there
        assert ids[budget:budget + len(close_ids)] == close_ids
    else:  # the model ended (end of generation) inside its budget
        assert len(ids) <= budget + 1 and c.finish_reason == "stop"
    reasoning, content = ref_split(raw, opened=True)
    msg = c.message.model_dump()
    assert msg["reasoning_content"] == reasoning and msg["reasoning"] == reasoning
    assert msg["content"] == content
    if budget == 0:
        assert reasoning is None


def test_stream_reasoning_then_content(server):
    whole = ask(server, thinking_token_budget=6, max_tokens=40)
    stream = ask(server, thinking_token_budget=6, max_tokens=40, stream=True)
    kinds, reasoning, content, finish = [], "", "", None
    for chunk in stream:
        for ch in chunk.choices:
            d = ch.delta.model_dump()
            if d.get("reasoning_content"):
                assert d["reasoning"] == d["reasoning_content"]
                reasoning += d["reasoning_content"]
                kinds.append("r")
            if d.get("content"):
                content += d["content"]
                kinds.append("c")
            finish = ch.finish_reason or finish
    assert kinds and kinds == sorted(kinds, key=lambda k: k == "c")  # every reasoning delta before any content
    m = whole.choices[0].message.model_dump()
    assert reasoning == (m["reasoning_content"] or "") and content == (m["content"] or "")
    assert finish == whole.choices[0].finish_reason


def test_cut_inside_the_reasoning(server):
    r = ask(server, max_tokens=6, return_token_ids=True)  # no budget: this model never closes it
    c = r.choices[0]
    assert c.finish_reason == "length" and c.message.content is None
    assert c.message.model_dump()["reasoning_content"] == ref_split(raw_output(server, c), opened=True)[0]
    deltas = [ch.delta.model_dump() for chunk in ask(server, max_tokens=6, stream=True) for ch in chunk.choices]
    assert not any(d.get("content") for d in deltas)
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == c.message.model_dump()["reasoning_content"]


def test_chat_template_kwargs_close_the_block_in_the_prompt(server):
    on = ask(server, return_token_ids=True)
    off = ask(server, chat_template_kwargs={"enable_thinking": False}, return_token_ids=True)
    closed = server.tokenize(prompt="\n</think>\n\n", add_special_tokens=False)
    assert off.usage.prompt_tokens >= on.usage.prompt_tokens + len(closed) - 1
    m = off.choices[0].message.model_dump()
    assert m["reasoning_content"] is None and m["content"] == ref_split(raw_output(server, off.choices[0]), False)[1]


def test_tokenize_takes_the_same_template_variables(server, plain):
    for kw in ({}, {"chat_template_kwargs": {"enable_thinking": False}}, {"reasoning_effort": "low"}):
        r = ask(server, max_tokens=1, **kw)
        assert len(server.tokenize(messages=Q, **kw)) == r.usage.prompt_tokens
    r = plain.post("/tokenize", json={"messages": Q, "reasoning_effort": "low"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "reasoning_effort"
    r = plain.post("/tokenize", json={"messages": Q, "chat_template_kwargs": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "chat_template_kwargs"


def test_reasoning_effort_reaches_the_template(server, plain):
    base = ask(server)
    high = ask(server, reasoning_effort="high")
    assert high.usage.prompt_tokens > base.usage.prompt_tokens  # the template's "Reasoning: high" line
    with pytest.raises(openai.BadRequestError) as e:
        ask(plain, reasoning_effort="high")  # SmolLM2's template does not read it
    assert e.value.body["param"] == "reasoning_effort"
    with pytest.raises(openai.BadRequestError) as e:
        ask(server, reasoning_effort="maximal")
    assert e.value.body["param"] == "reasoning_effort"


@pytest.mark.parametrize("kwargs,why", [
    ([1, 2], "must be an object"),
    ({"a": [[[[[[[[[1]]]]]]]]]}, "nested deeper"),
    ({"messages": []}, "set by the request"),
    ({"tools": []}, "set by the request"),
    ({f"k{i}": i for i in range(65)}, "at most 64"),
    ({"x": "y" * 70000}, "bytes of JSON"),
])
def test_chat_template_kwargs_limits(server, kwargs, why):
    with pytest.raises(openai.BadRequestError) as e:
        ask(server, chat_template_kwargs=kwargs)
    assert e.value.body["param"] == "chat_template_kwargs" and why in e.value.body["message"]


def test_a_model_that_does_not_think(plain):
    r = ask(plain, chat_template_kwargs={"enable_thinking": False, "anything": {"nested": [1, "x"]}})
    assert "reasoning_content" not in r.choices[0].message.model_dump(exclude_unset=True)
    assert r.choices[0].message.content
    for bad in ({"thinking_token_budget": 5}, {"thinking_token_budget": -1}):
        with pytest.raises(openai.BadRequestError) as e:
            ask(plain, **bad)
        assert e.value.body["param"] == "thinking_token_budget"


PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.mark.parametrize("budget", [3, 8])
def test_structured_output_applies_to_the_answer(server, budget):
    r = ask(server, thinking_token_budget=budget, max_tokens=80, return_token_ids=True,
            messages=[{"role": "user", "content": "Give me a person as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    c = r.choices[0]
    reasoning, content = ref_split(raw_output(server, c), opened=True)
    assert c.message.model_dump()["reasoning_content"] == reasoning
    assert reasoning and content  # greedy: this model reasons for the budget, then answers
    assert c.message.content == content
    jsonschema.validate(json.loads(content), PERSON)
    assert c.finish_reason == "stop"


def test_forced_tool_call_after_the_reasoning(server):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
        "additionalProperties": False}}}]
    r = ask(server, thinking_token_budget=4, max_tokens=60, tools=tools,
            tool_choice={"type": "function", "function": {"name": "get_weather"}})
    c = r.choices[0]
    assert c.message.model_dump()["reasoning_content"] and c.finish_reason == "tool_calls"
    assert c.message.tool_calls[0].function.name == "get_weather"
    assert set(json.loads(c.message.tool_calls[0].function.arguments)) == {"city"}


def test_responses_reasoning_item(server):
    c = server.client()
    r = c.responses.create(model=None, input=Q[0]["content"], max_output_tokens=40, temperature=0)
    chat = ask(server, max_tokens=40)
    kinds = [o.type for o in r.output]
    assert kinds[0] == "reasoning" and r.output[0].content[0].type == "reasoning_text"
    assert r.output[0].content[0].text == chat.choices[0].message.model_dump()["reasoning_content"]
    assert r.usage.output_tokens_details.reasoning_tokens > 0
    events = list(c.responses.create(model=None, input=Q[0]["content"], max_output_tokens=40, temperature=0,
                                     stream=True))
    types = [e.type for e in events]
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert events[2].item.type == "reasoning"
    deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert deltas == r.output[0].content[0].text
    done = [e for e in events if e.type == "response.reasoning_text.done"]
    assert len(done) == 1 and done[0].text == deltas
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output[0].type == "reasoning"


def test_responses_reasoning_effort(server, plain):
    c = server.client()
    base = c.responses.create(model=None, input=Q[0]["content"], max_output_tokens=2)
    high = c.responses.create(model=None, input=Q[0]["content"], max_output_tokens=2, reasoning={"effort": "high"})
    chat = ask(server, max_tokens=2, reasoning_effort="high")
    assert high.usage.input_tokens == chat.usage.prompt_tokens > base.usage.input_tokens
    for srv, body, param in ((server, {"summary": "auto"}, "reasoning.summary"),
                             (server, {"effort": "huge"}, "reasoning.effort"),
                             (plain, {"effort": "low"}, "reasoning.effort")):
        with pytest.raises(openai.BadRequestError) as e:
            srv.client().responses.create(model=None, input="hi", reasoning=body)
        assert e.value.body["param"] == param


def test_qwen3_template(qwen3):
    # auto: the template thinks (qwen3). SmolLM2 does not open <think>: its output is all answer
    r = ask(qwen3, return_token_ids=True)
    raw = raw_output(qwen3, r.choices[0])
    m = r.choices[0].message.model_dump()
    assert (m["reasoning_content"], m["content"]) == ref_split(raw, opened=False)
    assert "reasoning_content" in m  # the parser is on: the keys are written (null)
    off = ask(qwen3, chat_template_kwargs={"enable_thinking": False}, return_token_ids=True)
    assert off.usage.prompt_tokens > r.usage.prompt_tokens  # <think>\n\n</think>\n\n in the prompt
    m = off.choices[0].message.model_dump()
    assert m["reasoning_content"] is None and m["content"] == ref_split(raw_output(qwen3, off.choices[0]), False)[1]


def test_reasoning_budget_setting(budget3, parser_off):
    close_ids = budget3.tokenize(prompt=CLOSE, add_special_tokens=False)
    r = ask(budget3, return_token_ids=True)  # the setting's budget: 3
    assert list(r.choices[0].token_ids)[3:3 + len(close_ids)] == close_ids
    r = ask(budget3, thinking_token_budget=1, return_token_ids=True)  # the request's wins
    assert list(r.choices[0].token_ids)[1:1 + len(close_ids)] == close_ids
    # the parser off: the output is content as generated, tags and all, and no budget can be kept
    r = ask(parser_off, return_token_ids=True)
    assert "reasoning_content" not in r.choices[0].message.model_dump(exclude_unset=True)
    assert r.choices[0].message.content == raw_output(parser_off, r.choices[0])
    with pytest.raises(openai.BadRequestError) as e:
        ask(parser_off, thinking_token_budget=2)
    assert e.value.body["param"] == "thinking_token_budget"


@pytest.mark.parametrize("thinking,budget", [({"type": "adaptive"}, None),
                                             ({"type": "enabled", "budget_tokens": 1024}, 1024)])
def test_anthropic_thinking_blocks(server, thinking, budget):
    """The Messages API gives the same split as chat: the reasoning as a
    thinking block (thinking_delta when streamed) before the answer's text;
    thinking.budget_tokens is the thinking budget."""
    import anthropic
    kw = {"thinking_token_budget": budget} if budget is not None else {}
    chat = ask(server, max_tokens=1100, **kw).choices[0].message
    assert chat.reasoning_content, "the template opens <think>: the model's output starts as reasoning"
    a = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    body = dict(model=server.get("/v1/models").json()["data"][0]["id"], max_tokens=1100, messages=Q, thinking=thinking, extra_body={"temperature": 0})
    m = a.messages.create(**body)
    want = [("thinking", chat.reasoning_content)] + ([("text", chat.content)] if chat.content else [])
    got = [(b.type, b.thinking if b.type == "thinking" else b.text) for b in m.content]
    assert got == want
    blocks = {}
    order = []
    with a.messages.stream(**body) as s:
        for ev in s:
            if ev.type == "content_block_start":
                order.append(ev.content_block.type)
                blocks[ev.index] = ""
            elif ev.type == "content_block_delta":
                blocks[ev.index] += ev.delta.thinking if ev.delta.type == "thinking_delta" else ev.delta.text
    assert list(zip(order, [blocks[i] for i in sorted(blocks)])) == want


@pytest.mark.parametrize("thinking", [None, {"type": "disabled"}])
def test_anthropic_without_thinking(server, thinking):
    """Thinking off (Anthropic's default): the template is asked not to think
    (enable_thinking false, as chat_template_kwargs would) and no thinking
    block comes back."""
    import anthropic
    chat = ask(server, chat_template_kwargs={"enable_thinking": False}).choices[0].message
    assert chat.content and not chat.reasoning_content
    a = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    kw = {"thinking": thinking} if thinking else {}
    m = a.messages.create(model=server.get("/v1/models").json()["data"][0]["id"], max_tokens=40, messages=Q,
                          extra_body={"temperature": 0}, **kw)
    assert [(b.type, b.text) for b in m.content] == [("text", chat.content)]


def test_anthropic_thinking_budget_needs_a_thinking_model(plain):
    import anthropic
    a = anthropic.Anthropic(base_url=plain.url, api_key="none", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="thinking.budget_tokens"):
        a.messages.create(model=plain.get("/v1/models").json()["data"][0]["id"], max_tokens=1025, messages=Q, thinking={"type": "enabled", "budget_tokens": 1024})
