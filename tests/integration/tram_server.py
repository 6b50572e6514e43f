"""A real `tram serve` for the server tests: start it on a free port with the
default model, wait until /health answers 200, stop it with SIGTERM (and
check that it exits 0).

    from tram_server import TramServer, server_fixture
    server = server_fixture("--max-model-len", "512")   # a module-scoped fixture

    def test_x(server):
        server.client()   # openai.OpenAI for server.url
        server.get("/health"), server.post("/tokenize", json=...)

TRAM_TEST_URL=http://127.0.0.1:8080 targets a server already running (e.g.
under gdb: `gdb --args build/tram serve -m MODEL`) instead: the fixture
starts nothing and stops nothing; tests that need a server of their own (other
settings, signals) still start one.

Servers run with `--threads 2` (the machine has 2 cores) and a short
slow-client timeout so that timeout tests stay quick; their log goes to a file
next to the test's tmp folder and is printed when a test fails.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_ARGS = ("--threads", "2", "--slow-client-timeout", "2s", "--max-model-len", "1024", "--drain-grace", "0s")


def clean_env(**extra):
    """The environment without TRAM_* and systemd variables (tram warns about
    unknown TRAM_* names; NOTIFY_SOCKET/LISTEN_* would change its behaviour)."""
    drop = ("TRAM_", "NOTIFY_SOCKET", "LISTEN_", "WATCHDOG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


def tram_bin():
    p = pathlib.Path(os.environ.get("TRAM_BIN", ROOT / "build" / "tram"))
    return p if p.is_absolute() else ROOT / p


def model_path():
    p = pathlib.Path(os.environ.get("TRAM_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    return p if p.is_absolute() else ROOT / p


def gemma3_path():
    """Gemma 3 270M Q4_K_M, the real Gemma the tests use (`make model-gemma3`)."""
    p = pathlib.Path(os.environ.get("TRAM_GEMMA3", ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"))
    p = p if p.is_absolute() else ROOT / p
    assert p.exists(), f"{p} is missing: run `make model-gemma3` first"
    return p


class TramServer:
    def __init__(self, url, proc=None, log_path=None, uds=None):
        self.url = url.rstrip("/")
        self.proc = proc
        self.log_path = log_path
        self.uds = uds  # a unix socket path: url is then http://localhost
        transport = httpx.HTTPTransport(uds=str(uds)) if uds else None
        self.http = httpx.Client(base_url=self.url, timeout=120, transport=transport)

    # --- requests -------------------------------------------------------------------
    def get(self, path, **kw):
        return self.http.get(path, **kw)

    def post(self, path, **kw):
        return self.http.post(path, **kw)

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", "none"), max_retries=0, **kw)

    def async_client(self, **kw):
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", "none"), max_retries=0, **kw)

    def sse(self, path, body):
        """POSTs body (a streaming request) and returns its events, parsed;
        asserts a 200 and the closing [DONE]."""
        with self.http.stream("POST", path, json=body) as r:
            assert r.status_code == 200, r.read()
            lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "[DONE]"
        return [json.loads(x) for x in lines[:-1]]

    def tokenize(self, **body):
        r = self.post("/tokenize", json=body)
        assert r.status_code == 200, r.text
        return r.json()["tokens"]

    def metrics(self):
        """{sample name: {frozenset(labels minus model_name and engine): value}} parsed
        with prometheus_client's text parser."""
        r = self.get("/metrics")
        assert r.status_code == 200, r.text
        out = {}
        for fam in text_string_to_metric_families(r.text):
            for s in fam.samples:
                labels = frozenset((k, v) for k, v in s.labels.items() if k not in ("model_name", "engine"))
                out.setdefault(s.name, {})[labels] = s.value
        return out

    def metric(self, name, **labels):
        return self.metrics()[name][frozenset(labels.items())]

    @property
    def host_port(self):
        m = re.match(r"http://([^/]+)", self.url)
        host, port = m.group(1).rsplit(":", 1)
        return host.strip("[]"), int(port)

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    # --- life -----------------------------------------------------------------------
    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"tram exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if self.get("/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"tram did not become ready in {timeout} s:\n{self.log()[-3000:]}")

    def stop(self, timeout=60):
        """SIGTERM, wait; returns the exit status (None for an external server)."""
        self.http.close()
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"tram did not stop within {timeout} s of SIGTERM:\n{self.log()[-3000:]}")


def wait_for_port(proc, log_path, timeout=60):
    """The port tram logged ("listening on 127.0.0.1:PORT")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        m = re.search(r"listening on (\S+):\d+ \(port (\d+)\)", text)
        if m:
            return m.group(1), int(m.group(2))
        if proc.poll() is not None:
            raise AssertionError(f"tram exited with {proc.returncode} before listening:\n{text[-3000:]}")
        time.sleep(0.02)
    raise AssertionError("tram did not log its port")


def wait_for_file(proc, path, log_path, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise AssertionError(f"tram exited with {proc.returncode} before listening:\n{log_path.read_text()}")
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)


def start(log_dir, *args, binary=None, env=None, wait=True, default_args=True, url=None, uds=None, prefix=(),
          model=None, **popen):
    """Starts `tram serve -m MODEL --port 0 ...` (prefix: words before the
    program, e.g. a wrapper; model: another file than the default model) and
    returns a TramServer (ready unless wait=False). The log goes to log_dir/tram-N.log. With uds (the
    --unix-socket path, which the caller passes in args) or url given, the
    address is not read from the log."""
    log_dir = pathlib.Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"tram-{time.monotonic_ns()}.log"
    cmd = [*prefix, str(binary or tram_bin()), "serve", "-m", str(model or model_path()), "--host", "127.0.0.1",
           "--port", "0", *(DEFAULT_ARGS if default_args else ()), *map(str, args)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env or clean_env(), **popen)
    try:
        if uds:
            wait_for_file(proc, uds, log_path)
            srv = TramServer("http://localhost", proc, log_path, uds=uds)
        elif url:
            srv = TramServer(url, proc, log_path)
        else:
            host, port = wait_for_port(proc, log_path)
            srv = TramServer(f"http://{host}:{port}", proc, log_path)
        if wait:
            srv.wait_ready()
    except BaseException:  # never leave a tram running behind a failed start
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    return srv


def server_fixture(*args, use_external=True, model=None):
    """A module-scoped fixture: a server with DEFAULT_ARGS + args (of model,
    a callable giving the path, if not the default), or the one at
    TRAM_TEST_URL. Stopping it must give exit status 0."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory):
        external = os.environ.get("TRAM_TEST_URL")
        if external and use_external:
            srv = TramServer(external)
            srv.wait_ready()
            yield srv
            srv.stop()
            return
        srv = start(tmp_path_factory.mktemp("tram"), *args, model=model and model())
        try:
            yield srv
        finally:
            rc = srv.stop()
            print(srv.log()[-4000:])
        assert rc == 0, f"tram exited with {rc}"

    return server


async def assemble_tool_call(stream):
    """A streamed chat completion (the openai client's async stream) assembled as a client does:
    (the first call's name, its arguments, the finish_reason)."""
    name, args, finish = "", "", None
    async for ch in stream:
        for tc in ch.choices[0].delta.tool_calls or []:
            name += tc.function.name or ""
            args += tc.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    return name, args, finish
