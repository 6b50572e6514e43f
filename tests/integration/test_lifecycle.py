"""`tram serve` as a service (issue 8): sd_notify (READY=1 only once /health
answers 200, STATUS= lines, STOPPING=1 on SIGTERM, WATCHDOG=1 pings when
WATCHDOG_USEC is set) through a datagram socket the test holds as
NOTIFY_SOCKET; SIGTERM with 16 streams in flight (all complete, new
connections are refused, exit 0); the drain grace (/health 503 "draining"
and new requests 503 while the listener stays open, then it closes); the
drain timeout; a second signal;
socket activation (LISTEN_FDS, and a connection made while tram is down
waits in the held socket's queue); SIGHUP reopening the log file; and the
main paths once under the ASan/UBSan build (build/san/tram)."""
import json
import os
import pathlib
import re
import signal
import socket
import threading
import time

import httpx
import pytest

from tram_server import ROOT, clean_env, start


@pytest.fixture
def launch(tmp_path):
    """launch(*args, **kw) starts a tram like tram_server.start; whatever is
    still running when the test ends (a failed test) is killed."""
    started = []

    def go(*args, **kw):
        srv = start(tmp_path, *args, **kw)
        started.append(srv)
        return srv

    yield go
    for srv in started:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


class Notify:
    """A datagram socket for NOTIFY_SOCKET; collects what tram sends."""

    def __init__(self, tmp_path):
        self.path = str(tmp_path / "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []  # (time, text)

    def wait_for(self, text, timeout=30):
        """Receives until a message holding the line `text` arrives; returns
        its arrival time."""
        deadline = time.monotonic() + timeout
        for t, m in self.messages:
            if text in m.split("\n"):
                return t
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text} in {self.messages}"
            self.sock.settimeout(left)
            m = self.sock.recv(4096).decode()
            now = time.monotonic()
            self.messages.append((now, m))
            if text in m.split("\n"):
                return now

    def lines(self, prefix):
        return [l for _, m in self.messages for l in m.split("\n") if l.startswith(prefix)]

    def close(self):
        self.sock.close()


def sse_stream(url, body, out, started, uds=None):
    """One streamed completion; appends {"text", "finish", "done", "usage"}
    to out. Sets `started` after the first content event."""
    res = {"text": "", "finish": None, "done": False, "usage": None, "error": None}
    try:
        transport = httpx.HTTPTransport(uds=uds) if uds else None
        with httpx.Client(base_url=url, timeout=120, transport=transport) as c:
            with c.stream("POST", "/v1/completions", json=body) as r:
                assert r.status_code == 200, r.read()
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        res["done"] = True
                        continue
                    o = json.loads(line[6:])
                    if o.get("usage"):
                        res["usage"] = o["usage"]
                    for ch in o["choices"]:
                        res["text"] += ch["text"]
                        res["finish"] = ch["finish_reason"] or res["finish"]
                    started.set()
    except Exception as e:  # noqa: BLE001 - reported by the test
        res["error"] = repr(e)
    finally:
        started.set()
        out.append(res)


def start_streams(srv, n, max_tokens):
    body = {"prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    out, threads = [], []
    for _ in range(n):
        ev = threading.Event()
        t = threading.Thread(target=sse_stream, args=(srv.url, body, out, ev, srv.uds), daemon=True)
        t.start()
        threads.append((t, ev))
    for t, ev in threads:
        assert ev.wait(120), "a stream did not start"
    return out, [t for t, _ in threads]


def refused(host, port):
    """Whether a new connection is refused (or reset: made in the kernel's
    queue just before the listener closed)."""
    try:
        socket.create_connection((host, port), timeout=2).close()
        return False
    except (ConnectionRefusedError, ConnectionResetError):
        return True


def test_sd_notify_ready_status_stopping(tmp_path, launch):
    n = Notify(tmp_path)
    srv = launch(env=clean_env(NOTIFY_SOCKET=n.path), wait=False)
    try:
        n.wait_for("READY=1")
        # READY=1 is sent after the state flips: /health answers 200 at once
        assert srv.get("/health").status_code == 200
        status = n.lines("STATUS=")
        assert status[0].startswith("STATUS=loading ") and any(s.startswith("STATUS=ready") for s in status)
        assert len(n.lines("READY=1")) == 1
        srv.proc.send_signal(signal.SIGTERM)
        n.wait_for("STOPPING=1")
        assert srv.proc.wait(30) == 0
        assert any(s.startswith("STATUS=draining") for s in n.lines("STATUS="))
        assert not n.lines("WATCHDOG=1")  # no WATCHDOG_USEC: no pings
    finally:
        n.close()
        srv.stop()


def test_watchdog_pings(tmp_path, launch):
    n = Notify(tmp_path)
    srv = launch(env=clean_env(NOTIFY_SOCKET=n.path, WATCHDOG_USEC="1000000"), wait=False)
    try:
        t_ready = n.wait_for("READY=1")
        # a request keeps the engine busy meanwhile: it makes progress, so the pings go on
        r = srv.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 16, "ignore_eos": True})
        assert r.status_code == 200
        time.sleep(max(0.0, t_ready + 2.5 - time.monotonic()))
        while True:
            n.sock.settimeout(0.05)
            try:
                n.messages.append((time.monotonic(), n.sock.recv(4096).decode()))
            except socket.timeout:
                break
        pings = [t for t, m in n.messages if "WATCHDOG=1" in m.split("\n") and t >= t_ready]
        assert len(pings) >= 3, n.messages
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert max(gaps) < 1.0, gaps  # always within WATCHDOG_USEC
    finally:
        n.close()
        assert srv.stop() == 0


def test_sigterm_with_16_streams_in_flight(tmp_path, launch):
    srv = launch("--max-seqs", "16")
    host, port = srv.host_port
    out, threads = start_streams(srv, 16, 24)
    srv.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while not refused(host, port):  # the listener closes at once
        assert time.monotonic() < deadline, "new connections are still accepted while draining"
        time.sleep(0.02)
    for t in threads:
        t.join(120)
    assert srv.proc.wait(60) == 0
    assert len(out) == 16
    for r in out:
        assert r["error"] is None, r
        assert r["done"] and r["finish"] == "length" and r["usage"]["completion_tokens"] == 24, r
    assert "draining (16 requests in flight" in srv.log()


def test_drain_timeout_ends_the_rest(tmp_path, launch):
    srv = launch("--drain-timeout", "1s")
    out, threads = start_streams(srv, 2, 1000)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert srv.proc.wait(30) == 0
    assert time.monotonic() - t0 < 10
    for r in out:
        assert r["error"] is None and r["done"] and r["finish"] == "abort", r
        assert r["usage"]["completion_tokens"] < 1000
    assert "drain timeout" in srv.log()


def test_drain_grace_keeps_the_listener_open(tmp_path, launch):
    """SIGTERM with a drain grace: /health answers 503 "draining" at once on
    new connections (a load balancer's probe sees it), new generation
    requests get 503 with Retry-After, the stream in flight finishes, then
    the listener closes and tram exits 0."""
    srv = launch("--drain-grace", "3s")
    host, port = srv.host_port
    out, threads = start_streams(srv, 1, 48)
    srv.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while True:  # a fresh connection each time: the listener must stay open
        h = httpx.get(srv.url + "/health", headers={"Connection": "close"}, timeout=10)
        if h.status_code == 503:
            break
        assert h.status_code == 200 and time.monotonic() < deadline, h.text
        time.sleep(0.02)
    assert h.json() == {"status": "draining"}
    r = httpx.post(srv.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 4}, timeout=10)
    assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
    assert r.json()["error"]["code"] == "draining"
    assert httpx.get(srv.url + "/metrics", timeout=10).status_code == 200  # still scraped meanwhile
    assert srv.proc.poll() is None
    deadline = time.monotonic() + 60
    while not refused(host, port):  # then the listener closes
        assert time.monotonic() < deadline, "the listener stayed open after the grace"
        time.sleep(0.05)
    for t in threads:
        t.join(120)
    assert srv.proc.wait(60) == 0
    assert out[0]["error"] is None and out[0]["finish"] == "length", out
    assert out[0]["usage"]["completion_tokens"] == 48
    log = srv.log()
    assert "listener stays open 3.0 s" in log and "drain grace over: closing the listener" in log


def test_sigint_skips_the_drain_grace(tmp_path, launch):
    """Ctrl-C (SIGINT) drains without the grace: the listener closes at once
    and an idle tram exits 0 long before a 60 s grace would end."""
    srv = launch("--drain-grace", "60s")
    srv.proc.send_signal(signal.SIGINT)
    assert srv.proc.wait(30) == 0
    log = srv.log()
    assert "Interrupt: draining (0 requests in flight" in log and "listener stays open" not in log, log[-2000:]


def test_second_signal_exits_at_once(tmp_path, launch):
    srv = launch()
    out, threads = start_streams(srv, 1, 1000)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert srv.proc.poll() is None  # draining: the stream runs on
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGINT)
    rc = srv.proc.wait(10)
    assert time.monotonic() - t0 < 2 and rc == 1
    assert "exiting now" in srv.log()
    for t in threads:
        t.join(10)


def activated(launch, listener, *args):
    """tram with `listener` as fd 3 and LISTEN_FDS=1, LISTEN_PID = its own pid:
    a small bash wrapper moves the socket to fd 3, sets LISTEN_PID to its own
    pid and execs tram (which keeps that pid). tram's --port is ignored."""
    fd = listener.fileno()
    wrapper = f'exec 3<&{fd} {fd}<&-; export LISTEN_PID=$$; exec "$0" "$@"'
    return launch("--port", "1", *args, url="http://127.0.0.1:%d" % listener.getsockname()[1],
                 env=clean_env(LISTEN_FDS="1"), prefix=("bash", "-c", wrapper), pass_fds=(fd,))


def test_socket_activation(tmp_path, launch):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        srv = activated(launch, listener)
        assert "LISTEN_FDS" in srv.log()
        r = srv.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2})
        assert r.status_code == 200
        assert srv.stop() == 0
        # tram is gone, the socket is still held: a client connects and waits ...
        c = socket.create_connection(listener.getsockname(), timeout=30)
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # ... until the next tram takes the socket and answers it
        srv2 = activated(launch, listener)
        c.settimeout(30)
        got = b""
        while b"\r\n\r\n" not in got:
            got += c.recv(4096)
        c.close()
        assert got.startswith(b"HTTP/1.1 ") and int(got.split()[1]) in (200, 503)
        assert srv2.stop() == 0
    finally:
        listener.close()


def test_sighup_reopens_the_log_file(tmp_path, launch):
    log = tmp_path / "tram.log"
    uds = str(tmp_path / "tram.sock")
    srv = launch("--log-file", log, "--unix-socket", uds, uds=uds)
    try:
        assert "ready: serving" in log.read_text()
        rotated = tmp_path / "tram.log.1"
        log.rename(rotated)
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not log.exists():
            assert time.monotonic() < deadline, "SIGHUP did not create a new log file"
            time.sleep(0.02)
        assert srv.post("/tokenize", json={"prompt": "after rotation"}).status_code == 200
        assert srv.stop() == 0
        new, old = log.read_text(), rotated.read_text()
        assert "SIGHUP: log file reopened" in new and "endpoint=/tokenize" in new and "stopped" in new
        assert "ready: serving" in old and "endpoint=/tokenize" not in old
    finally:
        srv.stop()


def test_sanitized_build(tmp_path, launch):
    """The main paths under ASan + UBSan (make sanitize builds build/san/tram):
    whole and streamed answers, errors, a client leaving mid-stream, /metrics,
    /server_info and /model_info, KV-cache events published, then SIGTERM with a stream in flight that the drain timeout ends: exit 0
    with no report."""
    binary = pathlib.Path(os.environ.get("TRAM_SAN_BIN", ROOT / "build" / "san" / "tram"))
    binary = binary if binary.is_absolute() else ROOT / binary
    assert binary.exists(), f"{binary} is missing: run `make sanitize`"
    env = clean_env(ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1",
                    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    srv = launch("--drain-timeout", "1s", "--kv-events", f"ipc://{tmp_path}/kv.sock", binary=binary, env=env)
    out, threads = [], []
    try:
        c = srv.client()
        assert c.completions.create(model=None, prompt="Hi", max_tokens=3, logprobs=2).choices[0].text
        chunks = list(c.chat.completions.create(model=None, messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=3, stream=True, logprobs=True, top_logprobs=2,
                                                stream_options={"include_usage": True}))
        assert chunks[-1].usage.completion_tokens == 3
        assert srv.post("/v1/completions", json={"prompt": "x", "temperature": 9}).status_code == 400
        assert srv.post("/v1/completions", json={"prompt": ["a", "b"], "n": 2, "max_tokens": 2,
                                                  "echo": True, "stop": ["zz"]}).status_code == 200
        assert srv.post("/tokenize", json={"messages": [{"role": "user", "content": "Hi"}]}).status_code == 200
        assert srv.post("/detokenize", json={"tokens": [1, 2, 3]}).status_code == 200
        assert srv.get("/server_info").status_code == 200 and srv.get("/get_model_info").status_code == 200
        body = json.dumps({"prompt": "Once", "max_tokens": 500, "ignore_eos": True, "stream": True}).encode()
        s = socket.create_connection(srv.host_port, timeout=60)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(65536)
        s.close()
        deadline = time.monotonic() + 60
        while srv.metric("vllm:num_requests_running") != 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert srv.metric("tram:kv_cache_blocks_used") == 0
        out, threads = start_streams(srv, 1, 1000)  # still running at SIGTERM: the drain timeout ends it
    finally:
        rc = srv.stop(timeout=120)
    for t in threads:
        t.join(60)
    assert [r["finish"] for r in out] == ["abort"] * len(threads), out
    log = srv.log()
    assert not re.search(r"AddressSanitizer|LeakSanitizer|runtime error", log), log[-5000:]
    assert rc == 0, log[-3000:]
    assert re.search(r"kv_events: [1-9]\d* batches sent", log), log[-3000:]  # the blocks streamed tokens filled


def test_request_timeout(tmp_path, launch):
    """request_timeout ends a request with what it has (finish_reason
    "abort"), streamed or whole; the server serves on."""
    srv = launch("--request-timeout", "1s")
    try:
        t0 = time.monotonic()
        out, threads = start_streams(srv, 1, 1000)
        r = srv.post("/v1/completions", json={"prompt": "Once", "max_tokens": 1000, "ignore_eos": True})
        for t in threads:
            t.join(30)
        assert time.monotonic() - t0 < 6
        assert r.status_code == 200
        c = r.json()["choices"][0]
        assert c["finish_reason"] == "abort" and 0 < r.json()["usage"]["completion_tokens"] < 1000
        assert out[0]["finish"] == "abort" and out[0]["done"], out
        assert srv.get("/health").status_code == 200
        assert "finish_reason=timeout" in srv.log()
    finally:
        assert srv.stop() == 0
