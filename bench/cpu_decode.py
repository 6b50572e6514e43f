#!/usr/bin/env python3
"""CPU decode at real model sizes, tram against llama.cpp's llama-server in
one run (`make bench-cpu`; docs/benchmarks/cpu-decode.md).

1. Models. Random-weight GGUF files of real shapes, written here into
   build-bench/shapes/ (git-ignored): scripts/make-random-llama.py writes
   the shape in Q8_0, llama.cpp's llama-quantize (built by
   scripts/build-llamacpp.sh) requantizes it to the other types (Q4_0,
   Q4_K_M, Q5_K_M, Q6_K: llama.cpp's own per-tensor mixes). Shapes:
   smollm2-1.7b, llama3.2-3b, llama3.1-8b (8.5 GB at Q8_0). Mixtures of
   experts (docs/benchmarks/moe.md): bench/moe_shape.py writes
   qwen3-30b-a3b (7 of its 48 layers, Q8_0; requantized like the dense
   ones) and gpt-oss-20b (10 of its 24 layers, MXFP4 experts, used as
   written). Plus real models given with --model (the default model,
   Gemma 3 270M).
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
   the output projection counted once when tied; of an expert stack
   `*_exps.*`, expert_used_count of its expert_count experts: the active
   weights). Each server's resident set (VmRSS) right after its last
   request, beside the file size.
4. Writes --out (markdown: the tables of cpu-decode.md) and --json.
5. With --perf FOLDER, each tram server is profiled (`perf record -e
   cpu-clock`, from the end of the warm-up to the last token) into
   FOLDER/MODEL-Tt-Ss.data, with `perf report` by symbol beside it (.txt).
   bench/cpu_goals.sh (`make bench-cpu-goals`) runs every goal of issue 29
   this way in one command.

    .venv/bin/python bench/cpu_decode.py --shapes smollm2-1.7b --types Q4_0,Q8_0 --threads 1,2
"""
import argparse
import asyncio
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as S  # noqa: E402

ROOT = S.ROOT
MOE_LAYERS = {"qwen3-30b-a3b": 7, "gpt-oss-20b": 10}  # bench/moe_shape.py's shapes: layers for files of <= ~5 GB
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
        if shape in MOE_LAYERS:  # bench/moe_shape.py: Q8_0 matrices (gpt-oss: MXFP4 experts, not requantized)
            stem, base_type = f"{shape}-{MOE_LAYERS[shape]}l", "MXFP4" if shape.startswith("gpt-oss") else "Q8_0"
            write = [str(ROOT / "bench/moe_shape.py"), "--shape", shape, "--layers", str(MOE_LAYERS[shape])]
        else:
            stem, base_type = shape, "Q8_0"
            write = [str(ROOT / "scripts/make-random-llama.py"), *SHAPES[shape], "--no-rope-scaling", "--jobs", "2"]
        base = folder / f"{stem}-{base_type}.gguf"
        paths = [(t, base if t == base_type else folder / f"{stem}-{t}.gguf")
                 for t in (types if base_type == "Q8_0" else [base_type])]
        # the base only when a model is missing (it may be deleted once quantized: 8.5 GB at the 8B shape);
        # written under a temporary name, as the quantized ones: an interrupted run leaves no partial model
        if not base.exists() and not all(p.exists() for _, p in paths):
            log(f"writing {base}")
            part = base.with_name(base.name + ".part")
            out_arg = ["--out", str(part)] if shape in MOE_LAYERS else [str(part)]
            subprocess.run([sys.executable, *write, *out_arg], check=True)
            part.rename(base)
        for t, path in paths:
            if not path.exists():
                log(f"quantizing {path}")
                part = path.with_name(path.name + ".part")
                subprocess.run([str(quantize_bin), "--allow-requantize", str(base), str(part), t], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                part.rename(path)
            out.append((f"{stem} {t} (random)", path))
    return out


def step_bytes(path):
    """Weight bytes one decode step reads (see the module doc): of each expert stack (`*_exps.*`), the
    expert_used_count experts of expert_count a token chooses."""
    import gguf
    r = gguf.GGUFReader(str(path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    field = lambda k: int(r.fields[f"{arch}.{k}"].parts[-1][0]) if f"{arch}.{k}" in r.fields else 0  # noqa: E731
    used, experts = field("expert_used_count"), field("expert_count")
    total, emb, tied = 0, None, not any(t.name == "output.weight" for t in r.tensors)
    for t in r.tensors:
        if t.name == "token_embd.weight":
            emb = t
            continue
        total += int(t.n_bytes) * used // experts if "_exps." in t.name else int(t.n_bytes)
    row = int(emb.n_bytes) // int(emb.shape[1])
    return total + row + (int(emb.n_bytes) if tied else 0)


def rss_gb(pid):
    """The resident set of process pid now, GB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")) * 1024 / 1e9
    except (OSError, StopIteration):
        return 0.0


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


async def run_streams(port, streams, requests, vocab, plen, tokens, seed, warmup=4, after_warmup=None):
    url = f"http://127.0.0.1:{port}/v1/completions"
    rng = random.Random(seed)
    todo = [[rng.randrange(300, vocab - 300) for _ in range(plen)] for _ in range(requests)]
    res = []
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=streams + 2)) as client:
        await one_request(client, url, todo[0][:16], warmup)  # warm-up (a MoE's experts get repacked)
        if after_warmup:
            after_warmup()

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
    return {"tpot_ms": 1e3 * sum(tpots) / len(tpots) if tpots else float("nan"), "ttft_ms": 1e3 * sum(ttfts) / max(1, len(ttfts)),
            "tok_s": sum(len(t) for t in res) / wall,
            "itl_p50_ms": 1e3 * pick(0.5), "itl_p99_ms": 1e3 * pick(0.99), "requests": len(res)}


class Profile:
    """`perf record -e cpu-clock` of one server process from the end of the warm-up to the end of the
    requests (start-up and loading excluded), then `perf report` by symbol into NAME.txt beside NAME.data."""

    def __init__(self, pid, data):
        self.pid, self.data, self.proc = pid, pathlib.Path(data), None

    def start(self):
        self.data.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "499", "-p", str(self.pid), "-o",
                                      str(self.data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(50):  # until perf has attached (it writes its file's header then)
            if self.data.exists() and self.data.stat().st_size > 0:
                break
            time.sleep(0.1)
        time.sleep(0.5)

    def stop(self):
        if not self.proc:
            return
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        rep = subprocess.run(["perf", "report", "-i", str(self.data), "--stdio", "--no-children", "--sort", "symbol",
                              "--percent-limit", "0.3"], capture_output=True, text=True).stdout
        self.data.with_suffix(".txt").write_text(rep)


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
    ap.add_argument("--warmup-tokens", type=int, default=4,
                    help="tokens of the warm-up request (tram repacks a MoE's experts when first chosen)")
    ap.add_argument("--servers", default="tram,llamacpp", help="which servers run (the table needs both)")
    ap.add_argument("--one-server", action="store_true",
                    help="one server (slots: the most streams) for every stream count of a (model, threads)")
    ap.add_argument("--ready-timeout", type=float, default=120, help="seconds a server may take to load")
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--folder", default=str(ROOT / "build-bench/shapes"))
    ap.add_argument("--out", default=str(ROOT / "build-bench/cpu-decode.md"))
    ap.add_argument("--json", default=str(ROOT / "build-bench/cpu-decode.json"))
    ap.add_argument("--perf", default="", help="folder: profile each tram server's requests (perf record -e "
                    "cpu-clock, after the warm-up) into FOLDER/MODEL-Tt-Ss.{data,txt}")
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
    stream_counts = [int(x) for x in a.streams.split(",")]
    # one server per stream count, or with --one-server one per (model, threads, kind) for all of them
    groups = [stream_counts] if a.one_server else [[s] for s in stream_counts]
    for name, path in models:
        nbytes, vocab = step_bytes(path), vocab_size(path)
        for threads in [int(x) for x in a.threads.split(",")]:
            rs = {s: {"model": name, "bytes": nbytes, "file_gb": path.stat().st_size / 1e9, "threads": threads,
                      "streams": s} for s in stream_counts}
            for kind in a.servers.split(","):
                for group in groups:
                    ctx = (a.prompt + a.tokens + 255) // 256 * 256
                    t0 = time.perf_counter()
                    with S.start(kinds[kind], str(path), threads, max(group), ctx, logdir, f"{threads}t",
                                 ready_timeout_s=a.ready_timeout) as srv:
                        ready_s = time.perf_counter() - t0
                        for streams in group:
                            r = rs[streams]
                            prof = Profile(srv.proc.pid, pathlib.Path(a.perf) / f"{path.stem}-{threads}t-{streams}s.data") \
                                if a.perf and kind == "tram" else None
                            r[kind] = asyncio.run(run_streams(srv.port, streams, max(a.requests, streams), vocab,
                                                              a.prompt, a.tokens, 7, a.warmup_tokens,
                                                              prof.start if prof else None))
                            if prof:
                                prof.stop()
                            r[kind].update(ready_s=ready_s, rss_gb=rss_gb(srv.proc.pid))
                            log(f"{name} {threads}t {streams}s {kind}: {r[kind]}")
            bw = membw(build, threads)
            for streams in stream_counts:
                rs[streams].update(read_gbs=bw, load=os.getloadavg()[0])
                rows.append(rs[streams])
    lines = ["| model | weights / token | threads | streams | tram TPOT ms | llama.cpp TPOT ms | tram ÷ llama.cpp "
             "(1/TPOT) | tram tok/s | llama.cpp tok/s | tram ITL p99 / p50 ms | llama.cpp ITL p99 / p50 ms | read "
             "GB/s | tram share of read bw | llama.cpp share | tram TTFT ms | llama.cpp TTFT ms | tram ÷ llama.cpp (tok/s) | "
             "tram RSS / file GB | llama.cpp RSS GB | load |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "---: | ---: | ---: | ---: |"]
    none = {"tpot_ms": float("nan"), "tok_s": float("nan"), "itl_p50_ms": float("nan"), "itl_p99_ms": float("nan"),
            "ttft_ms": float("nan"), "rss_gb": float("nan")}
    for r in rows:
        t, l, bw = r.get("tram", none), r.get("llamacpp", none), r["read_gbs"]
        share = lambda x: f"{100 * r['bytes'] / (x['tpot_ms'] / 1e3) / 1e9 / bw:.0f} %" if bw and r["streams"] == 1 else "—"  # noqa: E731,E501
        lines.append(f"| {r['model']} | {r['bytes'] / 1e9:.2f} GB | {r['threads']} | {r['streams']} | {t['tpot_ms']:.1f} | "
                     f"{l['tpot_ms']:.1f} | {l['tpot_ms'] / t['tpot_ms']:.2f}× | {t['tok_s']:.1f} | {l['tok_s']:.1f} | "
                     f"{t['itl_p99_ms']:.0f} / {t['itl_p50_ms']:.0f} | {l['itl_p99_ms']:.0f} / {l['itl_p50_ms']:.0f} | "
                     f"{bw:.1f} | {share(t)} | {share(l)} | {t['ttft_ms']:.0f} | {l['ttft_ms']:.0f} | "
                     f"{t['tok_s'] / l['tok_s']:.2f}× | {t['rss_gb']:.2f} / {r['file_gb']:.2f} | {l['rss_gb']:.2f} | "
                     f"{r['load']:.1f} |")
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
