"""Model families from checkpoints transformers itself made
(tests/reference/make_hf_fixtures.py writes them with torch; the folders and
transformers' float64 logits and greedy continuations are committed under
tests/reference/data/<family>/, so this test needs neither).

For each family:
- the float64 numpy reference read from the Hugging Face folder (hf_ref.py)
  agrees with transformers (so it can stand in for it where the inputs
  cannot be fixed in advance: the chat prompt, whose template prints
  today's date);
- tram's logits from the folder, and from the GGUF that llama.cpp's
  converter conventions give for it (written here with the `gguf` package),
  are within rel. L2 1e-3 of transformers' at every position, same argmax;
- tram tokenizes the prompts as transformers did, and its greedy
  continuations (`tram generate`) are transformers' token for token — alone,
  in batches with staggered arrivals, and preempted in a tiny cache;
- `tram serve -m FOLDER` answers the official `openai` client's chat
  request with the prompt the family's template and tokenizer give
  (jinja2 + `tokenizers`) and the reference's greedy tokens;
- what tram does not run of the family (and Gemma 4, refused whole) is
  refused at load with the reason.
"""
import json
import pathlib
import shutil
import subprocess
import sys

import gguf
import numpy as np
import pytest
from gguf_copy import finish
from hf_gguf import add_bpe_vocab, add_f32, hparams, permute
from hf_ref import HfRef, load_safetensors
from test_forward import run_plan
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "integration"))
import tram_server  # noqa: E402
from test_chat_template import hf_environment  # noqa: E402
from test_engine import generate, ids_of  # noqa: E402

DATA = ROOT / "data"
FAMILIES = ["smollm3"]


def expected(family):
    d = np.load(DATA / family / "expected.npz")
    n = sum(1 for k in d if k.startswith("ids_"))
    return [(d[f"ids_{i}"].tolist(), d[f"logits_{i}"], d[f"greedy_{i}"].tolist()) for i in range(n)]


def check_logits(got, want):
    err = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
    print(f"{len(err)} positions, logits rel L2 max {err.max():.2e}")  # shown with pytest -s
    assert err.max() < 1e-3, f"rel L2 {err.max():.2e} at position {err.argmax()}"
    assert (got.argmax(axis=1) == want.argmax(axis=1)).all()


def forward(tool, model, seqs, tmp):
    """Logits per sequence, the sequences one a step (two threads, 4-token blocks)."""
    steps = [[len(s) if i == k else 0 for i, s in enumerate(seqs)] for k in range(len(seqs))]
    return run_plan(tool, tmp, model, seqs, steps, threads=2, block_size=4, num_blocks=64)[0]


def write_gguf(folder, path):
    """The folder as llama.cpp's converter writes a SmolLM3 GGUF (general.architecture smollm3, the llama
    tensor names, Q/K rows permuted, no key for the NoPE layers), weights as F32."""
    cfg = json.loads((folder / "config.json").read_text())
    w = hparams(path, cfg["model_type"], cfg)
    add_bpe_vocab(w, folder, cfg, "smaug-bpe")
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for name, x in sorted(load_safetensors(folder / "model.safetensors").items()):
        if name.startswith("model.layers."):
            layer, rest = name[len("model.layers."):].split(".", 1)
            base = rest[: -len(".weight")]
            if base == "self_attn.q_proj":
                x = permute(x, cfg["num_attention_heads"])
            elif base == "self_attn.k_proj":
                x = permute(x, cfg["num_key_value_heads"])
            gname = f"blk.{layer}.{names[base]}.weight"
        else:
            gname = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                     "lm_head.weight": "output.weight"}[name]
        add_f32(w, gname, x)
    finish(w)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def ref(family):
    return HfRef(DATA / family)


@pytest.fixture(scope="module")
def gguf_path(family, tmp_path_factory):
    p = tmp_path_factory.mktemp("gguf") / f"{family}.gguf"
    write_gguf(DATA / family, p)
    return p


def greedy(ref, ids, n):
    ids = list(ids)
    for _ in range(n):
        ids.append(int(ref.forward(ids)[-1].argmax()))
    return ids[-n:]


def test_reference_matches_transformers(family, ref):
    for ids, logits, cont in expected(family):
        got = ref.forward(ids)
        err = np.linalg.norm(got - logits, axis=1) / np.linalg.norm(logits, axis=1)
        assert err.max() < 1e-5, err.max()
        assert greedy(ref, ids, len(cont)) == cont


def test_logits_from_folder_and_gguf(family, tool, tmp_path, gguf_path):
    cases = expected(family)
    for model in (DATA / family, gguf_path):
        got = forward(tool, model, [ids for ids, _, _ in cases], tmp_path)
        for g, (_, want, _) in zip(got, cases):
            check_logits(g, want)


def test_greedy_alone_batched_and_preempted(family, tram_bin, tmp_path, gguf_path):
    cases = expected(family)
    tk = Tokenizer.from_file(str(DATA / family / "tokenizer.json"))
    prompts = [tk.decode(ids, skip_special_tokens=False) for ids, _, _ in cases]
    reqs = [{"prompt": p, "max_tokens": len(c), "ignore_eos": True, "temperature": 0}
            for p, (_, _, c) in zip(prompts, cases)] * 4
    want = [c for _, _, c in cases] * 4
    runs = {
        "alone": ("--max-seqs", "1", "--no-prefix-caching"),
        "batched": ("--max-seqs", "8", "--max-batch-tokens", "16", "--block-size", "8"),
        "preempted": ("--kv-cache-blocks", "8", "--block-size", "8", "--max-seqs", "8", "--max-batch-tokens", "32"),
    }
    for model in (DATA / family, gguf_path):
        for name, flags in runs.items():
            rs = [{**r, "arrive_step": (3 * i) % 7} for i, r in enumerate(reqs)] if name == "batched" else reqs
            out, stats = generate(tram_bin, model, tmp_path, rs, *flags)
            for r, o, w, (ids, _, _) in zip(rs, out, want, cases * 4):
                assert o["prompt_tokens"] == len(ids), (model, name, r)
                assert ids_of(o) == [w], (model, name, r)
            if name == "preempted":
                assert stats["preemptions"] > 0
            if name == "batched":
                assert stats["step_seqs"] > stats["steps"] and stats["decode_steps"] > 0


def test_serve_chat_through_openai(family, tram_bin, tmp_path, ref):
    folder = DATA / family
    template = hf_environment().from_string((folder / "chat_template.jinja").read_text())
    tk = Tokenizer.from_file(str(folder / "tokenizer.json"))
    messages = [{"role": "system", "content": "Answer briefly. /no_think"}, {"role": "user", "content": "2+2?"}]
    server = tram_server.start(tmp_path, "-m", folder, "--max-model-len", "512", binary=tram_bin)
    try:
        info = server.get("/model_info").json()
        assert (info["model_type"], info["architectures"]) == (family, ["SmolLM3ForCausalLM"])
        client = server.client()
        model = client.models.list().data[0].id
        out = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0,
                                             extra_body={"return_token_ids": True, "ignore_eos": True})
        text = template.render(messages=messages, add_generation_prompt=True, tools=None, documents=None,
                               bos_token="", eos_token="<|im_end|>")
        assert "Reasoning Mode: /no_think" in text and text.endswith("<think>\n\n</think>\n")
        prompt_ids = tk.encode(text, add_special_tokens=False).ids
        body = out.model_dump()
        assert body["prompt_token_ids"] == prompt_ids
        assert out.usage.prompt_tokens == len(prompt_ids)
        choice = body["choices"][0]
        assert choice["token_ids"] == greedy(ref, prompt_ids, 6)
        assert choice["message"]["content"] == tk.decode(choice["token_ids"])
    finally:
        assert server.stop() == 0


def edited(tmp_path, family, **fields):
    """A copy of the family's folder with config.json fields replaced (None: removed)."""
    d = tmp_path / f"{family}-edited"
    shutil.copytree(DATA / family, d)
    cfg = json.loads((d / "config.json").read_text())
    for k, v in fields.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def refusal(tool, model, tmp_path):
    plan = {"model": str(model), "seqs": [[1, 2]], "out": str(tmp_path / "o.f32")}
    res = subprocess.run([str(tool("forward")), "-"], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0
    return res.stderr


REFUSED = {
    # SmolLM3 as llama.cpp runs it: NoPE exactly on every fourth layer, no sliding windows
    "NoPE elsewhere": (dict(no_rope_layers=[1, 1, 0, 1, 1]), "no_rope_layers[2] is 0"),
    "NoPE every third": (dict(no_rope_layers=None, no_rope_layer_interval=3), "no_rope_layers[2] is 0"),
    "NoPE list too short": (dict(no_rope_layers=[1, 1, 1]), "no_rope_layers[3] is not 0 or 1"),
    "sliding windows": (dict(use_sliding_window=True, sliding_window=8), "use_sliding_window (SmolLM3's"),
    "YaRN in rope_parameters": (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e3, "factor": 2.0}),
                                "rope_parameters type \"yarn\" is not one tram runs"),
    "per-layer-type RoPE": (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4}}),
                            "rope_parameters.full_attention: per-layer-type"),
    # Gemma 4, text and multimodal configs, dense and MoE
    "gemma4_text": (dict(model_type="gemma4_text"), "\"gemma4_text\" (Gemma 4) is not something tram runs yet"),
    "gemma4 MoE": (dict(model_type="gemma4_text", enable_moe_block=True), "proportional RoPE, enable_moe_block"),
    "gemma4": (dict(model_type="gemma4"), "\"gemma4\" (Gemma 4)"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_with_the_reason(case, tool, tmp_path):
    fields, want = REFUSED[case]
    err = refusal(tool, edited(tmp_path, "smollm3", **fields), tmp_path)
    assert want in err, err


def test_gguf_gemma4_refused(tool, tmp_path):
    """A GGUF of llama.cpp's gemma4 architecture is refused naming what tram lacks."""
    p = tmp_path / "gemma4.gguf"
    w = gguf.GGUFWriter(str(p), "gemma4")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    err = refusal(tool, p, tmp_path)
    assert "general.architecture \"gemma4\" (Gemma 4) is not something tram runs yet" in err, err
