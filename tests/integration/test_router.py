"""Three tram replicas (one compute thread each, loopback ports) behind
sglang-router, the SGLang model gateway from PyPI, as a user would run them:

- what the router asks of a worker is answered: /health (its health check),
  /server_info and /model_info (its metadata discovery: the worker is
  registered under tram's served model name);
- a shared-prefix workload (groups of requests sharing a long prefix):
  with the router's cache_aware policy the fleet's prefix-cache hit rate,
  summed from every replica's /metrics, is higher than with round_robin
  (both printed; run with -s);
- a replica killed (SIGKILL) with requests in flight: nothing hangs, every
  request ends with a response (the router retries or answers an error),
  and requests sent afterwards are served by the others;
- a replica draining (SIGTERM with a drain grace): its /health turns 503,
  the router marks it unhealthy and sends it no new requests.

Bounded in time: small prompts, max_tokens 1 for the workload, every wait
has a deadline."""
import concurrent.futures
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tram_server import clean_env, start


GROUPS = 4      # shared prefixes per workload
PER_GROUP = 4   # requests per prefix


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Router:
    def __init__(self, tmp_path, workers, policy):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / f"router-{policy}.log"
        cmd = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(self.port),
               "--worker-urls", *(w.url for w in workers), "--policy", policy,
               "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
               "--request-timeout-secs", "60", "--log-level", "info"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=clean_env())
        self.http = httpx.Client(base_url=self.url, timeout=90)
        self.wait_workers(lambda ws: len(ws) == len(workers) and all(w["is_healthy"] for w in ws))

    def workers(self):
        return self.http.get("/workers", timeout=5).json()["workers"]

    def wait_workers(self, cond, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
            try:
                ws = self.workers()
                if cond(ws):
                    return ws
            except (httpx.TransportError, ValueError, KeyError):
                pass
            assert time.monotonic() < deadline, self.log_path.read_text()[-3000:]
            time.sleep(0.2)

    def complete(self, prompt, max_tokens=1):
        return self.http.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": max_tokens,
                                                      "temperature": 0, "ignore_eos": True})

    def stop(self):
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


MODEL = "tram-fleet"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    reps = []
    try:
        for _ in range(3):
            reps.append(start(tmp, "--threads", "1", "--served-model-name", MODEL, "--drain-grace", "60s",
                              "--max-model-len", "512"))
        yield reps
    finally:
        for r in reps:  # SIGINT: no drain grace
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGINT)
        for r in reps:
            r.http.close()
            if r.proc.poll() is None:
                try:
                    r.proc.wait(30)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    r.proc.wait()


def prefix_counts(reps):
    hits = queries = 0
    for r in reps:
        m = r.metrics()
        hits += m["vllm:prefix_cache_hits_total"][frozenset()]
        queries += m["vllm:prefix_cache_queries_total"][frozenset()]
    return hits, queries


def workload(router, reps, tag):
    """Groups of requests sharing a long prefix, interleaved; the fleet's
    prefix-cache hit rate over them (hit tokens / queried tokens)."""
    h0, q0 = prefix_counts(reps)
    prefixes = [f"[{tag}-{g}] " + " ".join(f"{tag}{g} fact {k}: the sky over {tag}{g} is blue." for k in range(12))
                for g in range(GROUPS)]
    for i in range(PER_GROUP):
        for g, p in enumerate(prefixes):
            r = router.complete(p + f" Question {i}: what colour is the sky?")
            assert r.status_code == 200, r.text
    h1, q1 = prefix_counts(reps)
    return (h1 - h0) / (q1 - q0)


def test_what_the_router_asks_is_answered(fleet, tmp_path):
    router = Router(tmp_path, fleet, "cache_aware")
    try:
        ws = router.workers()
        assert {w["model_id"] for w in ws} == {MODEL}  # from /server_info and /model_info
        assert all(w["metadata"]["served_model_name"] == MODEL and w["metadata"]["tp_size"] == "1" for w in ws)
        for r in fleet:
            info = r.get("/server_info").json()
            assert info["served_model_name"] == MODEL and info["dp_size"] == 1
            assert r.get("/get_model_info").json()["max_context_length"] == 512
        r = router.complete("Hello", max_tokens=3)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3, r.text
    finally:
        router.stop()


@pytest.mark.long  # the same workload through two routers: make test-long (CI) runs it
def test_cache_aware_beats_round_robin(fleet, tmp_path):
    rates = {}
    for policy in ("cache_aware", "round_robin"):
        router = Router(tmp_path, fleet, policy)
        try:
            rates[policy] = workload(router, fleet, policy[:5])
        finally:
            router.stop()
    print(f"\nfleet prefix-cache hit rate over {GROUPS} groups x {PER_GROUP} requests, 3 replicas: "
          f"cache_aware {rates['cache_aware']:.3f}, round_robin {rates['round_robin']:.3f}")
    assert rates["cache_aware"] > rates["round_robin"], rates


def test_killed_and_draining_replicas(fleet, tmp_path):
    router = Router(tmp_path, fleet, "cache_aware")
    victim, drained, survivor = fleet
    try:
        # a replica killed with requests in flight: every request ends
        prompts = [f"Story {i}: once upon a time" for i in range(6)]
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            futs = [pool.submit(router.complete, p, 48) for p in prompts]
            deadline = time.monotonic() + 60
            while victim.metrics()["vllm:num_requests_running"][frozenset()] < 1:
                assert time.monotonic() < deadline, "no request reached the victim"
                assert not all(f.done() for f in futs), "everything finished before a request reached the victim"
                time.sleep(0.05)
            victim.proc.kill()
            victim.proc.wait()
            results = [f.result(timeout=120) for f in futs]  # nothing hangs
        codes = [r.status_code for r in results]
        print(f"\nwith one replica killed mid-run: statuses {codes}")
        assert all(c == 200 or c >= 500 for c in codes), [r.text for r in results]
        assert codes.count(200) >= 1
        for r in results:
            if r.status_code != 200:
                assert r.text, "an error without a body"
        router.wait_workers(lambda ws: any(w["url"] == victim.url and not w["is_healthy"] for w in ws))
        for i in range(3):  # the rest serve what comes next
            r = router.complete(f"After the kill {i}", max_tokens=2)
            assert r.status_code == 200, r.text

        # a draining replica: unhealthy for the router at once, then no new requests
        drained.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while drained.get("/health").status_code != 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        router.wait_workers(lambda ws: any(w["url"] == drained.url and not w["is_healthy"] for w in ws))
        before = drained.log().count("endpoint=/v1/completions")
        served = survivor.log().count("endpoint=/v1/completions status=200")
        for i in range(4):
            r = router.complete(f"While draining {i}", max_tokens=2)
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 10  # the access log line is written as the response ends
        while survivor.log().count("endpoint=/v1/completions status=200") < served + 4:
            assert time.monotonic() < deadline, "the survivor did not serve the requests"
            time.sleep(0.05)
        assert drained.log().count("endpoint=/v1/completions") == before, "the draining replica got new requests"
        assert drained.proc.poll() is None  # still in its grace period, listener open
    finally:
        router.stop()
