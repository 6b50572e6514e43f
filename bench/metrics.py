"""Serving-benchmark metrics with the definitions `vllm bench serve` uses.

Pure functions over per-request timings; no I/O. docs/benchmarks/methodology.md
writes the definitions down; tests/integration/test_bench_metrics.py checks
them against hand computations.

Per request (RequestResult), all times in seconds from time.perf_counter():
  start      when the request was sent
  ttft       first chunk carrying a choice (even an empty one) - start
  itl        gaps between consecutive choice chunks (len = chunks - 1)
  latency    last choice chunk - start (E2E latency; the trailing usage-only
             chunk and [DONE] are not counted)
  output_tokens  the server's usage.completion_tokens when it sent one, else
             the generated text re-tokenized (vLLM's fallback), else 1
Per run (compute_metrics), over successful requests:
  tpot       (latency - ttft) / (output_tokens - 1), for requests with more
             than one output token
  request_throughput = completed / duration
  output_throughput  = sum(output_tokens) / duration
  total_token_throughput = (sum(prompt_len) + sum(output_tokens)) / duration
  where duration is the wall time of the measured phase (first send to last
  completion, warm-up excluded). Percentiles are numpy's linear interpolation.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterable, Sequence

import numpy as np

DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


@dataclasses.dataclass
class RequestResult:
    """What the load generator recorded for one request."""

    prompt_len: int                 # prompt tokens (the server's usage, else the workload's)
    expected_output_len: int        # max_tokens asked for
    success: bool = False
    start: float = 0.0              # perf_counter() at send
    ttft: float = 0.0               # seconds
    itl: list[float] = dataclasses.field(default_factory=list)  # seconds, one per later chunk
    latency: float = 0.0            # seconds, E2E
    output_tokens: int = 0          # server usage.completion_tokens; 0 if it sent none
    generated_text: str = ""
    chunks: int = 0                 # chunks with a choice
    usage_prompt_tokens: int | None = None
    finish_reason: str | None = None
    error: str = ""


def count_output_tokens(r: RequestResult, tokenize: Callable[[str], int] | None) -> int:
    """Output tokens of one successful request: server usage, else tokenizer
    count of the generated text, else 1 (vLLM's order)."""
    if r.output_tokens:
        return r.output_tokens
    if tokenize is None:
        return 1
    return tokenize(r.generated_text)


def _stats(values_s: Sequence[float], percentiles: Iterable[float]) -> dict:
    """mean/median/std/percentiles in milliseconds; zeros for no values (vLLM's `or 0`)."""
    arr = np.asarray(values_s if len(values_s) else [0.0], dtype=np.float64) * 1000.0
    out = {
        "mean": float(np.mean(arr)),
        "median": float(np.median(arr)),
        "std": float(np.std(arr)),
        "n": len(values_s),
    }
    for p in percentiles:
        out[f"p{_pkey(p)}"] = float(np.percentile(arr, p))
    return out


def _pkey(p: float) -> str:
    return str(int(p)) if float(p).is_integer() else str(p)


def compute_metrics(results: Sequence[RequestResult], duration_s: float,
                    tokenize: Callable[[str], int] | None = None,
                    percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> dict:
    """Aggregate one run (one workload at one concurrency) the way vLLM's
    calculate_metrics does. duration_s must be > 0."""
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration must be a positive number of seconds, got {duration_s!r}")
    percentiles = tuple(percentiles)
    ttfts, tpots, itls, e2els, out_lens = [], [], [], [], []
    total_input = completed = failed = 0
    for r in results:
        if not r.success:
            failed += 1
            continue
        n = count_output_tokens(r, tokenize)
        out_lens.append(n)
        total_input += r.prompt_len
        if n > 1:
            tpots.append((r.latency - r.ttft) / (n - 1))
        itls.extend(r.itl)
        ttfts.append(r.ttft)
        e2els.append(r.latency)
        completed += 1
    total_output = int(sum(out_lens))
    return {
        "completed": completed,
        "failed": failed,
        "duration_s": duration_s,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": completed / duration_s,
        "output_throughput": total_output / duration_s,
        "total_token_throughput": (total_input + total_output) / duration_s,
        "ttft_ms": _stats(ttfts, percentiles),
        "tpot_ms": _stats(tpots, percentiles),
        "itl_ms": _stats(itls, percentiles),
        "e2el_ms": _stats(e2els, percentiles),
        "output_lens": out_lens,
    }


def sanity_problems(results: Sequence[RequestResult], tokenize: Callable[[str], int] | None = None) -> list[str]:
    """Checks a run's raw records for things that would make its numbers
    meaningless; returns readable problems (empty when all is well)."""
    problems = []
    for i, r in enumerate(results):
        if not r.success:
            problems.append(f"request {i}: failed: {r.error[:200]}")
            continue
        if not 0 < r.ttft <= r.latency:
            problems.append(f"request {i}: ttft {r.ttft:.6f}s not in (0, latency {r.latency:.6f}s]")
        if any(g < 0 for g in r.itl):
            problems.append(f"request {i}: negative inter-chunk gap")
        if abs(r.ttft + sum(r.itl) - r.latency) > 1e-6:
            problems.append(f"request {i}: ttft + sum(itl) != latency")
        n = count_output_tokens(r, tokenize)
        if n != r.expected_output_len:
            problems.append(f"request {i}: {n} output tokens, asked for {r.expected_output_len}"
                            f" (finish_reason {r.finish_reason})")
    return problems
