"""Drives build/tests/tools/grammar_mask (tram's grammar engine over the
model's vocabulary) and builds the same vocabulary for PyPI's llguidance, the
independent implementation the masks are compared with."""
import json
import random
import subprocess


class GrammarTool:
    def __init__(self, path, model):
        self.p = subprocess.Popen([str(path), "-m", str(model)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        v = self.cmd({"vocab": 1})
        self.n = v["n"]
        self.eog = v["eog"]
        self.tokens = [bytes.fromhex(h) for h in v["tokens"]]

    def cmd(self, d):
        self.p.stdin.write(json.dumps(d) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, "grammar_mask exited"
        return json.loads(line)

    def compile(self, spec, flexible_ws=False):
        return self.cmd({"compile": spec, "flexible_ws": flexible_ws})

    def mask(self):
        r = self.cmd({"mask": 1})
        assert "error" not in r, r
        return bits(bytes.fromhex(r["mask"]), self.n)

    def accept(self, t):
        return self.cmd({"accept": t})["ok"] == 1

    def sample(self, seed, random_steps, max_tokens=3000):
        r = self.cmd({"sample": {"seed": seed, "random_steps": random_steps, "max_tokens": max_tokens}})
        return bytes.fromhex(r["text"]), r["complete"] == 1

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=30) == 0


def bits(b, n):
    return {i for i in range(n) if b[i >> 3] >> (i & 7) & 1}


def llg_tokenizer(tool):
    """An llguidance tokenizer over exactly the tool's vocabulary: control
    tokens (empty in the tool) are llguidance's special tokens; text is
    tokenized greedily (llguidance only uses it for forced bytes)."""
    import llguidance as llg

    toks = tool.tokens
    lookup = {}
    for i, t in enumerate(toks):
        if t and t not in lookup:
            lookup[t] = i

    class Vocab:
        def __init__(self):
            self.tokens = [t if t else b"<|special-%d|>" % i for i, t in enumerate(toks)]
            self.eos_token_id = tool.eog[0]
            self.bos_token_id = None
            self.special_token_ids = [i for i, t in enumerate(toks) if not t]

        def __call__(self, b):
            if isinstance(b, str):
                b = b.encode()
            out, i = [], 0
            while i < len(b):
                for k in range(min(32, len(b) - i), 0, -1):
                    t = lookup.get(b[i:i + k])
                    if t is not None:
                        out.append(t)
                        i += k
                        break
                else:
                    i += 1
            return out

    return llg.LLTokenizer(llg.TokenizerWrapper(Vocab()), eos_token=tool.eog)


def compare_walk(tool, llg_tok, spec, llg_grammar, seed, steps):
    """Walks `steps` random tokens (seeded) drawn from tram's masks, comparing
    tram's allowed set with llguidance's at every state. Where llguidance has
    forced bytes it offers only its canonical token for them; tram offers
    every token that fits, so there tram may allow more, but only tokens that
    are a prefix of the forced bytes (or extend them). Returns a list of
    mismatch descriptions (empty: equal)."""
    import llguidance as llg

    r = tool.compile(spec)
    assert "ok" in r, r
    m = llg.LLMatcher(llg_tok, llg_grammar, log_level=0)
    assert not m.is_error(), m.get_error()
    rnd = random.Random(seed)
    for step in range(steps):
        mine = tool.mask()
        theirs = bits(m.compute_bitmask(), tool.n)
        ff = m.compute_ff_bytes()
        forced = {t for t in mine - theirs if ff and (ff.startswith(tool.tokens[t]) or tool.tokens[t].startswith(ff))}
        if mine - forced != theirs:
            show = lambda s: [tool.tokens[t] or t for t in sorted(s)][:8]
            return [f"step {step}: only tram {show(mine - theirs - forced)}, only llguidance {show(theirs - mine)}"]
        if not mine:
            break
        t = rnd.choice(sorted(mine))
        if t in tool.eog:
            break
        assert tool.accept(t)
        assert m.consume_token(t), m.get_error()
    return []


def validator_schema(schema):
    """schema with OpenAPI's `nullable: true` (which tram honours, and which
    is no Draft 2020-12 keyword) rewritten as anyOf [schema, null], so that
    Python `jsonschema` judges outputs by the same language."""
    if isinstance(schema, list):
        return [validator_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: validator_schema(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out
