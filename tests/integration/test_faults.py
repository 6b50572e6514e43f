"""Fault injection (issue 17, item 4): the paths no request can reach, made
reachable by the TRAM_FAULTS hooks of the test build (base/fault.h; `make
sanitize` builds build/san/tram with them, under ASan + UBSan):

- a slow model load: /health answers 503 "loading" until the model is in;
- a model file that cannot be read, or is truncated on disk: refused at
  load with one clear line, exit 1;
- a wedged engine: /health answers 503 "stalled", the systemd watchdog
  pings stop (NOTIFY_SOCKET is a socket this test reads), the requests in
  flight get a clean error (an error event that ends the stream; a 503),
  and once the engine moves again everything serves as before;
- memory running out in the request parsers: 503 "out_of_memory", never a
  400 blamed on the client, nothing leaked (ASan checks at exit);
- a starved loop (stalled for seconds while clients connect and send): no
  request is lost; every one gets its whole answer.
"""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import threading
import time

import httpx
import pytest

from test_lifecycle import Notify
from tram_server import ROOT, clean_env, model_path, start

SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:strict_string_checks=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


@pytest.fixture(scope="module")
def fault_bin():
    binary = pathlib.Path(os.environ.get("TRAM_SAN_BIN", ROOT / "build" / "san" / "tram"))
    binary = binary if binary.is_absolute() else ROOT / binary
    assert binary.exists(), f"{binary} is missing: run `make sanitize` (the fault-injection build)"
    return binary


@pytest.fixture
def launch(tmp_path, fault_bin):
    """launch(faults, *args, env=...) starts the fault build with
    TRAM_FAULTS=faults; whatever still runs when the test ends is killed."""
    started = []

    def go(faults, *args, env=None, **kw):
        e = clean_env(TRAM_FAULTS=faults, **SAN_ENV, **(env or {}))
        srv = start(tmp_path, *args, binary=fault_bin, env=e, **kw)
        started.append(srv)
        return srv

    yield go
    for srv in started:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def assert_clean(srv):
    log = srv.log()
    assert "Sanitizer" not in log and "runtime error" not in log, log[-4000:]


def health(srv):
    r = srv.get("/health", timeout=10)
    return r.status_code, r.json().get("status")


# --- loading -------------------------------------------------------------------------


def test_health_says_loading_during_a_slow_load(launch):
    srv = launch("model_read_delay=2500", wait=False)
    try:
        seen = set()
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, seen
            try:
                code, status = health(srv)
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            seen.add((code, status))
            if code == 200:
                break
            time.sleep(0.05)
        assert (503, "loading") in seen and (200, "ok") in seen, seen
        assert "fault injection on: model_read_delay=2500" in srv.log()
    finally:
        assert srv.stop() == 0
    assert_clean(srv)


def run_serve(binary, model, env, timeout=120):
    return subprocess.run([str(binary), "serve", "-m", str(model), "--port", "0", "--threads", "2"],
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_a_model_read_error_is_refused_with_one_clear_line(fault_bin):
    r = run_serve(fault_bin, model_path(), clean_env(TRAM_FAULTS="model_read=fail", **SAN_ENV))
    assert r.returncode == 1, r.stderr[-3000:]
    assert re.search(r"error: .*SmolLM2.*: cannot read: Input/output error", r.stderr), r.stderr[-3000:]
    assert "Sanitizer" not in r.stderr


@pytest.mark.parametrize("keep", [0.5, 0.999])
def test_a_truncated_model_file_is_refused_at_load(tmp_path, keep):
    """Cut in its tensor data (half of it, or its last bytes): `tram serve`
    says which file and why, and exits 1 — no crash, no listening."""
    src = model_path()
    cut = tmp_path / "cut.gguf"
    size = src.stat().st_size
    with open(src, "rb") as f, open(cut, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
        g.truncate(int(size * keep))
    from tram_server import tram_bin
    r = run_serve(tram_bin(), cut, clean_env())
    assert r.returncode == 1, r.stderr[-3000:]
    errors = [l for l in r.stderr.splitlines() if " error: " in l or l.startswith("error")]
    assert errors and any("cut.gguf" in l and "runs past the end of the file" in l for l in errors), \
        r.stderr[-3000:]
    assert "ready" not in r.stderr


# --- a wedged engine ---------------------------------------------------------------------


def test_wedged_engine(tmp_path, launch):
    """The engine sleeps 8 s after its first step (engine_stall); 1 s without
    a step counts as stalled (stall_ms: 30 s in production), and the
    watchdog's period is 1 s: /health turns 503 "stalled", the WATCHDOG=1 pings stop,
    the stream in flight gets an error event and its end, the whole
    response a 503; afterwards /health is 200 again, the pings resume and
    requests are answered as before."""
    n = Notify(tmp_path)
    srv = launch("engine_stall=8000,stall_ms=1000", env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "1000000"},
                 wait=False)
    results = {}

    def stream():
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            with c.stream("POST", "/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 64,
                                                            "stream": True, "ignore_eos": True}) as r:
                results["stream_status"] = r.status_code
                results["stream"] = [l for l in r.iter_lines() if l.startswith("data: ")]

    def whole():
        r = httpx.post(srv.url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 64}, timeout=60)
        results["whole"] = (r.status_code, r.json())

    try:
        n.wait_for("READY=1")
        srv.wait_ready()
        threads = [threading.Thread(target=f, daemon=True) for f in (stream, whole)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while "engine_stall: sleeping" not in srv.log():  # the wedge begins (a slow step before it is not it)
            assert time.monotonic() < deadline, "the engine did not stall"
            time.sleep(0.05)
        while health(srv) != (503, "stalled"):
            assert time.monotonic() < deadline, "/health never said stalled"
            time.sleep(0.05)
        def drain():
            n.sock.settimeout(0.01)
            while True:
                try:
                    n.messages.append((time.monotonic(), n.sock.recv(4096).decode()))
                except socket.timeout:
                    return

        time.sleep(0.6)  # the ping for the last step before the wedge comes within half a period
        drain()
        pings_before = len(n.lines("WATCHDOG=1"))
        time.sleep(2.0)  # four ping periods
        drain()
        assert health(srv) == (503, "stalled")
        assert len(n.lines("WATCHDOG=1")) == pings_before, "the watchdog was pinged while the engine was wedged"
        for t in threads:
            t.join(30)
        # the clients in flight were answered cleanly while the engine was still wedged
        assert health(srv) == (503, "stalled")
        code, body = results["whole"]
        assert code == 503 and body["error"]["code"] == "engine_stalled", body
        assert results["stream_status"] == 200
        last = json.loads(results["stream"][-1][6:])
        assert last["error"]["code"] == "engine_stalled", results["stream"]
        # the engine comes back: /health 200, pings again, requests served
        deadline = time.monotonic() + 60
        while health(srv) != (200, "ok"):
            assert time.monotonic() < deadline, "/health did not recover"
            time.sleep(0.1)
        n.sock.settimeout(5)
        n.messages.append((time.monotonic(), n.sock.recv(4096).decode()))
        drain()
        assert len(n.lines("WATCHDOG=1")) > pings_before
        r = srv.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 4})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4, r.text
        assert "watchdog: the engine ran no step" in srv.log()
    finally:
        n.close()
        assert srv.stop() == 0
    assert_clean(srv)


def test_sigterm_with_a_wedged_engine_exits_1(launch):
    """SIGTERM while the engine is wedged for good (a 10-minute engine_stall):
    the drain runs its course (drain_timeout 1 s, then the 5 s close grace),
    the client in flight is answered engine_stalled, and since the engine
    thread can be neither joined nor freed tram exits at once with status 1
    (a failure, so systemd restarts it) instead of hanging until SIGKILL."""
    srv = launch("engine_stall=600000,stall_ms=1000", "--drain-timeout", "1s", "--drain-grace", "0s")
    result = {}

    def whole():
        r = httpx.post(srv.url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 64}, timeout=60)
        result["whole"] = (r.status_code, r.json())

    t = threading.Thread(target=whole, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while health(srv) != (503, "stalled"):
        assert time.monotonic() < deadline, "/health never said stalled"
        time.sleep(0.05)
    t.join(30)
    assert result["whole"][0] == 503 and result["whole"][1]["error"]["code"] == "engine_stalled", result
    t0 = time.monotonic()
    status = srv.stop(timeout=30)
    took = time.monotonic() - t0
    log = srv.log()
    assert status == 1, log[-3000:]
    assert "it is wedged; exiting without waiting for it" in log, log[-3000:]
    assert took < 20, took  # drain 1 s + close grace 5 s + the 1 s check, far from the 30 s kill
    assert_clean(srv)


# --- memory running out in the request parsers ---------------------------------------------


PARSER_REQUESTS = [
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 1, "stop": ["a", "b"], "logit_bias": {"5": 1}}),
    ("/v1/completions", {"prompt": [[1, 2, 3], [4, 5]], "max_tokens": 1, "n": 2}),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Hi"}], "max_tokens": 1,
                              "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                                  "type": "object", "properties": {"x": {"type": "integer"}}}}}]}),
    ("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                                 {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Go"}],
                       "instructions": "Be brief.", "max_output_tokens": 1, "temperature": 0}),
    ("/tokenize", {"prompt": "Hello there, world"}),
    ("/tokenize", {"messages": [{"role": "user", "content": "Hi"}]}),
    ("/detokenize", {"tokens": [1, 2, 3, 4, 5, 6]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                              "response_format": {"type": "json_schema", "json_schema": {
                                  "name": "n", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}),
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 1, "structured_outputs": {"choice": ["yes", "no"]}}),
]


@pytest.mark.parametrize("everies", [
    pytest.param((13, 199), id="short"),
    pytest.param((13, 41, 97, 199, 499), id="all", marks=pytest.mark.long),
])
def test_allocation_failure_in_parsers_is_a_503_and_leaks_nothing(launch, everies):
    """Every Nth allocation that may fail does (N = 13 and 199 in make test,
    13, 41, 97, 199 and 499 in make test-long; a server each): those of a request's JSON parse, of the request parsers' arena
    (the OpenAI fields, messages, tools, structured output, the Responses
    input) and of the HTTP head's copy. Each answer is the request's own
    (200) or 503 out_of_memory, never a 400 and never a crash; every route
    sees both; ASan finds no leak when each server stops.
    (tests/unit/test_openai_request.c's out_of_memory fails each arena
    allocation of the parsers in turn.)"""
    seen = {}
    for every in everies:
        srv = launch(f"alloc_fail={every}", "--tool-call-parser", "hermes")  # the default template has no tool format
        try:
            for _ in range(4):
                for k, (path, body) in enumerate(PARSER_REQUESTS):
                    r = srv.post(path, json=body)
                    if r.status_code == 503:
                        assert r.json()["error"]["code"] == "out_of_memory", r.text
                    else:
                        assert r.status_code == 200, (path, body, r.text)
                    seen.setdefault(k, set()).add(r.status_code)
            # /health's own head copy may be the one that fails: a 503 out_of_memory, then 200
            for _ in range(5):
                r = srv.get("/health", timeout=10)
                if r.status_code == 200:
                    break
                assert r.status_code == 503 and r.json()["error"]["code"] == "out_of_memory", r.text
            assert r.status_code == 200 and r.json()["status"] == "ok"
        finally:
            assert srv.stop() == 0
        assert_clean(srv)
    assert all(codes == {200, 503} for codes in seen.values()), seen


# --- a starved loop ------------------------------------------------------------------------


def send_and_read(sock, path, body, results, i):
    """One request over a connected plain socket (no retries, no pooling):
    records the status and the whole answer, or what went wrong."""
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    try:
        with sock:
            sock.sendall(head + data)
            got = b""
            while chunk := sock.recv(65536):
                got += chunk
        status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else None
        results[i] = (status, got)
    except OSError as e:
        results[i] = (None, repr(e).encode())


def test_a_starved_loop_loses_no_request(launch):
    """20 clients connect; then the loop sleeps 6 s at its first engine event
    (loop_stall), longer than their first-request deadline (slow_client_timeout,
    5 s), and they send their requests meanwhile (good ones, a bad one like
    {"prompt":[1,-5]}, tokenize, a stream). When the loop wakes, the
    deadlines it armed before find their bytes waiting: every request is
    answered whole — none is closed unanswered (as 8 of 20 were, silently,
    under valgrind)."""
    srv = launch("loop_stall=6000", "--slow-client-timeout", "5s")
    host, port = srv.host_port
    t_open = time.monotonic()
    socks = [socket.create_connection((host, port), timeout=60) for _ in range(20)]
    time.sleep(0.3)  # accepted: their first-request deadlines run
    first = {}
    t0 = threading.Thread(target=send_and_read, args=(socket.create_connection((host, port), timeout=60),
                                                      "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, first, 0))
    t0.start()
    deadline = time.monotonic() + 60
    while "loop_stall: sleeping" not in srv.log():  # its first token wakes the loop, which sleeps
        assert time.monotonic() < deadline
        time.sleep(0.02)
    if time.monotonic() - t_open > 4.5:
        for sock in socks:
            sock.close()
        t0.join(60)
        assert srv.stop() == 0
        pytest.skip("the first token came after the clients' deadlines (a loaded machine): nothing to test")
    bodies = [("/v1/completions", {"prompt": "Hello", "max_tokens": 2}),
              ("/v1/completions", {"prompt": [1, -5]}),
              ("/tokenize", {"prompt": "Hi"}),
              ("/v1/completions", {"prompt": "Hi", "max_tokens": 2, "stream": True})]  # short prompts: a quick engine
    results = {}
    threads = []
    for i, sock in enumerate(socks):
        path, body = bodies[i % len(bodies)]
        t = threading.Thread(target=send_and_read, args=(sock, path, body, results, i))
        t.start()
        threads.append(t)
    for t in threads + [t0]:
        t.join(120)
    try:
        assert first[0][0] == 200, first
        want = {0: 200, 1: 400, 2: 200, 3: 200}
        for i in range(20):
            status, got = results[i]
            assert status == want[i % 4], (i, got[-500:])
            if i % 4 == 3:
                assert b"data: [DONE]" in got, got[-300:]
    finally:
        assert srv.stop() == 0
    assert_clean(srv)
