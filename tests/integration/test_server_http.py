"""`tram serve` at the socket level: malformed request lines, bad headers,
truncated and oversized bodies, pipelined requests, chunked bodies, a
slowloris client; each gets the right status or a close, and the server keeps
serving the others. A client that disconnects mid-stream frees its request's
KV blocks (seen in /metrics), and /metrics parses with prometheus_client.

The fixture's server runs with --slow-client-timeout 2s and
--max-body-size 64K so that the limits are quick to reach."""
import json
import socket
import time

import pytest

from tram_server import server_fixture

server = server_fixture("--max-body-size", "64K", "--max-header-size", "4K", use_external=False)


def connect(server):
    s = socket.create_connection(server.host_port, timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s, timeout=10):
    """Everything until the server closes (or the timeout)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def read_response(s, timeout=10):
    """One response with a Content-Length body: (status, headers, body)."""
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        assert b, f"closed before a whole head: {buf!r}"
        buf += b
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    n = int(headers.get("content-length", 0))
    while len(rest) < n:
        b = s.recv(65536)
        assert b, "closed in the body"
        rest += b
    return status, headers, rest[:n], rest[n:]


def status_of(raw):
    assert raw.startswith(b"HTTP/1."), raw[:200]
    return int(raw.split(b" ", 2)[1])


def still_serving(server):
    assert server.get("/health").status_code == 200


@pytest.mark.parametrize("raw, status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
    (b"GET /health HTTP/1.1\r\nHost: x\r\n(bad): y\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400),
    (b"GET /he alth HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400),
    (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 8000 + b"\r\n\r\n", 431),
    (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n", 413),
])
def test_malformed_requests(server, raw, status):
    s = connect(server)
    s.sendall(raw)
    out = read_all(s)
    s.close()
    assert status_of(out) == status
    assert b'"error"' in out
    still_serving(server)


def test_oversized_chunked_body(server):
    s = connect(server)
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"a" * 16384
    try:
        for _ in range(8):  # 128 KiB > 64K
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert status_of(read_all(s)) == 413
    s.close()
    still_serving(server)


def test_truncated_body_times_out(server):
    s = connect(server)
    t0 = time.monotonic()
    s.sendall(b'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt": "a')
    out = read_all(s, timeout=10)
    assert status_of(out) == 408 and time.monotonic() - t0 < 6
    s.close()
    # a body cut off by the client closing: no answer, the connection just ends
    s = connect(server)
    s.sendall(b'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt"')
    s.shutdown(socket.SHUT_WR)
    assert read_all(s, timeout=5) == b""
    s.close()
    still_serving(server)


def test_pipelined_requests_in_order(server):
    body = json.dumps({"prompt": "pipelines"}).encode()
    s = connect(server)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
              b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s"
              b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n" % (len(body), body))
    st1, _, b1, rest = read_response(s)
    assert st1 == 200 and json.loads(b1) == {"status": "ok"}
    # the rest of the bytes may already hold the next responses
    s2 = _Prefixed(s, rest)
    st2, _, b2, rest = read_response(s2)
    assert st2 == 200 and json.loads(b2)["tokens"] == server.tokenize(prompt="pipelines")
    st3, _, _, _ = read_response(_Prefixed(s, rest))
    assert st3 == 404
    s.close()


class _Prefixed:
    """A socket whose first recv returns bytes already read."""

    def __init__(self, sock, prefix):
        self.sock, self.prefix = sock, prefix

    def settimeout(self, t):
        self.sock.settimeout(t)

    def recv(self, n):
        if self.prefix:
            out, self.prefix = self.prefix, b""
            return out
        return self.sock.recv(n)


def test_chunked_request_body(server):
    body = json.dumps({"prompt": "chunked bodies work"}).encode()
    parts = [body[:7], body[7:20], body[20:]]
    s = connect(server)
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    for p in parts:
        s.sendall(b"%x\r\n%s\r\n" % (len(p), p))
        time.sleep(0.05)
    s.sendall(b"0\r\n\r\n")
    st, _, b, _ = read_response(s)
    assert st == 200 and json.loads(b)["tokens"] == server.tokenize(prompt="chunked bodies work")
    s.close()


def test_slowloris_is_cut_off_and_others_are_served(server):
    s = connect(server)
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    t0 = time.monotonic()
    cut = None
    for i, byte in enumerate(head):
        try:
            s.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            cut = time.monotonic() - t0
            break
        if i % 10 == 0:
            still_serving(server)  # others are served meanwhile
        s.settimeout(0.2)
        try:
            got = s.recv(4096)
            cut = time.monotonic() - t0
            assert got == b"" or status_of(got) == 408
            break
        except socket.timeout:
            pass
    s.close()
    assert cut is not None and cut < 6, "the slow client was not cut off"
    still_serving(server)


def test_unknown_method_and_head(server):
    s = connect(server)
    s.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(5)
    head = s.recv(4096)
    assert status_of(head) == 200 and head.endswith(b"\r\n\r\n")
    s.close()
    s = connect(server)
    s.sendall(b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(read_all(s)) == 405
    s.close()


# --- disconnects, metrics ----------------------------------------------------------------


def wait_metric(server, name, pred, timeout=20, **labels):
    deadline = time.monotonic() + timeout
    while True:
        v = server.metric(name, **labels)
        if pred(v) or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def test_disconnect_mid_stream_frees_blocks(server):
    assert wait_metric(server, "tram:kv_cache_blocks_used", lambda v: v == 0) == 0
    aborts = server.metric("vllm:request_success_total", finished_reason="abort")
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 900, "ignore_eos": True, "temperature": 0,
                       "stream": True}).encode()
    s = connect(server)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    got = b""
    s.settimeout(30)
    while got.count(b"data: ") < 4:
        got += s.recv(65536)
    assert server.metric("tram:kv_cache_blocks_used") > 0
    assert server.metric("vllm:num_requests_running") == 1
    s.close()
    assert wait_metric(server, "tram:kv_cache_blocks_used", lambda v: v == 0) == 0
    assert server.metric("vllm:num_requests_running") == 0
    assert server.metric("vllm:request_success_total", finished_reason="abort") == aborts + 1
    still_serving(server)


def test_disconnect_while_waiting_for_a_whole_response(server):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 900, "ignore_eos": True}).encode()
    s = connect(server)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    assert wait_metric(server, "vllm:num_requests_running", lambda v: v == 1) == 1
    s.close()
    assert wait_metric(server, "vllm:num_requests_running", lambda v: v == 0) == 0
    assert wait_metric(server, "tram:kv_cache_blocks_used", lambda v: v == 0) == 0


EXPECTED = {
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "tram:kv_cache_blocks_used", "tram:kv_cache_blocks_total", "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total", "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total", "vllm:request_success_total", "tram:engine_steps_total",
    "vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_bucket",
    "vllm:e2e_request_latency_seconds_count", "vllm:request_queue_time_seconds_count",
    "vllm:request_prompt_tokens_bucket", "vllm:request_generation_tokens_bucket",
    "tram:http_connections_open", "tram:http_requests_total",
}


def test_metrics_parse_and_count(server):
    before = server.metrics()
    assert EXPECTED <= set(before), EXPECTED - set(before)
    r = server.client().completions.create(model=None, prompt="Metrics are", max_tokens=5, temperature=0,
                                           extra_body={"ignore_eos": True})
    after = server.metrics()

    def v(m, name, **labels):
        return m[name][frozenset(labels.items())]

    assert v(after, "vllm:request_success_total", finished_reason="length") == \
        v(before, "vllm:request_success_total", finished_reason="length") + 1
    assert v(after, "vllm:generation_tokens_total") - v(before, "vllm:generation_tokens_total") == 5
    assert v(after, "vllm:request_generation_tokens_count") == v(before, "vllm:request_generation_tokens_count") + 1
    assert v(after, "vllm:request_generation_tokens_sum") - v(before, "vllm:request_generation_tokens_sum") == 5
    assert v(after, "vllm:request_prompt_tokens_sum") - v(before, "vllm:request_prompt_tokens_sum") == \
        r.usage.prompt_tokens
    assert v(after, "vllm:inter_token_latency_seconds_count") - v(before, "vllm:inter_token_latency_seconds_count") == 4
    assert v(after, "vllm:time_to_first_token_seconds_count") == v(before, "vllm:time_to_first_token_seconds_count") + 1
    steps = sum(v(after, "tram:engine_steps_total", path=p) - v(before, "tram:engine_steps_total", path=p)
                for p in ("varlen", "decode"))
    assert steps >= 5
    assert v(after, "tram:kv_cache_blocks_total") > 0
    assert v(after, "vllm:prefix_cache_queries_total") >= v(after, "vllm:prefix_cache_hits_total")
