"""Issue 17 item 7: request bodies are read as RFC 8259 reads them, the way a
strict proxy in front of tram would: tram answers 400 invalid_json exactly
where Python's json module (strict, with NaN/Infinity refused and duplicate
keys detected through object_pairs_hook) refuses the body. Hand-written
cases (the issue's: leading zeros, a trailing dot, NUL then garbage, a
byte-order mark, duplicate keys) and seeded random mutations of valid
bodies, all sent to /tokenize. (The HTTP side, 505 and the malformed
framing, is tests/unit/test_http.c strict_http.)
"""
import json
import os
import random
import time

import httpx

from tram_server import server_fixture

server = server_fixture()


class Dup(Exception):
    pass


def no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise Dup()
    return dict(pairs)


def python_accepts(body: bytes) -> bool:
    def refuse(name):
        raise ValueError(name)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False  # RFC 8259 8.1: JSON text is UTF-8
    try:
        v = json.loads(text, object_pairs_hook=no_dups, parse_constant=refuse)
        json.dumps(v, ensure_ascii=False).encode()  # lone surrogates: refused (cJSON refuses them)
        return True
    except (ValueError, Dup, RecursionError, UnicodeEncodeError):
        return False


def tram_accepts(c, body: bytes) -> bool:
    r = c.post("/tokenize", content=body, headers={"content-type": "application/json"})
    code = r.json()["error"]["code"] if r.status_code >= 400 else None
    assert r.status_code in (200, 400), (body, r.status_code, r.text)
    return code != "invalid_json"


CASES = [
    b'{"prompt": "x", "add_special_tokens": true}',
    b'{"prompt": "x", "temperature": 01}', b'{"prompt": "x", "n": 1.}', b'{"prompt": "x", "n": .5}',
    b'{"prompt": "x"}\x00garbage', b'{"prompt": "x\x00y"}', b'\xef\xbb\xbf{"prompt": "x"}',
    b'{"prompt": "a", "prompt": "b"}', b'{"prompt": "x", "m": [{"a": 1, "a": 2}]}',
    b'{"prompt": "x", "\\u0061": 1, "a": 2}', b'{"prompt": "x", "n": -0, "t": 0e+5, "u": 1E-2}',
    b'{"prompt": "x", "n": +1}', b'{"prompt": "x", "n": 1e}', b'{"prompt": "x", "n": -}',
    b'{"prompt": "x\x01"}', b'{"prompt": "\\u12"}', b'{"prompt": "\\x"}', b'{"prompt": [1,]}',
    b'{"prompt": "x",}', b'{"prompt": tru}', b'{"prompt": "x", "n": NaN}', b'{"prompt": "x", "n": Infinity}',
    b'{"prompt": "x"} {}', b'[1, 2]', b'"x"', b'  {"prompt" : "x" }  \r\n', b'{"prompt": "\\ud83d\\ude00"}',
    b'{"prompt": "\\ud800"}', b'{"prompt": "\\udc00x"}', b'{"prompt": "\xff"}', b'{"prompt": "\xed\xa0\x80"}',
    b'{"prompt": "\xc0\xaf"}', b'{"prompt": "\xf4\x90\x80\x80"}', b'{"prompt": "\xe2\x82"}',
    '{"prompt": "caf\u00e9 \u65e5\u672c \U0001F600"}'.encode(),
    b'{"prompt": "x", "n": 01.5}', b'{"prompt": "x", "n": 1.5e+}', b"{'prompt': 'x'}", b'{"prompt": "x"',
    b'{"prompt": "x"}}', b'{"a" 1}', b'{"prompt": "x", "d": {"e": {"f": [[[[]]]]}}}', b'{"prompt": "\t"}',
]


def test_the_issue_cases_and_more_agree_with_python(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for body in CASES:
            assert tram_accepts(c, body) == python_accepts(body), body


def test_mutated_bodies_agree_with_python(server):
    s = int(os.environ.get("TRAM_TEST_SEED") or time.time_ns() % 2**32)
    print(f"seed: {s} (replay with TRAM_TEST_SEED={s})")
    rng = random.Random(s)
    base = [b'{"prompt": "hello", "add_special_tokens": false}',
            b'{"prompt": "a\\nb", "model": null, "x": [1, -2.5e3, {"y": true}]}',
            b'{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}']
    alphabet = b'{}[]:,"\\0123456789.-+eE tfnul\x00\t\n\xef'
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for _ in range(300):
            b = bytearray(rng.choice(base))
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(b) + 1)
                op = rng.random()
                if op < 0.4 and i < len(b):
                    del b[i]
                elif op < 0.8:
                    b[i:i] = bytes([rng.choice(alphabet)])
                else:
                    j = rng.randrange(len(b) + 1)
                    b[i:i] = b[min(i, j):max(i, j)][:20]  # a repeated piece: duplicate keys
            body = bytes(b)
            assert tram_accepts(c, body) == python_accepts(body), body
