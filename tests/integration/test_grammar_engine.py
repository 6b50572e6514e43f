"""The grammar engine (grammar/) over the default model's vocabulary, through
tests/tools/grammar_mask, against independent references:

- JSON Schema: every schema of tests/grammar/schemas.json, random complete
  outputs (seeded random tokens from the masks, then the shortest completion)
  validate under Python's jsonschema (Draft 2020-12, formats checked);
- masks equal PyPI llguidance's at random parser states (regexes, schemas);
- regex outputs full-match under Python's re; choice outputs are a choice;
- GBNF outputs parse under lark grammars written independently;
- bad input: a clear error naming the problem (position, keyword, path)."""
import json
import pathlib
import re

import jsonschema
import lark
import pytest

from grammar_tool import GrammarTool, compare_walk, llg_tokenizer, validator_schema

CORPUS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "grammar" / "schemas.json").read_text())
RANDOM_STEPS = [0, 3, 10, 30, 60, 100]


@pytest.fixture(scope="module")
def gtool(tool, model_path):
    t = GrammarTool(tool("grammar_mask"), model_path)
    yield t
    t.close()


@pytest.fixture(scope="module")
def llg_tok(gtool):
    return llg_tokenizer(gtool)


def samples(gtool, n=len(RANDOM_STEPS)):
    out = []
    for seed in range(n):
        text, complete = gtool.sample(seed, RANDOM_STEPS[seed % len(RANDOM_STEPS)])
        assert complete, f"seed {seed}: no complete output: {text[:200]!r}"
        out.append(text)
    return out


def test_corpus_size_and_keywords():
    assert len(CORPUS) >= 100
    seen = set()

    def walk(s):
        if isinstance(s, dict):
            seen.update(s)
            for v in s.values():
                walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)

    for e in CORPUS:
        walk(e["schema"])
    need = {"type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
            "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength",
            "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
            "nullable"}
    assert need <= seen, need - seen


@pytest.mark.parametrize("entry", CORPUS, ids=[e["name"] for e in CORPUS])
def test_schema_outputs_validate(gtool, entry):
    r = gtool.compile({"json_schema": entry["schema"]})
    assert "ok" in r, r
    validator = jsonschema.Draft202012Validator(validator_schema(entry["schema"]), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for text in samples(gtool):
        doc = json.loads(text)
        errors = [e.message for e in validator.iter_errors(doc)]
        assert not errors, (text[:300], errors[:3])


def test_flexible_whitespace_is_bounded(gtool):
    schema = next(e["schema"] for e in CORPUS if e["name"] == "api-order")
    assert "ok" in gtool.compile({"json_schema": schema}, flexible_ws=True)
    validator = jsonschema.Draft202012Validator(schema)
    saw_space = False
    for text in samples(gtool):
        doc = json.loads(text)
        assert not list(validator.iter_errors(doc))
        outside = re.sub(rb'"(\\.|[^"\\])*"', b'""', text)  # whitespace outside strings
        runs = re.findall(rb"[ \t\n\r]+", outside)
        saw_space |= bool(runs)
        assert all(len(r) <= 8 for r in runs), runs
    assert saw_space


def test_json_object(gtool):
    assert "ok" in gtool.compile({"json_object": 1})
    for text in samples(gtool):
        assert isinstance(json.loads(text), dict)


# Schemas whose language tram and llguidance define the same way (the others
# differ by design: tram's format regexes are narrower, numbers with bounds
# produce a subset, OpenAPI "nullable" is honoured, allOf merges objects).
LLG_SCHEMAS = ["type-list", "type-any", "string-len", "string-pattern-alt", "string-pattern-quote", "format-uuid",
               "int-range", "int-range-neg", "int-excl", "enum-mixed", "enum-typed", "const-obj", "array-prefix-more",
               "array-nested", "obj-mixed-req", "obj-additional-schema", "obj-keys-escape", "obj-prefix-keys",
               "oneof-disjoint", "ref-recursive-tree", "ref-root", "api-order", "api-tool-call", "api-comment-tree",
               "api-expr", "api-wide-20", "api-payment"]


@pytest.mark.parametrize("name", LLG_SCHEMAS)
def test_schema_masks_match_llguidance(gtool, llg_tok, name):
    import llguidance as llg

    schema = next(e["schema"] for e in CORPUS if e["name"] == name)
    g = llg.LLMatcher.grammar_from_json_schema(
        schema, overrides={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})
    for seed in range(2):
        assert compare_walk(gtool, llg_tok, {"json_schema": schema}, g, seed, 30) == []


REGEXES = [r"[a-z]+@[a-z]+\.com", r"(ab|cd){2,5}x?", r"[0-9]{3}-[0-9]{4}", r"héllo|wörld[^a]*", r".{0,20}",
           r'"([^"\\]|\\.)*"', r"(\+|-)?[0-9]+(\.[0-9]+)?([eE][0-9]+)?", r"[A-Z][a-z]*( [A-Z][a-z]*){0,3}",
           r"(yes|no|maybe)", r"[^\n]{3,10}\n[^\n]{0,5}", r"(a|b)*abb", r"[\u00e0-\u00ff]{1,4}z",
           # issue 35: repetitions of nullable bodies, and an alternation merged into a trie
           r"((a*)*)*b", r"(a?)*b", r"(ab?c?){2,4}d", "|".join(f"w{i}" for i in range(300))]


@pytest.mark.parametrize("rx", REGEXES)
def test_regex_masks_match_llguidance(gtool, llg_tok, rx):
    import llguidance as llg

    for seed in range(3):
        assert compare_walk(gtool, llg_tok, {"regex": rx}, llg.LLMatcher.grammar_from_regex(rx), seed, 25) == []


@pytest.mark.parametrize("rx", REGEXES + [r"\d{2}:\d{2}(am|pm)", r"\w+\s\w+", r"(?:[a-f0-9]{2}){3}", r"(?P<n>x+)y",
                                          r"^[A-Z]{2,3}$", r"a{2}b{1,}c{,2}"])
def test_regex_outputs_fullmatch(gtool, rx):
    assert "ok" in gtool.compile({"regex": rx})
    for text in samples(gtool):
        assert re.fullmatch(rx, text.decode("utf-8")), text


def test_choice(gtool):
    choices = ["yes", "no", "maybe so", "é", "no way"]
    assert "ok" in gtool.compile({"choice": choices})
    got = {t.decode() for t in samples(gtool, 12)}
    assert got <= set(choices) and len(got) >= 2


GBNF = {
    "arithmetic": ('''
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*   # precedence by layering
factor ::= number | "(" expr ")"
number ::= [0-9]{1,4}
''', r'''
start: expr
expr: term (("+"|"-") term)*
term: factor (("*"|"/") factor)*
factor: NUMBER | "(" expr ")"
NUMBER: /[0-9]{1,4}/
'''),
    "csv": ('''
root  ::= line line{1,3}
line  ::= field? ("," field?)* "\\n"
field ::= [a-z0-9]+ | "\\"" [a-zA-Z0-9 ]* "\\""
''', r'''
start: line line~1..3
line: field? ("," field?)* "\n"
field: /[a-z0-9]+/ | /"[a-zA-Z0-9 ]*"/
'''),
    "json": ('''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\\"" ( [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\\n" [ \\t]{0,20}
''', r'''
?start: object
?value: object | array | string | SIGNED_NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: string ":" value
string: ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
'''),
    "tiny-language": ('''
root  ::= stmt{1,4}
stmt  ::= "let " ident " = " expr ";\\n"
        | "print " expr ";\\n"
        | "if " expr " {\\n" stmt* "}\\n"
expr  ::= atom (" " op " " atom)*
atom  ::= ident | [0-9]+ | "(" expr ")"
op    ::= "+" | "-" | "*" | "<" | "=="
ident ::= [a-z] [a-z0-9_]{0,7}
''', r'''
start: stmt~1..4
stmt: "let " IDENT " = " expr ";\n" | "print " expr ";\n" | "if " expr " {\n" stmt* "}\n"
expr: atom (" " OP " " atom)*
atom: IDENT | NUM | "(" expr ")"
OP: "+" | "-" | "*" | "<" | "=="
IDENT: /[a-z][a-z0-9_]{0,7}/
NUM: /[0-9]+/
'''),
}


@pytest.mark.parametrize("name", sorted(GBNF))
def test_gbnf_outputs_parse_with_lark(gtool, name):
    gbnf, grammar = GBNF[name]
    r = gtool.compile({"gbnf": gbnf})
    assert "ok" in r, r
    parser = lark.Lark(grammar, parser="earley")
    for text in samples(gtool):
        parser.parse(text.decode("utf-8"))
        if name == "json":
            json.loads(text)


BAD = [
    ({"gbnf": 'root ::= "a" | b\n'}, r"undefined rule 'b'", 15),
    ({"gbnf": 'root ::= "abc\n'}, r"unterminated string", 13),
    ({"gbnf": 'root ::= [z-a]\n'}, r"out of order", None),
    ({"gbnf": 'root ::= x\nx ::= x "a" | "b"\n'}, r"left recursion in rule 'x'", None),
    ({"gbnf": 'expr ::= "a"\n'}, r"no 'root' rule", None),
    ({"gbnf": 'root ::= ("a"\n'}, r"expected '\)'", None),
    ({"gbnf": 'root ::= "a"{99999}\n'}, r"above", None),
    ({"gbnf": "root ::= " + "(" * 500 + '"a"' + ")" * 500}, r"deeper than", None),
    ({"regex": "a(?=b)"}, r"lookahead", 1),
    ({"regex": "(a)\\1"}, r"backreferences", 3),
    ({"regex": "a(?<!b)"}, r"lookbehind", 1),
    ({"regex": "\\bword"}, r"word boundary", 0),
    ({"regex": "(?i)abc"}, r"flags", 0),
    ({"regex": "\\p{L}"}, r"Unicode property", 0),
    ({"regex": "a**+"}, r"nothing to repeat|possessive", None),
    ({"regex": "(ab"}, r"missing '\)'", 0),
    ({"regex": "a{1000000}"}, r"above", None),
    ({"json_schema": {"type": "object", "properties": {"a": {"type": "string", "minProperties": 1}}}},
     r"keyword 'minProperties' is not supported \(at /properties/a/minProperties\)", None),
    ({"json_schema": {"type": "string", "format": "hostname"}}, r"format 'hostname' is not supported", None),
    ({"json_schema": {"$ref": "#/$defs/missing"}}, r"does not resolve", None),
    ({"json_schema": {"$ref": "http://example.com/s.json"}}, r"only local \$ref", None),
    ({"json_schema": {"type": "blob"}}, r"unknown type 'blob'", None),
    ({"json_schema": {"type": "integer", "minimum": 5, "maximum": 1}}, r"no integer", None),
    ({"json_schema": {"type": "array", "items": {"patternProperties": {}}}}, r"/items/patternProperties", None),
    ({"json_schema": {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}}, r"left recursion|no sentence", None),
    ({"choice": []}, r"empty", None),
]


@pytest.mark.parametrize("spec,pattern,pos", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_errors(gtool, spec, pattern, pos):
    r = gtool.compile(spec)
    assert "error" in r, r
    assert re.search(pattern, r["error"]), r["error"]
    if pos is not None:
        assert r["pos"] == pos, r
    assert "ok" in gtool.compile({"regex": "ok"})  # and the tool keeps working
