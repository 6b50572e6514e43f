"""The accuracy gates of `--precision fast`, short form (the full form over
more than 20,000 tokens: bench/accuracy.py, `make bench-accuracy`; results
in docs/benchmarks/precision.md): on the first 256 tokens of the evaluation
text (precision_eval.TEXT_SOURCES, real prose the project did not write),
fast against exact must keep perplexity within 0.5 %, mean KL divergence
<= 1e-3 and top-1 agreement >= 98 %, and every matmul of the exact forward,
re-run by the fast kernel on the same (real) activations, a normalized MSE
<= 5e-4. The noise floor is measured beside it: exact against the float64
reference model on a 64-token prefix. The same gates hold on Gemma 3 270M
Q4_K_M (a real model with a 262k vocabulary and Q4_K, Q5_0, Q6_K and Q8_0
weights, all of them repacked for the fast kernels), fast against exact
only: its float64 model costs more time than the short form has."""
import pathlib
import sys

import pytest
from precision_eval import evaluate, gate_failures, read_text, tokenize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
from tram_server import gemma3_path  # noqa: E402  (TRAM_GEMMA3, make model-gemma3)

TOKENS = 256
REF_PREFIX = 64


@pytest.fixture(scope="module")
def ids(tool, model_path):
    ids = tokenize(tool("tokenize"), model_path, read_text())
    assert len(ids) > 20000  # the full form's text is long enough
    return ids[:TOKENS]


def test_fast_precision_gates(tool, model_path, ids, default_ref, tmp_path):
    res = evaluate(tool, model_path, ids, TOKENS, tmp_path, threads=2, ref=default_ref, ref_prefix=REF_PREFIX,
                   log=lambda *a: None)
    fe, floor = res["fast_vs_exact"], res["exact_vs_ref"]
    print(f"fast vs exact ({fe['tokens']} tokens): ppl {fe['ppl_base']:.4f} -> {fe['ppl_cand']:.4f} "
          f"({100 * fe['ppl_rel_diff']:.3f} %), KLD mean {fe['kld_mean']:.2e} p99 {fe['kld_p99']:.2e}, "
          f"top-1 {100 * fe['top1']:.2f} %; matmul NMSE max {res['matmul_nmse']['max']:.2e}")
    print(f"noise floor, exact vs float64 ({floor['tokens']} tokens): KLD mean {floor['kld_mean']:.2e} "
          f"p99 {floor['kld_p99']:.2e}, top-1 {100 * floor['top1']:.2f} %")
    assert res["matmul_nmse"]["calls"] >= 30 * 7 + 1
    # the exact path sits on the float64 model: its KLD is far below the fast path's
    assert floor["kld_mean"] < 1e-5 and floor["top1"] >= 0.98
    assert gate_failures(fe, res["matmul_nmse"]["max"]) == []


@pytest.mark.long  # make bench-accuracy runs the full form on both models
def test_fast_precision_gates_gemma(tool, tmp_path):
    gemma_path = gemma3_path()
    ids = tokenize(tool("tokenize"), gemma_path, read_text())
    assert len(ids) > 20000
    res = evaluate(tool, gemma_path, ids[:TOKENS], TOKENS, tmp_path, threads=2, log=lambda *a: None)
    fe = res["fast_vs_exact"]
    print(f"gemma fast vs exact ({fe['tokens']} tokens): ppl {fe['ppl_base']:.4f} -> {fe['ppl_cand']:.4f} "
          f"({100 * fe['ppl_rel_diff']:.3f} %), KLD mean {fe['kld_mean']:.2e} p99 {fe['kld_p99']:.2e}, "
          f"top-1 {100 * fe['top1']:.2f} %; matmul NMSE max {res['matmul_nmse']['max']:.2e}")
    assert res["matmul_nmse"]["calls"] >= 18 * 7 + 1
    assert gate_failures(fe, res["matmul_nmse"]["max"]) == []
