"""tram's dequantization (kernels/cpu/dequant*.c, through tests/tools/dequant)
against the `gguf` Python package's gguf.quants.dequantize: random blocks of
every weight type, then real tensors of the default model; MXFP4 also
against a float64 dequantizer written from the OCP Microscaling spec.

Every value tram produces is the exact value rounded once to f32, and so is
every value the gguf package produces for these types (its products of an
f16 scale and a small integer are exact in f32, and MXFP4's power-of-two
scale times a doubled E2M1 value too, but where it overflows to inf), so
the two must agree bit for bit — through both the SIMD path and the
portable one."""
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
TYPES = ["F32", "F16", "BF16", *SCALES, "MXFP4"]  # MXFP4's scale byte: any of the 256 values


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
    with np.errstate(over="ignore"):  # MXFP4's largest scales overflow f32 (to inf, in both)
        want = gguf.quants.dequantize(raw, T[name])
    assert_bitwise_equal(tram_dequant(tool, name, raw, scalar), want, name)


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


# ---- MXFP4 against a float64 reference from the format's definition ------------------------

def e2m1_f64(code):
    """An FP4 E2M1 element (OCP Microscaling Formats v1.0, 5.3.3): bit 3 the sign, bits 2-1 the
    exponent (bias 1), bit 0 the mantissa; exponent 0 is subnormal (0.5 * m)."""
    sign = -1.0 if code & 8 else 1.0
    exp, man = (code >> 1) & 3, code & 1
    return sign * (0.5 * man if exp == 0 else 2.0 ** (exp - 1) * (1 + man / 2))


def mxfp4_ref(raw):
    """Blocks of 17 bytes -> f32 values: X = 2^(e - 127) * element (the spec's E8M0 scale), element j < 16
    in the low nibble of byte 1 + j, j + 16 in its high nibble. The spec reads e = 255 as NaN; GGML (and so
    the gguf package and tram) as the number 2^128, and code 8 (-0) as +0 — the reference follows GGML there. Computed in float64
    (exact: a power of two times a 3-bit significand) and rounded once to f32 (overflow gives inf)."""
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1, 17)
    codes = np.concatenate([raw[:, 1:] & 15, raw[:, 1:] >> 4], axis=1)
    # + 0.0: code 8 is the spec's -0, which GGML's integer table reads as +0
    values = np.array([e2m1_f64(c) + 0.0 for c in range(16)])[codes]
    scale = np.ldexp(1.0, raw[:, :1].astype(np.int64) - 127)
    with np.errstate(over="ignore"):
        return (scale * values).astype(np.float32).reshape(-1)


def every_mxfp4_block():
    """256 blocks, scale byte e = 0..255 in block e, each holding all 16 codes twice (low nibbles 0..15,
    high nibbles 15..0): every (scale, code) pair, the extreme scales and overflows included."""
    raw = np.zeros((256, 17), dtype=np.uint8)
    raw[:, 0] = np.arange(256)
    raw[:, 1:] = np.arange(16, dtype=np.uint8) | (np.arange(15, -1, -1, dtype=np.uint8) << 4)
    return raw


def test_mxfp4_reference_matches_gguf():
    """The float64 reference and the gguf package agree on every scale and code and on random blocks,
    and the cases the format makes special come out as the spec and GGML say."""
    rng = np.random.default_rng(39)
    for raw in (every_mxfp4_block(), random_blocks(rng, "MXFP4", 512)):
        with np.errstate(over="ignore"):
            want = gguf.quants.dequantize(raw, T.MXFP4)
        assert_bitwise_equal(mxfp4_ref(raw), want, "MXFP4 float64 reference vs gguf")
    ref = mxfp4_ref(every_mxfp4_block()).reshape(256, 32)
    assert ref[127, :8].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]     # e = 127: scale 1, the E2M1 values
    assert ref[127, 8:16].tolist() == [0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert np.signbit(ref[127, 8]) == False                           # code 8: +0 (GGML), not -0
    assert ref[127, 16] == -6 and ref[127, 24] == 6 and ref[127, 31] == 0  # high nibbles (15..0): elements 16..31
    assert ref[0, 1] == np.float32(2.0 ** -128)                        # e = 0: 2^-127 * 0.5, an f32 subnormal
    assert ref[255, 2] == np.inf and ref[255, 1] == np.float32(2.0 ** 127)  # e = 255: a number, overflowing


@pytest.mark.parametrize("scalar", [False, True], ids=["default", "portable"])
def test_mxfp4_matches_reference(tool, scalar):
    """tram's MXFP4 dequantization equals the float64 reference bit for bit: every scale and code, then
    random blocks."""
    rng = np.random.default_rng(30 + scalar)
    raw = np.concatenate([every_mxfp4_block(), random_blocks(rng, "MXFP4", 1024)])
    assert_bitwise_equal(tram_dequant(tool, "MXFP4", raw, scalar), mxfp4_ref(raw), "MXFP4")
