"""Structured output through the server (issue 16): every request form, on
both endpoints, streaming and not, checked with independent references —
Python `jsonschema` (Draft 2020-12, formats checked) for JSON Schema
outputs, `re` for regexes, `lark` for GBNF, exact membership for choices —
through the official `openai` client; n > 1, seeds, stop strings,
max_tokens, preemption, the prefix cache and speculative decoding keep their
guarantees; bad input of every class gets a 400 and the server keeps
serving."""
import concurrent.futures as cf
import contextlib
import json
import pathlib
import re

import jsonschema
import lark
import pytest

from grammar_tool import validator_schema
from tram_server import server_fixture, start

CORPUS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "grammar" / "schemas.json").read_text())
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER

server = server_fixture("--max-seqs", "16")


@contextlib.contextmanager
def start_server(log_dir, *args):
    srv = start(log_dir, *args)
    try:
        yield srv
    finally:
        assert srv.stop() == 0


def validate(schema, text):
    jsonschema.Draft202012Validator(validator_schema(schema), format_checker=FORMATS).validate(json.loads(text))


def chat(srv, schema, name="answer", **kw):
    kw.setdefault("max_tokens", 160)
    return srv.client().chat.completions.create(
        model=None,
        messages=[{"role": "user", "content": f"Give a JSON value for '{name}': {json.dumps(schema)[:400]}"}],
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}},
        **kw,
    )


def run_corpus(srv, entries, **kw):
    """Runs one chat request per schema, 16 at a time; returns (done, cut):
    complete outputs validated, outputs that hit max_tokens."""
    done = cut = 0
    with cf.ThreadPoolExecutor(16) as ex:
        futs = {ex.submit(chat, srv, e["schema"], e["name"], **kw): e for e in entries}
        for f in cf.as_completed(futs):
            e, ch = futs[f], f.result().choices[0]
            if ch.finish_reason == "length":
                cut += 1
                continue
            assert ch.finish_reason == "stop", e["name"]
            try:
                validate(e["schema"], ch.message.content)
            except Exception as ex_:  # noqa: BLE001 - the name makes the failure readable
                raise AssertionError(f"{e['name']}: {ch.message.content!r}: {ex_}") from None
            done += 1
    return done, cut


@pytest.mark.parametrize("part", [
    pytest.param(slice(1, None, 3), id="third"),  # disjoint from test_corpus_seeded's
    pytest.param(slice(None), id="all", marks=pytest.mark.long),
])
def test_corpus_greedy(server, part):
    entries = CORPUS[part]
    done, cut = run_corpus(server, entries, temperature=0)
    assert done + cut == len(entries) and done >= 0.8 * len(entries), (done, cut)


def test_corpus_seeded(server):
    done, cut = run_corpus(server, CORPUS[::3], temperature=1.0, seed=11)
    assert done >= 0.7 * len(CORPUS[::3]), (done, cut)


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["name", "age"],
}

# (request fields, checker of the output text) for every form
FORMS = [
    ({"response_format": {"type": "json_object"}}, lambda t: isinstance(json.loads(t), dict)),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}},
     lambda t: validate(PERSON, t) is None),
    ({"structured_outputs": {"json": PERSON}}, lambda t: validate(PERSON, t) is None),
    ({"structured_outputs": {"json": json.dumps(PERSON)}}, lambda t: validate(PERSON, t) is None),
    ({"structured_outputs": {"regex": r"[A-Z][a-z]{2,8} [0-9]{2}"}}, lambda t: re.fullmatch(r"[A-Z][a-z]{2,8} [0-9]{2}", t)),
    ({"structured_outputs": {"choice": ["red", "green", "blue"]}}, lambda t: t in ("red", "green", "blue")),
    ({"structured_outputs": {"grammar": 'root ::= "x" [0-9]{1,4} ";"'}}, lambda t: re.fullmatch(r"x[0-9]{1,4};", t)),
    ({"structured_outputs": {"json_object": True}}, lambda t: isinstance(json.loads(t), dict)),
    ({"guided_json": PERSON}, lambda t: validate(PERSON, t) is None),
    ({"guided_regex": r"(yes|no), because [a-z ]{1,30}\."}, lambda t: re.fullmatch(r"(yes|no), because [a-z ]{1,30}\.", t)),
    ({"guided_choice": ["alpha", "beta"]}, lambda t: t in ("alpha", "beta")),
    ({"guided_grammar": 'root ::= ("ab" | "cd"){1,3} "!"'}, lambda t: re.fullmatch(r"(ab|cd){1,3}!", t)),
    ({"grammar": 'root ::= [a-c]{3}'}, lambda t: re.fullmatch(r"[a-c]{3}", t)),
    ({"json_schema": PERSON}, lambda t: validate(PERSON, t) is None),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("form", range(len(FORMS)))
def test_every_form(server, form, endpoint, stream):
    """Each form's output passes its checker; any JSON object (unbounded) may
    run to max_tokens, and is then checked to be an object begun."""
    fields, check = FORMS[form]
    c = server.client()
    kw = dict(model=None, max_tokens=120, temperature=0.8, seed=form, stream=stream, extra_body=fields)
    if endpoint == "chat":
        r = c.chat.completions.create(messages=[{"role": "user", "content": "Answer in a few words."}], **kw)
        parts = [(x.choices[0].delta.content or "", x.choices[0].finish_reason) for x in r if x.choices] if stream \
            else [(r.choices[0].message.content, r.choices[0].finish_reason)]
    else:
        r = c.completions.create(prompt="Here is the short answer:", **kw)
        parts = [(x.choices[0].text, x.choices[0].finish_reason) for x in r if x.choices] if stream \
            else [(r.choices[0].text, r.choices[0].finish_reason)]
    text, finish = "".join(p[0] for p in parts), [p[1] for p in parts if p[1]][-1]
    if finish == "length" and "json_object" in json.dumps(fields):
        assert text.startswith("{"), text
    else:
        assert finish == "stop" and check(text), (fields, text)


def test_n_and_seed_are_reproducible(server):
    c = server.client()
    kw = dict(model=None, prompt="A person:", max_tokens=60, temperature=1.0, seed=42, n=4, extra_body={"guided_json": PERSON})
    a = c.completions.create(**kw)
    b = c.completions.create(**kw)
    texts = [x.text for x in sorted(a.choices, key=lambda x: x.index)]
    assert texts == [x.text for x in sorted(b.choices, key=lambda x: x.index)]
    for t in texts:
        validate(PERSON, t)
    assert len(set(texts)) > 1  # four draws, not one copied


def test_max_tokens_leaves_a_prefix(server):
    c = server.client()
    kw = dict(model=None, prompt="A person:", temperature=0, extra_body={"guided_json": PERSON})
    full = c.completions.create(max_tokens=80, **kw).choices[0]
    short = c.completions.create(max_tokens=4, **kw).choices[0]
    assert full.finish_reason == "stop" and short.finish_reason == "length"
    assert full.text.startswith(short.text) and len(short.text) < len(full.text)


def test_stop_string_ends_constrained_output(server):
    c = server.client()
    r = c.completions.create(model=None, prompt="Letters:", max_tokens=40, temperature=0, stop=["c"],
                             extra_body={"guided_regex": "abcabc"})
    assert r.choices[0].text == "ab" and r.choices[0].finish_reason == "stop"


def test_constrained_logprobs_are_of_the_masked_row(server):
    r = server.client().chat.completions.create(
        model=None, messages=[{"role": "user", "content": "Sky blue?"}], max_tokens=5, logprobs=True, top_logprobs=5,
        extra_body={"guided_choice": ["yes"]})
    tops = r.choices[0].logprobs.content[0].top_logprobs
    allowed = [t for t in tops if t.logprob > -9999]
    assert {t.token for t in allowed} <= {"y", "ye", "yes"} and allowed
    assert abs(sum(2.718281828 ** t.logprob for t in allowed) - 1) < 1e-3


def test_prefix_cache_and_batch_keep_outputs(server):
    """The same greedy request alone, again (prefix-cache hit) and among 12
    concurrent ones gives the same text."""
    c = server.client()
    record = "The customer register of the town library lists every member with a name and an age. " * 4
    kw = dict(model=None, prompt=record + "The next record is", max_tokens=60, temperature=0, extra_body={"guided_json": PERSON})
    solo = c.completions.create(**kw).choices[0].text
    again = c.completions.create(**kw)
    assert again.choices[0].text == solo and again.usage.prompt_tokens_details.cached_tokens > 0
    with cf.ThreadPoolExecutor(12) as ex:
        outs = list(ex.map(lambda i: c.completions.create(**{**kw, "prompt": kw["prompt"] + " " * (i % 3)}).choices[0].text
                           if i % 3 else c.completions.create(**kw).choices[0].text, range(12)))
    assert all(o == solo for o in outs[::3])


ARITH = r"""
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]{1,3} | "(" expr ")"
"""
LARK_ARITH = r"""
start: expr
expr: term (("+"|"-") term)*
term: factor (("*"|"/") factor)*
factor: /[0-9]{1,3}/ | "(" expr ")"
"""


def test_gbnf_output_parses_with_lark(server):
    p = lark.Lark(LARK_ARITH)
    c = server.client()
    for seed in range(4):
        r = c.completions.create(model=None, prompt="2+2*(3-1) =", max_tokens=40, temperature=1.0, seed=seed,
                                 extra_body={"grammar": ARITH})
        if r.choices[0].finish_reason == "stop":
            p.parse(r.choices[0].text)


BAD = [
    ({"guided_regex": "(ab"}, "guided_regex", "offset 0"),
    ({"guided_regex": "a{1000000}"}, "guided_regex", "above"),
    ({"guided_regex": "(" * 500 + "a" + ")" * 500}, "guided_regex", "deeper than"),
    ({"structured_outputs": {"grammar": 'root ::= "a" | b'}}, "structured_outputs.grammar", "undefined rule 'b'"),
    ({"grammar": "root ::= x\nx ::= x \"a\" | \"b\""}, "grammar", "left recursi"),  # (productive: one with no sentence says so)
    ({"grammar": "root ::= \"a"}, "grammar", ""),
    ({"grammar": "root ::= undefined"}, "grammar", "undefined"),
    ({"json_schema": {"type": "object", "uniqueItems": True}}, "json_schema", "uniqueItems"),
    ({"json_schema": {"$ref": "#/$defs/none"}}, "json_schema", ""),
    ({"guided_json": "not json"}, "guided_json", ""),
    ({"guided_choice": []}, "guided_choice", ""),
    ({"guided_choice": ["a", 1]}, "guided_choice", ""),
    ({"guided_regex": "a", "grammar": "root ::= \"a\""}, "grammar", "at most one"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs.choice", "at most one"),
    ({"structured_outputs": {"structural_tag": "x"}}, "structured_outputs.structural_tag", "not supported"),
    ({"structured_outputs": "json"}, "structured_outputs", ""),
    ({"response_format": {"type": "yaml"}}, "response_format.type", ""),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema", ""),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format.json_schema.schema", ""),
    ({"guided_whitespace_pattern": " *", "guided_json": {}}, "guided_whitespace_pattern", ""),
    ({"guided_decoding_backend": "xgrammar"}, "guided_decoding_backend", ""),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_gets_400(server, i):
    fields, param, words = BAD[i]
    r = server.post("/v1/completions", json={"prompt": "x", "max_tokens": 4, **fields})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err
    assert server.get("/health").status_code == 200


def test_preemption_keeps_constrained_outputs(tmp_path):
    """A cache of 12 blocks of 16 tokens for 8 concurrent constrained
    requests: sequences are preempted and recomputed, outputs equal solo."""
    # unpaced (scheduler/sched_pace.h): every prompt is admitted at once, so the 8 outgrow the cache
    with start_server(tmp_path, "--kv-cache-blocks", "12", "--block-size", "16", "--max-seqs", "8",
                      "--step-target-ms", "600000") as srv:
        c = srv.client()
        kw = dict(model=None, max_tokens=70, temperature=0.9, extra_body={"guided_json": PERSON})
        prompts = [f"Person number {i} in the register of the town:" for i in range(8)]
        solo = [c.completions.create(prompt=p, seed=i, **kw).choices[0].text for i, p in enumerate(prompts)]
        before = srv.metric("vllm:num_preemptions_total")
        with cf.ThreadPoolExecutor(8) as ex:
            both = list(ex.map(lambda i: c.completions.create(prompt=prompts[i], seed=i, **kw).choices[0].text, range(8)))
        assert srv.metric("vllm:num_preemptions_total") > before
        assert both == solo


def test_speculative_decoding_keeps_constrained_outputs(tmp_path):
    prompt = 'Repeat: {"name":"Ann","age":31} {"name":"Bob","age":42} {"name":"Ann","age":31}'
    kw = dict(model=None, prompt=prompt, max_tokens=60, temperature=0, extra_body={"guided_json": PERSON})
    with start_server(tmp_path / "a") as plain:
        want = plain.client().completions.create(**kw).choices[0].text
    with start_server(tmp_path / "b", "--speculative", "ngram") as spec:
        got = spec.client().completions.create(**kw).choices[0].text
    assert got == want
    validate(PERSON, got)


def token_id(srv, text):
    ids = srv.post("/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_structured_outputs_options_take_effect(server):
    """disable_any_whitespace false allows (bounded) whitespace, which the
    default compact form never emits; disable_additional_properties false lets
    objects take keys the schema does not list. A +100 logit bias on a space
    or on "b" shows each: the output takes it only where the option allows."""
    def run(so, bias):
        r = server.post("/v1/completions", json={"prompt": "Object:", "max_tokens": 30, "temperature": 0,
                                                 "logit_bias": bias, "structured_outputs": so})
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]
    space = {str(token_id(server, " ")): 100}
    compact = run({"json_object": True}, space)
    flexible = run({"json_object": True, "disable_any_whitespace": False}, space)
    # compact: the object starts at once; flexible: whitespace before it (bounded: 8 at most)
    assert compact.startswith("{") and flexible[0] == " " and flexible.lstrip(" ").startswith("{"), (compact, flexible)
    assert len(flexible) - len(flexible.lstrip(" ")) <= 8
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    b = {str(token_id(server, "b")): 100}
    strict = run({"json": schema}, b)
    loose = run({"json": schema, "disable_additional_properties": False}, b)
    assert "b" not in strict and loose.startswith('{"') and "b" in loose, (strict, loose)  # a key not in the schema
