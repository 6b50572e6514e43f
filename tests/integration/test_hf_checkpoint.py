"""Hugging Face checkpoints (`-m DIR`: config.json, safetensors, tokenizer.json,
tokenizer_config.json; hf/ reads them as a GGUF context).

Each family's seeded random model is written twice from the same weights: as
a Hugging Face folder (the `safetensors` and `tokenizers` packages, config
fields as transformers' configuration_*.py name them, Llama Q/K rows in
Hugging Face's order, Gemma norms as w) and as GGUF (the `gguf` package, with
llama.cpp's conventions: Llama Q/K rows permuted, Gemma norms as 1 + w). tram
must give the same logits for both, and the float64 reference (read from the
GGUF) must agree. The tokenizer.json built from SmolLM2's vocabulary and
merges must tokenize the multilingual corpus exactly as the `tokenizers`
package does, and `tram serve -m DIR` must answer the official `openai`
client. Malformed checkpoints are refused with one line naming the fault."""
import json
import pathlib
import subprocess
import sys

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from hf_gguf import permute  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402
from synthetic import add_shape  # noqa: E402
from test_forward import run_plan  # noqa: E402
import tram_server  # noqa: E402

L, D, H, KV, FF = 2, 64, 4, 2, 128
DATA = pathlib.Path(__file__).resolve().parent / "data"


def byte_level_tokenizer(vocab_tokens, merges, specials):
    """A tokenizers.Tokenizer: byte-level BPE with SmolLM2's pre-tokenizer."""
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(vocab_tokens)}, merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True) for t in specials])
    return tk


def tiny_tokenizer():
    """95 printable ASCII symbols, one merge, two specials (ids 96, 97)."""
    vocab = [chr(33 + i) for i in range(94)] + ["Ġ", "!\""]
    return byte_level_tokenizer(vocab, [("!", "\"")], ["<|endoftext|>", "<|im_end|>"]), 98


def write_pair(tmp, arch, tok, vocab, seed=7, quant=None):
    """The same random weights as a Hugging Face folder and a GGUF file; returns (dir, gguf path).
    quant (GGUF name -> GGMLQuantizationType or None): the GGUF's matrices quantized by gguf.quants."""
    rng = np.random.default_rng(seed)
    hd = 32 if arch in ("qwen3", "gemma3") else D // H
    gemma = arch.startswith("gemma")
    r = lambda *s: (rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32)
    nrm = lambda n: (rng.standard_normal(n) * 0.3 + (0.0 if gemma else 1.0)).astype(np.float32)
    hf = {"model.embed_tokens.weight": r(vocab, D), "model.norm.weight": nrm(D)}
    for l in range(L):
        p = f"model.layers.{l}."
        hf[p + "input_layernorm.weight"] = nrm(D)
        if arch == "phi3":
            hf[p + "self_attn.qkv_proj.weight"] = r((H + 2 * KV) * hd, D)
            hf[p + "mlp.gate_up_proj.weight"] = r(2 * FF, D)
        else:
            hf[p + "self_attn.q_proj.weight"] = r(H * hd, D)
            hf[p + "self_attn.k_proj.weight"] = r(KV * hd, D)
            hf[p + "self_attn.v_proj.weight"] = r(KV * hd, D)
            hf[p + "mlp.gate_proj.weight"] = r(FF, D)
            hf[p + "mlp.up_proj.weight"] = r(FF, D)
        if arch == "qwen2":
            for n, rows in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
                hf[p + f"self_attn.{n}_proj.bias"] = (rng.standard_normal(rows) * 0.5).astype(np.float32)
        if arch in ("qwen3", "gemma3"):
            hf[p + "self_attn.q_norm.weight"] = nrm(hd)
            hf[p + "self_attn.k_norm.weight"] = nrm(hd)
        hf[p + "self_attn.o_proj.weight"] = r(D, H * hd)
        hf[p + "post_attention_layernorm.weight"] = nrm(D)
        if gemma:
            hf[p + "pre_feedforward_layernorm.weight"] = nrm(D)
            hf[p + "post_feedforward_layernorm.weight"] = nrm(D)
        hf[p + "mlp.down_proj.weight"] = r(D, FF)
    if arch in ("llama", "qwen2"):
        hf["lm_head.weight"] = r(vocab, D)

    model_type = {"gemma3": "gemma3_text", "llama": "mistral"}.get(arch, arch)
    cfg = {"model_type": model_type, "hidden_size": D, "intermediate_size": FF, "num_hidden_layers": L,
           "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": hd, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "max_position_embeddings": 256, "vocab_size": vocab,
           "tie_word_embeddings": arch not in ("llama", "qwen2"), "bos_token_id": None, "eos_token_id": 96,
           "hidden_act": "gelu_pytorch_tanh" if gemma else "silu"}
    if arch == "llama":
        cfg["sliding_window"] = 6
    if gemma:
        cfg.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=hd, sliding_window=6)
    if arch == "gemma2":
        cfg.update(attn_logit_softcapping=1.5, final_logit_softcapping=3.0)
    if arch == "gemma3":
        cfg.update(sliding_window_pattern=2, rope_local_base_freq=10000.0, rope_theta=1e6,
                   rope_scaling={"rope_type": "linear", "factor": 8.0})
    d = tmp / f"hf-{arch}"
    d.mkdir()
    # two shards and an index, as transformers writes big checkpoints
    names = sorted(hf)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for f, ns in shards.items():
        save_file({n: hf[n] for n in ns}, str(d / f), metadata={"format": "pt"})
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: f for f, ns in shards.items() for n in ns}}))
    (d / "config.json").write_text(json.dumps(cfg))
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>", "add_bos_token": False,
                                                         "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}))

    # the GGUF twin, with llama.cpp's conventions
    path = tmp / f"{arch}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    add_shape(w, L, D, FF, H, KV)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_vocab_size(vocab)
    if "sliding_window" in cfg:
        w.add_uint32(f"{arch}.attention.sliding_window", 6)
    if arch == "gemma2":
        w.add_float32("gemma2.attn_logit_softcapping", 1.5)
        w.add_float32("gemma2.final_logit_softcapping", 3.0)
    if arch == "gemma3":
        w.add_uint32("gemma3.attention.sliding_window_pattern", 2)
        w.add_float32("gemma3.rope.freq_base_swa", 10000.0)
        w.add_string("gemma3.rope.scaling.type", "linear")
        w.add_rope_scaling_factor(8.0)
    vocab_list = [""] * vocab
    for t, i in tok.get_vocab().items():
        vocab_list[i] = t
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(vocab_list)
    w.add_token_types([3 if i >= 96 else 1 for i in range(vocab)])
    w.add_token_merges(["! \""])
    w.add_eos_token_id(96)
    gname = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "self_attn.qkv_proj": "attn_qkv",
             "post_attention_layernorm": "post_attention_norm" if gemma else "ffn_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "mlp.gate_up_proj": "ffn_up"}
    for n in names:
        x = hf[n]
        if n in gname:
            g = gname[n]
        else:
            l, rest = n[len("model.layers."):].split(".", 1)
            mod, kind = rest.rsplit(".", 1)
            g = f"blk.{l}.{layer[mod]}.{kind}"
        if arch == "llama" and (".q_proj." in n or ".k_proj." in n):
            x = permute(x, H if ".q_proj." in n else KV)
        if gemma and "norm" in n:
            x = (x + np.float32(1.0)).astype(np.float32)
        if quant is not None and x.ndim == 2 and quant(g) is not None:
            w.add_tensor(g, gguf.quants.quantize(x, quant(g)), raw_dtype=quant(g))
        else:
            w.add_tensor(g, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return d, path


def forward(tool, model, seqs, tmp, **plan_extra):
    """The logits of every row, the sequences one a step (two threads, 4-token blocks)."""
    steps = [[len(s) if i == k else 0 for i, s in enumerate(seqs)] for k in range(len(seqs))]
    opts = {"threads": 2, "block_size": 4, "num_blocks": 64, "steps": steps, **plan_extra}
    return np.concatenate(run_plan(tool, tmp, model, seqs, **opts)[0])


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"])
def test_safetensors_and_gguf_give_the_same_logits(arch, tool, tmp_path):
    tok, vocab = tiny_tokenizer()
    d, g = write_pair(tmp_path, arch, tok, vocab)
    seqs = [np.random.default_rng(1).integers(0, 96, 13).tolist()]
    from_hf = forward(tool, d, seqs, tmp_path)
    from_gguf = forward(tool, g, seqs, tmp_path)
    assert np.array_equal(from_hf.view(np.uint32), from_gguf.view(np.uint32))
    want = LlamaRef(g).forward(seqs[0])
    err = np.linalg.norm(from_hf - want, axis=1) / np.linalg.norm(want, axis=1)
    assert err.max() < 1e-3
    assert (from_hf.argmax(axis=1) == want.argmax(axis=1)).all()


def test_transformers5_rope_parameters(tool, tmp_path):
    """transformers 5 saves rope_theta and the scaling in one rope_parameters
    object: tram reads it as the older top-level rope_theta / rope_scaling
    (the same logits, bit for bit), and a base other than the default shows."""
    tok, vocab = tiny_tokenizer()
    d, _ = write_pair(tmp_path, "llama", tok, vocab)
    seqs = [np.random.default_rng(2).integers(0, 96, 13).tolist()]
    default_base = forward(tool, d, seqs, tmp_path)
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    edit(d / "config.json", rope_theta=500.0, rope_scaling=scaling)
    old_form = forward(tool, d, seqs, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    del cfg["rope_theta"], cfg["rope_scaling"]
    cfg["rope_parameters"] = {"rope_theta": 500.0, **scaling}
    (d / "config.json").write_text(json.dumps(cfg))
    new_form = forward(tool, d, seqs, tmp_path)
    assert np.array_equal(old_form.view(np.uint32), new_form.view(np.uint32))
    assert not np.allclose(old_form, default_base, atol=1e-3)


@pytest.fixture(scope="module")
def smollm_dir(model_path, tmp_path_factory):
    """A checkpoint folder with SmolLM2's real tokenizer.json (rebuilt from the
    GGUF's vocabulary and merges with the `tokenizers` package) and tiny random weights."""
    r = gguf.GGUFReader(str(model_path))
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in r.fields["tokenizer.ggml.merges"].contents()]
    specials = [t for t, ty in zip(tokens, types) if ty == 3]
    tk = byte_level_tokenizer(tokens, merges, specials)
    tmp = tmp_path_factory.mktemp("smollm-hf")
    d, _ = write_pair(tmp, "qwen3", tk, len(tokens))
    return d, tk


def test_tokenizer_json_matches_tokenizers_on_the_corpus(smollm_dir, tool, tmp_path):
    d, tk = smollm_dir
    corpus = json.loads((DATA / "tokenizer_corpus.json").read_text())
    # one process for the corpus: a text per line in hex, its ids per line back
    res = subprocess.run([str(tool("tokenize")), "-m", str(d), "--special", "--hex-lines"],
                         input="".join(t.encode().hex() + "\n" for t in corpus).encode(), capture_output=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    got = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert len(got) == len(corpus)
    for text, ids in zip(corpus, got):
        assert ids == tk.encode(text, add_special_tokens=False).ids, text


def test_nfc_normalizer_matches_tokenizers(smollm_dir, tool, tmp_path):
    """Qwen's tokenizer.json normalizes to NFC first: the corpus, and its NFD
    and mixed forms (combining accents, Hangul jamo), must give the ids
    `tokenizers` gives with the NFC normalizer."""
    import shutil
    import unicodedata
    d, _ = smollm_dir
    nfc_dir = tmp_path / "nfc"
    shutil.copytree(d, nfc_dir)
    edit(nfc_dir / "tokenizer.json", normalizer={"type": "NFC"})
    tk = Tokenizer.from_file(str(nfc_dir / "tokenizer.json"))
    corpus = json.loads((DATA / "tokenizer_corpus.json").read_text())
    texts = corpus + [unicodedata.normalize("NFD", t) for t in corpus] + [
        "e\u0301te\u0301 A\u030a \u1100\u1161\u11a8 \u212b \u0041\u0308\u0301 <|im_end|>x\u0301",
        "\u0301 starts with a mark", "q\u0307\u0323 order of marks", "\ufb01 ligature stays (NFC, not NFKC)"]
    res = subprocess.run([str(tool("tokenize")), "-m", str(nfc_dir), "--special", "--hex-lines"],
                         input="".join(t.encode().hex() + "\n" for t in texts).encode(), capture_output=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    got = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert len(got) == len(texts)
    changed = 0
    for text, ids in zip(texts, got):
        assert ids == tk.encode(text, add_special_tokens=False).ids, text[:80]
        changed += unicodedata.normalize("NFC", text) != text
    assert changed >= 8  # texts NFC changes: the NFD forms of the non-ASCII ones, and the extras


def test_serve_hf_folder_through_openai_client(smollm_dir, tram_bin, tmp_path):
    d, tk = smollm_dir
    server = tram_server.start(tmp_path, "-m", d, binary=tram_bin)  # the later -m wins
    try:
        client = server.client()
        model = client.models.list().data[0].id
        out = client.completions.create(model=model, prompt="The capital of France is", max_tokens=5, temperature=0)
        choice = out.choices[0]
        assert out.usage.prompt_tokens == len(tk.encode("The capital of France is").ids)
        assert out.usage.completion_tokens == 5 and choice.finish_reason == "length"
        ids = tk.encode(choice.text).ids
        assert tk.decode(ids) == choice.text  # byte-level text that the tokenizer reads back
    finally:
        assert server.stop() == 0


BAD = {
    "unknown model_type": (lambda d: edit(d / "config.json", model_type="mamba"), "model_type \"mamba\""),
    "activation": (lambda d: edit(d / "config.json", hidden_act="relu"), "activation \"relu\""),
    "rope scaling": (lambda d: edit(d / "config.json", rope_scaling={"rope_type": "yarn", "factor": 4.0}),
                     "rope_scaling type \"yarn\""),
    "normalizer": (lambda d: edit(d / "tokenizer.json", normalizer={"type": "NFKC"}), "normalizer NFKC"),
    "byte fallback": (lambda d: edit(d / "tokenizer.json", model={"type": "BPE", "byte_fallback": True}),
                      "byte_fallback"),
    "broken config": (lambda d: (d / "config.json").write_text("{"), "config.json: not valid JSON"),
    "missing tokenizer": (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json: cannot open"),
    "unknown tensor": (lambda d: extra_shard(d), "tensor 'model.extra.weight' has no counterpart"),
    "truncated shard": (lambda d: truncate(d / "model-00002-of-00002.safetensors"), "model-00002-of-00002"),
}


def edit(path, **fields):
    j = json.loads(path.read_text())
    j.update(fields)
    path.write_text(json.dumps(j))


def truncate(path):
    path.write_bytes(path.read_bytes()[:-4])


def extra_shard(d):
    save_file({"model.extra.weight": np.zeros(4, np.float32)}, str(d / "extra.safetensors"))
    edit(d / "model.safetensors.index.json",
         weight_map={**json.loads((d / "model.safetensors.index.json").read_text())["weight_map"],
                     "model.extra.weight": "extra.safetensors"})


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_checkpoint_refused(case, tool, tmp_path):
    tok, vocab = tiny_tokenizer()
    d, _ = write_pair(tmp_path, "qwen3", tok, vocab)
    breaker, want = BAD[case]
    breaker(d)
    plan = {"model": str(d), "seqs": [[1, 2]], "out": str(tmp_path / "o.f32")}
    res = subprocess.run([str(tool("forward")), "-"], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0
    assert want in res.stderr, res.stderr
