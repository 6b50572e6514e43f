"""POST /v1/responses (stateless) on a real `tram serve`, through the
official client's `client.responses.create(...)`, sync and async, whole and
streamed, and raw HTTP for the event framing: the same greedy text as chat
for the same messages, instructions as a system message, input as text or
message items, max_output_tokens ending it as "incomplete", usage, and a 400
naming each unsupported part."""
import asyncio
import json

import jsonschema
import openai
import pytest

from tram_server import server_fixture

server = server_fixture()

Q = "What is the capital of France?"


def test_matches_chat_and_counts_tokens(server):
    c = server.client()
    r = c.responses.create(model=None, input=Q, instructions="Answer briefly.", max_output_tokens=20, temperature=0)
    msgs = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": Q}]
    chat = c.chat.completions.create(model=None, messages=msgs, max_tokens=20, temperature=0)
    assert r.object == "response" and r.id.startswith("resp")
    assert r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == len(server.tokenize(messages=msgs)) == chat.usage.prompt_tokens
    assert r.usage.output_tokens == chat.usage.completion_tokens
    assert r.instructions == "Answer briefly." and r.output[0].role == "assistant"
    done = "completed" if chat.choices[0].finish_reason == "stop" else "incomplete"
    assert r.status == done


def test_items_and_incomplete(server):
    items = [{"role": "user", "content": [{"type": "input_text", "text": Q}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris."}]},
             {"role": "user", "content": "Now tell me a long story about Rome."}]
    r = server.client().responses.create(model=None, input=items, max_output_tokens=3, temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3
    plain = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]}
             for m in items]
    assert r.usage.input_tokens == len(server.tokenize(messages=plain))


def test_stream_events(server):
    body = {"input": Q, "max_output_tokens": 12, "temperature": 0, "stream": True}
    with server.http.stream("POST", "/v1/responses", json=body) as resp:
        lines = [line for line in resp.iter_lines() if line]
    assert not any(line == "data: [DONE]" for line in lines)
    names = [line[7:] for line in lines if line.startswith("event: ")]
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert [e["type"] for e in events] == names
    assert names[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert names[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert names[-1] in ("response.completed", "response.incomplete")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert events[-4]["text"] == text and events[-1]["response"]["output"][0]["content"][0]["text"] == text

    async def go():  # the async client reads the same stream
        c = server.async_client()
        s = await c.responses.create(model=None, input=Q, max_output_tokens=12, temperature=0, stream=True)
        out, final = "", None
        async for e in s:
            if e.type == "response.output_text.delta":
                out += e.delta
            if e.type in ("response.completed", "response.incomplete"):
                final = e.response
        await c.close()
        return out, final

    out, final = asyncio.run(go())
    assert out == text and final.output_text == text


@pytest.mark.parametrize("field,value", [
    ("tools", [{"type": "function", "name": "f", "parameters": {}}]),
    ("previous_response_id", "resp_123"),
    ("store", True),
    ("reasoning", {"effort": "low"}),
    ("text.format.type", {"format": {"type": "yaml"}}),
    ("text.format.schema", {"format": {"type": "json_schema", "name": "x"}}),
])
def test_unsupported_parts_are_named(server, field, value):
    body = {"input": Q}
    body[field.split(".")[0]] = value
    with pytest.raises(openai.BadRequestError) as e:
        server.client().responses.create(model=None, **body)
    assert e.value.body["param"] == field


def test_logprobs(server):
    """vLLM's Responses test_logprobs: include ["message.output_text.logprobs"]
    with top_logprobs returns them on the output_text part, as OpenAI does
    — the same tokens and values as chat's logprobs for the same messages,
    and streamed: each delta's, which add up to the whole."""
    c = server.client()
    kw = dict(model=None, input=Q, max_output_tokens=12, temperature=0, top_logprobs=5,
              include=["message.output_text.logprobs"])
    r = c.responses.create(**kw)
    lps = r.output[-1].content[-1].logprobs
    assert lps and all(len(t.top_logprobs) == 5 for t in lps)
    chat = c.chat.completions.create(model=None, messages=[{"role": "user", "content": Q}], max_tokens=12,
                                     temperature=0, logprobs=True, top_logprobs=5)
    want = chat.choices[0].logprobs.content
    assert [(t.token, t.bytes) for t in lps] == [(t.token, t.bytes) for t in want]
    for a, b in zip(lps, want):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-5)
        assert [x.token for x in a.top_logprobs] == [x.token for x in b.top_logprobs]
    assert "".join(t.token for t in lps).startswith(r.output_text)  # + the end-of-turn token, as chat
    streamed, final = [], None
    for e in c.responses.create(stream=True, **kw):
        if e.type == "response.output_text.delta":
            streamed += e.logprobs
        elif e.type in ("response.completed", "response.incomplete"):
            final = e.response
    # the end-of-turn token has no text, so no delta: its entry is only in the final part's
    assert [(t.token, round(t.logprob, 5)) for t in streamed] == [(t.token, round(t.logprob, 5)) for t in lps][
        :len(streamed)] and len(lps) - len(streamed) <= 1
    assert len(final.output[-1].content[-1].logprobs) == len(lps)
    plain = c.responses.create(model=None, input=Q, max_output_tokens=4, temperature=0)
    assert plain.output[-1].content[-1].logprobs == []
    for body, param in [({"include": ["file_search_call.results"]}, "include[0]"), ({"include": "x"}, "include"),
                        ({"top_logprobs": 3}, "top_logprobs"),
                        ({"include": ["message.output_text.logprobs"], "top_logprobs": 21}, "top_logprobs")]:
        bad = server.post("/v1/responses", json={"input": Q, **body})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == param, bad.text


def test_bad_items(server):
    r = server.post("/v1/responses", json={"input": [{"type": "web_search_call", "id": "ws_1"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0]"
    r = server.post("/v1/responses", json={"input": [{"role": "user", "content": [{"type": "input_image"}]}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0].content[0].type"
    r = server.post("/v1/responses", json={"instructions": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"


PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "age"]}


def test_text_format_json_schema(server):
    """text.format is structured output: the official client's parse helper
    reads the output as the schema's object, streamed or not."""
    fmt = {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}
    r = server.client().responses.create(model=None, input="Describe a person.", text=fmt, max_output_tokens=60)
    doc = json.loads(r.output_text)
    jsonschema.validate(doc, PERSON)
    assert r.text.format.type == "json_schema"
    with server.client().responses.stream(model=None, input="Describe a person.", text=fmt, max_output_tokens=60) as st:
        final = st.get_final_response()
    jsonschema.validate(json.loads(final.output_text), PERSON)
    r = server.client().responses.create(model=None, input="An object.", text={"format": {"type": "json_object"}},
                                         max_output_tokens=200, temperature=0)
    assert r.status != "completed" or isinstance(json.loads(r.output_text), dict)
