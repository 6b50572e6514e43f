#!/usr/bin/env python3
"""CPU decode at real model sizes, tram against llama.cpp's llama-server in
one run (`make bench-cpu`; docs/benchmarks/cpu-decode.md).

1. Models. Random-weight GGUF files of real shapes, written here into
   build-bench/shapes/ (git-ignored): scripts/make-random-llama.py writes
   the shape in Q8_0, llama.cpp's llama-quantize (built by
   scripts/build-llamacpp.sh) requantizes it to the other types (Q4_0,
   Q4_K_M, Q5_K_M, Q6_K: llama.cpp's own per-tensor mixes). Shapes:
   smollm2-1.7b, llama3.2-3b, llama3.1-8b (8.5 GB at Q8_0). Plus real
   models given with --model (the default model, Gemma 3 270M).
2. For each model and thread count: a fresh server of each kind (tram
   first, then llama.cpp; the same --threads, one slot per stream), one
   warm-up request, then --requests streaming completions per stream count
   (--streams, closed loop) of --prompt random token ids and --tokens
   output tokens (ignore_eos, greedy): TPOT = (last chunk - first chunk) /
   (chunks - 1) per request, mean; TTFT = first chunk - send, mean (with
   --prompt 512 --streams 1, the prefill time of a 512-token prompt);
   output tokens/s over the run.
3. The bound: bench/membw's read bandwidth with the same threads, in the
   same run, right after each model; weight bytes per decoded token from
   the file (every tensor but the token embedding, plus one embedding row,
   the output projection counted once when tied).
4. Writes --out (markdown: the tables of cpu-decode.md) and --json.

    .venv/bin/python bench/cpu_decode.py --shapes smollm2-1.7b --types Q4_0,Q8_0 --threads 1,2
"""
import argparse
import asyncio
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as S  # noqa: E402

ROOT = S.ROOT
SHAPES = {  # make-random-llama.py options: llama.cpp's shapes of these models
    "smollm2-1.7b": ["--layers", "24", "--dim", "2048", "--heads", "32", "--kv-heads", "32", "--ff", "8192",
                     "--vocab", "49152", "--ctx", "8192", "--rope-base", "130000"],
    "llama3.2-3b": ["--layers", "28", "--dim", "3072", "--heads", "24", "--kv-heads", "8", "--ff", "8192",
                    "--vocab", "128256"],
    "llama3.1-8b": [],  # the script's default shape
}


def make_models(shapes, types, folder, quantize_bin, log):
    out = []
    folder.mkdir(parents=True, exist_ok=True)
    for shape in shapes:
        base = folder / f"{shape}-Q8_0.gguf"
        if not base.exists():
            log(f"writing {base}")
            subprocess.run([sys.executable, str(ROOT / "scripts/make-random-llama.py"), str(base),
                            *SHAPES[shape], "--no-rope-scaling", "--jobs", "2"], check=True)
        for t in types:
            path = base if t == "Q8_0" else folder / f"{shape}-{t}.gguf"
            if not path.exists():
                log(f"quantizing {path}")
                subprocess.run([str(quantize_bin), "--allow-requantize", str(base), str(path), t], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out.append((f"{shape} {t} (random)", path))
    return out


def step_bytes(path):
    """Weight bytes one decode step reads (see the module doc)."""
    import gguf
    r = gguf.GGUFReader(str(path))
    total, emb, tied = 0, None, not any(t.name == "output.weight" for t in r.tensors)
    for t in r.tensors:
        if t.name == "token_embd.weight":
            emb = t
            continue
        total += int(t.n_bytes)
    row = int(emb.n_bytes) // int(emb.shape[1])
    return total + row + (int(emb.n_bytes) if tied else 0)


def membw(build, threads):
    out = subprocess.run([str(build / "bench/membw"), "-t", str(threads), "-m", "256"], capture_output=True,
                         text=True).stdout
    m = re.search(r"read: ([\d.]+) GB/s", out)
    return float(m[1]) if m else 0.0


async def one_request(client, url, prompt, tokens):
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True}
    times = [time.perf_counter()]  # the send time, then one per chunk with text
    # one connection per request (as bench/loadgen.py): a keep-alive request sent while the server closes
    # the connection fails now and then (docs/benchmarks/methodology.md)
    async with client.stream("POST", url, json=body, timeout=3600, headers={"Connection": "close"}) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                if d.get("choices") and d["choices"][0].get("text", "") != "":
                    times.append(time.perf_counter())
    return times


async def run_streams(port, streams, requests, vocab, plen, tokens, seed):
    url = f"http://127.0.0.1:{port}/v1/completions"
    rng = random.Random(seed)
    todo = [[rng.randrange(300, vocab - 300) for _ in range(plen)] for _ in range(requests)]
    res = []
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=streams + 2)) as client:
        await one_request(client, url, todo[0][:16], 4)  # warm-up

        async def worker():
            while todo:
                p = todo.pop()
                res.append(await one_request(client, url, p, tokens))
        t0 = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(streams)])
        wall = time.perf_counter() - t0
    ttfts = [t[1] - t[0] for t in res if len(t) > 1]
    res = [t[1:] for t in res]
    tpots = [(t[-1] - t[0]) / (len(t) - 1) for t in res if len(t) > 1]
    gaps = sorted(b - a for t in res for a, b in zip(t, t[1:]))
    pick = lambda q: gaps[min(len(gaps) - 1, int(q * len(gaps)))] if gaps else 0  # noqa: E731
    return {"tpot_ms": 1e3 * sum(tpots) / len(tpots), "ttft_ms": 1e3 * sum(ttfts) / max(1, len(ttfts)),
            "tok_s": sum(len(t) for t in res) / wall,
            "itl_p50_ms": 1e3 * pick(0.5), "itl_p99_ms": 1e3 * pick(0.99), "requests": len(res)}


def vocab_size(path):
    import gguf
    r = gguf.GGUFReader(str(path))
    return len(r.fields["tokenizer.ggml.tokens"].data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="smollm2-1.7b,llama3.2-3b,llama3.1-8b")
    ap.add_argument("--types", default="Q4_0,Q4_K_M,Q5_K_M,Q6_K,Q8_0")
    ap.add_argument("--model", action="append", default=[], help="a real model too (repeatable)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--streams", default="1", help="stream counts, e.g. 1,8,32")
    ap.add_argument("--requests", type=int, default=3, help="requests per stream count (at least the streams)")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--tram-args", default="")
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--folder", default=str(ROOT / "build-bench/shapes"))
    ap.add_argument("--out", default=str(ROOT / "build-bench/cpu-decode.md"))
    ap.add_argument("--json", default=str(ROOT / "build-bench/cpu-decode.json"))
    a = ap.parse_args()
    log = lambda m: print(f"cpu_decode: {m}", file=sys.stderr, flush=True)  # noqa: E731
    build = pathlib.Path(a.build_dir)
    models = [(pathlib.Path(m).name, pathlib.Path(m)) for m in a.model]
    shapes = [s for s in a.shapes.split(",") if s]
    types = [t for t in a.types.split(",") if t]
    if shapes:
        models += make_models(shapes, types, pathlib.Path(a.folder), S.PEER_DIR / "bin/llama-quantize", log)
    kinds = S.kinds(str(build / "tram"), str(S.PEER_DIR / "bin/llama-server"), a.tram_args, "")
    logdir = ROOT / "build-bench/cpu-logs"
    logdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, path in models:
        nbytes, vocab = step_bytes(path), vocab_size(path)
        for threads in [int(x) for x in a.threads.split(",")]:
            for streams in [int(x) for x in a.streams.split(",")]:
                r = {"model": name, "bytes": nbytes, "threads": threads, "streams": streams}
                for kind in ("tram", "llamacpp"):
                    ctx = (a.prompt + a.tokens + 255) // 256 * 256
                    with S.start(kinds[kind], str(path), threads, streams, ctx, logdir, f"{threads}t") as srv:
                        r[kind] = asyncio.run(run_streams(srv.port, streams, max(a.requests, streams), vocab,
                                                          a.prompt, a.tokens, 7))
                    log(f"{name} {threads}t {streams}s {kind}: {r[kind]}")
                r["read_gbs"] = membw(build, threads)
                r["load"] = os.getloadavg()[0]
                rows.append(r)
    lines = ["| model | weights / token | threads | streams | tram TPOT ms | llama.cpp TPOT ms | tram ÷ llama.cpp "
             "(1/TPOT) | tram tok/s | llama.cpp tok/s | tram ITL p99 / p50 ms | llama.cpp ITL p99 / p50 ms | read "
             "GB/s | tram share of read bw | llama.cpp share | tram TTFT ms | llama.cpp TTFT ms | load |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "---: |"]
    for r in rows:
        t, l, bw = r["tram"], r["llamacpp"], r["read_gbs"]
        share = lambda x: f"{100 * r['bytes'] / (x['tpot_ms'] / 1e3) / 1e9 / bw:.0f} %" if bw and r["streams"] == 1 else "—"  # noqa: E731,E501
        lines.append(f"| {r['model']} | {r['bytes'] / 1e9:.2f} GB | {r['threads']} | {r['streams']} | {t['tpot_ms']:.1f} | "
                     f"{l['tpot_ms']:.1f} | {l['tpot_ms'] / t['tpot_ms']:.2f}× | {t['tok_s']:.1f} | {l['tok_s']:.1f} | "
                     f"{t['itl_p99_ms']:.0f} / {t['itl_p50_ms']:.0f} | {l['itl_p99_ms']:.0f} / {l['itl_p50_ms']:.0f} | "
                     f"{bw:.1f} | {share(t)} | {share(l)} | {t['ttft_ms']:.0f} | {l['ttft_ms']:.0f} | {r['load']:.1f} |")
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
