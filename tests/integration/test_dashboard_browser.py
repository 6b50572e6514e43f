"""The dashboard page in a real browser: Debian's headless Chromium, driven
through its DevTools protocol (dashboard_util.Chromium), loads /dashboard
while eight streams generate, and the DOM is checked against /metrics: one
cell per KV block, the held cells between the /metrics readings taken before
the drawn snapshot was built and after the DOM was read (no sequence ends in
between, so held blocks only grow), the queue counts, the legend's numbers
against the cells' classes, a row per live request. A screenshot is saved
(TRAM_DASHBOARD_SCREENSHOT=docs/dashboard.png writes the one the README
shows). A second test types an API key into the page's prompt and sees the
stream start (the key travels in a header, never the URL)."""
import os
import pathlib
import struct
import time

import pytest

from dashboard_util import Chromium, Workload, have_chromium
from tram_server import start

pytestmark = pytest.mark.skipif(not have_chromium(), reason="chromium is not installed (scripts/setup.sh installs it)")

READ_DOM = """(() => {
  const n = (sel) => document.querySelectorAll(sel).length;
  const t = (id) => document.getElementById(id).textContent;
  return {time: Number(document.body.dataset.time), seq: Number(document.body.dataset.seq),
          cells: n('#kv-map .cell'), s0: n('#kv-map .cell.s0'), s1: n('#kv-map .cell.s1'),
          s2: n('#kv-map .cell.s2'), s3: n('#kv-map .cell.s3'),
          free: t('kv-free'), cached: t('kv-cached'), owned: t('kv-owned'), shared: t('kv-shared'),
          running: t('q-running'), waiting: t('q-waiting'), preempted: t('q-preempted'),
          rows: n('#requests tbody tr'), conn: t('conn'), info: t('info')};
})()"""


def png_size(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_page_shows_the_engine(tmp_path):
    srv = start(tmp_path, "--kv-cache-blocks", "160", "--block-size", "16", "--max-seqs", "8")
    try:
        # a finished request leaves cached blocks; the workload shares a prefix
        r = srv.post("/v1/completions", json={"prompt": "Trams in Lisbon climb steep hills because", "max_tokens": 40,
                                               "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200
        # one stream first: once it generates, its full prompt block is published and the others share it
        gen0 = srv.metric("vllm:generation_tokens_total")
        lead = Workload(srv, n=1, max_tokens=200)
        deadline = time.monotonic() + 60
        while srv.metric("vllm:generation_tokens_total") == gen0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        work = Workload(srv, n=7, max_tokens=200)
        while srv.metric("vllm:num_requests_running") < 8:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with Chromium() as browser:
            page = browser.open(srv.url + "/dashboard")
            page.wait("document.body && Number(document.body.dataset.seq) >= 2")
            m1 = srv.metrics()
            t1 = time.monotonic() * 1000
            page.wait(f"Number(document.body.dataset.time) > {t1}")  # a snapshot built after m1
            dom = page.eval(READ_DOM)
            m2 = srv.metrics()
            one = lambda m, name: m[name][frozenset()]  # noqa: E731
            assert one(m2, "vllm:num_requests_running") == 8  # nobody ended: held blocks only grew
            assert dom["time"] > t1 and dom["conn"] == "live"
            assert dom["cells"] == one(m1, "tram:kv_cache_blocks_total") == 160
            held = dom["s2"] + dom["s3"]
            assert one(m1, "tram:kv_cache_blocks_used") <= held <= one(m2, "tram:kv_cache_blocks_used"), dom
            assert dom["s1"] > 0 and dom["s3"] > 0, dom  # cached prefix blocks, and the shared prefix
            assert [dom[k] for k in ("free", "cached", "owned", "shared")] == \
                [str(dom[k]) for k in ("s0", "s1", "s2", "s3")]
            assert dom["running"] == "8" and dom["waiting"] == "0" and dom["preempted"] == "0"
            assert dom["rows"] == 8
            assert "SmolLM2" in dom["info"] and "160 blocks × 16 tokens" in dom["info"]
            page.wait(f"Number(document.body.dataset.seq) >= {dom['seq'] + 8}")  # a couple of seconds of steps
            target = os.environ.get("TRAM_DASHBOARD_SCREENSHOT")
            if target:  # the README's picture: more streams than max_seqs, a full cache, preemptions
                more = Workload(srv, n=8, max_tokens=120)
                page.wait("Number(document.getElementById('q-waiting').textContent) > 0", timeout=60)
                page.wait(f"Number(document.body.dataset.seq) >= {dom['seq'] + 40}", timeout=60)
            shot = tmp_path / "dashboard.png"
            page.screenshot(shot)
            w, h = png_size(shot)
            assert 1200 <= w <= 1280 and h >= 800  # (less a scroll bar)
            if target:
                pathlib.Path(target).write_bytes(shot.read_bytes())
                more.join()
            page.close()
        lead.join()
        work.join()
        assert lead.tokens + work.tokens == [200] * 8
    finally:
        assert srv.stop() == 0


def test_page_asks_for_the_key(tmp_path):
    key = "page-key-3d8bfd"
    srv = start(tmp_path, "--api-keys", key)
    try:
        with Chromium() as browser:
            page = browser.open(srv.url + "/dashboard")
            page.wait("document.body && !document.getElementById('auth').classList.contains('hidden')")
            assert "API key" in page.eval("document.getElementById('conn').textContent")
            page.eval(f"document.getElementById('auth-key').value = '{key}';"
                      "document.getElementById('auth').requestSubmit(); true")
            page.wait("Number(document.body.dataset.seq) >= 1")
            assert page.eval("location.href") == srv.url + "/dashboard"
            page.close()
    finally:
        assert srv.stop() == 0
    assert key not in srv.log()
