"""`--quantize`: tram's load-time quantizer (kernels/kern_quant.c, through
tests/tools/quantize) against the `gguf` Python package's
gguf.quants.quantize, which reproduces GGML's reference quantizers bit for
bit; then models loaded with --quantize against GGUF files the `gguf`
package quantized (the same bits, so the same logits), and the real default
model's accuracy cost on real text (KL divergence and top-1 agreement with
the unquantized forward).

Inputs: random rows at many scales, the edge cases of the formats (zero and
constant blocks, exact .5 ties, equal magnitudes of both signs, scales that
are f16 subnormals or overflow f16), from F32, F16 and BF16 sources, and real
tensors of the default model."""
import json
import pathlib
import subprocess
import sys
import zlib

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from precision_eval import Compare, forward as eval_forward, read_text, tokenize  # noqa: E402
from synthetic import add_shape  # noqa: E402

TARGETS = ["Q8_0", "Q4_0", "Q4_1"]
SOURCES = ["F32", "F16", "BF16"]


def tram_quantize(tool, to, src_name, raw, cols):
    res = subprocess.run([tool("quantize"), to, src_name, str(cols)], input=np.ascontiguousarray(raw).tobytes(),
                         capture_output=True)
    assert res.returncode == 0, res.stderr
    return np.frombuffer(res.stdout, dtype=np.uint8)


def as_source(x, src_name):
    """(raw bytes of x in src_name, the f32 values they hold)."""
    x = np.asarray(x, dtype=np.float32)
    if src_name == "F32":
        return x, x
    if src_name == "F16":
        h = x.astype(np.float16)
        return h, h.astype(np.float32)
    u = x.view(np.uint32)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    return b, (b.astype(np.uint32) << 16).view(np.float32)


def edge_rows(rng, cols):
    """Rows that hit the formats' corner cases, each `cols` wide."""
    rows = [np.zeros(cols), np.full(cols, 0.75), np.full(cols, -3.0)]
    ties = rng.integers(-127, 128, cols) + 0.5  # x / d lands on .5 for Q8_0 when amax = 127 * d
    ties[0] = 127.0
    rows.append(ties / 64)
    sym = rng.standard_normal(cols)
    sym[::32] = 2.0
    sym[1::32] = -2.0  # equal magnitudes, + first
    rows.append(sym)
    neg = rng.standard_normal(cols)
    neg[5::32] = -4.0  # the largest magnitude negative
    rows.append(neg)
    rows.append(rng.standard_normal(cols) * 1e-6)  # scales that are f16 subnormals
    rows.append(rng.standard_normal(cols) * 1e-9)  # scales that flush to 0 in f16
    q = np.repeat(np.arange(16.0), cols // 16)[:cols] / 15.0  # Q4_1 codes exactly on the grid
    rows.append(q)
    rows.append(q + 0.5 / 15)  # and on its .5 boundaries
    return np.stack(rows)


def zero_block_sign(to, blocks, values):
    """Quantized bytes with the sign of zero cleared in the f16 fields (d, and
    Q4_1's m) of all-zero blocks: the one place where gguf.quants is not GGML's
    C reference. A block of ±0 has a scale of ±0 by which zero comes first
    (C's strict comparisons from a +0 or +inf start) or which numpy's
    argmax/min picks; both decode to zeros."""
    size, fields = {"Q8_0": (34, [1]), "Q4_0": (18, [1]), "Q4_1": (20, [1, 3])}[to]
    q = blocks.reshape(-1, size).copy()
    zero = (values.reshape(-1, 32) == 0).all(axis=1)
    for f in fields:
        q[zero, f] &= 0x7F
    return q.reshape(-1)


@pytest.mark.parametrize("src_name", SOURCES)
@pytest.mark.parametrize("to", TARGETS)
def test_quantizer_matches_gguf(tool, to, src_name):
    rng = np.random.default_rng(zlib.crc32(f"{to}/{src_name}".encode()))
    cols = 256
    scales = 10.0 ** rng.uniform(-4, 3, size=(200, 1))
    x = np.concatenate([edge_rows(rng, cols), rng.standard_normal((200, cols)) * scales,
                        rng.uniform(-1, 1, (50, cols)) + rng.uniform(-2, 2, (50, 1))])
    if src_name == "F32":
        x = np.concatenate([x, rng.standard_normal((4, cols)) * 1e6])  # scales past f16's range
    raw, values = as_source(x, src_name)
    with np.errstate(over="ignore"):
        want = gguf.quants.quantize(values, T[to]).reshape(-1)
    got = tram_quantize(tool, to, src_name, raw, cols)
    assert got.shape == want.shape
    got, want = zero_block_sign(to, got, values), zero_block_sign(to, want, values)
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, f"{diff.size} of {got.size} bytes differ, first at {diff[0]}"


@pytest.fixture(scope="module")
def model_tensors(model_path):
    return {t.name: t for t in gguf.GGUFReader(str(model_path)).tensors}


@pytest.mark.parametrize("tensor", ["blk.0.attn_q.weight", "blk.7.ffn_down.weight", "token_embd.weight"])
def test_quantizer_on_real_weights(tool, model_tensors, tensor):
    t = model_tensors[tensor]
    w = gguf.quants.dequantize(t.data[:512], t.tensor_type).astype(np.float32)
    for src_name in ("F32", "BF16"):
        raw, values = as_source(w, src_name)
        for to in TARGETS:
            want = gguf.quants.quantize(values, T[to]).reshape(-1)
            assert np.array_equal(tram_quantize(tool, to, src_name, raw, w.shape[1]), want), (src_name, to)


def test_quantizer_refuses_bad_arguments(tool):
    bad = subprocess.run([tool("quantize"), "Q4_0", "F32", "48"], input=b"\0" * 192, capture_output=True)
    assert bad.returncode == 2 and b"whole number of blocks" in bad.stderr
    bad = subprocess.run([tool("quantize"), "Q6_K", "F32", "256"], input=b"\0" * 1024, capture_output=True)
    assert bad.returncode == 2 and b"refused" in bad.stderr


# --- models loaded with --quantize --------------------------------------------

def llama_cpp_type(name, to, arch):
    """The type --quantize `to` gives the GGUF tensor `name` of write_pair's
    model: `to`, but Q8_0 for the output projection (output.weight, or the
    tied token_embd.weight) under a 4-bit type, as llama.cpp keeps it at
    higher precision."""
    tied = arch not in ("llama", "qwen2")
    output = name == "output.weight" or (tied and name == "token_embd.weight")
    return T.Q8_0 if output else T[to]


@pytest.mark.parametrize("arch", ["llama", "gemma2", "phi3"])
@pytest.mark.parametrize("to", TARGETS)
def test_quantized_load_equals_a_gguf_quantized_file(arch, to, tool, tmp_path):
    """A random model's F32 weights quantized by tram at load (from the
    Hugging Face folder and from the F32 GGUF file) give the logits, bit for
    bit, of the GGUF file whose matrices gguf.quants quantized."""
    from test_hf_checkpoint import forward, tiny_tokenizer, write_pair
    tok, vocab = tiny_tokenizer()
    (tmp_path / "f32").mkdir()
    (tmp_path / "q").mkdir()
    hf_dir, f32_gguf = write_pair(tmp_path / "f32", arch, tok, vocab)
    _, q_gguf = write_pair(tmp_path / "q", arch, tok, vocab, quant=lambda name: llama_cpp_type(name, to, arch))
    seqs = [np.random.default_rng(3).integers(0, 96, 11).tolist()]
    want = forward(tool, q_gguf, seqs, tmp_path)
    plain = forward(tool, f32_gguf, seqs, tmp_path)
    for model in (hf_dir, f32_gguf):
        got = forward(tool, model, seqs, tmp_path, quantize=to)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), model
    assert not np.array_equal(plain, want)  # the quantization did change the weights
    # already quantized weights stay as they are
    again = forward(tool, q_gguf, seqs, tmp_path, quantize="Q8_0" if to != "Q8_0" else "Q4_0")
    assert np.array_equal(again.view(np.uint32), want.view(np.uint32))


def test_quantize_refuses_other_types(tool, tmp_path):
    from test_hf_checkpoint import tiny_tokenizer, write_pair
    tok, vocab = tiny_tokenizer()
    _, g = write_pair(tmp_path, "qwen3", tok, vocab)
    plan = {"model": str(g), "seqs": [[1, 2]], "out": str(tmp_path / "o.f32"), "quantize": "Q6_K"}
    res = subprocess.run([str(tool("forward")), "-"], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0 and "cannot quantize weights to Q6_K" in res.stderr, res.stderr


def test_generate_with_the_quantize_setting(tram_bin, tmp_path):
    """The setting reaches the model: `tram generate --quantize q4_0` on the
    F32 file writes what the gguf-quantized Q4_0 file writes, and an unknown
    type is refused before anything loads."""
    from test_hf_checkpoint import tiny_tokenizer, write_pair
    tok, vocab = tiny_tokenizer()
    (tmp_path / "f32").mkdir()
    (tmp_path / "q").mkdir()
    hf_dir, _ = write_pair(tmp_path / "f32", "qwen3", tok, vocab)
    _, q_gguf = write_pair(tmp_path / "q", "qwen3", tok, vocab, quant=lambda name: llama_cpp_type(name, "Q4_0", "qwen3"))

    def generate(*args):
        res = subprocess.run([str(tram_bin), "generate", "-p", "abc", "-n", "12", "--ignore-eos", "--json",
                              "--threads", "2", *map(str, args)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        c = json.loads(res.stdout.splitlines()[0])["choices"][0]
        return (c["token_ids"], c["text"]), res.stderr

    got, log = generate("-m", hf_dir, "--quantize", "q4_0")
    want, _ = generate("-m", q_gguf)
    assert got == want and "quantized to Q4_0 at load" in log
    bad = subprocess.run([str(tram_bin), "generate", "-p", "x", "-m", str(hf_dir), "--quantize", "q6_k"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "quantize" in bad.stderr, bad.stderr
