"""How `--quantize` is judged: the same model loaded unquantized and with its
weights quantized at load, over real text (precision_eval's TEXT_SOURCES),
compared by perplexity, KL divergence of the quantized next-token
distribution from the unquantized one, and top-1 agreement (precision_eval's
Compare).

The unquantized model: tram ships no F16/BF16 checkpoint and none can be
downloaded here, so `unquantized_copy` writes the default model's GGUF with
every tensor dequantized (gguf.quants) to F16 (matrices) or F32 (vectors).
Its weights therefore lie on the original Q4_1/Q8_0 grids, which flatters
re-quantizing to Q4_1 (mostly the same grid back); Q8_0 and Q4_0 put them on
grids of their own. Used by tests/reference/test_quantize_accuracy.py (the
short form in `make test`) and bench/quantize_accuracy.py (the full one)."""
import gguf
import numpy as np

from gguf_copy import finish, open_copy
from precision_eval import Compare, forward


def unquantized_copy(src, dst):
    """Writes GGUF file src again at dst with every tensor dequantized: 2-D
    ones as F16, the rest as F32; the metadata as it was."""
    r, w = open_copy(src, dst)
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape([int(d) for d in reversed(t.shape)])  # GGUF dims are innermost first
        w.add_tensor(t.name, x.astype(np.float16) if x.ndim == 2 else x)
    finish(w)


def evaluate(forward_tool, model, ids, ctx, types, tmp_dir, threads=0, log=print):
    """{type: Compare summary of the model with --quantize type against the
    model as stored}, over ids in windows of ctx tokens."""
    cmp = {t: Compare() for t in types}
    for w0 in range(0, len(ids) - 1, ctx):
        win = ids[w0:w0 + ctx]
        if len(win) < 2:
            break
        base, _ = forward(forward_tool, model, win, "exact", tmp_dir, threads)
        for t in types:
            cand, _ = forward(forward_tool, model, win, "exact", tmp_dir, threads, quantize=t)
            cmp[t].add(win, base, cand)
        log(f"window at token {w0}: {len(win)} tokens")
    return {t: c.summary() for t, c in cmp.items()}
