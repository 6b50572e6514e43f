"""The foundation: the default model in place and verified, the binary built."""
import hashlib
import subprocess

import gguf


def test_model_matches_recorded_sha256(root, model_path):
    recorded = {}
    for line in (root / "scripts" / "model.sha256").read_text().splitlines():
        digest, name = line.split()
        recorded[name] = digest
    h = hashlib.sha256()
    with open(model_path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    assert h.hexdigest() == recorded[model_path.name]


def test_model_is_the_documented_llama(model_path):
    r = gguf.GGUFReader(str(model_path))
    field = lambda k: r.fields[k].contents()
    assert field("general.architecture") == "llama"
    assert field("llama.block_count") == 30
    assert field("llama.embedding_length") == 576
    assert field("llama.attention.head_count") == 9
    assert field("llama.attention.head_count_kv") == 3
    assert field("tokenizer.ggml.model") == "gpt2"
    types = {t.tensor_type.name for t in r.tensors}
    assert types == {"F32", "Q4_1", "Q8_0"}
    assert len(r.tensors) == 272


def test_version(tram_bin):
    out = subprocess.run([tram_bin, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("tram ")
