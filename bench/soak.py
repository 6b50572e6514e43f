"""A long soak of `tram serve` under mixed, hostile-ish load (`make soak`;
a short run is tests/integration/test_soak.py, in make test).

    .venv/bin/python bench/soak.py [--minutes 60] [--clients 32] [--seed N]
                                   [--report docs/benchmarks/reliability.md]

Starts tram with a small KV cache (so that preemption happens), records the
greedy outputs of a fixed prompt set each alone, then runs `clients` threads
for the given time. Each request is one of: a greedy prompt (streamed or
not; its text must equal the solo output: batch invariance under load and
preemption), seeded sampling with n of 1-3, a long prompt sharing a prefix
with others (the prefix cache), a chat request; 10 % of streams are
abandoned after a few chunks (a client disconnect). Every request must end
in a complete answer (a whole JSON, or a stream ending in [DONE]) or a clean
error (an HTTP status with an OpenAI error object, e.g. 429 when the queue
is full); anything else (a dropped connection, a stream without [DONE], a
timeout) is lost. Every 10 s the daemon's RSS, open descriptors and the
loop's longest stall (tram:event_loop_stall_max_seconds) are sampled.

Exit status 0 when nothing was lost, every greedy output matched and (runs
of 5 min or more) RSS and open fds stayed within 5 % after the first third.
The report (markdown) says what was sent, completed, errored, abandoned and
lost, the samples and the command.
"""
import argparse
import json
import os
import pathlib
import random
import sys
import threading
import time

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tram_server import start  # noqa: E402

GREEDY = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "The three primary colors are",
          "In 1969, astronauts", "A haiku about the sea:", "The quick brown fox", "Water boils at"]
PREFIX = ("You are a careful assistant. Answer briefly and precisely, citing the rule you apply. " * 6)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {"sent": 0, "completed": 0, "errored": 0, "abandoned": 0, "lost": 0, "greedy_checked": 0,
                  "greedy_mismatch": 0}
        self.lost = []

    def add(self, key, detail=None):
        with self.lock:
            self.n[key] += 1
            if key in ("lost", "greedy_mismatch") and detail and len(self.lost) < 20:
                self.lost.append(f"{key}: {detail}")


def stream_text(c, path, body, abandon_after=None):
    """('done', text) | ('abandoned', None) | ('error', status) | ('lost', why)."""
    text = []
    with c.stream("POST", path, json=body) as r:
        if r.status_code != 200:
            r.read()
            try:
                r.json()["error"]
                return "error", r.status_code
            except Exception:
                return "lost", f"status {r.status_code} without an error object"
        chunks = 0
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                return "done", "".join(text)
            d = json.loads(line[6:])
            for ch in d.get("choices", []):
                text.append(ch.get("text") or (ch.get("delta") or {}).get("content") or "")
            chunks += 1
            if abandon_after is not None and chunks >= abandon_after:
                return "abandoned", None
    return "lost", "stream ended without [DONE]"


def whole_text(c, path, body):
    r = c.post(path, json=body)
    try:
        d = r.json()
    except Exception:
        return "lost", f"status {r.status_code}, body not JSON"
    if r.status_code != 200:
        return ("error", r.status_code) if "error" in d else ("lost", f"status {r.status_code}")
    ch = d["choices"][0]
    return "done", ch.get("text") if "text" in ch else ch["message"]["content"]


def one_request(c, rng, solo, stats):
    kind = rng.choices(["greedy", "sampled", "prefix", "chat"], [4, 3, 2, 1])[0]
    stream = rng.random() < 0.6
    abandon = rng.randint(1, 6) if stream and rng.random() < 0.10 else None
    path, body, want = "/v1/completions", None, None
    if kind == "greedy":
        p = rng.choice(GREEDY)
        body, want = {"prompt": p, "max_tokens": 24, "temperature": 0}, solo[p]
    elif kind == "sampled":
        body = {"prompt": rng.choice(GREEDY), "max_tokens": rng.randint(8, 48), "temperature": 0.8,
                "seed": rng.randrange(1 << 30), "n": rng.randint(1, 3)}
    elif kind == "prefix":
        body = {"prompt": PREFIX + f"Question {rng.randrange(1000)}: what is {rng.randrange(100)} + 1?",
                "max_tokens": rng.randint(4, 32), "temperature": 0}
    else:
        path = "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": rng.choice(GREEDY)}], "max_tokens": rng.randint(4, 32)}
    body["stream"] = stream
    stats.add("sent")
    try:
        how, out = stream_text(c, path, body, abandon) if stream else whole_text(c, path, body)
    except (httpx.TransportError, json.JSONDecodeError) as e:
        how, out = "lost", f"{type(e).__name__}: {e}"
    if how == "done":
        stats.add("completed")
        if want is not None:
            stats.add("greedy_checked")
            if out != want:
                stats.add("greedy_mismatch", f"{body['prompt']!r}: {out!r} != solo {want!r}")
    elif how == "error":
        stats.add("errored")
    elif how == "abandoned":
        stats.add("abandoned")
    else:
        stats.add("lost", f"{kind} stream={stream}: {out}")


def proc_sample(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def run(minutes, clients, seed, log_dir, sample_s=10.0, extra_args=()):
    """Runs the soak; returns the result dict (see the module doc)."""
    load = os.getloadavg()[0]
    srv = start(log_dir, "--block-size", "8", "--kv-cache-blocks", "64", "--max-model-len", "512", "--max-seqs", "16", "--max-waiting", "256",
                *extra_args)
    try:
        solo = {}
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            for p in GREEDY:
                solo[p] = c.post("/v1/completions", json={"prompt": p, "max_tokens": 24,
                                                          "temperature": 0}).json()["choices"][0]["text"]
        stats, stop = Stats(), threading.Event()
        end = time.monotonic() + minutes * 60

        def client(i):
            rng = random.Random(seed * 1000 + i)
            with httpx.Client(base_url=srv.url, timeout=300) as c:
                while time.monotonic() < end:
                    one_request(c, rng, solo, stats)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        samples, t0 = [], time.monotonic()
        while any(t.is_alive() for t in threads):
            rss, fds = proc_sample(srv.proc.pid)
            samples.append({"t": round(time.monotonic() - t0, 1), "rss_mib": round(rss / 2**20, 1), "fds": fds,
                            "stall_ms": round(srv.metric("tram:event_loop_stall_max_seconds") * 1e3, 1)})
            stop.wait(sample_s)
        for t in threads:
            t.join()
        m = srv.metrics()
        preempted = m["vllm:num_preemptions_total"][frozenset()]
        hits = m["vllm:prefix_cache_hits_total"][frozenset()]
    finally:
        rc = srv.stop()
    later = samples[len(samples) // 3:-1] or samples  # the last one is taken while clients finish
    rss = [s["rss_mib"] for s in later]
    fds = [s["fds"] for s in later]
    flat = lambda xs: (max(xs) - min(xs)) <= 0.05 * max(xs) if xs else True
    return {"minutes": minutes, "clients": clients, "seed": seed, "cpus": os.cpu_count(), "load_at_start": load,
            **stats.n, "preemptions": preempted,
            "prefix_hit_tokens": hits, "samples": samples, "rss_flat": flat(rss), "fds_flat": flat(fds),
            "stall_max_ms": max((s["stall_ms"] for s in samples), default=0), "exit_status": rc,
            "problems": stats.lost}


def report(res, cmd):
    lines = ["# Reliability: the soak", "",
             f"Command: `{cmd}` ({res['minutes']} min, {res['clients']} clients, seed {res['seed']}), on "
             f"{res['cpus']} CPUs with a load average of {res['load_at_start']:.1f} at the start.", "",
             "| sent | completed | clean errors | abandoned (client left) | lost | greedy checked | greedy "
             "mismatches | preemptions | prefix-cache hit tokens | loop stall max |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             f"| {res['sent']} | {res['completed']} | {res['errored']} | {res['abandoned']} | {res['lost']} | "
             f"{res['greedy_checked']} | {res['greedy_mismatch']} | {res['preemptions']:.0f} | "
             f"{res['prefix_hit_tokens']:.0f} | {res['stall_max_ms']} ms |", "",
             f"RSS flat within 5 % after the first third: {res['rss_flat']}; open fds: {res['fds_flat']}; "
             f"tram's exit status after SIGTERM: {res['exit_status']}.", "",
             "| t (s) | RSS (MiB) | open fds | loop stall max (ms) |", "| --- | --- | --- | --- |"]
    lines += [f"| {s['t']} | {s['rss_mib']} | {s['fds']} | {s['stall_ms']} |" for s in res["samples"]]
    if res["problems"]:
        lines += ["", "Problems:", ""] + [f"- {p}" for p in res["problems"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--report", default=str(ROOT / "docs" / "benchmarks" / "reliability.md"))
    a = ap.parse_args()
    res = run(a.minutes, a.clients, a.seed, ROOT / "build" / "soak")
    cmd = f"make soak SOAK_MINUTES={a.minutes:g} SOAK_CLIENTS={a.clients}"
    pathlib.Path(a.report).write_text(report(res, cmd))
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}, indent=1))
    long_run = a.minutes >= 5
    ok = res["lost"] == 0 and res["greedy_mismatch"] == 0 and res["exit_status"] == 0 and (
        not long_run or (res["rss_flat"] and res["fds_flat"]))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
