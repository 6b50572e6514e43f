"""The live dashboard's snapshot stream (GET /dashboard/events) against
/metrics (prometheus_client's parser): while concurrent streams run, every
counter of a snapshot lies between the /metrics readings taken before it was
built and after it arrived; once idle, every count agrees exactly. Also: the
page and its assets, the API-key rule (the page is public, the stream is not,
and a key never reaches the log), the `dashboard` setting, and a dashboard
client that never reads while others work.

The snapshot's time_ms and Python's time.monotonic() read the same clock
(CLOCK_MONOTONIC), which orders a snapshot after a /metrics reading without
any timing assumption."""
import socket
import time

import httpx
import pytest

from dashboard_util import SnapshotReader, Workload
from tram_server import server_fixture, start

# 48 blocks of 16 tokens for 8 sequences of ~130 tokens: they preempt each other
server = server_fixture("--kv-cache-blocks", "48", "--block-size", "16", "--max-seqs", "8", "--dashboard", "on")

COUNTERS = {  # snapshot totals -> /metrics counters
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "preemptions": "vllm:num_preemptions_total",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
}


def counters(m):
    out = {k: m[v][frozenset()] for k, v in COUNTERS.items()}
    steps = m["tram:engine_steps_total"]
    out["decode_steps"] = steps[frozenset({("path", "decode")})]
    out["varlen_steps"] = steps[frozenset({("path", "varlen")})]
    return out


def check_cells(s, total_blocks):
    kv = s["kv"]
    assert kv["blocks"] == total_blocks == s["info"]["kv_blocks"]
    assert kv["per_cell"] == 1 and len(kv["cells"]) == total_blocks
    for i, name in enumerate(("free", "cached", "owned", "shared")):
        assert kv["cells"].count(str(i)) == kv[name]
    assert kv["free"] + kv["cached"] + kv["owned"] + kv["shared"] == total_blocks
    owned_cells = sum(n for _, n, _, _ in kv["owners"])
    assert owned_cells == kv["owned"] + kv["shared"]  # every held block has an owner
    live = {r["id"] for r in s["requests"]}
    assert all(o[2] in live for o in kv["owners"])


def test_page_and_assets(server):
    r = server.get("/dashboard")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert '<script src="/dashboard/dashboard.js"' in r.text
    for path, kind in (("/dashboard/dashboard.js", "text/javascript"), ("/dashboard/dashboard.css", "text/css")):
        a = server.get(path)
        assert a.status_code == 200 and a.headers["content-type"].startswith(kind) and len(a.content) > 1000
    assert server.get("/dashboard/nothing").status_code == 404
    head = server.http.head("/dashboard/events")  # the head, then the end: no stream held open
    assert head.status_code == 200 and head.headers["content-type"].startswith("text/event-stream")


def test_stream_counts_agree_with_metrics(server):
    total = server.metric("tram:kv_cache_blocks_total")
    reader = SnapshotReader(server)
    try:
        reader.wait()
        before = server.metrics()
        work = Workload(server, n=8, max_tokens=100)
        checked = 0
        while any(t.is_alive() for t in work.threads) or checked < 3:
            m1 = counters(server.metrics())
            t1 = time.monotonic() * 1000
            s = reader.wait(lambda s: s["time_ms"] > t1)  # built after m1 was read
            m2 = counters(server.metrics())
            for k in m1:
                v = s["totals"][k]
                assert m1[k] <= v <= m2[k], (k, m1[k], v, m2[k])
            check_cells(s, total)
            assert s["queues"]["running"] <= 8
            assert sum(st["prefill"] + st["decode"] for st in s["steps"]) <= s["info"]["max_batch_tokens"] * len(s["steps"])
            checked += 1
        work.join()
        assert checked >= 3
        # idle: everything agrees exactly
        t = time.monotonic() * 1000
        s = reader.wait(lambda s: s["time_ms"] > t and s["queues"]["running"] + s["queues"]["waiting"] == 0)
        m = server.metrics()
        assert counters(m) == {k: s["totals"][k] for k in counters(m)}
        assert m["vllm:num_requests_running"][frozenset()] == s["queues"]["running"] == 0
        assert m["vllm:num_requests_waiting"][frozenset()] == s["queues"]["waiting"] == 0
        assert m["tram:kv_cache_blocks_used"][frozenset()] == s["kv"]["owned"] + s["kv"]["shared"] == 0
        assert s["kv"]["cached"] > 0  # the finished prompts stay findable
        check_cells(s, total)
        gen = s["totals"]["generation_tokens"] - before["vllm:generation_tokens_total"][frozenset()]
        assert gen == sum(work.tokens) == 800
        assert s["totals"]["preemptions"] > before["vllm:num_preemptions_total"][frozenset()]
        assert s["totals"]["prefix_hit_blocks"] > 0
        assert s["requests"] == [] and s["requests_total"] == 0
        lat = s["latency"]
        assert lat["ttft_n"] > 0 and 0 < lat["ttft_p50_ms"] <= lat["ttft_p99_ms"]  # (the last minute's)
        assert lat["itl_n"] > 0 and 0 < lat["itl_p50_ms"] <= lat["itl_p99_ms"]
        # every step between two snapshots is listed, in order, once
        seen = [st["step"] for snap in reader.snaps for st in snap["steps"]]
        assert seen == sorted(set(seen))
    finally:
        reader.close()


def test_a_stalled_dashboard_slows_nothing(server):
    """A client that asks for the stream and never reads: the workload and
    a reading dashboard go on (the server drops snapshots for the stalled
    one, or cuts it once its write stalls past slow_client_timeout)."""
    host, port = server.host_port
    stalled = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect((host, port))
    stalled.sendall(b"GET /dashboard/events HTTP/1.1\r\nHost: x\r\n\r\n")
    reader = SnapshotReader(server)
    try:
        first = reader.wait(lambda s: s["info"]["clients"] >= 2)  # both streams open
        work = Workload(server, n=4, max_tokens=40)
        work.join()
        assert work.tokens == [40] * 4
        last = reader.wait(lambda s: s["queues"]["running"] == 0, after=first["seq"])
        seqs = [s["seq"] for s in reader.snaps]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # the reading client missed none
        assert last["seq"] > first["seq"]
    finally:
        reader.close()
        stalled.close()


def test_api_keys_guard_the_stream_not_the_page(tmp_path):
    key = "dash-secret-5be37d"
    srv = start(tmp_path, "--api-keys", key)
    try:
        assert srv.get("/dashboard").status_code == 200
        assert srv.get("/dashboard/dashboard.js").status_code == 200
        assert srv.get("/dashboard/events").status_code == 401
        assert srv.get("/dashboard/events", headers={"Authorization": "Bearer wrong"}).status_code == 401
        reader = SnapshotReader(srv, headers={"Authorization": f"Bearer {key}"})
        try:
            s = reader.wait()
            assert s["kv"]["blocks"] > 0
        finally:
            reader.close()
    finally:
        assert srv.stop() == 0
    assert key not in srv.log()


@pytest.mark.parametrize("args,on", [
    ((), True),                              # auto on loopback
    (("--host", "0.0.0.0"), False),          # auto on every interface
    (("--host", "0.0.0.0", "--dashboard", "on"), True),
    (("--dashboard", "off"), False),
])
def test_setting(tmp_path, args, on):
    srv = start(tmp_path, *args)
    try:
        url = srv.url.replace("0.0.0.0", "127.0.0.1")
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get("/dashboard").status_code == (200 if on else 404)
            if not on:
                assert c.get("/dashboard/events").status_code == 404
    finally:
        assert srv.stop() == 0
