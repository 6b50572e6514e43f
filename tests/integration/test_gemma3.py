"""The real Gemma 3 270M Q4_K_M (models/gemma-3-270m-q4_k_m.gguf, `make
model-gemma3`): a checkpoint no one here made, with a 262,144-token
vocabulary and no chat template of its own, served by `tram serve` and
asked through the official `openai` client.

- Chat falls back to ChatML and, as the file's tokenizer.ggml.add_bos_token
  asks (and as llama.cpp's tokenization of its own ChatML fallback does),
  the prompt starts with <bos>, once.
- /model_info and /server_info name the file's general.architecture and
  Hugging Face's class for it (Gemma3ForCausalLM), not Llama's.
- Its prompt logprobs and top alternatives, chat prompt included, are the
  float64 numpy reference's (tests/reference/llama_ref.py, weights
  dequantized by the `gguf` package) to LP_TOL.

What the file says is read here from its bytes with the `gguf` package's
type codes (gguf.GGUFReader takes ~15 s of CPU to index the 262,144 token
strings; only the header's scalars and array lengths are needed)."""
import pathlib
import struct
import sys

import pytest
from gguf import GGUFValueType as VT
from tram_server import gemma3_path, server_fixture

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from llama_ref import LlamaRef  # noqa: E402
from test_prompt_logprobs import check_entry, ref_logprobs, vllm_entries  # noqa: E402

server = server_fixture(model=gemma3_path)
# logprob units: tram's float32 forward against the reference's float64 on
# the same dequantized weights (seen: at most 1.9e-3 over these prompts'
# tokens and alternatives; a prompt without its <bos> is off by whole units)
LP_TOL = 1e-2

SCALAR = {VT.UINT8: "<B", VT.INT8: "<b", VT.UINT16: "<H", VT.INT16: "<h", VT.UINT32: "<I", VT.INT32: "<i",
          VT.FLOAT32: "<f", VT.BOOL: "<?", VT.UINT64: "<Q", VT.INT64: "<q", VT.FLOAT64: "<d"}
CHATML = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"


def gguf_header(path):
    """{key: value} of a GGUF v3 file's metadata: scalars and strings as
    values, arrays as their length."""
    with open(path, "rb") as f:
        data = f.read(8 << 20)  # the header of this file ends well before 8 MiB
    assert data[:4] == b"GGUF" and struct.unpack_from("<I", data, 4)[0] == 3
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    at = 24

    def take(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, data, at)[0]
        at += struct.calcsize(fmt)
        return v

    def string():
        nonlocal at
        n = take("<Q")
        at += n
        return data[at - n:at].decode()

    def value(t):
        if t == VT.STRING:
            return string()
        if t == VT.ARRAY:
            et, n = VT(take("<I")), take("<Q")
            for _ in range(n):
                value(et)
            return n
        return take(SCALAR[t])

    out = {}
    for _ in range(n_kv):
        key = string()
        out[key] = value(VT(take("<I")))
    return out


@pytest.fixture(scope="module")
def meta():
    return gguf_header(gemma3_path())


def test_the_file_asks_for_bos_and_has_no_template(meta):
    """The premises of the tests below, as the file states them."""
    assert meta["general.architecture"] == "gemma3"
    assert meta["tokenizer.ggml.add_bos_token"] is True and meta["tokenizer.ggml.add_eos_token"] is False
    assert "tokenizer.chat_template" not in meta
    assert meta["tokenizer.ggml.tokens"] == 262144


def test_chat_prompt_starts_with_bos_once(server, meta):
    bos = meta["tokenizer.ggml.bos_token_id"]
    text = "Name a colour."
    msgs = [{"role": "user", "content": text}]
    r = server.client().chat.completions.create(model=None, messages=msgs, max_tokens=8, temperature=0,
                                                extra_body={"return_token_ids": True})
    ids = r.prompt_token_ids
    assert ids[0] == bos and ids.count(bos) == 1
    # the rest is ChatML's text, tokenized without special tokens
    assert ids[1:] == server.tokenize(prompt=CHATML.format(text), add_special_tokens=False)
    assert r.usage.prompt_tokens == len(ids)
    assert server.tokenize(messages=msgs, add_generation_prompt=True) == ids
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length") and len(c.token_ids) == r.usage.completion_tokens > 0
    # a text prompt with add_special_tokens gets the same single <bos> (as the tokenizer says)
    assert server.tokenize(prompt=text, add_special_tokens=True) == [bos] + server.tokenize(
        prompt=text, add_special_tokens=False)


def test_chat_stream_equals_whole_answer(server):
    msgs = [{"role": "user", "content": "Count to five."}]
    whole = server.client().chat.completions.create(model=None, messages=msgs, max_tokens=12, temperature=0)
    parts = server.client().chat.completions.create(model=None, messages=msgs, max_tokens=12, temperature=0,
                                                    stream=True)
    text = "".join(ch.choices[0].delta.content or "" for ch in parts if ch.choices)
    assert text == whole.choices[0].message.content


def test_model_and_server_info_name_gemma3(server, meta):
    for path in ("/model_info", "/server_info", "/get_model_info", "/get_server_info"):
        j = server.get(path).json()
        assert j["model_type"] == meta["general.architecture"], path
        assert j["architectures"] == ["Gemma3ForCausalLM"], path
    j = server.get("/model_info").json()
    assert j["vocab_size"] == meta["tokenizer.ggml.tokens"]
    assert j["bos_token_id"] == meta["tokenizer.ggml.bos_token_id"]
    assert j["eos_token_id"] == meta["tokenizer.ggml.eos_token_id"]


@pytest.fixture(scope="module")
def ref():
    """The float64 reference of the checkpoint (~1.5 GB while it lives: the
    tied 262,144 x 640 output matrix)."""
    return LlamaRef(gemma3_path())


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_prompt_logprobs_match_the_float64_reference(server, ref, kind):
    """Each prompt token's logprob and rank, the 5 likeliest alternatives at
    each position, and the greedy next token with its alternatives."""
    if kind == "text":
        url, body = "/v1/completions", {"prompt": "The capital of France is Paris, and the capital of Italy is",
                                        "add_special_tokens": True, "logprobs": 5}
    else:
        url, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": "Why is the sky blue?"}],
                                             "logprobs": True, "top_logprobs": 5}
    r = server.post(url, json={**body, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 5,
                               "return_token_ids": True})
    assert r.status_code == 200, r.text
    j = r.json()
    c = j["choices"][0]
    ids = j["prompt_token_ids"] if kind == "chat" else c["prompt_token_ids"]
    plp = j.get("prompt_logprobs") or c["prompt_logprobs"]
    assert ids[0] == 2  # <bos>
    lp = ref_logprobs(ref, ids + c["token_ids"][:1])
    for p, (logprob, rank, d) in enumerate(vllm_entries(plp, ids), start=1):
        alts = sorted((v["rank"], i, v["logprob"]) for i, v in d.items() if i != ids[p] or rank <= 5)
        assert [a[0] for a in alts] == list(range(1, 6))
        check_entry(lp, p, ids[p], logprob, rank, [(i, l) for _, i, l in alts], tol=LP_TOL)
    # the generated token: the reference's likeliest unless within LP_TOL of the next
    nxt = c["token_ids"][0]
    row = lp[len(ids) - 1]
    order = row.argsort()[::-1]
    assert nxt == order[0] or row[order[0]] - row[nxt] < LP_TOL
    if kind == "chat":
        tops = [(t["token"], t["logprob"]) for t in c["logprobs"]["content"][0]["top_logprobs"]]
    else:
        tops = list(c["logprobs"]["top_logprobs"][0].items())
    assert len(tops) == 5
    for k, (_, logprob) in enumerate(tops):
        assert abs(logprob - row[order[k]]) < LP_TOL, (k, logprob, row[order[k]])
