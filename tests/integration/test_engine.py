"""The engine on the real default model, driven through `tram generate
--json` (server/generate.h): batch invariance against solo runs (greedy and
seeded sampling, requests arriving at random steps, chunked prompts),
preemption in a tiny cache, chunked prefill next to decodes, cancellation,
prefix caching, n > 1 forks, stop conditions, refusal at admission, and
after every run all blocks free again.

Output text is checked against Hugging Face `tokenizers` decoding the
output ids (a tokenizer built from the vocabulary and merges the `gguf`
package reads from the model file), so detokenization and stop-string
truncation have an independent reference.

Sizes are small on purpose: the model runs on two shared cores. Random
choices are seeded (printed; replay with TRAM_TEST_SEED).
"""
import json
import os
import random
import subprocess
import time

import gguf
import jinja2
import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

WORDS = ("the a of and to in is was for on that with as by at from his her it an were are which this be "
         "river mountain city music garden winter engine library ocean market bridge story number "
         "quickly slowly bright quiet ancient modern small large red green blue golden paper stone").split()


def seed():
    s = int(os.environ.get("TRAM_TEST_SEED") or time.time_ns() % 2**32)
    print(f"seed: {s} (replay with TRAM_TEST_SEED={s})")
    return s


def clean_env(**extra):
    """The environment without TRAM_* variables (tram warns about those it
    does not know)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TRAM_")}, **extra}


def generate(tram_bin, model_path, tmp_path, reqs, *args, timeout=600):
    """Runs `tram generate --json` over reqs (dicts, one JSON line each);
    returns (results in input order, stats). Checks that every request
    completed and every block is free again."""
    f = tmp_path / f"prompts-{time.time_ns()}.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    p = subprocess.run([str(tram_bin), "generate", "-m", str(model_path), "--prompts", str(f), "--json",
                        "--threads", "2", "--log-level", "warn", *map(str, args)],
                       capture_output=True, text=True, timeout=timeout, env=clean_env())
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    stats = lines[-1]["stats"]
    out = lines[:-1]
    assert [o["index"] for o in out] == list(range(len(reqs)))
    assert stats["requests_finished"] == stats["requests_submitted"]
    assert stats["running"] == 0 and stats["waiting"] == 0
    assert stats["kv_blocks_used"] == 0 and stats["kv_blocks_free"] == stats["kv_blocks_total"]
    return out, stats


def ids_of(res):
    return [c["token_ids"] for c in res["choices"]]


@pytest.fixture(scope="module")
def hf(model_path):
    """SmolLM2's byte-level BPE tokenizer rebuilt from the vocabulary and
    merges in the model file (pre-tokenized as its tokenizer.json says);
    control tokens are special (skipped when decoding, as tram's output
    skips them). tk.chat_template is the file's template."""
    r = gguf.GGUFReader(str(model_path))
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in r.fields["tokenizer.ggml.merges"].contents()]
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True) for t, ty in zip(tokens, types) if ty == 3])
    tk.chat_template = r.fields["tokenizer.chat_template"].contents()
    return tk


def hf_chat_ids(hf, text):
    """The chat prompt as transformers renders and tokenizes it."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    rendered = env.from_string(hf.chat_template).render(messages=[{"role": "user", "content": text}],
                                                        add_generation_prompt=True)
    return hf.encode(rendered, add_special_tokens=False).ids


def random_prompt(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize()


# --- batch invariance and preemption against solo runs -----------------------------------

def make_workload(tram_bin, model_path, tmp_path_factory, *flags):
    """32 requests (every other one seeded sampling) and their solo outputs:
    each run alone (max_seqs 1), with `flags` (e.g. a precision)."""
    rng = random.Random(seed())
    reqs = []
    for i in range(32):
        r = {"prompt": random_prompt(rng, 3, 18), "max_tokens": 4, "ignore_eos": True}
        if i % 2:
            r.update(temperature=rng.choice([0.7, 1.0, 1.3]), top_k=rng.choice([0, 40]),
                     top_p=rng.choice([1.0, 0.9]), seed=rng.randrange(2**53))
        reqs.append(r)
    solo, _ = generate(tram_bin, model_path, tmp_path_factory.mktemp("solo"), reqs, "--max-seqs", "1",
                       "--no-prefix-caching", *flags)
    return rng, reqs, [ids_of(s) for s in solo]


@pytest.fixture(scope="module")
def workload(tram_bin, model_path, tmp_path_factory):
    """At the default precision (fast)."""
    return make_workload(tram_bin, model_path, tmp_path_factory)


@pytest.fixture(scope="module")
def workload_exact(tram_bin, model_path, tmp_path_factory):
    return make_workload(tram_bin, model_path, tmp_path_factory, "--precision", "exact")


@pytest.mark.parametrize("precision", ["exact", "fast"])
def test_batch_invariance_random_arrivals(tram_bin, model_path, tmp_path, precision, request, hf):
    rng, reqs, solo = request.getfixturevalue("workload_exact" if precision == "exact" else "workload")
    arriving = [{**r, "arrive_step": rng.randint(0, 12)} for r in reqs]
    out, stats = generate(tram_bin, model_path, tmp_path, arriving, "--max-seqs", "16",
                          "--max-batch-tokens", "32", "--precision", precision)
    for r, o, want in zip(arriving, out, solo):
        assert ids_of(o) == want, r
        assert o["choices"][0]["text"] == hf.decode(want[0])
        assert o["choices"][0]["finish_reason"] == "length"
    assert stats["step_seqs"] > stats["steps"]          # batches of several sequences
    assert stats["varlen_steps"] > 0 and stats["decode_steps"] > 0
    assert stats["prompt_tokens"] == sum(o["prompt_tokens"] for o in out)


def test_preemption_in_a_tiny_cache(tram_bin, model_path, tmp_path, workload):
    _, reqs, solo = workload
    out, stats = generate(tram_bin, model_path, tmp_path, reqs, "--kv-cache-blocks", "8", "--block-size", "8",
                          "--max-seqs", "8", "--max-batch-tokens", "64")
    assert stats["kv_blocks_total"] == 8
    assert stats["preemptions"] > 0
    for r, o, want in zip(reqs, out, solo):
        assert ids_of(o) == want, r


# --- chunked prefill ---------------------------------------------------------------------

def test_long_prompt_chunked_while_8_decode(tram_bin, model_path, tmp_path):
    rng = random.Random(seed())
    decoders_ = [{"prompt": random_prompt(rng, 3, 6), "max_tokens": 14, "ignore_eos": True} for _ in range(8)]
    long = {"prompt": " ".join(rng.choice(WORDS) for _ in range(1500)), "max_tokens": 2, "ignore_eos": True,
            "arrive_step": 2}
    # a step target far above any step: no pacing (scheduler/sched_pace.h), chunks fill the budget
    out, stats = generate(tram_bin, model_path, tmp_path, decoders_ + [long], "--max-batch-tokens", "256",
                          "--max-seqs", "16", "--step-target-ms", "600000")
    big = out[8]
    n = big["prompt_tokens"]
    assert 1400 <= n <= 2100
    first, done = big["times"]["first_step"], big["choices"][0]["token_steps"][0]
    assert done - first + 1 == -(-n // (256 - 8))      # chunks of the budget left by the 8 decodes
    for o in out[:8]:                                   # every step of the prefill advanced each decode
        steps = set(o["choices"][0]["token_steps"])
        assert set(range(first, done + 1)) <= steps, (first, done, sorted(steps))


# --- cancellation --------------------------------------------------------------------------

def test_cancel_frees_blocks_within_a_step(tram_bin, model_path, tmp_path):
    reqs = [{"prompt": "Write a long story about a dragon.", "max_tokens": 12, "ignore_eos": True},
            {"prompt": "Count from one to one hundred:", "max_tokens": 200, "ignore_eos": True,
             "cancel_after": 3}]
    out, stats = generate(tram_bin, model_path, tmp_path, reqs)
    c = out[1]["choices"][0]
    assert c["finish_reason"] == "abort"
    t = out[1]["times"]
    assert t["final_step"] <= t["cancel_step"] + 1     # dropped at the step after the cancel
    assert 3 <= len(c["token_ids"]) < 200
    assert out[0]["choices"][0]["finish_reason"] == "length"   # the other one goes on


# --- prefix caching ------------------------------------------------------------------------

def test_prefix_cache_computes_only_the_tail(tram_bin, model_path, tmp_path):
    rng = random.Random(seed())
    prompt = " ".join(rng.choice(WORDS) for _ in range(150))
    reqs = [{"prompt": prompt, "max_tokens": 4}, {"prompt": prompt, "max_tokens": 4, "arrive_step": 4}]
    out, stats = generate(tram_bin, model_path, tmp_path, reqs, "--block-size", "32")
    n = out[0]["prompt_tokens"]
    cached = (n - 1) // 32 * 32
    assert out[0]["usage"]["cached_tokens"] == 0
    assert out[1]["usage"]["cached_tokens"] == cached
    assert stats["prompt_tokens"] == n + (n - cached)  # the second computed only its tail
    assert stats["prefix_hit_tokens"] == cached
    assert ids_of(out[1]) == ids_of(out[0])           # the first computed it all: the same output


# --- n > 1 ---------------------------------------------------------------------------------

def test_n_completions_share_the_prompt(tram_bin, model_path, tmp_path):
    prompt = "In a quiet village by the river there lived an old clockmaker who built"
    req = {"prompt": prompt, "max_tokens": 5, "n": 3, "temperature": 1.0, "seed": 1234, "ignore_eos": True}
    out, stats = generate(tram_bin, model_path, tmp_path, [req], "--no-prefix-caching", "--block-size", "8")
    n = out[0]["prompt_tokens"]
    assert n % 8 != 0                                   # a partial last block: copied at the fork
    assert stats["prompt_tokens"] == n                  # the prompt was computed once for all three
    ch = out[0]["choices"]
    assert len({tuple(c["token_ids"]) for c in ch}) > 1
    assert ch[0]["seed"] == "1234" and len({c["seed"] for c in ch}) == 3
    # each completion equals a single request with its seed
    solo = [{**req, "n": 1, "seed": c["seed"]} for c in ch]   # a decimal string: all 64 bits
    out1, _ = generate(tram_bin, model_path, tmp_path, solo, "--no-prefix-caching", "--block-size", "8")
    assert [ids_of(o)[0] for o in out1] == [c["token_ids"] for c in ch]


# --- stop conditions ---------------------------------------------------------------------

STORY = "Once upon a time, in a small town near the sea, there was a"


@pytest.fixture(scope="module")
def story(tram_bin, model_path, tmp_path_factory):
    """The greedy continuation of STORY, 16 tokens, eos ignored."""
    out, _ = generate(tram_bin, model_path, tmp_path_factory.mktemp("story"),
                      [{"prompt": STORY, "max_tokens": 16, "ignore_eos": True}])
    return out[0]["choices"][0]


def test_stop_strings(tram_bin, model_path, tmp_path, story, hf):
    ids = story["token_ids"]
    pieces = [hf.decode(ids[: i + 1])[len(hf.decode(ids[:i])):] for i in range(len(ids))]
    full = hf.decode(ids)
    assert story["text"] == full
    # a stop string across a token boundary: the end of token k and the start of token k + 1
    k = next(i for i in range(4, len(ids) - 1) if len(pieces[i]) >= 2 and len(pieces[i + 1]) >= 2)
    stop = pieces[k][-2:] + pieces[k + 1][:2]
    cut = full.find(stop)
    near = stop[:3] + "\u00a7"                         # its prefix shows up, then never completes
    reqs = [{"prompt": STORY, "max_tokens": 16, "ignore_eos": True, "stop": [stop]},
            {"prompt": STORY, "max_tokens": 16, "ignore_eos": True, "stop": [near]},
            {"prompt": STORY, "max_tokens": 16, "ignore_eos": True, "stop": ["\u00a7\u00a7", stop, near]}]
    out, _ = generate(tram_bin, model_path, tmp_path, reqs)
    a, b, c = (o["choices"][0] for o in out)
    assert a["finish_reason"] == "stop" and a["stop"] == stop
    assert a["text"] == full[:cut]                     # the stop string and what follows are not returned
    assert a["token_ids"] == ids[: len(a["token_ids"])] and len(a["token_ids"]) <= k + 2
    assert hf.decode(a["token_ids"]).startswith(a["text"] + stop)
    assert b["finish_reason"] == "length" and b["text"] == full   # held-back text released at the end
    assert c["stop"] == stop and c["text"] == full[:cut]


def test_stop_token_ids_eos_and_length(tram_bin, model_path, tmp_path, story, hf):
    ids = story["token_ids"]
    j = 6
    stop_id = ids[j]
    first = ids.index(stop_id)
    chat = "What is 2+2?"
    reqs = [{"prompt": STORY, "max_tokens": 16, "ignore_eos": True, "stop_token_ids": [stop_id]},
            {"prompt": STORY, "max_tokens": 7, "ignore_eos": True},
            {"prompt": chat, "chat": True, "max_tokens": 40},
            {"prompt": chat, "chat": True, "max_tokens": 40, "ignore_eos": True}]
    out, _ = generate(tram_bin, model_path, tmp_path, reqs)
    s, m, e, ie = (o["choices"][0] for o in out)
    assert s["finish_reason"] == "stop" and s["stop_token"] == stop_id
    assert s["token_ids"] == ids[: first + 1]
    assert s["text"] == hf.decode(ids[:first])        # the stop token's text is not returned
    assert m["finish_reason"] == "length" and m["token_ids"] == ids[:7] and m["text"] == hf.decode(ids[:7])
    assert out[1]["usage"]["completion_tokens"] == 7
    assert out[2]["prompt_tokens"] == len(hf_chat_ids(hf, chat))   # --chat / "chat": the template's prompt
    eog = e["token_ids"][-1]
    assert e["finish_reason"] == "stop" and e["stop_token"] == eog and len(e["token_ids"]) < 40
    assert e["text"] == hf.decode(e["token_ids"][:-1]) and "4" in e["text"]
    assert ie["token_ids"][: len(e["token_ids"])] == e["token_ids"]   # ignore_eos: goes on past it
    assert ie["finish_reason"] == "length" and len(ie["token_ids"]) == 40


def test_context_length(tram_bin, model_path, tmp_path):
    reqs = [{"prompt": STORY, "max_tokens": 0, "ignore_eos": True}]
    out, stats = generate(tram_bin, model_path, tmp_path, reqs, "--max-model-len", "20")
    c = out[0]["choices"][0]
    assert stats["max_model_len"] == 20
    assert c["finish_reason"] == "length"
    assert out[0]["prompt_tokens"] + len(c["token_ids"]) == 20


def test_refused_at_admission(tram_bin, model_path, tmp_path):
    reqs = [{"prompt": STORY, "max_tokens": 100},                 # 16 + 100 tokens > 4 blocks of 16
            {"prompt": STORY, "max_tokens": 8},
            {"prompt": " ".join(["word"] * 80), "max_tokens": 1}]
    out, _ = generate(tram_bin, model_path, tmp_path, reqs, "--kv-cache-blocks", "4", "--block-size", "16")
    assert "KV cache holds only 64 tokens" in out[0]["error"] and "max_tokens (100)" in out[0]["error"]
    assert out[0]["choices"] == []
    assert out[1]["choices"][0]["finish_reason"] == "length"      # the one that fits still runs
    assert "KV cache holds only 64 tokens" in out[2]["error"]


# --- the command line ----------------------------------------------------------------------

def test_generate_paris(tram_bin, model_path):
    p = subprocess.run([str(tram_bin), "generate", "-m", str(model_path), "-p", "The capital of France is",
                        "-n", "16", "--temperature", "0", "--threads", "2"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Paris" in p.stdout
    assert "generated tokens" in p.stderr and "requests/s" in p.stderr


def test_generate_plain_prompt_lines(tram_bin, model_path, tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("The capital of France is\n\nThe capital of Italy is\n")
    p = subprocess.run([str(tram_bin), "generate", "-m", str(model_path), "--prompts", str(f), "-n", "6",
                        "--threads", "2", "--log-level", "warn"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("=== ") == 2 and "Paris" in p.stdout and "Rome" in p.stdout
    assert "2 requests" in p.stderr


def test_generate_usage_errors(tram_bin, model_path, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hi", "temperature": "hot"}\n')
    for args, msg in [(["-p", "x", "--prompts", str(bad)], "exactly one of"),
                      (["--prompts", str(bad)], "bad.jsonl:1: \"temperature\": bad value"),
                      (["-p", "x", "--top-p", "2"], "--top-p"),
                      (["-p", "x", "--stop", ""], "stop string")]:
        p = subprocess.run([str(tram_bin), "generate", "-m", str(model_path), *args, "--log-level", "warn"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and msg in p.stderr + p.stdout, (args, p.stderr)


def test_engine_under_sanitizers(model_path, tmp_path):
    """A small mix of everything (a fork with a partial block copy, stop
    strings, a cancel, prefix-cache hits, preemptions in a tiny cache)
    through the ASan+UBSan build: no report, every block back."""
    san = os.environ.get("TRAM_SAN_BIN")
    if not san or not os.path.exists(san):
        pytest.skip("no sanitizer build (TRAM_SAN_BIN): `make test` sets it")
    reqs = [{"prompt": STORY, "max_tokens": 6, "n": 2, "temperature": 0.9, "seed": 5},
            {"prompt": STORY, "max_tokens": 6, "stop": [" a", "zz"], "arrive_step": 1},
            {"prompt": STORY + " young", "max_tokens": 24, "ignore_eos": True, "cancel_after": 2},
            {"prompt": "Hello", "max_tokens": 5, "arrive_step": 3}]
    env = clean_env(ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    p = subprocess.run([san, "generate", "-m", str(model_path), "--prompts", str(f), "--json", "--threads", "2",
                        "--kv-cache-blocks", "6", "--block-size", "8", "--max-batch-tokens", "16",
                        "--log-level", "warn"], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0 and "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr[-3000:]
    stats = json.loads(p.stdout.splitlines()[-1])["stats"]
    assert stats["kv_blocks_used"] == 0 and stats["requests_finished"] == 4
