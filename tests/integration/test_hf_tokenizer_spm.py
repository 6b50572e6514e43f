"""tokenizer.json's SentencePiece-style BPE (Llama 2, Mistral, Gemma): a BPE
model with byte_fallback, spaces made "▁" by the normalizer (Prepend +
Replace) or by a Metaspace pre-tokenizer that does not split. hf/ reads it as
a "llama" vocabulary with merges; text/ merges its characters by rank and
falls back to <0xXX> byte tokens for characters it lacks.

The tokenizer is built here with the `tokenizers` package itself: merges
trained on real prose and code (precision_eval.TEXT_SOURCES) with a small
alphabet, so the multilingual corpus needs byte fallback all the time; then
tram must tokenize the corpus exactly as `tokenizers` does, and decode
the ids back to the text."""
import json
import pathlib
import subprocess
import sys

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from precision_eval import read_text  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parent / "data"
SPECIALS = ["<unk>", "<s>", "</s>"]


def trained_merges():
    """(vocab, merges) of a BPE trained on real text, words split at spaces."""
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIALS, limit_alphabet=80, show_progress=False)
    tk.train_from_iterator(read_text().splitlines(), trainer)
    j = json.loads(tk.to_str())
    return j["model"]["vocab"], [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in j["model"]["merges"]]


def spm_tokenizer(style):
    """A byte-fallback BPE in one of the two tokenizer.json styles."""
    vocab, merges = trained_merges()
    for b in range(256):  # the byte-fallback tokens, after the trained ones
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tk = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if style == "normalizer":  # Llama 2, Mistral v0.1
        tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                        decoders.Strip(" ", 1, 0)])
    else:  # newer Llama/Mistral conversions
        tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tk.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tk.add_special_tokens([AddedToken(t, special=True) for t in SPECIALS])
    tk.add_tokens([AddedToken("<tool>", special=False, normalized=False)])  # a user-defined token
    return tk


@pytest.fixture(scope="module", params=["normalizer", "metaspace"])
def spm_dir(request, tmp_path_factory):
    from test_hf_checkpoint import write_pair
    tk = spm_tokenizer(request.param)
    tmp = tmp_path_factory.mktemp(f"spm-{request.param}")
    d, _ = write_pair(tmp, "qwen3", tk, tk.get_vocab_size())
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg.update(bos_token="<s>", eos_token="</s>", add_bos_token=True)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d, tk


def tram_tokenize(tool, d, texts, *flags):
    res = subprocess.run([str(tool("tokenize")), "-m", str(d), "--hex-lines", *flags],
                         input="".join(t.encode().hex() + "\n" for t in texts).encode(), capture_output=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.decode().splitlines()]


def test_byte_fallback_matches_tokenizers_on_the_corpus(spm_dir, tool):
    d, tk = spm_dir
    corpus = json.loads((DATA / "tokenizer_corpus.json").read_text())
    corpus += [read_text()[:20000], "  two  spaces", " lead", "trail ", "", "\u00e9t\u00e9 \U0001F600 \u4e2d\u6587"]
    got = tram_tokenize(tool, d, corpus)
    assert len(got) == len(corpus)
    n_bytes = 0
    for text, ids in zip(corpus, got):
        want = tk.encode(text, add_special_tokens=False).ids
        assert ids == want, text[:80]
        n_bytes += sum(1 for i in ids if tk.id_to_token(i).startswith("<0x"))
    assert n_bytes > 100  # the corpus did exercise the byte fallback


def test_added_tokens_split_the_text_as_tokenizers_does(spm_dir, tool):
    """Where the "▁" prefix goes around added tokens (matched in the text as
    it is: normalized=False, as Llama's and Mistral's are): Prepend puts it
    before every piece between them, Metaspace "first" before the text's
    first piece only."""
    d, tk = spm_dir
    texts = ["<s>hello world</s>", "hi<s> there", "a<tool>b <tool> c", "<tool>x", "x</s>y</s> z", "<s><s>",
             " <s>lead", "end<tool>", "\u00e9<tool>\u00e9</s>\U0001F600"]
    got = tram_tokenize(tool, d, texts, "--special")
    for text, ids in zip(texts, got):
        assert ids == tk.encode(text, add_special_tokens=False).ids, text


def test_bos_and_decoding(spm_dir, tool):
    d, tk = spm_dir
    texts = ["Hello world", "\u00e9t\u00e9 \U0001F600 ok"]
    with_bos = tram_tokenize(tool, d, texts, "--add-special")
    for text, ids in zip(texts, with_bos):
        assert ids == [tk.token_to_id("<s>")] + tk.encode(text, add_special_tokens=False).ids
    res = subprocess.run([str(tool("tokenize")), "-m", str(d), "--decode", "--hex-lines", "--strip-prefix"],
                         input="".join(json.dumps(tk.encode(t, add_special_tokens=False).ids) + "\n" for t in texts),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert [bytes.fromhex(line).decode() for line in res.stdout.splitlines()] == texts


BAD = {
    "lowercase": ({"normalizer": {"type": "Lowercase"}}, "normalizer Lowercase"),
    "splitting metaspace": ({"normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁",
                                                                   "prepend_scheme": "always", "split": True}},
                            "Metaspace pre-tokenizer that splits"),
    "no space replacement": ({"normalizer": None, "pre_tokenizer": None}, "without spaces replaced"),
    "word affixes": ({"model": {"type": "BPE", "byte_fallback": True, "continuing_subword_prefix": "##"}},
                     "word affixes"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_unsupported_byte_fallback_tokenizers_refused(case, spm_dir, tool, tmp_path):
    d, _ = spm_dir
    j = json.loads((d / "tokenizer.json").read_text())
    fields, want = BAD[case]
    if "model" in fields:
        j["model"].update(fields["model"])
    else:
        j.update(fields)
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(d, bad)
    (bad / "tokenizer.json").write_text(json.dumps(j))
    res = subprocess.run([str(tool("tokenize")), "-m", str(bad)], input=b"x", capture_output=True, timeout=60)
    assert res.returncode != 0 and want in res.stderr.decode(), res.stderr


def gemma4_tokenizer():
    """A tokenizer of Gemma 4's kind: byte-fallback BPE, spaces made "▁" by the normalizer with no prefix, runs
    of newlines as tokens (merged by rank: "\\n" "\\n", then "\\n\\n" "\\n"); <bos> and a user-defined token."""
    vocab, merges = trained_merges()
    for t in ["\n", "\n\n", "\n\n\n"]:
        vocab.setdefault(t, len(vocab))
    merges += [("\n", "\n"), ("\n\n", "\n")]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tk = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tk.normalizer = normalizers.Replace(" ", "▁")
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tk.add_special_tokens([AddedToken(t, special=True) for t in ["<unk>", "<bos>", "<eos>"]])
    tk.add_tokens([AddedToken("<|channel>", special=False, normalized=False)])
    return tk


def test_gemma4_tokenizer_model(tool, tmp_path):
    """llama.cpp's `gemma4` tokenizer model (tokenizer.ggml.model "gemma4", as its converter writes a Gemma 4
    tokenizer.json: tokens by id, merges, no space prefix, <bos> always; llama-vocab.cpp: spaces as "▁", the text
    cut into runs of newlines and runs of the rest, merged by rank, a newline run that is a token taken whole,
    byte fallback) tokenizes as `tokenizers` does with that tokenizer.json, whose merges never cross a newline."""
    import gguf
    tk = gemma4_tokenizer()
    j = json.loads(tk.to_str())
    n = tk.get_vocab_size()
    names = [tk.id_to_token(i) for i in range(n)]
    added = {a["id"]: a for a in j["added_tokens"]}
    types = [(3 if added[i]["special"] else 4) if i in added else 6 if names[i].startswith("<0x") else 1
             for i in range(n)]
    p = tmp_path / "gemma4-vocab.gguf"
    w = gguf.GGUFWriter(str(p), "gemma4")
    w.add_tokenizer_model("gemma4")
    w.add_token_list(names)
    w.add_token_scores([0.0] * n)
    w.add_token_types(types)
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]])
    w.add_bos_token_id(tk.token_to_id("<bos>"))
    w.add_add_space_prefix(False)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    corpus = json.loads((DATA / "tokenizer_corpus.json").read_text())
    corpus += [read_text()[:20000], "a\nb\n\nc\n\n\nd\n\n\n\ne\n\n\n\n\nf", "\n", "\n\n", " \n lead", "x <|channel>y",
               "  two  spaces", "trail ", "\u00e9t\u00e9 \U0001F600 \u4e2d\u6587\n\n"]
    got = tram_tokenize(tool, p, corpus, "--special")
    for text, ids in zip(corpus, got):
        assert ids == tk.encode(text, add_special_tokens=False).ids, text[:80]
    assert tram_tokenize(tool, p, ["hi"], "--add-special")[0] == [tk.token_to_id("<bos>")] + tk.encode("hi").ids
