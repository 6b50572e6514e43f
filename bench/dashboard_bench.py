"""What the live dashboard costs the engine: step time with 0, 1 and 8
dashboards open while 32 streams generate (docs/benchmarks/dashboard.md).

One tram (--max-seqs 32) serves 32 closed-loop streaming completions
(ignore_eos, max_tokens each) for the whole run. The run alternates phases of
`--phase` seconds with 0, 1 and 8 dashboard clients reading
/dashboard/events (each parses every snapshot, as the page does), `--rounds`
times, so slow drifts of a shared machine spread over every setting. Per
phase, from /metrics deltas: the mean inter-token latency (at 32 running
decodes every step yields one token per stream: the mean ITL is the mean
step time as the streams see it, loop work included) and output tokens/s;
from the stream itself: the engine thread's time building snapshots over its
busy time; and tram's CPU time (all threads, /proc) per generated token,
less noisy than wall time on a shared machine. Prints a markdown table.

  .venv/bin/python bench/dashboard_bench.py [--tram-bin build/tram] [--threads 2] [--phase 20] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import servers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
STREAMS = 32


async def metrics(client: httpx.AsyncClient) -> dict:
    out = {}
    for fam in text_string_to_metric_families((await client.get("/metrics")).text):
        for s in fam.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name")))] = s.value
    return out


def val(m: dict, name: str, **labels) -> float:
    return m[(name, tuple(sorted(labels.items())))]


async def stream_loop(client: httpx.AsyncClient, i: int, max_tokens: int, stop: asyncio.Event) -> None:
    body = {"prompt": f"Stream {i}: tell a long story about a tram that runs through a city at night.",
            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}
    while not stop.is_set():
        async with client.stream("POST", "/v1/completions", json=body) as r:
            async for _ in r.aiter_lines():
                pass


async def dashboard(client: httpx.AsyncClient, stop: asyncio.Event, snaps: list) -> None:
    async with client.stream("GET", "/dashboard/events") as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                snaps.append(json.loads(line[6:]))  # parsed, as the page does
            if stop.is_set():
                return


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds (/proc/PID/stat), all threads."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(base_url: str, pid: int, phase_s: float, rounds: int, max_tokens: int) -> list[dict]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:
        stop_streams = asyncio.Event()
        streams = [asyncio.create_task(stream_loop(client, i, max_tokens, stop_streams)) for i in range(STREAMS)]
        while val(await metrics(client), "vllm:num_requests_running") < STREAMS:
            await asyncio.sleep(0.2)
        await asyncio.sleep(phase_s / 2)  # warm up
        rows = []
        for r in range(rounds):
            for n_dash in (0, 1, 8):
                stop = asyncio.Event()
                snaps: list[list] = [[] for _ in range(n_dash)]
                dashes = [asyncio.create_task(dashboard(client, stop, snaps[k])) for k in range(n_dash)]
                await asyncio.sleep(1.0)  # the dashboards connect
                m0, t0, c0 = await metrics(client), time.monotonic(), cpu_s(pid)
                await asyncio.sleep(phase_s)
                m1, t1, c1 = await metrics(client), time.monotonic(), cpu_s(pid)
                stop.set()
                for d in dashes:
                    d.cancel()
                await asyncio.gather(*dashes, return_exceptions=True)
                itl_n = val(m1, "vllm:inter_token_latency_seconds_count") - val(m0, "vllm:inter_token_latency_seconds_count")
                itl_s = val(m1, "vllm:inter_token_latency_seconds_sum") - val(m0, "vllm:inter_token_latency_seconds_sum")
                gen = val(m1, "vllm:generation_tokens_total") - val(m0, "vllm:generation_tokens_total")
                row = {"round": r, "dashboards": n_dash, "itl_ms": 1e3 * itl_s / itl_n, "tok_s": gen / (t1 - t0),
                       "cpu_ms_tok": 1e3 * (c1 - c0) / gen}
                if n_dash:
                    s = snaps[0]
                    a, b = s[1], s[-1]  # the first one may be an older cached snapshot
                    busy = b["totals"]["busy_ms"] - a["totals"]["busy_ms"]
                    build = b["totals"]["snapshot_build_ms"] - a["totals"]["snapshot_build_ms"]
                    row["build_share"] = build / busy if busy > 0 else 0
                    row["build_us"] = 1e3 * build / max(1, b["totals"]["snapshot_builds"] - a["totals"]["snapshot_builds"])
                    row["json_kib"] = statistics.mean(len(json.dumps(x)) for x in s) / 1024
                    row["loop_share"] = (b["info"]["loop_ms"] - a["info"]["loop_ms"]) / (b["time_ms"] - a["time_ms"])
                rows.append(row)
                print(f"round {r} dashboards {n_dash}: ITL {row['itl_ms']:.2f} ms, {row['tok_s']:.1f} tok/s, "
                      f"tram CPU {row['cpu_ms_tok']:.2f} ms/token"
                      + (f", snapshot builds {100 * row['build_share']:.3f}% of engine busy time"
                         f" ({row['build_us']:.0f} us each), loop {100 * row['loop_share']:.3f}% of a core"
                         if n_dash else ""), flush=True)
        stop_streams.set()
        for t in streams:
            t.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        return rows


def table(rows: list[dict]) -> str:
    base = statistics.mean(r["itl_ms"] for r in rows if r["dashboards"] == 0)
    cpu0 = statistics.mean(r["cpu_ms_tok"] for r in rows if r["dashboards"] == 0)
    out = ["| dashboards | mean ITL (step time), ms | vs 0 | output tok/s | tram CPU, ms/token | vs 0 "
           "| snapshot builds, % of engine busy time | µs per build | snapshot JSON, KiB | loop (JSON, writes), % of a core |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in (0, 1, 8):
        rs = [r for r in rows if r["dashboards"] == n]
        itl = statistics.mean(r["itl_ms"] for r in rs)
        spread = f" ({min(r['itl_ms'] for r in rs):.2f}–{max(r['itl_ms'] for r in rs):.2f})"
        extra = ("| – | – | – | –" if n == 0 else
                 f"| {100 * statistics.mean(r['build_share'] for r in rs):.3f} | "
                 f"{statistics.mean(r['build_us'] for r in rs):.0f} | {statistics.mean(r['json_kib'] for r in rs):.1f} | "
                 f"{100 * statistics.mean(r['loop_share'] for r in rs):.3f}")
        cpu = statistics.mean(r["cpu_ms_tok"] for r in rs)
        out.append(f"| {n} | {itl:.2f}{spread} | {100 * (itl / base - 1):+.1f} % | "
                   f"{statistics.mean(r['tok_s'] for r in rs):.1f} | {cpu:.2f} | {100 * (cpu / cpu0 - 1):+.1f} % {extra} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tram-bin", default=str(ROOT / "build" / "tram"))
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--phase", type=float, default=20.0, help="seconds per phase")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args()
    kind = servers.kinds(args.tram_bin, "", tram_args="--dashboard on")["tram"]
    with tempfile.TemporaryDirectory() as logdir:
        srv = servers.start(kind, args.model, args.threads, STREAMS, 512, pathlib.Path(logdir), "dashboard")
        try:
            rows = asyncio.run(run(srv.base_url, srv.proc.pid, args.phase, args.rounds, args.max_tokens))
        finally:
            srv.stop()
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
