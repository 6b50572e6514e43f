"""scripts/make-random-llama.py: the random-weights Llama model the GPU
benchmarks run (Llama-3-8B-shaped by default, written on the GPU machine).

Here the script writes tiny models of the same structure, which must (1)
read back with the `gguf` package exactly as asked (an independent reader
of the hand-written file), (2) load in tram (model_load: hyper-parameters,
llama3 RoPE scaling keys, every tensor, the byte-level BPE tokenizer), and
(3) give, through tram's forward on the CPU, the logits of the float64
numpy reference (tests/reference/llama_ref.py). The default shape is
checked from the script's tensor table without writing 8.5 GB."""
import hashlib
import json
import pathlib
import subprocess
import sys

import gguf
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make-random-llama.py"
sys.path.insert(0, str(ROOT / "tests" / "reference"))
from llama_ref import LlamaRef  # noqa: E402

TINY = ["--layers", "2", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ff", "512", "--vocab", "1024"]


def make(path, *args):
    res = subprocess.run([sys.executable, str(SCRIPT), str(path), *args], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make(tmp_path_factory.mktemp("rl") / "tiny.gguf", *TINY, "--seed", "7")


def test_default_shape_is_llama3_8b():
    res = subprocess.run([sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True, check=True)
    info = json.loads(res.stdout)
    shapes = {name: (t, ne) for name, t, ne in info["tensors"]}
    assert len(shapes) == 2 + 32 * 9 + 1
    Q8_0, F32 = 8, 0
    assert shapes["token_embd.weight"] == (Q8_0, [4096, 128256])
    assert shapes["output.weight"] == (Q8_0, [4096, 128256])
    assert shapes["blk.31.attn_q.weight"] == (Q8_0, [4096, 4096])
    assert shapes["blk.31.attn_k.weight"] == (Q8_0, [4096, 1024])  # 8 KV heads of 128
    assert shapes["blk.31.ffn_gate.weight"] == (Q8_0, [4096, 14336])
    assert shapes["blk.31.ffn_down.weight"] == (Q8_0, [14336, 4096])
    assert shapes["blk.0.attn_norm.weight"] == (F32, [4096])
    assert abs(info["params"] - 8.03e9) < 0.01e9  # Llama 3 8B
    assert 8.4e9 < info["data_bytes"] < 8.6e9


def test_reads_back_as_asked(tiny):
    r = gguf.GGUFReader(str(tiny))
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    want = {
        "general.architecture": "llama",
        "llama.block_count": 2,
        "llama.embedding_length": 256,
        "llama.feed_forward_length": 512,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.rope.dimension_count": 64,
        "llama.vocab_size": 1024,
        "llama.rope.scaling.type": "llama3",
        "llama.rope.scaling.factor": 8.0,
        "llama.rope.scaling.original_context_length": 8192,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "llama-bpe",
    }
    assert {k: f[k] for k in want} == want
    tokens, types, merges = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"], f["tokenizer.ggml.merges"]
    assert len(tokens) == len(types) == 1024 and len(set(tokens)) == 1024
    ids = {t: i for i, t in enumerate(tokens)}
    for m in merges:  # every merge joins two tokens into a third
        a, b = m.split(" ")
        assert a in ids and b in ids and a + b in ids
    assert tokens[f["tokenizer.ggml.bos_token_id"]] == "<|begin_of_text|>"
    assert tokens[f["tokenizer.ggml.eos_token_id"]] == "<|end_of_text|>"
    assert tokens[f["tokenizer.ggml.eot_token_id"]] == "<|eot_id|>"
    assert types[f["tokenizer.ggml.bos_token_id"]] == 3  # control
    t = {x.name: x for x in r.tensors}
    assert len(t) == 2 + 2 * 9 + 1
    assert t["blk.1.ffn_down.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert list(t["blk.1.ffn_down.weight"].shape) == [512, 256]
    w = gguf.quants.dequantize(t["blk.0.ffn_up.weight"].data, t["blk.0.ffn_up.weight"].tensor_type)
    assert w.shape == (512, 256) and 0.015 < w.std() < 0.025 and np.count_nonzero(w) > 0.99 * w.size


def test_seeded_and_independent_of_jobs(tiny, tmp_path):
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    assert digest(make(tmp_path / "a.gguf", *TINY, "--seed", "7", "--jobs", "1")) == digest(tiny)
    assert digest(make(tmp_path / "b.gguf", *TINY, "--seed", "8")) != digest(tiny)


def test_tokenizer_round_trips(tiny, tool):
    tokenize = lambda *a, data: subprocess.run([str(tool("tokenize")), "-m", str(tiny), *a], input=data,
                                               capture_output=True, check=True).stdout
    text = "Hello, world! Random weights 12345 \u2014 \u00fcn\u00efc\u00f6d\u00e9\n\tend"
    ids = json.loads(tokenize(data=text.encode()))
    assert tokenize("--decode", data=json.dumps(ids).encode()).decode() == text
    # a merge of two ASCII letters or signs (their byte symbols are
    # themselves): those two bytes encode to the merged token
    f = gguf.GGUFReader(str(tiny)).fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    ascii_pair = lambda m: len(m) == 3 and all("!" <= c <= "~" for c in m[::2])
    first = next(m for m in f["tokenizer.ggml.merges"].contents() if ascii_pair(m)).replace(" ", "")
    merged = tokens.index(first)
    assert tokenize("--decode", data=json.dumps([merged]).encode()) == first.encode()
    assert json.loads(tokenize(data=first.encode())) == [merged]


def test_forward_matches_reference(tiny, tool, tmp_path):
    rng = np.random.default_rng(3)
    seqs = [rng.integers(0, 768, n).tolist() for n in (12, 7)]
    out = tmp_path / "logits.f32"
    # a prefill, a chunked prefill beside a decode row, a decode step
    plan = {"model": str(tiny), "seqs": seqs, "steps": [[6, 5], [5, 1], [1, 1]], "out": str(out), "threads": 2}
    res = subprocess.run([str(tool("forward")), "-"], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["paths"] == ["varlen", "varlen", "decode"]
    got = np.fromfile(out, dtype=np.float32).reshape(info["rows"], 1024)
    ref = LlamaRef(tiny)
    for s, part in enumerate(np.split(got, [12])):
        want = ref.forward(seqs[s])
        err = np.linalg.norm(part - want, axis=1) / np.linalg.norm(want, axis=1)
        assert err.max() < 1e-4, f"sequence {s}: rel L2 {err.max():.2e} at position {err.argmax()}"
