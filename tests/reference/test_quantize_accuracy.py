"""The accuracy of `--quantize`, short form (the full form:
bench/quantize_accuracy.py; results in docs/models.md): the default model
written unquantized (quant_eval.unquantized_copy: F16 matrices) and loaded
as stored and with each quantize type, over the first 256 tokens of the
evaluation text (real prose the project did not write).

The gates are sanity bounds a broken quantizer or a wrong block layout
misses by orders of magnitude, not targets: Q8_0 stays within a few 1e-3 of
mean KL divergence; Q4_1 puts the weights back on the Q4_1 grid they came
from (the copy's F16 rounding aside), so it must nearly reproduce the
unquantized forward; Q4_0 (a grid of its own, at 4 bits, on a 135M model)
costs far more but must keep most top-1 predictions."""
import pytest
from precision_eval import read_text, tokenize
from quant_eval import evaluate, unquantized_copy

TOKENS = 256
GATES = {"Q8_0": (5e-3, 0.95), "Q4_1": (1e-4, 0.99), "Q4_0": (1.0, 0.6)}  # max mean KLD, min top-1


@pytest.fixture(scope="module")
def f16_model(model_path, tmp_path_factory):
    dst = tmp_path_factory.mktemp("quant") / "default-f16.gguf"
    unquantized_copy(model_path, dst)
    return dst


@pytest.mark.long
def test_quantize_accuracy_gates(tool, f16_model, tmp_path):
    ids = tokenize(tool("tokenize"), f16_model, read_text())[:TOKENS]
    res = evaluate(tool("forward"), f16_model, ids, TOKENS, list(GATES), tmp_path, threads=2, log=lambda *a: None)
    for t, s in res.items():
        print(f"--quantize {t} vs F16 ({s['tokens']} tokens): ppl {s['ppl_base']:.4f} -> {s['ppl_cand']:.4f}, "
              f"KLD mean {s['kld_mean']:.2e} p99 {s['kld_p99']:.2e}, top-1 {100 * s['top1']:.2f} %")
    for t, (kld_max, top1_min) in GATES.items():
        assert res[t]["kld_mean"] <= kld_max and res[t]["top1"] >= top1_min, (t, res[t])
