"""tram's GGUF reader against an independent one: the `gguf` package's
GGUFReader. tests/tools/gguf_dump prints what tram reads (every key/value,
every tensor info, a CRC-32 of every tensor's data); these tests compare all
of it with GGUFReader on the default model and on synthetic files written by
gguf.GGUFWriter.

Random data is seeded from TRAM_TEST_SEED when set (else the clock); the seed
is printed."""
import json
import math
import os
import subprocess
import time
import zlib

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V


@pytest.fixture
def rng():
    seed = int(os.environ.get("TRAM_TEST_SEED", time.time_ns() % 2**32))
    print(f"seed: {seed} (replay with TRAM_TEST_SEED={seed})")
    return np.random.default_rng(seed)


def run_dump(tool, path):
    return subprocess.run([tool("gguf_dump"), str(path)], capture_output=True, timeout=120)


def dump(tool, path):
    out = run_dump(tool, path)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return json.loads(out.stdout)


def same(ours, want):
    """Exact equality; floats may come back as JSON integers, NaN equals NaN,
    and a bool is never taken for an integer."""
    if isinstance(want, list):
        return isinstance(ours, list) and len(ours) == len(want) and all(same(a, b) for a, b in zip(ours, want))
    if isinstance(want, float):
        return type(ours) in (int, float) and (ours == want or (math.isnan(ours) and math.isnan(want)))
    return type(ours) is type(want) and ours == want


def compare_with_reader(ours, path):
    r = gguf.GGUFReader(str(path))
    assert ours["version"] == r.fields["GGUF.version"].contents()
    assert ours["alignment"] == r.alignment
    assert ours["data_offset"] == r.data_offset
    assert ours["file_size"] == os.path.getsize(path)

    fields = [f for name, f in r.fields.items() if not name.startswith("GGUF.")]
    assert [kv["key"] for kv in ours["kv"]] == [f.name for f in fields]
    for kv, f in zip(ours["kv"], fields):
        assert kv["type"] == f.types[0].name.lower(), f.name
        if f.types[0] == V.ARRAY:
            assert kv["elem_type"] == f.types[-1].name.lower(), f.name
        assert same(kv["value"], f.contents()), f.name

    assert len(ours["tensors"]) == len(r.tensors)
    for t, rt in zip(ours["tensors"], r.tensors):
        assert t["name"] == rt.name
        assert t["type"] == rt.tensor_type.name, rt.name
        assert t["type_id"] == int(rt.tensor_type), rt.name
        assert t["dims"] == [int(d) for d in rt.shape], rt.name
        assert t["offset"] == rt.data_offset - r.data_offset, rt.name
        assert t["nbytes"] == rt.n_bytes, rt.name
        assert t["crc32"] == zlib.crc32(np.ascontiguousarray(rt.data).tobytes()), rt.name
    return r


def test_default_model_matches_gguf_reader(tool, model_path):
    ours = dump(tool, model_path)
    compare_with_reader(ours, model_path)
    assert len(ours["tensors"]) == 272
    keys = {kv["key"]: kv for kv in ours["kv"]}
    assert len(keys["tokenizer.ggml.tokens"]["value"]) == 49152
    assert len(keys["tokenizer.ggml.merges"]["value"]) == 48900


def write_synthetic(path, rng, alignment=None):
    """A file with every value type and tensors of every type tram reads."""
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", int(rng.integers(0, 256)))
    w.add_int8("t.i8", int(rng.integers(-128, 128)))
    w.add_uint16("t.u16", int(rng.integers(0, 2**16)))
    w.add_int16("t.i16", int(rng.integers(-(2**15), 2**15)))
    w.add_uint32("t.u32", int(rng.integers(0, 2**32)))
    w.add_int32("t.i32", int(rng.integers(-(2**31), 2**31)))
    w.add_float32("t.f32", float(rng.standard_normal()))
    w.add_uint64("t.u64", int(rng.integers(2**63, 2**64, dtype=np.uint64)))
    w.add_int64("t.i64", -int(rng.integers(2**62, 2**63 - 1)))
    w.add_float64("t.f64", float(rng.standard_normal()) * 1e200)
    w.add_bool("t.true", True)
    w.add_bool("t.false", False)
    w.add_string("t.str", "héllo\twörld \"quoted\" \\ ✓")
    w.add_key_value("t.arr.i8", [-1, 2, -3], V.ARRAY, sub_type=V.INT8)
    w.add_key_value("t.arr.u16", [0, 65535], V.ARRAY, sub_type=V.UINT16)
    w.add_key_value("t.arr.i32", [int(v) for v in rng.integers(-(2**31), 2**31, 50)], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("t.arr.f32", [float(v) for v in rng.standard_normal(40)], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("t.arr.f64", [1e-300, -2.5, float("inf")], V.ARRAY, sub_type=V.FLOAT64)
    w.add_key_value("t.arr.bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("t.arr.u64", [2**64 - 1, 0], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("t.arr.i64", [-(2**63), 2**63 - 1], V.ARRAY, sub_type=V.INT64)
    w.add_array("t.arr.str", ["", "a", "Ġthe", "<|im_start|>", "line\nbreak"])

    x = rng.standard_normal((3, 256)).astype(np.float32)
    w.add_tensor("f32", x)
    w.add_tensor("f32.1d", rng.standard_normal(7).astype(np.float32))
    w.add_tensor("f32.3d", rng.standard_normal((2, 3, 5)).astype(np.float32))
    w.add_tensor("f16", x.astype(np.float16))
    for q in (Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4):
        w.add_tensor(q.name.lower(), gguf.quants.quantize(x, q), raw_dtype=q)
    for q in (Q.Q4_K, Q.Q5_K, Q.Q6_K):  # no quantizer in the package: random blocks
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[q]
        blocks = rng.integers(0, 256, (2, 512 // block_elems * block_bytes), dtype=np.uint8)
        w.add_tensor(q.name.lower(), blocks, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_synthetic_file_matches_gguf_reader(tool, tmp_path, rng):
    path = tmp_path / "synthetic.gguf"
    write_synthetic(path, rng)
    r = compare_with_reader(dump(tool, path), path)
    assert {t.tensor_type.name for t in r.tensors} == {
        "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4"}


@pytest.mark.parametrize("alignment", [64, 256])
def test_custom_alignment_matches_gguf_reader(tool, tmp_path, rng, alignment):
    path = tmp_path / f"align{alignment}.gguf"
    write_synthetic(path, rng, alignment)
    ours = dump(tool, path)
    assert ours["alignment"] == alignment
    compare_with_reader(ours, path)


def test_version_2_matches_gguf_reader(tool, tmp_path, rng):
    path = tmp_path / "v2.gguf"
    write_synthetic(path, rng)
    data = bytearray(path.read_bytes())
    assert data[4:8] == (3).to_bytes(4, "little")
    data[4:8] = (2).to_bytes(4, "little")  # v2 and v3 lay out little-endian files alike
    path.write_bytes(bytes(data))
    ours = dump(tool, path)
    assert ours["version"] == 2
    compare_with_reader(ours, path)


def test_truncated_file_gives_one_clear_line(tool, tmp_path, rng):
    path = tmp_path / "full.gguf"
    write_synthetic(path, rng)
    data = path.read_bytes()
    full = dump(tool, path)
    last = full["tensors"][-1]
    data_end = full["data_offset"] + last["offset"] + last["nbytes"]  # GGUFWriter pads after it
    cut = tmp_path / "cut.gguf"
    for size in sorted({0, 3, 24, 100, len(data) // 2, data_end - 1}):
        cut.write_bytes(data[:size])
        out = run_dump(tool, cut)
        assert out.returncode == 1, size
        err = out.stderr.decode()
        assert err.startswith(f"{cut}: ") and err.count("\n") == 1, err
        assert "past the end of the file" in err or "cannot fit" in err, err
