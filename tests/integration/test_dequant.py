"""tram's dequantization (kernels/cpu/dequant*.c, through tests/tools/dequant)
against the `gguf` Python package's gguf.quants.dequantize: random blocks of
every weight type, then real tensors of the default model.

Every value tram produces is the exact value rounded once to f32, and so is
every value the gguf package produces for these types (its products of an
f16 scale and a small integer are exact in f32), so the two must agree bit
for bit — through both the SIMD path and the portable one."""
import subprocess
import zlib

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

# Byte offsets of the f16 scale fields inside one block.
SCALES = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
          "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
TYPES = ["F32", "F16", "BF16", *SCALES]


def tram_dequant(tool, name, data, scalar=False):
    args = [tool("dequant"), "--binary", *(["--scalar"] if scalar else []), name]
    out = subprocess.run(args, input=np.ascontiguousarray(data).tobytes(), capture_output=True, check=True)
    return np.frombuffer(out.stdout, dtype=np.float32)


def finite_f16(u16):
    """Random f16 bit patterns made finite (exponent 31 becomes 15)."""
    return np.where((u16 & 0x7C00) == 0x7C00, u16 & ~np.uint16(0x4000), u16).astype(np.uint16)


def random_blocks(rng, name, n_blocks):
    _, type_size = GGML_QUANT_SIZES[T[name]]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    if name == "F16":
        raw = finite_f16(raw.view(np.uint16)).view(np.uint8)
    elif name == "BF16":
        h = raw.view(np.uint16)
        raw = np.where((h & 0x7F80) == 0x7F80, h & ~np.uint16(0x4000), h).astype(np.uint16).view(np.uint8)
    elif name == "F32":
        u = raw.view(np.uint32)
        raw = np.where((u & 0x7F800000) == 0x7F800000, u & ~np.uint32(1 << 30), u).astype(np.uint32).view(np.uint8)
    for off in SCALES.get(name, []):
        raw[:, off:off + 2] = finite_f16(raw[:, off:off + 2].copy().view(np.uint16)).view(np.uint8)
    return raw.reshape(n_blocks, -1)


def assert_bitwise_equal(got, want, what):
    want = np.asarray(want, dtype=np.float32).reshape(-1)
    assert got.shape == want.shape, what
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, f"{what}: {diff.size} of {got.size} differ, first at {diff[0]}: {got[diff[0]]!r} vs {want[diff[0]]!r}"


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("scalar", [False, True], ids=["default", "portable"])
def test_random_blocks_match_gguf(tool, name, scalar):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{scalar}".encode()))
    n_blocks = 4096 if GGML_QUANT_SIZES[T[name]][0] == 1 else 512
    raw = random_blocks(rng, name, n_blocks)
    assert_bitwise_equal(tram_dequant(tool, name, raw, scalar), gguf.quants.dequantize(raw, T[name]), name)


def test_rejects_bad_input(tool):
    bad = subprocess.run([tool("dequant"), "Q4_1"], input=b"\0" * 21, capture_output=True)
    assert bad.returncode == 2 and b"whole number of blocks" in bad.stderr
    bad = subprocess.run([tool("dequant"), "Q2_K"], input=b"", capture_output=True)
    assert bad.returncode == 2 and b"not a weight type" in bad.stderr


@pytest.fixture(scope="module")
def model_tensors(model_path):
    return {t.name: t for t in gguf.GGUFReader(str(model_path)).tensors}


@pytest.mark.parametrize("tensor,rows", [
    ("token_embd.weight", [0, 1, 2, 1000, 12345, 49151]),  # Q8_0, also the output projection
    ("blk.0.attn_q.weight", None),                          # Q4_1, whole tensors
    ("blk.0.ffn_down.weight", None),
    ("blk.29.ffn_gate.weight", None),
    ("blk.15.attn_norm.weight", None),                      # F32
])
def test_model_tensors_match_gguf(tool, model_tensors, tensor, rows):
    t = model_tensors[tensor]
    data = t.data if rows is None else t.data[rows]
    want = gguf.quants.dequantize(data, t.tensor_type)
    for scalar in (False, True):
        assert_bitwise_equal(tram_dequant(tool, t.tensor_type.name, data, scalar), want, tensor)
