"""gpt-oss tool calls end to end: `tram serve` on the tiny gpt-oss fixture
given a harmony vocabulary and gpt-oss's own chat template, driven by the
official `openai` client (chat, streamed and not), the Responses API and
Anthropic's Messages API.

The fixture (tests/reference/data/gpt_oss/) has a 98-token vocabulary
without harmony's special tokens; harmony_folder() copies it with the
missing byte-level characters and harmony's seven special tokens added
(their embedding and output rows random), `<|return|>` and `<|call|>` as
the ends of generation, and the published template
(tests/integration/data/templates/openai-gpt-oss-120b.jinja). Random weights
never call a tool on their own, so the calls are forced the way a user
forces one: a named tool_choice with a thinking budget — once the budget is
spent the engine writes the call's harmony header
(`<|end|><|start|>assistant<|channel|>commentary to=functions.NAME
<|constrain|>json<|message|>`) and the function's parameters schema
constrains the arguments. What the server answers is checked against the
raw output (its token ids decoded by HF `tokenizers`) read by an
independent harmony reader written here from OpenAI's format guide, and the
arguments against the schema with `jsonschema`; the prompt of a
conversation with tool calls and tool results against jinja2 rendering the
same template and `tokenizers` encoding it."""
import asyncio
import json
import pathlib
import re
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jsonschema
import numpy as np
import openai
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
import tram_server  # noqa: E402

FIX = pathlib.Path(__file__).resolve().parent / "data" / "gpt_oss"
TEMPLATE = pathlib.Path(__file__).resolve().parents[1] / "integration" / "data" / "templates" / \
    "openai-gpt-oss-120b.jinja"
SPECIALS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 9}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "ping", "description": "Check the network",
                                           "parameters": {"type": "object", "properties": {}}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def byte_chars():
    """GPT-2's byte-to-character map (the ByteLevel pre-tokenizer's): every byte's character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def write_safetensors(path, tensors):
    """name → (dtype, shape, bytes) written as a safetensors file."""
    head, off, blobs = {}, 0, []
    for name, (dtype, shape, data) in tensors.items():
        head[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def harmony_folder(dst):
    """The fixture with a harmony vocabulary and gpt-oss's template (see the module's text). Returns the ids
    of the special tokens by text."""
    dst.mkdir(parents=True, exist_ok=True)
    tok = json.loads((FIX / "tokenizer.json").read_text())
    vocab, nxt = tok["model"]["vocab"], 98
    for ch in byte_chars():
        if ch not in vocab:
            vocab[ch] = nxt
            nxt += 1
    ids = {}
    for s in SPECIALS:
        tok["added_tokens"].append({"id": nxt, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                                    "normalized": False, "special": True})
        ids[s] = nxt
        nxt += 1
    (dst / "tokenizer.json").write_text(json.dumps(tok))
    (dst / "tokenizer_config.json").write_text(json.dumps({
        "eos_token": "<|return|>", "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": TEMPLATE.read_text()}))
    cfg = json.loads((FIX / "config.json").read_text())
    cfg.update(vocab_size=nxt, max_position_embeddings=4096, eos_token_id=[ids["<|return|>"], ids["<|call|>"]])
    (dst / "config.json").write_text(json.dumps(cfg))
    (dst / "generation_config.json").write_text(json.dumps({"eos_token_id": [ids["<|return|>"], ids["<|call|>"]]}))
    raw = (FIX / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    head, base = json.loads(raw[8:8 + n]), 8 + n
    rng = np.random.default_rng(30)
    out = {}
    for name, info in head.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        data, shape = raw[base + a:base + b], info["shape"]
        if shape[0] == 98 and name in ("lm_head.weight", "model.embed_tokens.weight"):
            extra = (rng.standard_normal((nxt - 98, shape[1])).astype(np.float32) * 0.5).view(np.uint32) >> 16
            data += extra.astype(np.uint16).tobytes()
            shape = [nxt, shape[1]]
        out[name] = (info["dtype"], shape, data)
    write_safetensors(dst / "model.safetensors", out)
    return ids


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    d = tmp_path_factory.mktemp("gptoss_harmony")
    ids = harmony_folder(d / "model")
    # the server's default thinking budget: for the APIs whose own budget fields cannot be this small
    srv = tram_server.start(d, "--max-model-len", "2048", "--reasoning-budget", "3", model=d / "model")
    srv.ids, srv.tok = ids, Tokenizer.from_file(str(d / "model" / "tokenizer.json"))
    srv.model = srv.get("/v1/models").json()["data"][0]["id"]
    yield srv
    assert srv.stop() == 0


def read_harmony(text):
    """An independent reader of harmony output (OpenAI's format guide): the text after the generation
    prompt `<|start|>assistant`, messages ended by <|end|>, <|call|> or <|return|> (the last one may be
    ended by the end of the text, the engine having stopped at <|call|>). Returns (analysis, final,
    [(recipient, content type, body)])."""
    analysis, final, calls = "", "", []
    for m in re.split(r"<\|end\|>|<\|call\|>|<\|return\|>", text):
        m = m.removeprefix("<|start|>assistant")
        if not m:
            continue
        head, sep, body = m.partition("<|message|>")
        assert sep, f"no <|message|> in {m!r}"
        role_part, _, chan_part = head.partition("<|channel|>")
        words = role_part.split() + chan_part.replace("<|constrain|>", " ").split()
        to = next((w[3:] for w in words if w.startswith("to=")), None)
        rest = [w for w in chan_part.replace("<|constrain|>", " ").split() if not w.startswith("to=")]
        channel, ctype = rest[0], (rest[1] if len(rest) > 1 else None)
        if to:
            calls.append((to, ctype, body))
        elif channel == "analysis":
            analysis += body
        elif channel == "final":
            final += body
    return analysis, final, calls


def raw_text(srv, token_ids):
    return srv.tok.decode(token_ids, skip_special_tokens=False)


def chat(srv, **kw):
    body = {"model": srv.model, "messages": ASK, "tools": TOOLS, "temperature": 0, "max_tokens": 200}
    body.update(kw)
    r = srv.http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("budget", [2, 5])
def test_forced_call_in_harmony(harmony, budget):
    """A named tool_choice with a budget: reasoning, then the call in harmony's own form, read into
    message.tool_calls; the raw output read independently gives the same."""
    j = chat(harmony, tool_choice=NAMED, thinking_token_budget=budget, return_token_ids=True)
    c = j["choices"][0]
    raw = raw_text(harmony, c["token_ids"])
    analysis, final, calls = read_harmony(raw)
    assert "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" in raw
    assert [(to, ctype) for to, ctype, _ in calls] == [("functions.get_weather", "json")]
    assert c["finish_reason"] == "tool_calls" and c["message"]["content"] is None
    assert c["message"]["reasoning_content"] == analysis and analysis
    (tc,) = c["message"]["tool_calls"]
    assert tc["type"] == "function" and tc["id"] and tc["function"]["name"] == "get_weather"
    args = json.loads(tc["function"]["arguments"])
    assert args == json.loads(calls[0][2])
    jsonschema.validate(args, WEATHER)
    # the call ended where the grammar did, or at <|call|> / <|return|>: never a stray token after it
    assert c["token_ids"][-1] in (harmony.ids["<|call|>"], harmony.ids["<|return|>"]) or raw.endswith("}")


def test_forced_call_with_the_longest_name(harmony):
    """A function name of 64 characters (OpenAI's longest) of digits and dashes: in this vocabulary each
    character is a token of its own, so the forced header is 107 tokens (the most any vocabulary needs) —
    more than the 64 stop token ids a request may hold, which once refused it with a message about
    "reasoning close ids". It is served: the header is written and the call is read back under its name."""
    name = ("0123456789-" * 6)[:64]
    tools = [{"type": "function", "function": {"name": name, "description": "Weather", "parameters": WEATHER}}]
    header = f"<|end|><|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
    assert len(harmony.tok.encode(header, add_special_tokens=False).ids) == 107
    j = chat(harmony, tools=tools, tool_choice={"type": "function", "function": {"name": name}},
             thinking_token_budget=2, return_token_ids=True)
    c = j["choices"][0]
    raw = raw_text(harmony, c["token_ids"])
    assert header in raw
    assert [to for to, _, _ in read_harmony(raw)[2]] == ["functions." + name]
    (tc,) = c["message"]["tool_calls"]
    assert tc["function"]["name"] == name and c["finish_reason"] == "tool_calls"
    jsonschema.validate(json.loads(tc["function"]["arguments"]), WEATHER)


def test_forced_call_after_the_model_ends_its_reasoning(harmony):
    """A named tool_choice where the model ends its reasoning itself (<|end|>, the one tag that ends a harmony
    body and goes on), before any budget is spent (pushed to by logit_bias: random weights never would):
    the rest of the call's header is forced from there, so the call's recipient is the named function — a
    call the model addressed to another one (once dropped silently) cannot be written."""
    end = harmony.ids["<|end|>"]
    j = chat(harmony, tool_choice=NAMED, thinking_token_budget=1000, return_token_ids=True,
             logit_bias={str(end): 100})
    c = j["choices"][0]
    raw = raw_text(harmony, c["token_ids"])
    assert raw.startswith("<|channel|>analysis<|message|><|end|>"), raw
    header = "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    assert header in raw
    assert [to for to, _, _ in read_harmony(raw)[2]] == ["functions.get_weather"]
    (tc,) = c["message"]["tool_calls"]
    assert tc["function"]["name"] == "get_weather" and c["finish_reason"] == "tool_calls"
    jsonschema.validate(json.loads(tc["function"]["arguments"]), WEATHER)


def test_forced_call_streamed(harmony):
    """The same call streamed: reasoning deltas strictly before the call; the call's id, type and name,
    then its arguments; finish_reason tool_calls. The openai client assembles what the whole response
    holds."""
    whole = chat(harmony, tool_choice=NAMED, thinking_token_budget=3)["choices"][0]
    body = {"model": harmony.model, "messages": ASK, "tools": TOOLS, "temperature": 0, "max_tokens": 200,
            "tool_choice": NAMED, "thinking_token_budget": 3, "stream": True}
    with harmony.http.stream("POST", "/v1/chat/completions", json=body) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    kinds = [k for d in deltas for k in ("reasoning_content", "tool_calls", "content") if d.get(k)]
    first_call = kinds.index("tool_calls")
    assert set(kinds[:first_call]) == {"reasoning_content"} and "reasoning_content" not in kinds[first_call:]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == whole["message"]["reasoning_content"]
    calls = [d["tool_calls"] for d in deltas if d.get("tool_calls")]
    want = whole["message"]["tool_calls"][0]
    assert calls[0] == [{"index": 0, "id": calls[0][0]["id"], "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]
    assert calls[1] == [{"index": 0, "function": {"arguments": want["function"]["arguments"]}}]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"

    async def go():
        c = openai.AsyncOpenAI(base_url=harmony.url + "/v1", api_key="x")
        stream = await c.chat.completions.create(model=harmony.model, messages=ASK, tools=TOOLS, tool_choice=NAMED,
                                                 temperature=0, max_tokens=200, stream=True,
                                                 extra_body={"thinking_token_budget": 3})
        out = await tram_server.assemble_tool_call(stream)
        await c.close()
        return out

    assert asyncio.run(go()) == ("get_weather", want["function"]["arguments"], "tool_calls")


def test_openai_client_and_parallel_limit(harmony):
    """The official client reads the call; parallel_tool_calls false keeps it one."""
    c = openai.OpenAI(base_url=harmony.url + "/v1", api_key="x")
    r = c.chat.completions.create(model=harmony.model, messages=ASK, tools=TOOLS, tool_choice=NAMED, temperature=0,
                                  max_tokens=200, parallel_tool_calls=False, extra_body={"thinking_token_budget": 4})
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls" and ch.message.content is None
    assert [t.function.name for t in ch.message.tool_calls] == ["get_weather"]
    jsonschema.validate(json.loads(ch.message.tool_calls[0].function.arguments), WEATHER)


def test_required_answers_in_the_final_channel(harmony):
    """tool_choice required: a spent budget opens the final channel, where the grammar writes the list of
    calls (as for the other formats); they are read from there."""
    j = chat(harmony, tool_choice="required", thinking_token_budget=2, return_token_ids=True, max_tokens=200)
    c = j["choices"][0]
    analysis, final, calls = read_harmony(raw_text(harmony, c["token_ids"]))
    assert not calls and c["message"]["reasoning_content"] == analysis
    want = [(x["name"], x["parameters"]) for x in json.loads(final)]
    got = [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in c["message"]["tool_calls"]]
    assert got == want and c["finish_reason"] == "tool_calls"


def jinja_render(messages, tools):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    env.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
    msgs = []
    for m in messages:  # as transformers/vLLM hand them to templates: arguments as objects, content a string
        m = {**m, "content": m.get("content") or ""}
        if m.get("tool_calls"):
            m["tool_calls"] = [{**tc, "function": {**tc["function"], "arguments": json.loads(
                tc["function"]["arguments"])}} for tc in m["tool_calls"]]
        msgs.append(m)
    return env.from_string(TEMPLATE.read_text()).render(messages=msgs, tools=tools, add_generation_prompt=True)


def test_second_turn_after_a_tool_result(harmony):
    """The call the server returned goes back with the tool's result: the prompt is gpt-oss's template's
    (jinja2 + tokenizers), and the model answers."""
    first = chat(harmony, tool_choice=NAMED, thinking_token_budget=2)["choices"][0]["message"]
    call = first["tool_calls"][0]
    msgs = ASK + [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": call["id"], "content": '{"temperature": 21}'}]
    want = harmony.tok.encode(jinja_render(msgs, TOOLS), add_special_tokens=False).ids
    assert f'<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>' in jinja_render(msgs, TOOLS)
    r = harmony.http.post("/tokenize", json={"model": harmony.model, "messages": msgs, "tools": TOOLS})
    assert r.status_code == 200, r.text
    assert r.json()["tokens"] == want
    j = chat(harmony, messages=msgs, max_tokens=8)
    assert j["usage"]["prompt_tokens"] == len(want)


def test_responses_api_function_call(harmony):
    """/v1/responses (the server's thinking budget): the forced call as a function_call item after the
    reasoning item."""
    c = openai.OpenAI(base_url=harmony.url + "/v1", api_key="x")
    tools = [{"type": "function", "name": "get_weather", "description": "Get the weather", "parameters": WEATHER}]
    r = c.responses.create(model=harmony.model, input=ASK[0]["content"], tools=tools, temperature=0,
                           max_output_tokens=200, tool_choice={"type": "function", "name": "get_weather"})
    kinds = [o.type for o in r.output]
    assert kinds[0] == "reasoning" and kinds[-1] == "function_call", kinds
    fc = r.output[-1]
    assert fc.name == "get_weather"
    jsonschema.validate(json.loads(fc.arguments), WEATHER)


def test_anthropic_tool_use(harmony):
    """/v1/messages (the server's thinking budget: Anthropic's budget_tokens is 1024 at least): the forced
    call as a tool_use block, stop_reason tool_use."""
    body = {"model": harmony.model, "max_tokens": 200, "messages": ASK, "temperature": 0,
            "tools": [{"name": "get_weather", "description": "Get the weather", "input_schema": WEATHER}],
            "tool_choice": {"type": "tool", "name": "get_weather"}}
    r = harmony.http.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    j = r.json()
    blocks = [b["type"] for b in j["content"]]
    assert blocks == ["tool_use"], blocks  # thinking not asked for: not shown, as Anthropic's
    assert j["stop_reason"] == "tool_use" and j["content"][-1]["name"] == "get_weather"
    jsonschema.validate(j["content"][-1]["input"], WEATHER)
    # streamed: one tool_use block whose input_json_delta pieces make the same input
    with harmony.http.stream("POST", "/v1/messages", json={**body, "stream": True},
                             headers={"anthropic-version": "2023-06-01"}) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [(b["type"], b.get("name")) for b in starts] == [("tool_use", "get_weather")]
    pieces = [e["delta"]["partial_json"] for e in events
              if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"]
    assert json.loads("".join(pieces)) == j["content"][-1]["input"]
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["tool_use"]


@pytest.mark.parametrize("reasoning,parser,word", [
    ("none", "openai", "gpt_oss"),    # the harmony tool parser needs its reasoning parser
    ("gpt_oss", "hermes", "harmony"),  # hermes would stream the harmony call as text and then as a call
], ids=["openai-without-gpt_oss", "gpt_oss-with-hermes"])
def test_tool_parser_and_harmony_must_go_together(tmp_path, reasoning, parser, word):
    """A gpt-oss model whose tool_call_parser and reasoning parser do not pair (openai without gpt_oss, or
    gpt_oss with another tool parser): a request with tools is a 400 naming tools whose message names what
    is missing; a request without tools is served."""
    d = tmp_path / "model"
    harmony_folder(d)
    srv = tram_server.start(tmp_path, "--max-model-len", "2048", "--reasoning-parser", reasoning, "--tool-call-parser",
                            parser, model=d)
    try:
        r = srv.http.post("/v1/chat/completions", json={"messages": ASK, "tools": TOOLS, "max_tokens": 4})
        assert r.status_code == 400 and r.json()["error"]["param"] == "tools", r.text
        assert word in r.json()["error"]["message"]
        r = srv.http.post("/v1/chat/completions", json={"messages": ASK, "max_tokens": 4})  # no tools: served
        assert r.status_code == 200, r.text
    finally:
        assert srv.stop() == 0
