"""Model families from checkpoints transformers itself made
(tests/reference/make_hf_fixtures.py writes them with torch; the folders and
transformers' float64 logits and greedy continuations are committed under
tests/reference/data/<family>/, so this test needs neither).

Families: smollm3, gemma4 (the dense text model) and gemma4_moe (Gemma 4
with enable_moe_block: the 26B-A4B's MLP and mixture of experts side by
side). For each family:
- the float64 numpy reference read from the Hugging Face folder (hf_ref.py)
  agrees with transformers (so it can stand in for it where the inputs
  cannot be fixed in advance: the chat prompt, whose template prints
  today's date);
- tram's logits from the folder, and from the GGUF that llama.cpp's
  converter conventions give for it (written with the `gguf` package:
  SmolLM3 here, Gemma 4 by hf_gguf.write_gemma4 — llama.cpp's own keys,
  per-layer arrays and rope_freqs.weight), are within rel. L2 1e-3 of
  transformers' at every position, same argmax, and the two forms' logits
  agree to 1e-6 (the GGUF path and the folder path are one model);
- tram tokenizes the prompts as transformers did, and its greedy
  continuations (`tram generate`) are transformers' token for token — alone,
  in batches with staggered arrivals, and preempted in a tiny cache (for
  Gemma 4: through its KV-shared layers, whose cache layers are their
  sources', with heads of 16 and 32 in one cache);
- `tram serve -m FOLDER` answers the official `openai` client's chat
  request with the prompt the family's template and tokenizer give
  (jinja2 + `tokenizers`) and the reference's greedy tokens;
- Gemma 4's multimodal folder (model_type gemma4, the text model under
  model.language_model., a vision tower beside it) gives the text model's
  logits;
- what tram does not run of the family is refused at load with the reason,
  from the folder and (Gemma 4) from llama.cpp's GGUF form.
"""
import json
import pathlib
import shutil
import subprocess
import sys

import gguf
import numpy as np
import pytest
from gemma4_ref import Gemma4Ref
from gguf_copy import finish
from hf_gguf import add_bpe_vocab, add_f32, hparams, permute, write_gemma4
from hf_ref import HfRef, load_safetensors
from safetensors.numpy import save_file
from test_forward import run_plan
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "integration"))
import tram_server  # noqa: E402
from test_chat_template import hf_environment  # noqa: E402
from test_engine import generate, ids_of  # noqa: E402

DATA = ROOT / "data"
FAMILIES = ["smollm3", "gemma4", "gemma4_moe"]
HF_CLASS = {"smollm3": "SmolLM3ForCausalLM", "gemma4": "Gemma4ForCausalLM", "gemma4_moe": "Gemma4ForCausalLM"}
MODEL_TYPE = {"smollm3": "smollm3", "gemma4": "gemma4", "gemma4_moe": "gemma4"}
# the numpy reference vs transformers' float64 model: Gemma 4's softmax runs in float32 there
# (eager_attention_forward's dtype=torch.float32), SmolLM3's in float64
REF_TOL = {"smollm3": 1e-5, "gemma4": 5e-5, "gemma4_moe": 5e-5}


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
    return Gemma4Ref(DATA / family) if family.startswith("gemma4") else HfRef(DATA / family)


@pytest.fixture(scope="module")
def models(family, tmp_path_factory):
    """The family's folder, and its GGUF form as llama.cpp's converter writes it."""
    p = tmp_path_factory.mktemp("gguf") / f"{family}.gguf"
    if family.startswith("gemma4"):
        finish(write_gemma4(DATA / family, p, load_safetensors(DATA / family / "model.safetensors")))
    else:
        write_gguf(DATA / family, p)
    return [DATA / family, p]


def greedy(ref, ids, n):
    ids = list(ids)
    for _ in range(n):
        ids.append(int(ref.forward(ids)[-1].argmax()))
    return ids[-n:]


def test_reference_matches_transformers(family, ref):
    for ids, logits, cont in expected(family):
        got = ref.forward(ids)
        err = np.linalg.norm(got - logits, axis=1) / np.linalg.norm(logits, axis=1)
        assert err.max() < REF_TOL[family], err.max()
        assert greedy(ref, ids, len(cont)) == cont


def test_logits_from_folder_and_gguf(family, tool, tmp_path, models):
    cases = expected(family)
    forms = []
    for model in models:
        got = forward(tool, model, [ids for ids, _, _ in cases], tmp_path)
        for g, (_, want, _) in zip(got, cases):
            check_logits(g, want)
        forms.append(got)
    for folder, gguf_form in zip(*forms):  # one model either way
        diff = np.abs(folder - gguf_form).max() / np.abs(folder).max()
        print(f"folder vs GGUF: max |diff| / max |logit| {diff:.1e}")
        assert diff <= 1e-6, diff


def test_greedy_alone_batched_and_preempted(family, tram_bin, tmp_path, models):
    cases = expected(family)
    tk = Tokenizer.from_file(str(DATA / family / "tokenizer.json"))
    add_bos = json.loads((DATA / family / "tokenizer_config.json").read_text()).get("add_bos_token", False)
    prompts = [tk.decode(ids[1 if add_bos else 0:], skip_special_tokens=False) for ids, _, _ in cases]
    reqs = [{"prompt": p, "max_tokens": len(c), "ignore_eos": True, "temperature": 0}
            for p, (_, _, c) in zip(prompts, cases)] * 4
    want = [c for _, _, c in cases] * 4
    runs = {
        "alone": ("--max-seqs", "1", "--no-prefix-caching"),
        "batched": ("--max-seqs", "8", "--max-batch-tokens", "16", "--block-size", "8"),
        "preempted": ("--kv-cache-blocks", "8", "--block-size", "8", "--max-seqs", "8", "--max-batch-tokens", "32"),
    }
    for model in models:
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


CHAT = {  # the family's messages, its template's variables, and what the rendered prompt must show
    "smollm3": ([{"role": "system", "content": "Answer briefly. /no_think"}, {"role": "user", "content": "2+2?"}],
                {"bos_token": "", "eos_token": "<|im_end|>"},
                lambda t: "Reasoning Mode: /no_think" in t and t.endswith("<think>\n\n</think>\n")),
    "gemma4": ([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "2+2?"}],
               {"bos_token": "<bos>", "eos_token": "<turn|>"},
               lambda t: t.startswith("<bos><|turn>system\nAnswer briefly.<turn|>")
               and t.endswith("<|turn>model\n<|channel>thought\n<channel|>")),  # thinking off: an empty thought
}


def test_serve_chat_through_openai(family, tram_bin, tmp_path, ref):
    folder = DATA / family
    messages, variables, looks_right = CHAT[family.removesuffix("_moe")]
    template = hf_environment().from_string((folder / "chat_template.jinja").read_text())
    tk = Tokenizer.from_file(str(folder / "tokenizer.json"))
    server = tram_server.start(tmp_path, "-m", folder, "--max-model-len", "512", binary=tram_bin)
    try:
        info = server.get("/model_info").json()
        assert (info["model_type"], info["architectures"]) == (MODEL_TYPE[family], [HF_CLASS[family]])
        client = server.client()
        model = client.models.list().data[0].id
        out = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0,
                                             extra_body={"return_token_ids": True, "ignore_eos": True})
        text = template.render(messages=messages, add_generation_prompt=True, tools=None, documents=None,
                               **variables)
        assert looks_right(text), text
        prompt_ids = tk.encode(text, add_special_tokens=False).ids
        body = out.model_dump()
        assert body["prompt_token_ids"] == prompt_ids
        assert out.usage.prompt_tokens == len(prompt_ids)
        choice = body["choices"][0]
        assert choice["token_ids"] == greedy(ref, prompt_ids, 6)
        assert choice["message"]["content"] == tk.decode(choice["token_ids"])
    finally:
        assert server.stop() == 0


def test_gemma4_multimodal_folder(tool, tmp_path):
    """A Gemma4ForConditionalGeneration folder: config.json wraps the text config (model_type gemma4,
    text_config), the text model's tensors sit under model.language_model. (here as F32) beside a vision
    tower's; tram runs the text model and skips the tower."""
    d = tmp_path / "gemma4-mm"
    shutil.copytree(DATA / "gemma4", d)
    text = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({"model_type": "gemma4", "architectures":
                                               ["Gemma4ForConditionalGeneration"], "text_config": text}))
    w = load_safetensors(d / "model.safetensors")
    t = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v for k, v in w.items()}
    t["model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight"] = np.ones((4, 4), dtype=np.float32)
    t["model.embed_vision.embedding_projection.weight"] = np.ones((4, 4), dtype=np.float32)
    save_file({k: np.ascontiguousarray(v) for k, v in t.items()}, str(d / "model.safetensors"))
    cases = expected("gemma4")
    got = forward(tool, d, [ids for ids, _, _ in cases], tmp_path)
    for g, (_, want, _) in zip(got, cases):
        check_logits(g, want)


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
}


G4_FULL = {"head_dim": 32, "num_key_value_heads": 1}
G4_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
           "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000.0}}
G4_REFUSED = {
    "MoE block without its sizes": (dict(enable_moe_block=True), "config.json: num_experts is missing"),
    "more experts chosen than there are": (dict(enable_moe_block=True, num_experts=4, top_k_experts=5,
                                                moe_intermediate_size=8),
                                           "config.json: top_k_experts"),
    "bidirectional": (dict(use_bidirectional_attention="all"), "use_bidirectional_attention is not something"),
    "attention bias": (dict(attention_bias=True), "attention_bias is not something"),
    "YaRN on the full layers": (dict(rope_parameters={**G4_ROPE, "full_attention": {"rope_type": "yarn",
                                                                                    "rope_theta": 1e4}}),
                                "rope_parameters.full_attention.rope_type \"yarn\" is not one tram runs"),
    "scaled proportional RoPE": (dict(rope_parameters={**G4_ROPE, "full_attention": {
        **G4_ROPE["full_attention"], "factor": 8.0}}), "tram runs proportional RoPE unscaled"),
    "proportional on sliding": (dict(rope_parameters={**G4_ROPE, "sliding_attention": G4_ROPE["full_attention"]}),
                                "rope_parameters.sliding_attention.rope_type \"proportional\""),
    "two full geometries": (dict(per_layer_config={"2": G4_FULL, "5": {"head_dim": 64, "num_key_value_heads": 1}}),
                            "per_layer_config.5: tram runs one head geometry per layer type"),
    "a sliding layer's own heads": (dict(per_layer_config={"1": G4_FULL, "2": G4_FULL, "5": G4_FULL}),
                                    "per_layer_config.1: tram runs one head geometry per layer type"),
    "a full layer without its entry": (dict(per_layer_config={"2": G4_FULL}), "no entry for full layer 5"),
    "a per-layer field tram lacks": (dict(per_layer_config={"2": {**G4_FULL, "intermediate_size": 8},
                                                            "5": G4_FULL}),
                                     "per_layer_config.2.intermediate_size is not something tram runs per layer"),
    "non-periodic layer types": (dict(layer_types=["sliding_attention", "full_attention", "sliding_attention",
                                                   "sliding_attention", "sliding_attention", "full_attention"]),
                                 "layer_types[3] breaks the periodic sliding/full pattern"),
    "per-layer vocabulary": (dict(vocab_size_per_layer_input=100), "vocab_size_per_layer_input 100 differs"),
    "every layer shared": (dict(num_kv_shared_layers=6), "num_kv_shared_layers is not a whole number in 0..5"),
    "a shared type without a source": (dict(num_kv_shared_layers=4),
                                       "shared layer 2 (full) has no earlier layer of its type"),
}


@pytest.mark.parametrize("family,case", [("smollm3", c) for c in REFUSED] + [("gemma4", c) for c in G4_REFUSED])
def test_refused_with_the_reason(family, case, tool, tmp_path):
    fields, want = (REFUSED if family == "smollm3" else G4_REFUSED)[case]
    err = refusal(tool, edited(tmp_path, family, **fields), tmp_path)
    assert want in err, err


G4_GGUF_REFUSED = {  # llama.cpp's gemma4 keys and tensors that tram does not run, each refused by name
    "non-periodic pattern": (lambda w: w.add_sliding_window_pattern([True, False, True, True, True, False]),
                             "layer 3 breaks the periodic pattern of a full layer every 2"),
    "pattern of another length": (lambda w: w.add_sliding_window_pattern([True, True, False]),
                                  "not a bool array of block_count"),
    "a sliding layer's own KV heads": (lambda w: w.add_head_count_kv([2, 1, 1, 2, 2, 1]),
                                       "layer 1 has 1, another of its kind 2 (tram runs one value per layer type)"),
    "an owner's own MLP width": (lambda w: w.add_feed_forward_length([96, 96, 96, 48, 192, 192]),
                                 "feed_forward_length': layer 3 has 48"),
    "partial rotation by count": (lambda w: w.add_rope_dimension_count_swa(8), "rotates whole heads"),
    "a zero divisor": (lambda w: setattr(w.tensors[0]["rope_freqs.weight"], "tensor", np.zeros(16, np.float32)),
                       "element 0 is 0, not a positive finite divisor"),
    "no rope_freqs": (lambda w: w.tensors[0].pop("rope_freqs.weight"), "tensor 'rope_freqs.weight' is missing"),
    "no KV source": (lambda w: (w.add_shared_kv_layers(5), w.add_feed_forward_length(96)),
                     "layer 2 has no earlier layer of its type"),
    # attention_k_eq_v (V = K where attn_v is absent) is the full layers' alone (layer 2 here has no attn_v)
    "a sliding layer without attn_v": (lambda w: w.tensors[0].pop("blk.1.attn_v.weight"),
                                       "tensor 'blk.1.attn_v.weight' is missing: layer 1 is a sliding-window layer"),
}
G4_MOE_GGUF_REFUSED = {  # the MoE block's
    "a router without experts": (lambda w: (w.add_expert_count(0), w.add_expert_used_count(0)),
                                 "tensor 'blk.0.ffn_gate_inp.weight': a router, but no experts"),
    "no per-expert scale": (lambda w: w.tensors[0].pop("blk.1.ffn_down_exps.scale"),
                            "tensor 'blk.1.ffn_down_exps.scale' is missing"),
    "no router input scale": (lambda w: w.tensors[0].pop("blk.2.ffn_gate_inp.scale"),
                              "tensor 'blk.2.ffn_gate_inp.scale' is missing"),
    "experts of another width": (lambda w: w.add_expert_feed_forward_length(8),
                                 "tensor 'blk.0.ffn_gate_up_exps.weight' has shape [64, 32, 8], the hyper-parameters "
                                 "need [64, 16, 8]"),
}


@pytest.mark.parametrize("family,case", [("gemma4", c) for c in sorted(G4_GGUF_REFUSED)]
                         + [("gemma4_moe", c) for c in sorted(G4_MOE_GGUF_REFUSED)])
def test_gemma4_gguf_refused_with_the_reason(family, case, tool, tmp_path):
    edit, message = (G4_GGUF_REFUSED if family == "gemma4" else G4_MOE_GGUF_REFUSED)[case]
    p = tmp_path / "gemma4.gguf"
    w = write_gemma4(DATA / family, p, load_safetensors(DATA / family / "model.safetensors"))
    edit(w)
    finish(w)
    err = refusal(tool, p, tmp_path)
    assert message in err, err
