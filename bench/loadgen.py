#!/usr/bin/env python3
"""Load generator: streaming OpenAI completions against any compatible server.

Closed loop: `concurrency` clients, each sending its next request as soon as
its previous one finishes, until the run's requests are used up (the same
schedule as `vllm bench serve --max-concurrency N --request-rate inf`). A few
warm-up requests go first and are not measured.

Each request is POST {base}/v1/completions (or /v1/chat/completions) with
stream=true, stream_options.include_usage=true, temperature 0, max_tokens and
ignore_eos=true (so the output length is the one asked for on servers that
honour it; the sanity check reports any that do not). Timings are taken the
way vLLM's request function takes them (bench/metrics.py).

As a program (one server already running):
  bench/loadgen.py --base-url http://127.0.0.1:8080 --model M.gguf \
      --workload fixed:128:128 --concurrency 1,4,16 --requests 16
prints a vLLM-style summary per level and can write the raw records as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, __import__("os").path.dirname(__file__))
import metrics as M  # noqa: E402
import workloads as W  # noqa: E402


class SSEParser:
    """Splits a byte stream into SSE `data:` payloads (str), comments dropped."""

    def __init__(self):
        self.buf = b""

    def feed(self, data: bytes) -> list[str]:
        self.buf = (self.buf + data).replace(b"\r\n", b"\n")   # a CR LF may straddle two reads
        out = []
        while True:
            i = self.buf.find(b"\n\n")
            if i < 0:
                break
            event, self.buf = self.buf[:i], self.buf[i + 2:]
            lines = [ln[5:].lstrip(b" ") for ln in event.split(b"\n") if ln.startswith(b"data:")]
            if lines:
                out.append(b"\n".join(lines).decode("utf-8", "replace"))
        return out


def _payload(req: W.Request, model: str, chat: bool, extra: dict | None) -> dict:
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": req.output_len, "temperature": 0.0, "ignore_eos": True}
    if chat:
        body["messages"] = [{"role": "user", "content": req.prompt}]
    else:
        body["prompt"] = req.prompt
    if extra:
        body.update(extra)
    return body


async def send(client: httpx.AsyncClient, url: str, req: W.Request, model: str,
               chat: bool = False, extra: dict | None = None) -> M.RequestResult:
    """One streaming request, timed like vLLM's async_request_openai_*."""
    res = M.RequestResult(prompt_len=req.prompt_len, expected_output_len=req.output_len)
    text = []
    st = time.perf_counter()
    res.start = st
    last = st
    try:
        async with client.stream("POST", url, json=_payload(req, model, chat, extra)) as resp:
            if resp.status_code != 200:
                body = (await resp.aread())[:300].decode("utf-8", "replace")
                res.error = f"HTTP {resp.status_code}: {body}"
                return res
            parser = SSEParser()
            async for data in resp.aiter_raw():
                for msg in parser.feed(data):
                    if msg == "[DONE]":
                        continue
                    obj = json.loads(msg)
                    if "error" in obj:
                        res.error = f"stream error: {json.dumps(obj['error'])[:300]}"
                        return res
                    choices = obj.get("choices")
                    if choices:
                        now = time.perf_counter()
                        if res.chunks == 0:
                            res.ttft = now - st
                        else:
                            res.itl.append(now - last)
                        last = now
                        res.chunks += 1
                        c = choices[0]
                        piece = (c.get("delta") or {}).get("content") if chat else c.get("text")
                        text.append(piece or "")
                        if c.get("finish_reason"):
                            res.finish_reason = c["finish_reason"]
                    usage = obj.get("usage")
                    if usage:
                        res.output_tokens = int(usage.get("completion_tokens") or 0)
                        if usage.get("prompt_tokens") is not None:
                            res.usage_prompt_tokens = int(usage["prompt_tokens"])
                            res.prompt_len = res.usage_prompt_tokens
        res.generated_text = "".join(text)
        if res.chunks == 0:
            res.error = "no chunk with a choice arrived"
        else:
            res.success = True
            res.latency = last - st
    except (httpx.HTTPError, json.JSONDecodeError, OSError) as e:
        res.error = f"{type(e).__name__}: {e}"
    return res


@dataclasses.dataclass
class Run:
    """One measured run: the records, the wall time of the measured phase."""

    concurrency: int
    results: list[M.RequestResult]
    duration_s: float


async def closed_loop(base_url: str, model: str, reqs: list[W.Request], concurrency: int,
                      warmup: list[W.Request] | None = None, chat: bool = False,
                      extra: dict | None = None, timeout_s: float = 600.0) -> Run:
    """Runs reqs with `concurrency` clients (closed loop) after the warm-up
    requests (sent with the same concurrency, not measured)."""
    url = base_url.rstrip("/") + ("/v1/chat/completions" if chat else "/v1/completions")
    # One TCP connection per request (no keep-alive): a reused connection
    # that the server is closing at that moment would fail a request for a
    # reason that is not the server's speed. A loopback connect is ~0.1 ms.
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits) as client:

        async def drain(queue: list, out: list):
            async def worker():
                while queue:
                    i, r = queue.pop(0)
                    out[i] = await send(client, url, r, model, chat, extra)
            await asyncio.gather(*(worker() for _ in range(min(concurrency, len(queue)))))

        if warmup:
            await drain(list(enumerate(warmup)), [None] * len(warmup))
        out: list = [None] * len(reqs)
        t0 = time.perf_counter()
        await drain(list(enumerate(reqs)), out)
        return Run(concurrency, out, time.perf_counter() - t0)


async def wait_ready(base_url: str, timeout_s: float, proc=None) -> str:
    """Polls GET /health, then /v1/models, until 200; returns the first model
    id. Raises RuntimeError on timeout or when proc (a Popen) exits."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    async with httpx.AsyncClient(timeout=5.0) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"server exited with status {proc.returncode} before it was ready")
            try:
                h = await client.get(base_url.rstrip("/") + "/health")
                if h.status_code in (200, 404):
                    m = await client.get(base_url.rstrip("/") + "/v1/models")
                    if m.status_code == 200:
                        data = m.json().get("data") or []
                        if data:
                            return data[0]["id"]
                    last = f"/v1/models: HTTP {m.status_code}"
                else:
                    last = f"/health: HTTP {h.status_code}"
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}"
            await asyncio.sleep(0.25)
    raise RuntimeError(f"{base_url} not ready after {timeout_s:.0f}s ({last})")


def summary(name: str, m: dict) -> str:
    """vLLM-style text block for one run's metrics."""
    lines = [f"==== {name} ====",
             f"successful / failed requests:  {m['completed']} / {m['failed']}",
             f"duration (s):                  {m['duration_s']:.2f}",
             f"input / output tokens:         {m['total_input_tokens']} / {m['total_output_tokens']}",
             f"request throughput (req/s):    {m['request_throughput']:.2f}",
             f"output token throughput (t/s): {m['output_throughput']:.2f}",
             f"total token throughput (t/s):  {m['total_token_throughput']:.2f}"]
    for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2el_ms", "E2E")):
        s = m[key]
        lines.append(f"{label:5s} ms mean {s['mean']:9.2f}  median {s['median']:9.2f}  p99 {s['p99']:9.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True, help="GGUF file (for the tokenizer)")
    ap.add_argument("--served-model", default="", help="model name to send (default: the server's first)")
    ap.add_argument("--workload", default="fixed:128:128")
    ap.add_argument("--concurrency", default="1")
    ap.add_argument("--requests", type=int, default=16, help="measured requests per level (at least the concurrency)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("--json", default="", help="write raw records and metrics here")
    ap.add_argument("--cache", default="build-bench/cache")
    a = ap.parse_args(argv)
    tok = W.load_tokenizer(a.model, a.cache)
    wl = W.parse(a.workload)
    levels = [int(x) for x in a.concurrency.split(",")]
    served = a.served_model or asyncio.run(wait_ready(a.base_url, 30))
    out = []
    for i, c in enumerate(levels):
        n = max(a.requests, c)
        reqs = wl.requests(tok, n, a.seed + 1000 * i)
        warm = wl.requests(tok, a.warmup, a.seed + 1000 * i + 999) if a.warmup else None
        run = asyncio.run(closed_loop(a.base_url, served, reqs, c, warm, a.chat))
        m = M.compute_metrics(run.results, run.duration_s, tok.count)
        print(summary(f"{wl.name}, concurrency {c}", m))
        for p in M.sanity_problems(run.results, tok.count)[:10]:
            print("  sanity:", p)
        out.append({"concurrency": c, "metrics": m,
                    "results": [dataclasses.asdict(r) for r in run.results]})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"workload": wl.spec, "runs": out}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
