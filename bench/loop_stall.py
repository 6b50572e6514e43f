"""The event loop under hostile load (issue 17, items 1 and 2): how fast a
health prober is answered, and how late the loop runs its timers, while
clients attack tram.

    .venv/bin/python bench/loop_stall.py [--seconds 20] [--threads 1] [--compute-nice N] [--report FILE]

For each scenario a fresh `tram serve` is started (so the loop-stall gauge,
a maximum since start, is the scenario's own), the load runs in separate
processes (so the prober shares no interpreter lock with it), and the prober
opens a new TCP connection every 20 ms and sends `GET /health`, as a load
balancer does; it records each answer's status and latency (connect to the
last byte). Scenarios:

  idle        nothing else: the floor of the measurement
  costly      3 clients each sending, back to back, a 1.9 MB prompt of one
              pre-token (tokenized on a worker; answered 400)
  flood       idle connections opened as fast as one process can (no byte
              sent) against --max-connections 64
  generate    16 clients streaming completions (the loop's ordinary work)

Reported per scenario: polls, non-200 answers, latency p50 / p99 / max, how
many polls took over 100 ms, tram:event_loop_stall_max_seconds, the mean
lateness of the 10 ms probe timer (stall_seconds_total over the ticks), and
the load's completed answers per second (generate: streams of 64 tokens). The
issue's goals: /health within 100 ms throughout, the loop's longest stall
under 5 ms. Printed as markdown; --report appends it to a file.
"""
import argparse
import json
import multiprocessing as mp
import os
import pathlib
import random
import socket
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tram_server import start  # noqa: E402


def post(body):
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def repeat(host, port, stop, request, done, count):
    """Sends request on a new connection, reads until done(tail of the
    answer) or EOF; again until stop. count: answers that were done."""
    while not stop.is_set():
        try:
            with socket.create_connection((host, port), timeout=60) as s:
                s.sendall(request)
                got = b""
                while not done(got):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got = got[-4096:] + chunk
                if done(got):
                    with count.get_lock():
                        count.value += 1
        except OSError:
            time.sleep(0.01)


def costly(host, port, stop, seed, count):
    rng = random.Random(seed)
    body = json.dumps({"prompt": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1_900_000)),
                       "max_tokens": 1}).encode()
    repeat(host, port, stop, post(body), lambda got: b"}}" in got, count)  # the 400's error object


def flood(host, port, stop, seed, count):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = []
    while not stop.is_set():
        try:
            held.append(socket.create_connection((host, port), timeout=5))
        except OSError:
            time.sleep(0.01)
        if len(held) > 3000:
            held.pop(0).close()
        time.sleep(0.001)
    for s in held:
        s.close()


def generate(host, port, stop, seed, count):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 64, "stream": True, "ignore_eos": True,
                       "seed": seed, "temperature": 0.8}).encode()
    repeat(host, port, stop, post(body), lambda got: b"data: [DONE]" in got, count)


SCENARIOS = {
    "idle": (None, 0, ()),
    "costly": (costly, 3, ()),
    "flood": (flood, 1, ("--max-connections", "64")),
    "generate": (generate, 16, ()),
}


def probe(host, port):
    t0 = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = b""
            while chunk := s.recv(4096):
                got += chunk
        status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else None
    except OSError:
        status = None
    return status, time.perf_counter() - t0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def renice_compute(pid, nice):
    """Sets the nice value of tram's engine and compute threads (not the
    loop's): whether a loop that outranks compute stalls less."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        name = pathlib.Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        if name == "tram-engine" or name.startswith("tram-cpu"):
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)


def run(name, seconds, threads, log_dir, compute_nice=0):
    fn, procs, extra = SCENARIOS[name]
    srv = start(log_dir, "--threads", str(threads), *extra)
    if compute_nice:
        renice_compute(srv.proc.pid, compute_nice)
    t_up = time.monotonic()  # from ready; the probe ran during the load too, so the mean is an upper bound
    host, port = srv.host_port
    stop = mp.Event()
    count = mp.Value("l", 0)
    ps = [mp.Process(target=fn, args=(host, port, stop, i, count), daemon=True) for i in range(procs)] if fn else []
    try:
        for p in ps:
            p.start()
        time.sleep(2.0)  # the load gets going (the costly bodies are built first)
        polls = []
        count0 = count.value
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            polls.append(probe(host, port))
            time.sleep(0.02)
        answered = count.value - count0
        stop.set()
        for p in ps:
            p.join(30)
            if p.is_alive():
                p.kill()
        m = srv.metrics()
        stall_max = m["tram:event_loop_stall_max_seconds"][frozenset()]
        stall_sum = m["tram:event_loop_stall_seconds_total"][frozenset()]
        uptime = time.monotonic() - t_up
    finally:
        stop.set()
        srv.stop()
    lat = [t for _, t in polls]
    ticks = uptime / 0.010
    return {"scenario": name, "polls": len(polls), "not_200": sum(1 for s, _ in polls if s != 200),
            "p50_ms": pct(lat, 0.5) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3, "max_ms": max(lat) * 1e3,
            "over_100ms": sum(1 for t in lat if t > 0.1), "stall_max_ms": stall_max * 1e3,
            "stall_mean_ms": stall_sum / ticks * 1e3, "answered_per_s": answered / seconds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--threads", type=int, default=1, help="compute threads (1 leaves a core to the loop on 2)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--compute-nice", type=int, default=0,
                    help="renice tram's engine and compute threads (an experiment: the loop outranks them)")
    ap.add_argument("--report")
    args = ap.parse_args()
    log_dir = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"loop_stall.{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    rows = [run(n, args.seconds, args.threads, log_dir, args.compute_nice) for n in args.scenarios.split(",")]
    flags = f" --compute-nice {args.compute_nice}" if args.compute_nice else ""
    out = [f"`.venv/bin/python bench/loop_stall.py --seconds {args.seconds:g} --threads {args.threads}{flags}` "
           f"({os.cpu_count()} CPUs, load average {load:.2f} at the start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
           "",
           "| scenario | polls | not 200 | /health p50 (ms) | p99 (ms) | max (ms) | polls over 100 ms | loop stall max (ms) | probe lateness mean (ms) | attackers' answers/s |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['scenario']} | {r['polls']} | {r['not_200']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                   f"{r['max_ms']:.1f} | {r['over_100ms']} | {r['stall_max_ms']:.1f} | {r['stall_mean_ms']:.2f} | "
                   f"{r['answered_per_s']:.2f} |")
    text = "\n".join(out) + "\n"
    print(text)
    if args.report:
        with open(args.report, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
