"""Speculative decoding with a draft model (`--speculative draft
--draft-model PATH`), driven through `tram generate --json` and the server:

- the default model as its own draft: greedy outputs equal plain decoding's
  and every draft is accepted (the counters, and /metrics);
- two random-weights GGUFs that share a vocabulary
  (scripts/make-random-llama.py with --vocab-seed), and a random model as
  its own draft: token ids equal with and without speculation, greedy and
  seeded, in mixed batches with random arrivals and with preemptions and a
  draft cache too small for every sequence (its blocks are then taken from
  sequences that do not speculate);
- after every run no block of either cache is in use (generate() checks the
  main one, these tests the draft's);
- a draft model with another vocabulary (size, or token texts) is refused
  at start, naming the difference.

The reference is tram's own plain decoding (test_engine.py and
tests/reference check it). Random choices are seeded (printed; replay with
TRAM_TEST_SEED)."""
import json
import os
import random
import subprocess
import sys

import pytest

from prometheus_client.parser import text_string_to_metric_families
from test_engine import WORDS, clean_env, generate, ids_of, seed
from tram_server import model_path as default_model, server_fixture

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "make-random-llama.py")

draft_server = server_fixture("--speculative", "draft", "--draft-model", str(default_model()),
                              "--served-model-name", "spec", use_external=False)

SHAPE = ["--heads", "4", "--kv-heads", "2", "--vocab", "1024", "--ctx", "4096"]


def make(path, *args):
    p = subprocess.run([sys.executable, SCRIPT, str(path), "--jobs", "1", *args], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return path


@pytest.fixture(scope="module")
def rand(tmp_path_factory):
    """A target, a smaller draft sharing its vocabulary, and two models whose
    vocabularies differ from it (in token texts; in size)."""
    d = tmp_path_factory.mktemp("draft")
    return {
        "target": make(d / "t.gguf", "--layers", "2", "--dim", "256", "--ff", "512", "--seed", "7", *SHAPE),
        "draft": make(d / "d.gguf", "--layers", "1", "--dim", "128", "--ff", "256", "--seed", "8",
                      "--vocab-seed", "7", *SHAPE),
        "texts": make(d / "x.gguf", "--layers", "1", "--dim", "128", "--ff", "256", "--seed", "9", *SHAPE),
        "size": make(d / "y.gguf", "--layers", "1", "--dim", "128", "--ff", "256", "--seed", "7", *SHAPE[:-4],
                     "--vocab", "2048", "--ctx", "4096"),
    }


def spec(draft, k=4):
    return ("--speculative", "draft", "--draft-model", str(draft), "--num-speculative-tokens", str(k),
            "--speculative-max-batch", "16")


def check_draft_cache(st):
    assert st["draft_kv_blocks_total"] > 0 and st["draft_kv_blocks_used"] == 0, st


def passage(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def random_workload(rng, n, words=(3, 30), tokens=(8, 40), arrive=12):
    """Plain prompts of random words (a random model's vocabulary spells a
    word in several tokens), greedy and seeded sampling, arriving at random
    steps."""
    reqs = []
    for i in range(n):
        r = {"prompt": passage(rng, rng.randint(*words)), "max_tokens": rng.randint(*tokens),
             "arrive_step": rng.randint(0, arrive)}
        if i % 2:
            r.update(temperature=rng.choice([0.6, 1.0]), top_k=rng.choice([0, 20]), seed=rng.randrange(2**53))
        reqs.append(r)
    return reqs


def test_self_draft_greedy_accepts_everything(tram_bin, model_path, tmp_path):
    rng = random.Random(seed())
    # ignore_eos: a sequence that ends at a token leaves the drafts after it unverified
    reqs = [{"prompt": f"Repeat the following text exactly: {passage(rng, 20)}", "chat": True, "max_tokens": 40,
             "ignore_eos": True},
            {"prompt": "Tell me about the history of Rome.", "chat": True, "max_tokens": 40, "arrive_step": 3,
             "ignore_eos": True}]
    plain, _ = generate(tram_bin, model_path, tmp_path, reqs)
    out, st = generate(tram_bin, model_path, tmp_path, reqs, *spec(model_path))
    for r, a, b in zip(reqs, plain, out):
        assert ids_of(b) == ids_of(a), r
    assert st["spec_drafts"] > 0 and st["spec_accepted_tokens"] == st["spec_draft_tokens"] > 0, st
    assert st["steps"] < sum(len(ids_of(o)[0]) for o in plain)  # drafts were kept
    check_draft_cache(st)


def test_random_pair_outputs_unchanged(tram_bin, rand, tmp_path):
    rng = random.Random(seed())
    reqs = random_workload(rng, 10)
    args = ("--max-seqs", "6", "--max-batch-tokens", "40")
    plain, _ = generate(tram_bin, rand["target"], tmp_path, reqs, *args)
    for draft in (rand["draft"], rand["target"]):  # a smaller model; the target as its own draft
        out, st = generate(tram_bin, rand["target"], tmp_path, reqs, *args, *spec(draft))
        for r, a, b in zip(reqs, plain, out):
            assert ids_of(b) == ids_of(a), (draft, r)
        assert st["spec_drafts"] > 0 and st["step_seqs"] > st["steps"], st
        check_draft_cache(st)
    assert st["spec_accepted_tokens"] > 0  # the target as its own draft: greedy rows accept all


def test_preemption_and_a_small_draft_cache(tram_bin, rand, tmp_path):
    rng = random.Random(seed())
    # the main cache: 12 blocks of 8 tokens for 6 sequences of up to 60; the
    # draft's 6 blocks (16 KiB each): room for one speculating sequence, so
    # a sequence that speculates takes the draft blocks of those that do not
    args = ("--kv-cache-blocks", "12", "--block-size", "8", "--max-seqs", "6", "--max-batch-tokens", "40",
            "--draft-kv-cache-bytes", "96K")
    for _ in range(4):  # a random workload may happen to fit: draw another until one preempts
        # arriving at once (a step of these tiny models takes a millisecond:
        # late arrivals, on a loaded machine, could each run alone)
        reqs = random_workload(rng, 8, words=(1, 4), tokens=(20, 40), arrive=2)
        plain, _ = generate(tram_bin, rand["target"], tmp_path, reqs, *args)
        out, st = generate(tram_bin, rand["target"], tmp_path, reqs, *args, *spec(rand["target"]))
        for r, a, b in zip(reqs, plain, out):
            assert ids_of(b) == ids_of(a), r
        assert st["draft_kv_blocks_total"] == 6
        check_draft_cache(st)
        if st["preemptions"] > 0 and st["spec_drafts"] > 0:
            break
    assert st["preemptions"] > 0 and st["spec_drafts"] > 0


@pytest.mark.parametrize("which, why", [("texts", "token 256 is"), ("size", "has a vocabulary of 2048 tokens")])
def test_other_vocabulary_refused(tram_bin, rand, tmp_path, which, why):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": "hello", "max_tokens": 4}) + "\n")
    p = subprocess.run([str(tram_bin), "generate", "-m", str(rand["target"]), "--prompts", str(f), "--json",
                        "--threads", "2", *spec(rand[which])], capture_output=True, text=True, timeout=120,
                       env=clean_env())
    assert p.returncode != 0 and not p.stdout
    assert f"draft_model {rand[which]}" in p.stderr and why in p.stderr, p.stderr
    assert "a draft model must share the model's vocabulary" in p.stderr
    # the server loads the same stack: it exits with the same reason
    p = subprocess.run([str(tram_bin), "serve", "-m", str(rand["target"]), "--host", "127.0.0.1", "--port", "0",
                        "--threads", "2", *spec(rand[which])], capture_output=True, text=True, timeout=120,
                       env=clean_env())
    assert p.returncode != 0 and why in p.stderr, p.stderr


def test_settings_need_each_other(tram_bin, rand, tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": "hello", "max_tokens": 4}) + "\n")
    for args, why in ((("--speculative", "draft"), "speculative draft needs a draft model"),
                      (("--draft-model", str(rand["draft"])), "a draft model is used only with speculative draft")):
        p = subprocess.run([str(tram_bin), "generate", "-m", str(rand["target"]), "--prompts", str(f), *args],
                           capture_output=True, text=True, timeout=60, env=clean_env())
        assert p.returncode != 0 and why in p.stderr, p.stderr


def test_draft_under_sanitizers(rand, tmp_path):
    """Drafts, rollbacks, preemptions, draft-cache evictions and a cancel
    through the ASan+UBSan build: no report, every block of both caches back."""
    san = os.environ.get("TRAM_SAN_BIN")
    if not san or not os.path.exists(san):
        pytest.skip("no sanitizer build (TRAM_SAN_BIN): `make test` sets it")
    reqs = random_workload(random.Random(5), 8, words=(1, 4), tokens=(20, 40))
    reqs[2]["cancel_after"] = 5
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    env = clean_env(ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    for draft in (rand["draft"], rand["target"]):
        p = subprocess.run([san, "generate", "-m", str(rand["target"]), "--prompts", str(f), "--json", "--threads",
                            "2", "--kv-cache-blocks", "12", "--block-size", "8", "--max-seqs", "6",
                            "--draft-kv-cache-bytes", "96K", "--log-level", "warn", *spec(draft)],
                           capture_output=True, text=True, timeout=600, env=env)
        assert p.returncode == 0 and "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr[-3000:]
        st = json.loads(p.stdout.splitlines()[-1])["stats"]
        assert st["kv_blocks_used"] == 0 and st["requests_finished"] == len(reqs) and st["spec_drafts"] > 0
        check_draft_cache(st)


def test_metrics_self_draft(draft_server):
    """The default model as its own draft through the server: every greedy
    draft accepted, by vLLM's counters, and the draft cache empty after."""
    client = draft_server.client()
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    r = client.chat.completions.create(model="spec", messages=[{"role": "user", "content": f"Repeat exactly: {text}"}],
                                       max_tokens=32, temperature=0, extra_body={"ignore_eos": True})
    fams = {f.name: f for f in text_string_to_metric_families(draft_server.get("/metrics").text)}

    def value(family, name):
        got, = [s.value for s in fams[family].samples if s.name == name]
        return got

    drafts = value("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_drafts_total")
    proposed = value("vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_draft_tokens_total")
    accepted = value("vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted == proposed > 0
    assert r.usage.completion_tokens >= accepted + 1
    assert value("tram:draft_kv_cache_blocks_total", "tram:draft_kv_cache_blocks_total") > 0
    assert value("tram:draft_kv_cache_blocks_used", "tram:draft_kv_cache_blocks_used") == 0
