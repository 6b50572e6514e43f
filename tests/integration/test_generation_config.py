"""The model file's generation defaults (the generation_config setting):
a GGUF file's general.sampling.* keys (llama.cpp's names) and a checkpoint
folder's generation_config.json become the defaults of requests that leave
those fields out, as vLLM's `--generation-config auto` does; a field the
request gives wins; `--generation-config none` restores OpenAI's defaults.

The GGUF files are the default model copied with the `gguf` package and the
keys added; the checkpoint folder is test_hf_checkpoint.py's (SmolLM2's
tokenizer, tiny random weights) with a generation_config.json. Whether a
request was greedy is read from its output: greedy outputs equal the
temperature-0 output whatever the seed, sampled ones differ between seeds."""
import json
import shutil

import gguf
import pytest

import tram_server
from test_hf_checkpoint import smollm_dir  # noqa: F401 (a fixture; it puts tests/reference on sys.path)
from gguf_copy import finish, open_copy  # noqa: E402

PROMPT = "Once upon a time"
F32, U32 = gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.UINT32


def copy_with_keys(src, dst, keys):
    """src with the metadata keys {key: (value, type)} added."""
    r, w = open_copy(src, dst)
    for key, (value, vtype) in keys.items():
        w.add_key_value(key, value, vtype)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    finish(w)
    return dst


@pytest.fixture(scope="module")
def greedy_file(model_path, tmp_path_factory):
    """The model recommending temperature 0 and 7 new tokens, with a value
    out of range (top_p 5) and a key tram has no setting for (mirostat)."""
    return copy_with_keys(model_path, tmp_path_factory.mktemp("gen") / "greedy.gguf", {
        "general.sampling.temp": (0.0, F32),
        "general.sampling.top_p": (5.0, F32),
        "general.sampling.mirostat": (2, U32),
        "tram.sampling.max_new_tokens": (7, U32),
    })


@pytest.fixture(scope="module")
def auto(greedy_file, tmp_path_factory):
    srv = tram_server.start(tmp_path_factory.mktemp("auto"), "-m", greedy_file)
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def off(greedy_file, tmp_path_factory):
    srv = tram_server.start(tmp_path_factory.mktemp("off"), "-m", greedy_file, "--generation-config", "none")
    yield srv
    assert srv.stop() == 0


def texts(server, seeds=(1, 2, 3, 4), **body):
    """The completions of PROMPT with each seed (no temperature unless body gives one)."""
    out = []
    for seed in seeds:
        r = server.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 12, "seed": seed, **body})
        assert r.status_code == 200, r.text
        out.append(r.json()["choices"][0]["text"])
    return out


def greedy(server):
    return texts(server, seeds=(1,), temperature=0)[0]


def test_file_temperature_makes_requests_greedy(auto):
    assert texts(auto) == [greedy(auto)] * 4


def test_request_temperature_still_wins(auto):
    assert len(set(texts(auto, temperature=1.0))) > 1


def test_setting_none_restores_openai_defaults(off):
    assert len(set(texts(off))) > 1  # sampled at OpenAI's temperature 1
    assert off.get("/model_info").json()["generation_defaults"] == {}


def test_file_max_new_tokens_is_the_chat_default(auto):
    client = auto.client()
    hi = [{"role": "user", "content": "Tell me a long story"}]
    r = client.chat.completions.create(model=None, messages=hi, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length"
    r = client.chat.completions.create(model=None, messages=hi, max_tokens=3, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3


def test_defaults_are_logged_and_shown(auto):
    log = auto.log()
    assert "generation defaults (generation_config auto): temperature=0 max_tokens=7" in log
    assert "general.sampling.top_p = 5 is not a top_p tram accepts (0, 1]: ignored" in log
    assert "general.sampling.mirostat: tram's sampler has no such setting: ignored" in log
    assert auto.get("/model_info").json()["generation_defaults"] == {"temperature": 0, "max_tokens": 7}


def test_responses_take_the_default_too(auto):
    r = auto.client().responses.create(model=None, input=PROMPT, max_output_tokens=8)
    assert r.temperature == 0


def test_generation_config_json_of_a_checkpoint(smollm_dir, tmp_path):  # noqa: F811
    d, _ = smollm_dir
    folder = tmp_path / "ckpt"
    shutil.copytree(d, folder)
    (folder / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.0, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05,
         "max_new_tokens": 5, "eos_token_id": json.loads((folder / "config.json").read_text()).get("eos_token_id")}))
    srv = tram_server.start(tmp_path, "-m", folder)
    try:
        info = srv.get("/model_info").json()["generation_defaults"]
        assert info == {"temperature": 0, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05, "max_tokens": 5}
        assert texts(srv) == [greedy(srv)] * 4
        r = srv.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                   "ignore_eos": True}).json()
        assert r["usage"]["completion_tokens"] == 5
    finally:
        assert srv.stop() == 0
