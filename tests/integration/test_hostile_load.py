"""Issue 17: tram under hostile load.

- A blocked loop: prompts whose tokenizing is costly (1.9 MB of letters
  without a space) are parsed and tokenized on the worker pool, not on the
  libuv loop, so /health answers while three clients send them, and the
  loop's stall probe (tram:event_loop_stall_max_seconds) stays small. No
  absolute time is asserted: the bounds are fractions of the time one such
  request takes alone, measured in the same run (with tokenizing on the loop
  the loop would stall for at least that long).
- Connection floods: the cap is sized from the open-file limit; far more
  idle connections than the cap do not lock a prober out (the one idle
  longest makes room); with every slot busy, /health answers on a reserve
  (tests/unit/test_http.c, connection_cap).
"""
import random
import re
import resource
import socket
import threading
import time

import httpx

from tram_server import server_fixture, start

server = server_fixture()


def heavy_body(rng, n=1_900_000):
    """A single pre-token of n random letters: ~n/3 tokens, far over the
    context (so the answer is a 400 and no engine work follows)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return {"prompt": "".join(rng.choice(letters) for _ in range(n)), "max_tokens": 1}


def test_loop_stays_free_while_clients_send_costly_prompts(server):
    rng = random.Random(17)
    body = heavy_body(rng)
    with httpx.Client(base_url=server.url, timeout=120) as c:
        t0 = time.monotonic()
        r = c.post("/v1/completions", json=body)
        alone = time.monotonic() - t0
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
    stall_before = server.metric("tram:event_loop_stall_max_seconds")

    statuses, done = [], threading.Event()

    def attacker():
        with httpx.Client(base_url=server.url, timeout=120) as c:
            for _ in range(2):
                statuses.append(c.post("/v1/completions", json=body).status_code)

    threads = [threading.Thread(target=attacker) for _ in range(3)]
    for t in threads:
        t.start()
    polls = []
    with httpx.Client(base_url=server.url, timeout=60) as c:
        while any(t.is_alive() for t in threads):
            t0 = time.monotonic()
            h = c.get("/health")
            polls.append((h.status_code, time.monotonic() - t0))
            time.sleep(0.02)
    for t in threads:
        t.join()
    assert statuses == [400] * 6
    assert polls and all(code == 200 for code, _ in polls)
    worst = max(lat for _, lat in polls)
    stall = server.metric("tram:event_loop_stall_max_seconds")
    print(f"one costly request alone: {alone:.3f} s; {len(polls)} /health polls, the slowest {worst * 1e3:.1f} ms; "
          f"loop stall max {stall_before * 1e3:.1f} ms before, {stall * 1e3:.1f} ms after")
    assert worst < alone / 2, (worst, alone)
    assert stall < alone / 4, (stall, alone)


# ---- connection floods -----------------------------------------------------------------

def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def test_connection_cap_is_sized_from_the_open_file_limit(server):
    """max_connections 0 (the default): the soft limit is raised to the hard
    one and the cap leaves 256 descriptors (at most 65536)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = min(hard - 256, 65536) if hard != resource.RLIM_INFINITY else 65536
    m = re.search(r"max_connections: (\d+) \(from the open-file limit\)", server.log())
    assert m and int(m.group(1)) == max(want, 16), server.log()[-2000:]


def test_idle_connection_flood_does_not_lock_out_probers(tmp_path):
    """A flood of idle connections (no byte sent) far over the cap: each new
    one closes the connection idle longest, so a prober's fresh connection
    always gets its /health answered."""
    raise_nofile()
    srv = start(tmp_path, "--max-connections", "64")
    flood, stop = [], threading.Event()

    def flooder():
        host, port = srv.host_port
        while not stop.is_set() and len(flood) < 1500:
            try:
                flood.append(socket.create_connection((host, port), timeout=5))
            except OSError:
                pass
            time.sleep(0.002)

    try:
        t = threading.Thread(target=flooder)
        t.start()
        codes, worst = [], 0.0
        while len(flood) < 400:
            time.sleep(0.01)
        for _ in range(30):
            t0 = time.monotonic()
            with httpx.Client(base_url=srv.url, timeout=10) as c:
                codes.append(c.get("/health").status_code)
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.02)
        stop.set()
        t.join()
        m = srv.metrics()
        evicted = m["tram:http_connections_evicted_total"][frozenset()]
        rejected = m["tram:http_connections_rejected_total"][frozenset()]
        print(f"{len(flood)} flood connections; /health {codes.count(200)}/{len(codes)} ok, slowest "
              f"{worst * 1e3:.1f} ms; evicted {evicted:.0f}, rejected {rejected:.0f}")
        assert codes == [200] * 30
        assert evicted >= len(flood) - 64 - 30 and rejected == 0
    finally:
        stop.set()
        for s in flood:
            s.close()
        assert srv.stop() == 0
