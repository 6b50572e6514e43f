"""POST /v1/embeddings of a real `tram serve` against the float64 numpy
reference (llama_ref.py: LlamaRef.hidden, the final-normed hidden states):
each pooling (last: the default for a model file without pooling_type;
mean: from the file's `llama.pooling_type` as llama.cpp writes it; cls: the
--pooling setting), normalized or not, on the exact path, within 1e-3
relative L2. Then what the vector must not depend on (the batch, chunked
prefill, generation traffic at the same time: bit for bit), the official
`openai` client (float and base64), the refusals, and that an embedding
leaves no KV block in use."""
import base64
import json
import concurrent.futures as cf
import pathlib
import sys

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
import tram_server  # noqa: E402
from gguf_copy import finish, open_copy  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402
from tram_server import server_fixture  # noqa: E402

# max_batch_tokens 64: LONG is computed in several chunks; exact: the reference tolerance
ARGS = ("--max-batch-tokens", "64", "--precision", "exact")
server = server_fixture(*ARGS, use_external=False)
cls_server = server_fixture(*ARGS, "--pooling", "cls", "--pooling-normalize", "false", use_external=False)

SHORT = "The capital of France is Paris."
LONG = ("Once upon a time, in a small village by the sea, there lived an old fisherman and his wife. " * 4).strip()
TEXTS = [SHORT, LONG, "a", "Embeddings map text to vectors."]
DIM = 576  # SmolLM2-135M's hidden size


def ref_vector(ref, ids, pooling, normalize=True):
    h = ref.hidden(ids)  # [len, dim] float64
    v = {"last": h[-1], "mean": h.mean(axis=0), "cls": h[0]}[pooling]
    return v / max(np.linalg.norm(v), 1e-12) if normalize else v


def rel_l2(got, want):
    got = np.asarray(got, dtype=np.float64)
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def embed(srv, **body):
    r = srv.post("/v1/embeddings", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def vectors(resp):
    data = sorted(resp["data"], key=lambda d: d["index"])
    return [d["embedding"] for d in data]


@pytest.fixture(scope="module")
def mean_server(model_path, tmp_path_factory):
    """The default model with `llama.pooling_type` 1 (mean), as llama.cpp's
    converters write it for a mean-pooling embedding model: --pooling auto
    takes it from the file."""
    d = tmp_path_factory.mktemp("mean")
    r, w = open_copy(model_path, d / "mean.gguf")
    w.add_key_value("llama.pooling_type", 1, gguf.GGUFValueType.UINT32)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    finish(w)
    srv = tram_server.start(d, *ARGS, model=d / "mean.gguf")
    yield srv
    assert srv.stop() == 0


# ---- the numbers ---------------------------------------------------------------------


def test_last_token_matches_reference(server, default_ref):
    resp = embed(server, input=TEXTS)
    assert resp["object"] == "list" and len(resp["data"]) == len(TEXTS)
    total = 0
    for i, (text, vec) in enumerate(zip(TEXTS, vectors(resp))):
        ids = server.tokenize(prompt=text)
        total += len(ids)
        assert resp["data"][i]["object"] == "embedding" and len(vec) == DIM
        assert rel_l2(vec, ref_vector(default_ref, ids, "last")) < 1e-3, text
        assert abs(np.linalg.norm(vec) - 1) < 1e-5
    assert resp["usage"] == {"prompt_tokens": total, "total_tokens": total}
    assert resp["model"]


def test_unnormalized_and_token_ids(server, default_ref):
    ids = server.tokenize(prompt=LONG)
    vec = vectors(embed(server, input=ids, normalize=False))[0]
    assert rel_l2(vec, ref_vector(default_ref, ids, "last", normalize=False)) < 1e-3
    both = vectors(embed(server, input=[ids, ids[:5]]))
    assert rel_l2(both[0], ref_vector(default_ref, ids, "last")) < 1e-3
    assert rel_l2(both[1], ref_vector(default_ref, ids[:5], "last")) < 1e-3


def test_mean_pooling_from_the_model_file(mean_server, default_ref):
    for text in (SHORT, LONG):  # LONG: its mean runs over several chunks
        ids = mean_server.tokenize(prompt=text)
        vec = vectors(embed(mean_server, input=text))[0]
        assert rel_l2(vec, ref_vector(default_ref, ids, "mean")) < 1e-3, text


def test_cls_pooling_setting_without_normalize(cls_server, default_ref):
    ids = cls_server.tokenize(prompt=LONG)
    vec = vectors(embed(cls_server, input=LONG))[0]
    assert rel_l2(vec, ref_vector(default_ref, ids, "cls", normalize=False)) < 1e-3
    assert abs(np.linalg.norm(vec) - 1) > 1e-2  # not normalized: the setting is off
    vec = vectors(embed(cls_server, input=LONG, normalize=True))[0]  # the request's field wins
    assert rel_l2(vec, ref_vector(default_ref, ids, "cls")) < 1e-3


def test_truncate_prompt_tokens(server, default_ref):
    ids = server.tokenize(prompt=LONG)
    vec = vectors(embed(server, input=ids, truncate_prompt_tokens=7, normalize=False))[0]
    assert rel_l2(vec, ref_vector(default_ref, ids[-7:], "last", normalize=False)) < 1e-3
    resp = embed(server, input=ids, truncate_prompt_tokens=-1)  # to the context: it fits, nothing cut
    assert resp["usage"]["prompt_tokens"] == len(ids)


# ---- batch invariance --------------------------------------------------------------------


def test_bit_identical_alone_batched_and_beside_generation(server):
    alone = [vectors(embed(server, input=t))[0] for t in TEXTS]
    batched = vectors(embed(server, input=TEXTS))
    assert batched == alone
    gen_body = {"prompt": LONG, "max_tokens": 24, "temperature": 0}
    gen_alone = server.post("/v1/completions", json=gen_body).json()["choices"][0]["text"]

    def gen():
        r = server.post("/v1/completions", json=gen_body)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]

    with cf.ThreadPoolExecutor(8) as pool:
        gens = [pool.submit(gen) for _ in range(4)]
        embs = [pool.submit(lambda i=i: vectors(embed(server, input=TEXTS[i % 4:] + TEXTS[:i % 4])))
                for i in range(6)]
        for i, f in enumerate(embs):
            got = f.result()
            assert got == alone[i % 4:] + alone[:i % 4]
        assert all(f.result() == gen_alone for f in gens)


def test_no_kv_kept(server):
    embed(server, input=[LONG, SHORT])
    m = server.metrics()
    assert list(m["tram:kv_cache_blocks_used"].values()) == [0]
    assert list(m["vllm:num_requests_running"].values()) == [0]


# ---- the official client -------------------------------------------------------------------


def test_openai_client_float_and_base64(server):
    c = server.client()
    f = c.embeddings.create(model=None, input=TEXTS[:2], encoding_format="float")
    b = c.embeddings.create(model=None, input=TEXTS[:2], encoding_format="base64")
    d = c.embeddings.create(model=None, input=TEXTS[:2])  # the client asks base64 and decodes it
    f32 = [np.asarray(e.embedding, dtype=np.float32) for e in f.data]  # 9 digits: the float32 values exactly
    assert all((np.asarray(e.embedding, dtype=np.float32) == f32[i]).all() for i, e in enumerate(d.data))
    assert f.usage.prompt_tokens == f.usage.total_tokens > 0
    for i, e in enumerate(b.data):  # asked for explicitly, the client hands the string over as it came
        got = np.frombuffer(base64.b64decode(e.embedding), dtype="<f4")
        assert (got == f32[i]).all()  # little-endian float32, the same values
    assert c.embeddings.create(model=None, input="x", dimensions=DIM, user="u-1").data[0].index == 0


# ---- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("body,param", [
    ({"input": "hi", "dimensions": 8}, "dimensions"),
    ({"input": "hi", "dimensions": 0}, "dimensions"),
    ({"input": "hi", "encoding_format": "int8"}, "encoding_format"),
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": ["a", 3]}, "input[1]"),
    ({"input": [[1, 2], "a"]}, "input[1]"),
    ({"input": [10 ** 9]}, "input[0]"),  # a token id outside the vocabulary
    ({"input": [[5], [6, -1]]}, "input[1][1]"),
    ({"input": {"text": "a"}}, "input"),
    ({}, "input"),
    ({"input": "hi", "user": 5}, "user"),
    ({"input": "hi", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
    ({"input": "hi", "normalize": "yes"}, "normalize"),
    ({"messages": [{"role": "user", "content": "hi"}], "input": "x"}, "messages"),
])
def test_refused(server, body, param):
    r = server.post("/v1/embeddings", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


def test_longer_than_the_context(server):
    ids = [1] * 1025  # --max-model-len 1024
    r = server.post("/v1/embeddings", json={"input": [[5, 6], ids]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[1]", r.text
    assert r.json()["error"]["code"] == "context_length_exceeded"
    ok = server.post("/v1/embeddings", json={"input": [1] * 1024})  # exactly the context: no output needed
    assert ok.status_code == 200, ok.text
    ok = server.post("/v1/embeddings", json={"input": ids, "truncate_prompt_tokens": -1})
    assert ok.status_code == 200 and ok.json()["usage"]["prompt_tokens"] == 1024


def test_other_model_and_bad_json(server):
    r = server.post("/v1/embeddings", json={"input": "hi", "model": "nope"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    r = server.post("/v1/embeddings", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 400


# ---- a sentence-transformers checkpoint -------------------------------------------------------

from test_hf_checkpoint import smollm_dir  # noqa: E402,F401 (a fixture: a tiny qwen3 folder and its GGUF twin)


def st_modules(d, pooling_cfg, normalize):
    """Makes folder d a sentence-transformers model: modules.json with a
    Pooling module (1_Pooling/config.json) and maybe a Normalize one."""
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        mods.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (d / "modules.json").write_text(json.dumps(mods))
    (d / "1_Pooling").mkdir(exist_ok=True)
    modes = dict.fromkeys(["pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                           "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                           "pooling_mode_lasttoken"], False)
    modes.update(pooling_cfg)
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 64, **modes}))


@pytest.mark.parametrize("mode,pooling,normalize", [
    ("pooling_mode_lasttoken", "last", True),  # Qwen3-Embedding's
    ("pooling_mode_mean_tokens", "mean", False),
])
def test_sentence_transformers_checkpoint(smollm_dir, tmp_path, mode, pooling, normalize):  # noqa: F811
    d, _ = smollm_dir
    ref = LlamaRef(d.parent / "qwen3.gguf")  # the same weights, as GGUF
    st_modules(d, {mode: True}, normalize)
    srv = tram_server.start(tmp_path, "--precision", "exact", model=d)
    try:
        for text in (SHORT, LONG):
            ids = srv.tokenize(prompt=text)
            vec = vectors(embed(srv, input=text))[0]
            assert len(vec) == 64
            assert rel_l2(vec, ref_vector(ref, ids, pooling, normalize)) < 1e-3, (mode, text)
    finally:
        assert srv.stop() == 0


def test_sentence_transformers_pooling_tram_does_not_run(smollm_dir, tmp_path):  # noqa: F811
    d, _ = smollm_dir
    st_modules(d, {"pooling_mode_max_tokens": True}, False)
    srv = tram_server.start(tmp_path, model=d, wait=False)
    try:
        assert srv.proc.wait(60) != 0
    finally:
        srv.stop()
    assert "pooling_mode_max_tokens is not a pooling tram runs" in srv.log()
