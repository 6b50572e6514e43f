"""Benchmark workloads: prompts with exact token lengths, built from the
model's own tokenizer, and the requests each workload sends.

The tokenizer is the GGUF's byte-level BPE (tokenizer.ggml.tokens / merges)
loaded into HF `tokenizers` with the `gguf` package; it is cached as JSON in
the cache folder because reading the GGUF's 49k-entry vocabulary is slow.

Prompts are sequences of " word" pieces drawn from the vocabulary: letters-
only tokens with a leading space that the tokenizer maps back to exactly one
token. The pre-tokenizer splits text at each such space, so N pieces are N
tokens (checked when the prompt is built, and again against the server's
usage.prompt_tokens). Every request draws its own words from a seeded RNG, so
no two prompts share a prefix by accident; the shared-prefix workload shares
one on purpose.

Workload specs (strings, for the command line):
  fixed:P:O            every request P prompt tokens, O output tokens
  conv                 conversation-like requests: log-normal prompt and
                       output lengths (seeded; medians 200/120 tokens,
                       clipped to [8, 1024] and [8, 512])
  prefix:S:U:O         shared system prompt of S tokens, then U distinct
                       tokens per request, O output tokens
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import pathlib
import random
import re

LETTERS = re.compile(r"^Ġ[a-z]{3,12}$")   # "Ġ" is a space in byte-level BPE


@dataclasses.dataclass(frozen=True)
class Request:
    """One request to send: a prompt of prompt_len tokens, max_tokens output."""

    prompt: str
    prompt_len: int
    output_len: int


class Tokenizer:
    """The model's tokenizer (HF tokenizers), with count() and a word pool."""

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        self._pool: list[str] | None = None

    def count(self, text: str) -> int:
        return len(self.hf.encode(text, add_special_tokens=False).ids)

    def word_pool(self) -> list[str]:
        """Sorted " word" strings that are exactly one token each."""
        if self._pool is None:
            vocab = self.hf.get_vocab()
            cands = sorted(t for t in vocab if LETTERS.match(t))
            pool = []
            for t in cands:
                w = " " + t[1:]
                if self.hf.encode(w, add_special_tokens=False).ids == [vocab[t]]:
                    pool.append(w)
            if len(pool) < 1000:
                raise RuntimeError(f"only {len(pool)} one-token words in the vocabulary")
            self._pool = pool
        return self._pool

    def words(self, rng: random.Random, n: int) -> str:
        """A prompt of exactly n tokens (n >= 0)."""
        pool = self.word_pool()
        text = "".join(rng.choice(pool) for _ in range(n))
        got = self.count(text)
        if got != n:
            raise RuntimeError(f"prompt of {n} words tokenized to {got} tokens")
        return text


def _gguf_tokenizer_json(model_path: str) -> str:
    """HF tokenizer.json text for the GGUF's gpt2-style BPE vocabulary."""
    import gguf  # the `gguf` package (tests/requirements.txt)

    r = gguf.GGUFReader(model_path)

    def field(name):
        f = r.fields.get(name)
        if f is None:
            raise RuntimeError(f"{model_path}: no {name} in the GGUF")
        return f.contents()

    kind = field("tokenizer.ggml.model")
    if kind != "gpt2":
        raise RuntimeError(f"{model_path}: tokenizer.ggml.model is {kind!r}; only gpt2 (byte-level BPE) is supported")
    tokens = field("tokenizer.ggml.tokens")
    merges = field("tokenizer.ggml.merges")
    types = field("tokenizer.ggml.token_type")
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers

    tok = HFTokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                                 merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(tokens, types) if ty == 3]   # control tokens
    tok.add_special_tokens(specials)
    return tok.to_str()


def cache_key(model_path: str) -> str:
    """Names what is cached about one model file (path, size, mtime)."""
    st = os.stat(model_path)
    return hashlib.sha256(f"{os.path.realpath(model_path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]


def load_tokenizer(model_path: str, cache_dir: str | os.PathLike | None = None) -> Tokenizer:
    """The model's tokenizer; cached as JSON under cache_dir when given."""
    from tokenizers import Tokenizer as HFTokenizer

    cache = pathlib.Path(cache_dir) / f"tokenizer-{cache_key(model_path)}.json" if cache_dir else None
    if cache is not None and cache.exists():
        return Tokenizer(HFTokenizer.from_str(cache.read_text()))
    text = _gguf_tokenizer_json(model_path)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(cache)
    return Tokenizer(HFTokenizer.from_str(text))


@dataclasses.dataclass(frozen=True)
class Workload:
    """A parsed workload spec; requests() makes its requests."""

    kind: str          # fixed | conv | prefix
    a: int = 0
    b: int = 0
    c: int = 0

    @property
    def name(self) -> str:
        if self.kind == "fixed":
            return f"fixed {self.a}/{self.b}"
        if self.kind == "conv":
            return "conversation"
        return f"shared prefix {self.a}+{self.b}/{self.c}"

    @property
    def spec(self) -> str:
        return {"fixed": f"fixed:{self.a}:{self.b}", "conv": "conv",
                "prefix": f"prefix:{self.a}:{self.b}:{self.c}"}[self.kind]

    def max_seq_len(self) -> int:
        """Longest prompt + output of any request (for the peer's slot context)."""
        if self.kind == "fixed":
            return self.a + self.b
        if self.kind == "conv":
            return CONV_PROMPT_MAX + CONV_OUTPUT_MAX
        return self.a + self.b + self.c

    def requests(self, tok: Tokenizer, n: int, seed: int) -> list[Request]:
        """n requests; the same (n, seed), the same requests."""
        rng = random.Random(f"{self.spec}:{seed}")
        if self.kind == "fixed":
            return [Request(tok.words(rng, self.a), self.a, self.b) for _ in range(n)]
        if self.kind == "conv":
            lens = conversation_lengths(n, seed)
            return [Request(tok.words(rng, p), p, o) for p, o in lens]
        system = tok.words(random.Random(f"system:{seed}"), self.a)
        out = []
        for _ in range(n):
            text = system + tok.words(rng, self.b)
            got = tok.count(text)
            if got != self.a + self.b:
                raise RuntimeError(f"shared-prefix prompt tokenized to {got}, expected {self.a + self.b}")
            out.append(Request(text, got, self.c))
        return out


CONV_PROMPT_MEDIAN, CONV_PROMPT_SIGMA, CONV_PROMPT_MAX = 200, 0.9, 1024
CONV_OUTPUT_MEDIAN, CONV_OUTPUT_SIGMA, CONV_OUTPUT_MAX = 120, 0.8, 512
CONV_MIN = 8


def conversation_lengths(n: int, seed: int) -> list[tuple[int, int]]:
    """n (prompt, output) lengths, log-normal, clipped; same seed, same list."""
    rng = random.Random(f"conv-lengths:{seed}")

    def draw(median, sigma, hi):
        return max(CONV_MIN, min(hi, int(round(rng.lognormvariate(math.log(median), sigma)))))

    return [(draw(CONV_PROMPT_MEDIAN, CONV_PROMPT_SIGMA, CONV_PROMPT_MAX),
             draw(CONV_OUTPUT_MEDIAN, CONV_OUTPUT_SIGMA, CONV_OUTPUT_MAX)) for _ in range(n)]


def parse(spec: str) -> Workload:
    """'fixed:128:128' | 'conv' | 'prefix:512:32:64' -> Workload (ValueError if malformed)."""
    parts = spec.strip().split(":")
    want = {"fixed": 2, "conv": 0, "prefix": 3}
    if parts[0] not in want or len(parts) != want[parts[0]] + 1:
        raise ValueError(f"bad workload {spec!r}: expected fixed:P:O, conv or prefix:S:U:O")
    try:
        nums = [int(x) for x in parts[1:]]
    except ValueError:
        raise ValueError(f"bad workload {spec!r}: lengths must be integers") from None
    if any(x < 1 for x in nums):
        raise ValueError(f"bad workload {spec!r}: lengths must be >= 1")
    return Workload(parts[0], *nums)

