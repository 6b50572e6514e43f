"""Tokenizer parity: tram's ids (tests/tools/tokenize.c) against independent
references built from the same vocabulary.

- The default model's tokenizer (byte-level BPE, pre "smollm") against
  Hugging Face `tokenizers` built from the vocab and merges the `gguf`
  package reads from the file, pre-tokenized like SmolLM2's tokenizer.json:
  Sequence[Digits(individual_digits=True), ByteLevel(use_regex=True)].
- The same vocabulary with Llama 3's and Qwen2's Split regexes.
- The SentencePiece path against the `sentencepiece` package: a small BPE
  model trained on the corpus, written to a GGUF with gguf.GGUFWriter.

The corpus (data/tokenizer_corpus.json) covers prose, code, whitespace runs,
digits, accented Latin, CJK, emoji with modifiers and ZWJ sequences, RTL
text and control characters; random strings over its characters are added
(seed printed; replay with TRAM_TEST_SEED).
"""
import json
import os
import random
import subprocess
import time

import gguf
import pytest
import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

HERE = os.path.dirname(__file__)
CORPUS = json.load(open(os.path.join(HERE, "data", "tokenizer_corpus.json"), encoding="utf-8"))

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")
# o200k (GPT-4o, gpt-oss's o200k_harmony tokenizer.json)
GPT4O_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def seed():
    s = int(os.environ.get("TRAM_TEST_SEED") or time.time_ns() % 2**32)
    print(f"seed: {s} (replay with TRAM_TEST_SEED={s})")
    return s


def random_texts(n, rng):
    """Random strings over the corpus's characters, in runs (so that words,
    numbers and whitespace runs form), plus a few all-whitespace ones."""
    chars = sorted(set("".join(CORPUS)))
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            c = rng.choice(chars)
            parts.append(c * rng.choice([1, 1, 1, 2, 3, 7]) if rng.random() < 0.3 else
                         "".join(rng.choice(chars) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts))
    out += [" " * k + "\n" * j + "\t" * i for k, j, i in [(1, 0, 0), (2, 1, 0), (0, 2, 2), (5, 3, 1)]]
    return out


# ---- reading the vocabulary with the gguf package ---------------------------------------

def read_vocab(path):
    r = gguf.GGUFReader(str(path))
    f = lambda k: r.fields[k].contents() if k in r.fields else None
    return {
        "model": f("tokenizer.ggml.model"),
        "pre": f("tokenizer.ggml.pre"),
        "tokens": f("tokenizer.ggml.tokens"),
        "types": f("tokenizer.ggml.token_type"),
        "scores": f("tokenizer.ggml.scores"),
        "merges": f("tokenizer.ggml.merges") or [],
        "bos": f("tokenizer.ggml.bos_token_id"),
        "eos": f("tokenizer.ggml.eos_token_id"),
        "unk": f("tokenizer.ggml.unknown_token_id"),
        "add_bos": f("tokenizer.ggml.add_bos_token"),
        "add_space_prefix": f("tokenizer.ggml.add_space_prefix"),
    }


@pytest.fixture(scope="module")
def smol(model_path):
    return read_vocab(model_path)


def write_gguf(path, vocab, **over):
    """A GGUF holding only tokenizer keys (no tensors), written with the gguf
    package: what tram reads with -m."""
    d = {**vocab, **over}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(d["model"])
    if d.get("pre"):
        w.add_tokenizer_pre(d["pre"])
    w.add_token_list(d["tokens"])
    w.add_token_types(d["types"])
    if d.get("scores") is not None:
        w.add_token_scores(d["scores"])
    if d.get("merges"):
        w.add_token_merges(d["merges"])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                     ("unk", w.add_unk_token_id), ("add_bos", w.add_add_bos_token),
                     ("add_space_prefix", w.add_add_space_prefix)):
        if d.get(key) is not None:
            add(d[key])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ---- running tram --------------------------------------------------------------------

def run(tool, args, data):
    p = subprocess.run([str(tool("tokenize")), *map(str, args)], input=data, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


def tram_encode(tool, src, texts, *flags):
    data = b"".join((t if isinstance(t, bytes) else t.encode()).hex().encode() + b"\n" for t in texts)
    out = run(tool, [*src, "--hex-lines", *flags], data).decode().splitlines()
    assert len(out) == len(texts)
    return [json.loads(line) for line in out]


def tram_decode(tool, src, id_lists, *flags):
    data = "".join(json.dumps(ids) + "\n" for ids in id_lists).encode()
    out = run(tool, [*src, "--hex-lines", *flags], data).decode().splitlines()
    assert len(out) == len(id_lists)
    return [bytes.fromhex(line) for line in out]


# ---- Hugging Face references ---------------------------------------------------------

def hf_bytelevel(vocab, pre_tokenizer, ignore_merges=False):
    v = {t: i for i, t in enumerate(vocab["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in vocab["merges"]]
    tk = Tokenizer(models.BPE(v, merges, ignore_merges=ignore_merges))
    tk.pre_tokenizer = pre_tokenizer
    tk.decoder = decoders.ByteLevel()
    added = [AddedToken(t, special=ty == 3, normalized=False)
             for t, ty in zip(vocab["tokens"], vocab["types"]) if ty in (3, 4)]
    tk.add_special_tokens([a for a in added if a.special])
    tk.add_tokens([a for a in added if not a.special])
    return tk


def smollm_pre():
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])


def split_pre(regex):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def hf_encode(tk, texts, parse_special=True):
    tk.encode_special_tokens = not parse_special
    return [tk.encode(t, add_special_tokens=False).ids for t in texts]


def assert_same(texts, got, want, what):
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    for t, g, w in bad[:5]:
        print(f"{what}: {t!r}\n  tram {g}\n  ref  {w}")
    assert not bad, f"{what}: {len(bad)} of {len(texts)} texts differ (first ones printed)"


# ---- the default model ---------------------------------------------------------------

@pytest.fixture(scope="module")
def smol_src(model_path):
    return ["-m", model_path]


@pytest.fixture(scope="module")
def smol_hf(smol):
    assert smol["model"] == "gpt2" and smol["pre"] == "smollm"
    return hf_bytelevel(smol, smollm_pre())


@pytest.fixture(scope="module")
def texts():
    return CORPUS + random_texts(300, random.Random(seed()))


def test_smollm_matches_hf_with_special_parsing(tool, smol_src, smol_hf, texts):
    assert_same(texts, tram_encode(tool, smol_src, texts, "--special"),
                hf_encode(smol_hf, texts), "smollm")


def test_smollm_matches_hf_with_specials_as_text(tool, smol_src, smol_hf, texts):
    assert_same(texts, tram_encode(tool, smol_src, texts), hf_encode(smol_hf, texts, False),
                "smollm, specials as text")


def test_decode_inverts_encode(tool, smol_src, smol_hf, texts):
    """decode(encode(x)) == x, except for the bytes SmolLM2's vocabulary has no
    token for (six C0 controls), which are dropped as HF drops them; and the
    decoding agrees with HF's, special tokens skipped or not."""
    ids = tram_encode(tool, smol_src, texts)
    back = tram_decode(tool, smol_src, ids, "--decode")
    missing = {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D}
    for t, b in zip(texts, back):
        want = bytes(c for c in t.encode() if c not in missing)
        assert b == want, t
    ids = tram_encode(tool, smol_src, texts, "--special")
    for flags, skip in [((), True), (("--render-special",), False)]:
        got = tram_decode(tool, smol_src, ids, "--decode", *flags)
        want = [smol_hf.decode(i, skip_special_tokens=skip) for i in ids]
        assert [g.decode() for g in got] == want


def test_streaming_equals_whole_decode(tool, smol_src, texts):
    ids = tram_encode(tool, smol_src, texts, "--special")
    streamed = tram_decode(tool, smol_src, ids, "--stream")
    whole = tram_decode(tool, smol_src, ids, "--decode", "--valid-utf8")
    assert streamed == whole
    # special tokens rendered on request, skipped otherwise
    chat = [t for t in texts if "<|im_start|>" in t]
    shown = tram_decode(tool, smol_src, tram_encode(tool, smol_src, chat, "--special"),
                        "--stream", "--render-special")
    assert [s.decode() for s in shown] == chat


def test_invalid_utf8_becomes_replacement_characters(tool, smol_src, smol_hf):
    raw = [b"ok \xff\xfe bad", b"\xe2\x82", b"cut \xf0\x9f\x98", b"\xc0\xafx\xed\xa0\x80y",
           b"a\x80\x80\x80b", bytes(range(256))]
    replaced = [r.decode("utf-8", "replace") for r in raw]
    got = tram_encode(tool, smol_src, raw)
    assert_same(replaced, got, hf_encode(smol_hf, replaced, False), "invalid UTF-8")
    p = subprocess.run([str(tool("tokenize")), *map(str, smol_src), "--strict"], input=raw[0],
                       capture_output=True, timeout=60)
    assert p.returncode == 3 and b"Invalid or incomplete multibyte" in p.stderr


def test_default_model_special_ids(tool, smol_src, smol):
    info = json.loads(run(tool, [*smol_src, "--info"], b""))
    tokens = smol["tokens"]
    assert info["bos"] == smol["bos"] and info["eos"] == smol["eos"]
    assert info["add_bos"] == int(smol["add_bos"])
    assert {tokens[i] for i in info["eog"]} == {"<|im_end|>", "<|endoftext|>"}
    assert tokens[info["eot"]] == "<|im_end|>"
    # BOS is not added for this model, even when asked for the model's specials
    assert tram_encode(tool, smol_src, ["Hi"], "--add-special") == hf_encode(
        hf_bytelevel(smol, smollm_pre()), ["Hi"])


PIECE_MAX = 1024  # TOK_PIECE_MAX (text/tok_internal.h)


def hf_pieces_encode(tk, text):
    """The reference for long pre-tokens: HF's pre-tokenizer splits the text,
    a word of more than PIECE_MAX UTF-8 bytes is cut into pieces of at most
    PIECE_MAX bytes at character boundaries, and HF's BPE model merges each
    piece on its own."""
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    pre = pre_tokenizers.Digits(individual_digits=True)
    ids = []
    for word, _ in pre.pre_tokenize_str(text):
        for w, _ in pre_tokenizers.Split(Regex(GPT2_RE), "isolated").pre_tokenize_str(word):
            raw = w.encode()
            pieces = []
            while raw:
                k = min(len(raw), PIECE_MAX)
                while k < len(raw) and (raw[k] & 0xC0) == 0x80:
                    k -= 1
                pieces.append(raw[:k].decode())
                raw = raw[k:]
            for p in pieces:
                (form, _), = bl.pre_tokenize_str(p)
                ids += [t.id for t in tk.model.tokenize(form)]
    return ids


def test_long_pretokens_are_merged_in_pieces(tool, smol_src, smol_hf):
    """A huge pre-token (a run of spaces, letters without a space) is merged
    in pieces of PIECE_MAX bytes, so tokenizing stays linear in the input;
    up to PIECE_MAX bytes the ids are HF's, beyond it they are HF's ids of
    each piece, and the text decodes back unchanged."""
    rng = random.Random(seed())
    letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000))
    short = ["a" * PIECE_MAX, " " * (PIECE_MAX - 1) + "x", letters[:PIECE_MAX]]
    long = ["x" + " " * 5000 + "y", "a" * 3001, letters + " end", "\u00e9" * 1500 + "!",
            "\u65e5\u672c" * 700, " " * 20000, "\n" * 3000 + "z", "word " + "b" * 40000]
    assert_same(short, tram_encode(tool, smol_src, short), hf_encode(smol_hf, short, False),
                "words of PIECE_MAX bytes")
    got = tram_encode(tool, smol_src, long)
    assert_same(long, got, [hf_pieces_encode(smol_hf, t) for t in long], "long words")
    back = tram_decode(tool, smol_src, got, "--decode")
    assert [b.decode() for b in back] == long


# ---- other pre-tokenizers on the same vocabulary ---------------------------------------

@pytest.mark.parametrize("pre,regex,ignore_merges", [("llama3", LLAMA3_RE, True),
                                                     ("qwen2", QWEN2_RE, False),
                                                     ("gpt2", GPT2_RE, False),
                                                     ("gpt-4o", GPT4O_RE, False)])
def test_split_regex_matches_hf(tool, smol, tmp_path, texts, pre, regex, ignore_merges):
    src = ["-m", write_gguf(tmp_path / f"{pre}.gguf", smol, pre=pre, add_bos=False)]
    hf = hf_bytelevel(smol, split_pre(regex), ignore_merges=ignore_merges)
    assert_same(texts, tram_encode(tool, src, texts, "--special"), hf_encode(hf, texts), pre)


# ---- SentencePiece ------------------------------------------------------------------

USER_SYMBOLS = ["<tool>", "[[x]]"]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A small BPE model trained on the corpus, like Llama 2's: byte fallback,
    no normalization, spaces kept, a dummy prefix; plus two user-defined
    symbols (always matched, type 4 in the GGUF)."""
    d = tmp_path_factory.mktemp("spm")
    lines = [line for t in CORPUS for line in t.split("\n") if line.strip()]
    (d / "train.txt").write_text("\n".join(lines * 3) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(d / "train.txt"), model_prefix=str(d / "m"), model_type="bpe", vocab_size=800,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=True, character_coverage=0.98,
        allow_whitespace_only_pieces=True, user_defined_symbols=USER_SYMBOLS, minloglevel=2,
        num_threads=1)
    sp = spm.SentencePieceProcessor(model_file=str(d / "m.model"))
    n = sp.get_piece_size()
    types = []
    for i in range(n):
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 4 if sp.id_to_piece(i) in USER_SYMBOLS else 1)
    vocab = {"model": "llama", "pre": None,
             "tokens": [sp.id_to_piece(i) for i in range(n)],
             "scores": [sp.get_score(i) for i in range(n)], "types": types, "merges": [],
             "bos": sp.bos_id(), "eos": sp.eos_id(), "unk": sp.unk_id(), "add_bos": True,
             "add_space_prefix": True}
    write_gguf(d / "spm.gguf", vocab)
    return sp, d / "spm.gguf"


def test_sentencepiece_matches_the_sentencepiece_package(tool, spm_model, tmp_path, texts):
    sp, path = spm_model
    assert read_vocab(path)["model"] == "llama"
    src = ["-m", path]
    texts = texts + ["<tool>start", "mid<tool>dle [[x]]<tool> x", "end [[x]]", "<tool>", " <tool>",
                     "[[x]][[x]]<tool>x"]
    want = [sp.encode(t) for t in texts]
    assert_same(texts, tram_encode(tool, src, texts), want, "sentencepiece")
    # BOS per add_bos_token; decode(encode(x)) == x with the dummy prefix dropped
    assert tram_encode(tool, src, ["Hello"], "--add-special")[0] == [sp.bos_id()] + sp.encode("Hello")
    back = tram_decode(tool, src, want, "--decode", "--strip-prefix")
    assert [b.decode() for b in back] == [sp.decode(w) for w in want]
    assert [b.decode() for b in back] == texts
