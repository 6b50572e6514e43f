"""Physical limits the serving numbers are held against.

Model side (read from the GGUF with the `gguf` package):
  weight_bytes   bytes of weights one decode step must read: every tensor
                 except the token embedding, plus the embedding table again
                 when the output projection is tied to it, plus one embedding
                 row (96.4 MB for the default model, docs/model.md). KV-cache
                 reads are left out, so the bounds below are upper bounds.
  flops(ctx)     FLOPs to produce one token at context position ctx: 2 per
                 weight of every matrix (q, k, v, o, gate, up, down per layer,
                 and the output projection) plus attention, 4 * layers *
                 heads * head_dim * ctx (QK^T and AV).
Machine side (the C probes built by `make`, run in the same script):
  build/bench/membw  "read: X GB/s"   -> memory bandwidth
  build/bench/flops  its table row for the servers' thread count -> peak FLOP/s
Bounds (each skipped, with a note, when its probe is missing or fails):
  decode, B streams:  output tokens/s <= min(B * BW / weight_bytes,
                      PEAK * O / (F * flops(P - F / 2) + O * flops(P + O / 2)))
                      for prompts of P tokens, F of them not in a prefix
                      cache (F = P but for the shared-prefix workload),
                      and outputs of O tokens
  step time (ITL):    >= max(weight_bytes / BW, B * flops(ctx) / PEAK)
  prefill:            tokens/s <= PEAK / flops(P / 2); TTFT >= P * flops(P / 2) / PEAK
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess


@dataclasses.dataclass(frozen=True)
class ModelCost:
    weight_bytes: int
    matmul_weights: int        # weights multiplied per token
    layers: int
    heads: int
    head_dim: int

    def flops(self, ctx: float) -> float:
        """FLOPs for one token attending to ctx positions."""
        return 2.0 * self.matmul_weights + 4.0 * self.layers * self.heads * self.head_dim * ctx


def model_cost(model_path: str, cache_dir: str | os.PathLike | None = None) -> ModelCost:
    """The model's per-token costs; cached as JSON under cache_dir when given
    (reading a GGUF's metadata takes seconds)."""
    from workloads import cache_key

    cache = pathlib.Path(cache_dir) / f"cost-{cache_key(model_path)}.json" if cache_dir else None
    if cache is not None and cache.exists():
        return ModelCost(**json.loads(cache.read_text()))
    cost = _read_cost(model_path)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(dataclasses.asdict(cost)))
    return cost


def _read_cost(model_path: str) -> ModelCost:
    import gguf

    r = gguf.GGUFReader(model_path)
    arch = r.fields["general.architecture"].contents()

    def meta(key):
        return int(r.fields[f"{arch}.{key}"].contents())

    tensors = {t.name: t for t in r.tensors}
    emb = tensors.get("token_embd.weight")
    if emb is None:
        raise RuntimeError(f"{model_path}: no token_embd.weight")
    tied = "output.weight" not in tensors
    rest = [t for n, t in tensors.items() if n != "token_embd.weight"]
    vocab = int(emb.shape[-1])
    weight_bytes = sum(int(t.n_bytes) for t in rest) + (int(emb.n_bytes) if tied else 0) + int(emb.n_bytes) // vocab
    matmul = sum(int(t.n_elements) for t in rest if len(t.shape) == 2) + (int(emb.n_elements) if tied else 0)
    heads = meta("attention.head_count")
    return ModelCost(weight_bytes, matmul, meta("block_count"), heads, meta("embedding_length") // heads)


@dataclasses.dataclass
class Machine:
    bandwidth_gbs: float | None      # GB/s (1e9 bytes)
    peak_gflops: float | None
    notes: list[str]
    outputs: dict[str, str]          # probe name -> what it printed


def _run(cmd: list[str], timeout_s: float) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        return p.returncode, (p.stdout + p.stderr).strip()
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:.0f}s"
    except OSError as e:
        return 127, str(e)


def _rel(path: pathlib.Path) -> str:
    root = pathlib.Path(__file__).resolve().parents[1]
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def probe_machine(build_dir: pathlib.Path, threads: int, timeout_s: float = 120.0) -> Machine:
    """Runs build/bench/membw and build/bench/flops when they exist."""
    notes, outputs = [], {}
    bw = peak = None
    membw = build_dir / "bench" / "membw"
    if membw.is_file():
        rc, out = _run([str(membw), "-t", str(threads)], timeout_s)
        outputs["membw"] = out
        m = re.search(r"^read:\s*([0-9.]+)\s*GB/s", out, re.M)
        if rc == 0 and m:
            bw = float(m.group(1))
        else:
            notes.append(f"{_rel(membw)} failed or printed no 'read: X GB/s' (status {rc}): bandwidth bounds skipped")
    else:
        notes.append(f"{_rel(membw)} is not built (bench/membw.c not on this branch yet): bandwidth bounds skipped")
    flops = build_dir / "bench" / "flops"
    if flops.is_file():
        rc, out = _run([str(flops), "-t", str(threads)], timeout_s)
        outputs["flops"] = out
        peak = parse_flops(out, threads) if rc == 0 else None
        if peak is None:
            notes.append(f"{_rel(flops)} failed or printed no GFLOP/s table (status {rc}): compute bounds skipped")
    else:
        notes.append(f"{_rel(flops)} is not built (bench/flops.c not on this branch yet): compute bounds skipped")
    return Machine(bw, peak, notes, outputs)


def parse_flops(out: str, threads: int) -> float | None:
    """Peak GFLOP/s from build/bench/flops' output: its table row for
    `threads` ("threads  GFLOP/s  GFLOP/s/thread"), else the best row, else
    the largest "X GFLOP/s" figure; None when there is none."""
    rows = {int(t): float(g) for t, g in re.findall(r"^\s*(\d+)\s+([0-9.]+)\s+[0-9.]+\s*$", out, re.M)}
    if rows:
        return rows.get(threads, max(rows.values()))
    vals = [float(v) for v in re.findall(r"([0-9.]+)\s*GFLOP/s", out)]
    return max(vals) if vals else None


def decode_bound(cost: ModelCost, mach: Machine, streams: float, prompt_len: float,
                 output_len: float, cached: float = 0) -> float | None:
    """Upper bound on aggregate output tokens/s with `streams` sequences of
    prompt_len + output_len tokens: the bandwidth cap (each step reads the
    weights once and yields one token per stream) and the compute cap (each
    output token also carries its share of its prompt's prefill FLOPs; the
    first `cached` prompt tokens are taken as served from a prefix cache)."""
    caps = []
    if mach.bandwidth_gbs:
        caps.append(streams * mach.bandwidth_gbs * 1e9 / cost.weight_bytes)
    if mach.peak_gflops and output_len > 0:
        fresh = max(0.0, prompt_len - cached)
        work = fresh * cost.flops(prompt_len - fresh / 2) + output_len * cost.flops(prompt_len + output_len / 2)
        caps.append(mach.peak_gflops * 1e9 * output_len / work)
    return min(caps) if caps else None


def step_time_bound(cost: ModelCost, mach: Machine, streams: int, ctx: float) -> float | None:
    """Lower bound on one decode step (= inter-token latency), seconds."""
    parts = []
    if mach.bandwidth_gbs:
        parts.append(cost.weight_bytes / (mach.bandwidth_gbs * 1e9))
    if mach.peak_gflops:
        parts.append(streams * cost.flops(ctx) / (mach.peak_gflops * 1e9))
    return max(parts) if parts else None


def prefill_time_bound(cost: ModelCost, mach: Machine, prompt_len: int) -> float | None:
    """Lower bound on the prefill of one prompt (= TTFT at concurrency 1), seconds."""
    parts = []
    if mach.peak_gflops:
        parts.append(prompt_len * cost.flops(prompt_len / 2) / (mach.peak_gflops * 1e9))
    if mach.bandwidth_gbs:
        parts.append(cost.weight_bytes / (mach.bandwidth_gbs * 1e9))
    return max(parts) if parts else None
