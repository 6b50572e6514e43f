"""Helpers for the dashboard tests: a reader of the snapshot stream, a
workload of concurrent streaming completions, and a small Chrome DevTools
Protocol client (websocket-client) for Debian's headless Chromium.

    snaps = SnapshotReader(server)          # a thread reading /dashboard/events
    work = Workload(server, n=8, max_tokens=200)
    with Chromium() as browser:
        page = browser.open(server.url + "/dashboard")
        page.eval("document.body.dataset.seq")
"""
import base64
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time

import httpx
import websocket


class SnapshotReader:
    """Reads /dashboard/events on a thread; .snaps holds every snapshot."""

    def __init__(self, server, headers=None):
        self.snaps = []
        self.cv = threading.Condition()
        self.error = None
        self.closed = False
        self.client = httpx.Client(base_url=server.url, timeout=60,
                                   transport=httpx.HTTPTransport(uds=str(server.uds)) if server.uds else None)
        self.thread = threading.Thread(target=self._run, args=(headers or {},), daemon=True)
        self.thread.start()

    def _run(self, headers):
        try:
            with self.client.stream("GET", "/dashboard/events", headers=headers) as r:
                assert r.status_code == 200, r.read()
                assert r.headers["content-type"].startswith("text/event-stream")
                for line in r.iter_lines():
                    if self.closed:
                        return
                    if line.startswith("data: "):
                        with self.cv:
                            self.snaps.append(json.loads(line[6:]))
                            self.cv.notify_all()
        except Exception as e:  # noqa: BLE001 - reported by wait()
            if not self.closed:
                self.error = e
        finally:
            with self.cv:
                self.cv.notify_all()

    def wait(self, pred=lambda s: True, after=0, timeout=30):
        """The first snapshot with seq > after for which pred holds."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for s in self.snaps:
                    if s["seq"] > after and pred(s):
                        return s
                if self.error:
                    raise self.error
                left = deadline - time.monotonic()
                assert left > 0, f"no matching snapshot in {timeout} s ({len(self.snaps)} seen)"
                self.cv.wait(left)

    def latest(self):
        with self.cv:
            return self.snaps[-1] if self.snaps else None

    def close(self):
        self.closed = True
        self.client.close()


class Workload:
    """n streaming completions at once on threads (ignore_eos, so each makes
    exactly max_tokens tokens, counted from the usage chunk); prompts share a
    prefix so the prefix cache has something to share."""

    PREFIX = "You are a helpful assistant who answers in full sentences about trains and trams. "

    def __init__(self, server, n=8, max_tokens=100, timeout=300):
        self.tokens = [0] * n
        self.errors = []
        self.client = httpx.Client(base_url=server.url, timeout=timeout)
        self.threads = [threading.Thread(target=self._one, args=(i, max_tokens), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _one(self, i, max_tokens):
        body = {"prompt": f"{self.PREFIX}Question {i}: why do trams run on rails?", "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        try:
            with self.client.stream("POST", "/v1/completions", json=body) as r:
                assert r.status_code == 200, r.read()
                for line in r.iter_lines():
                    if line.startswith("data: {") and '"usage":{' in line:
                        self.tokens[i] = json.loads(line[6:])["usage"]["completion_tokens"]
        except Exception as e:  # noqa: BLE001 - checked by join()
            self.errors.append(e)

    def join(self, timeout=300):
        for t in self.threads:
            t.join(timeout)
        self.client.close()
        assert not self.errors, self.errors


# --- Chromium through the DevTools protocol -------------------------------------------


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Page:
    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                assert "error" not in msg, msg
                return msg["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def wait(self, expr, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
            v = None if "exceptionDetails" in r else r["result"].get("value")  # not loaded yet
            if v:
                return v
            time.sleep(0.1)
        raise AssertionError(f"the page never satisfied {expr!r}")

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        pathlib.Path(path).write_bytes(base64.b64decode(r["data"]))

    def close(self):
        self.ws.close()


class Chromium:
    """Headless Chromium (Debian's package) on a DevTools port it picks."""

    def __init__(self, width=1280, height=1000):
        self.size = (width, height)

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="tram-chromium-")
        cmd = [chromium_path(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-dev-shm-usage", "--remote-debugging-port=0",
               f"--user-data-dir={self.dir}", f"--window-size={self.size[0]},{self.size[1]}", "about:blank"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = pathlib.Path(self.dir) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert self.proc.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.05)
        self.port = int(port_file.read_text().split("\n")[0])
        return self

    def open(self, url):
        targets = httpx.get(f"http://127.0.0.1:{self.port}/json/list", timeout=10).json()
        page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
        page.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1],
                  deviceScaleFactor=1, mobile=False)
        page.call("Page.enable")
        page.call("Page.navigate", url=url)
        return page

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


def have_chromium():
    return chromium_path() is not None and os.environ.get("TRAM_SKIP_BROWSER") != "1"
