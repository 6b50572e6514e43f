"""How `--precision fast` is judged against `exact`, the way the field judges
activation quantization: perplexity of both paths, KL divergence of the fast
path's next-token distribution from the exact one's per token (mean and
p99), top-1 agreement; and the noise floor beside it (the exact path against
the float64 reference model, llama_ref.py, on a prefix).

Used by the short gate in `make test` (test_precision.py) and by the full one
(bench/accuracy.py, `make bench-accuracy`). Text: real English prose and code
the project did not write, shipped by Debian packages (TEXT_SOURCES).

Windows: the token stream is cut into non-overlapping windows of `ctx`
tokens, each run from an empty cache (tests/tools/forward.c, the engine's
path); in each window every position but the last predicts the next token
and is scored."""
import json
import pathlib
import subprocess

import numpy as np

# The evaluation text, in this order: the GPL 3 (prose, package base-files)
# and Python's argparse module (code and docstrings, package
# libpython3.11-minimal).
TEXT_SOURCES = ["/usr/share/common-licenses/GPL-3", "/usr/lib/python3.11/argparse.py"]

GATES = {"ppl_rel_diff_max": 0.005, "kld_mean_max": 1e-3, "top1_min": 0.98, "matmul_nmse_max": 5e-4}


def read_text(sources=TEXT_SOURCES):
    return "".join(pathlib.Path(p).read_text(encoding="utf-8") for p in sources)


def tokenize(tokenize_tool, model, text):
    res = subprocess.run([str(tokenize_tool), "-m", str(model)], input=text.encode(), capture_output=True, check=True)
    return json.loads(res.stdout)


def forward(forward_tool, model, ids, precision, tmp_dir, threads=0, nmse=False, quantize=None):
    """Logits [len(ids), vocab] f32 of one sequence from an empty cache, and the tool's info line.
    quantize: a GGML type name the F32/F16/BF16 weights are quantized to at load."""
    tmp_dir = pathlib.Path(tmp_dir)
    out = tmp_dir / f"logits-{precision}.f32"
    plan = {"model": str(model), "seqs": [list(ids)], "out": str(out), "precision": precision, "threads": threads,
            "matmul_nmse": nmse}
    if quantize:
        plan["quantize"] = quantize
    (tmp_dir / "plan.json").write_text(json.dumps(plan))
    res = subprocess.run([str(forward_tool), str(tmp_dir / "plan.json")], capture_output=True, text=True,
                         timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"forward failed: {res.stderr}")
    info = json.loads(res.stdout)
    logits = np.fromfile(out, dtype=np.float32).reshape(info["rows"], info["n_vocab"])
    out.unlink()
    return logits, info


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


class Compare:
    """Accumulates, window by window, a candidate's logits against a base's
    over the same tokens: negative log-likelihoods of both, KL(base ||
    candidate) per scored position, top-1 agreement."""

    def __init__(self):
        self.nll_base, self.nll_cand, self.kld, self.agree = [], [], [], []

    def add(self, ids, base, cand, rows=256):
        ids = np.asarray(ids)
        for r0 in range(0, len(ids) - 1, rows):  # float64 in slices: bounded memory
            r1 = min(r0 + rows, len(ids) - 1)
            lb, lc = log_softmax(base[r0:r1]), log_softmax(cand[r0:r1])
            nxt = ids[r0 + 1:r1 + 1]
            idx = np.arange(r1 - r0)
            self.nll_base.append(-lb[idx, nxt])
            self.nll_cand.append(-lc[idx, nxt])
            self.kld.append(np.maximum((np.exp(lb) * (lb - lc)).sum(axis=1), 0.0))
            self.agree.append(lb.argmax(axis=1) == lc.argmax(axis=1))

    def summary(self):
        nb, nc = np.concatenate(self.nll_base), np.concatenate(self.nll_cand)
        kld, agree = np.concatenate(self.kld), np.concatenate(self.agree)
        ppl_b, ppl_c = float(np.exp(nb.mean())), float(np.exp(nc.mean()))
        return {"tokens": int(nb.size), "ppl_base": ppl_b, "ppl_cand": ppl_c,
                "ppl_rel_diff": abs(ppl_c - ppl_b) / ppl_b, "kld_mean": float(kld.mean()),
                "kld_p99": float(np.percentile(kld, 99)), "kld_max": float(kld.max()),
                "top1": float(agree.mean())}


def gate_failures(fast_vs_exact, matmul_nmse_max):
    """The gates the fast path misses, as sentences (empty: all passed)."""
    s, g, bad = fast_vs_exact, GATES, []
    if not s["ppl_rel_diff"] <= g["ppl_rel_diff_max"]:
        bad.append(f"perplexity differs by {100 * s['ppl_rel_diff']:.3f} % > {100 * g['ppl_rel_diff_max']} %")
    if not s["kld_mean"] <= g["kld_mean_max"]:
        bad.append(f"mean KLD {s['kld_mean']:.3g} > {g['kld_mean_max']}")
    if not s["top1"] >= g["top1_min"]:
        bad.append(f"top-1 agreement {100 * s['top1']:.2f} % < {100 * g['top1_min']} %")
    if not matmul_nmse_max <= g["matmul_nmse_max"]:
        bad.append(f"a matmul's normalized MSE {matmul_nmse_max:.3g} > {g['matmul_nmse_max']}")
    return bad


def evaluate(tools, model, ids, ctx, tmp_dir, threads=0, ref=None, ref_prefix=0, log=print):
    """Runs both precisions over ids in windows of ctx tokens. Returns
    {"fast_vs_exact": summary, "matmul_nmse": {"max", "mean"}, and with a
    float64 reference model `ref` (LlamaRef) and ref_prefix > 0, the noise
    floor on the first window's first ref_prefix tokens: "exact_vs_ref",
    "fast_vs_ref"}."""
    fe = Compare()
    nmse_max, nmse_sum, nmse_calls = 0.0, 0.0, 0
    first = None
    for w0 in range(0, len(ids) - 1, ctx):
        win = ids[w0:w0 + ctx]
        if len(win) < 2:
            break
        exact, info = forward(tools("forward"), model, win, "exact", tmp_dir, threads, nmse=True)
        fast, _ = forward(tools("forward"), model, win, "fast", tmp_dir, threads)
        fe.add(win, exact, fast)
        m = info["matmul_nmse"]
        nmse_max = max(nmse_max, m["max"])
        nmse_sum += m["mean"] * m["calls"]
        nmse_calls += m["calls"]
        if first is None:
            first = (win, exact, fast)
        log(f"window at token {w0}: {len(win)} tokens, running {fe.summary()}")
    res = {"fast_vs_exact": fe.summary(),
           "matmul_nmse": {"max": nmse_max, "mean": nmse_sum / max(nmse_calls, 1), "calls": nmse_calls}}
    if ref is not None and ref_prefix > 0:
        win, exact, fast = first
        n = min(ref_prefix, len(win))
        want = ref.forward(list(win[:n]))
        for name, got in (("exact_vs_ref", exact), ("fast_vs_ref", fast)):
            c = Compare()
            c.add(win[:n], want, got[:n])
            res[name] = c.summary()
    return res
