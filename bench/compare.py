#!/usr/bin/env python3
"""Side-by-side serving benchmark: starts each server itself, runs the
workloads at each concurrency level, alternating the servers' order from one
level to the next so drift hits both, stops them, probes the machine's
bandwidth and peak FLOP/s, then writes the results JSON and the report
(bench/report.py: README.md and PNG plots in --out).

  bench/compare.py --servers tram,llamacpp            # what `make bench` runs
  bench/compare.py --servers llamacpp --concurrency 1,4,16 --requests 8
  bench/compare.py --smoke                             # what `make bench-smoke` runs

For every (workload, concurrency N) and every server: a fresh server process
with N running sequences / parallel slots and the same --threads, a few
unmeasured warm-up requests, then max(--requests, --rounds * N) measured
requests from N closed-loop clients. Both servers get identical prompts.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bounds  # noqa: E402
import loadgen  # noqa: E402
import metrics as M  # noqa: E402
import report  # noqa: E402
import servers as S  # noqa: E402
import workloads as W  # noqa: E402

ROOT = S.ROOT
DEFAULT_WORKLOADS = "fixed:128:128,fixed:512:64,fixed:32:256,conv,prefix:512:32:64"
DEFAULT_LEVELS = "1,2,4,8,16,32,64"
SMOKE = dict(servers="tram", workloads="fixed:32:16", concurrency="1,4", requests=4, rounds=1, warmup=1)


def machine_info() -> dict:
    """Date, CPU model, cores, memory, kernel and load: the report's header."""
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "kernel": platform.release()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "Core(s) per socket", "Socket(s)", "Thread(s) per core",
                             "L3 cache", "Flags"):
                info[k.strip()] = v.strip() if k.strip() != "Flags" else \
                    " ".join(f for f in v.split() if f.startswith(("avx", "fma", "f16c", "amx")))
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
        info["memory_gib"] = round(kb / 1048576, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return info


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_one(kind: S.ServerKind, wl: W.Workload, level: int, reqs, warm, a, logdir, tok) -> dict:
    """One server, one workload, one concurrency level: start, measure, stop."""
    slot_ctx = max(256, -(-(wl.max_seq_len() + 16) // 256) * 256)
    tag = f"{wl.spec.replace(':', '-')}-c{level}"
    load_before = load_avg()
    srv = S.start(kind, a.model, a.threads, level, slot_ctx, logdir, tag, a.ready_timeout)
    try:
        run = asyncio.run(loadgen.closed_loop(srv.base_url, srv.model_id, reqs, level, warm,
                                              timeout_s=a.request_timeout))
    finally:
        srv.stop()
    m = M.compute_metrics(run.results, run.duration_s, tok.count)
    problems = M.sanity_problems(run.results, tok.count)
    mismatched = sum(1 for r, q in zip(run.results, reqs)
                     if r.usage_prompt_tokens is not None and r.usage_prompt_tokens != q.prompt_len)
    if mismatched:
        problems.append(f"{mismatched} requests: the server counted a different prompt length than the workload")
    print(loadgen.summary(f"{kind.label}: {wl.name}, concurrency {level}", m), flush=True)
    for p in problems[:5]:
        print("  sanity:", p, flush=True)
    raw = {"results": [dataclasses.asdict(r) | {"generated_text": r.generated_text[:80]} for r in run.results]}
    (logdir / f"{kind.name}-{tag}.json").write_text(json.dumps(raw))
    del m["output_lens"]
    return {"server": kind.name, "workload": wl.spec, "concurrency": level, "metrics": m,
            "command": shlex.join(srv.cmd).replace(f"{ROOT}/", ""), "problems": problems, "load_before": load_before,
            "load_after": load_avg(), "usage_counted": sum(1 for r in run.results if r.output_tokens),
            "chunks_per_request": (sum(r.chunks for r in run.results) / max(1, len(run.results)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="tram,llamacpp", help="comma list of tram, llamacpp")
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 1) - 1),
                    help="compute threads for every server (default: CPUs - 1, one left for the load generator)")
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--concurrency", default=DEFAULT_LEVELS)
    ap.add_argument("--requests", type=int, default=16, help="measured requests per level, at least")
    ap.add_argument("--rounds", type=int, default=2, help="... and at least this many per client")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured requests before each run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tram-bin", default=str(ROOT / "build/tram"))
    ap.add_argument("--peer-bin", default=str(S.PEER_DIR / "bin/llama-server"))
    ap.add_argument("--tram-args", default="", help="extra tram serve flags (one string)")
    ap.add_argument("--peer-args", default="", help="extra llama-server flags (one string)")
    ap.add_argument("--build-dir", default=str(ROOT / "build"), help="where build/bench/membw and flops are")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks"), help="report folder (README.md, PNGs, results)")
    ap.add_argument("--scratch", default=str(ROOT / "build-bench"), help="logs, raw records, tokenizer cache")
    ap.add_argument("--note", action="append", default=[], help="a line for the report's notes (repeatable)")
    ap.add_argument("--title", default="Serving benchmark: tram vs llama.cpp")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--request-timeout", type=float, default=600.0)
    ap.add_argument("--smoke", action="store_true", help="tram only, tiny sweep, report into the scratch folder")
    a = ap.parse_args(argv)
    if a.smoke:
        for k, v in SMOKE.items():
            setattr(a, k, v)
        a.out = str(pathlib.Path(a.scratch) / "smoke")
        a.title = "bench-smoke (tram only, tiny sweep; not a measurement)"

    kinds = S.kinds(a.tram_bin, a.peer_bin, a.tram_args, a.peer_args)
    names = [s.strip() for s in a.servers.split(",") if s.strip()]
    for n in names:
        if n not in kinds:
            ap.error(f"unknown server {n!r} (tram, llamacpp)")
        why = kinds[n].missing()
        if why:
            print(f"bench: {why}", file=sys.stderr)
            return 2
    try:
        wls = [W.parse(s) for s in a.workloads.split(",") if s.strip()]
        levels = [int(x) for x in a.concurrency.split(",") if x.strip()]
    except ValueError as e:
        ap.error(str(e))
    if not os.path.isfile(a.model):
        print(f"bench: {a.model} is missing: run `make model`", file=sys.stderr)
        return 2

    scratch = pathlib.Path(a.scratch)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logdir = scratch / "runs" / stamp
    logdir.mkdir(parents=True, exist_ok=True)
    print(f"bench: servers {names}, threads {a.threads}, logs in {logdir}", flush=True)
    tok = W.load_tokenizer(a.model, scratch / "cache")
    cost = bounds.model_cost(a.model, scratch / "cache")

    meta = {"machine": machine_info(), "load_start": load_avg(), "threads": a.threads,
            "model": os.path.relpath(a.model, ROOT) if a.model.startswith(str(ROOT)) else a.model,
            "versions": {n: kinds[n].version() for n in names},
            "invocation": "bench/compare.py " + shlex.join(sys.argv[1:] if argv is None else argv),
            "title": a.title, "notes": list(a.note), "servers": names,
            "labels": {n: kinds[n].label for n in names},
            "workloads": [w.spec for w in wls], "concurrency": levels,
            "cost": dataclasses.asdict(cost)}
    runs = []
    t0 = time.monotonic()
    try:
        for wl in wls:
            for i, level in enumerate(levels):
                n = max(a.requests, a.rounds * level)
                reqs = wl.requests(tok, n, a.seed * 7919 + i)
                warm = wl.requests(tok, a.warmup, a.seed * 7919 + i + 500) if a.warmup else None
                order = names if i % 2 == 0 else names[::-1]
                for name in order:
                    runs.append(run_one(kinds[name], wl, level, reqs, warm, a, logdir, tok))
    except RuntimeError as e:   # a server did not come up: report what ran, then fail
        print(f"bench: {e}", file=sys.stderr)
        meta["notes"].append(f"ABORTED: {str(e).splitlines()[0]} (the runs before it are below)")
        if not runs:
            return 1
    meta["elapsed_s"] = round(time.monotonic() - t0, 1)
    # Probes last, on an idle machine (no server running).
    mach = bounds.probe_machine(pathlib.Path(a.build_dir), a.threads)
    meta["machine_probe"] = dataclasses.asdict(mach)
    meta["load_end"] = load_avg()
    results = {"meta": meta, "runs": runs}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    report.write(results, out)
    print(f"bench: wrote {out / 'README.md'} ({meta['elapsed_s']:.0f}s)", flush=True)
    if any(n.startswith("ABORTED") for n in meta["notes"]):
        return 1
    bad = [r for r in runs if r["metrics"]["failed"]]
    if bad:
        print(f"bench: {len(bad)} runs had failed requests (see the report)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
