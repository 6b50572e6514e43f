"""The README's curl examples (the ```sh blocks after a `<!-- example -->`
line), run as written against a real `tram serve` on 127.0.0.1:8080.

So that port 8080 is free whatever else runs on the machine, the server and
the examples run in a network namespace of their own (`unshare -rn`: a user
and network namespace, no privileges needed). Where namespaces are not
allowed, the examples run against a server on a free port with
"127.0.0.1:8080" replaced by its address (the only change; said in the
output)."""
import json
import re
import subprocess

import pytest

from tram_server import ROOT, clean_env, model_path, start, tram_bin

ADDRESS = "127.0.0.1:8080"


def examples():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"<!-- example -->\n```sh\n(.*?)```", text, re.S)
    assert len(blocks) >= 3, "README.md has no marked curl examples"
    for b in blocks:
        assert ADDRESS in b, b
    return blocks


def check_output(block, out):
    assert out.strip(), f"no output from:\n{block}"
    if "/metrics" in block:
        assert "vllm:num_requests_running" in out and "vllm:kv_cache_usage_perc" in out
    if '"stream": true' in block:
        events = [l[6:] for l in out.splitlines() if l.startswith("data: ")]
        assert events[-1] == "[DONE]" and len(events) > 2, out
        objs = [json.loads(e) for e in events[:-1]]
        assert objs[0]["choices"][0]["delta"]["role"] == "assistant"
        assert objs[-1]["choices"][0]["finish_reason"] in ("stop", "length")
        return
    dec, pos, n = json.JSONDecoder(), 0, 0  # curl prints JSON bodies back to back
    while (pos := out.find("{", pos)) >= 0:
        try:
            obj, pos = dec.raw_decode(out, pos)
        except json.JSONDecodeError:  # a "{" of a metrics line
            pos += 1
            continue
        assert "error" not in obj, out
        n += 1
    assert n or "/metrics" in block or "/health" in block, out


def namespaces_work():
    try:
        return subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


SCRIPT = r"""
set -u
ip link set lo up
"$TRAM" serve -m "$MODEL" --threads 2 --max-model-len 1024 >"$DIR/tram.log" 2>&1 &
pid=$!
trap 'kill -KILL $pid 2>/dev/null' EXIT
for _ in $(seq 600); do curl -sf http://127.0.0.1:8080/health >/dev/null && break; sleep 0.1; done
for f in "$DIR"/example-*.sh; do
  bash -o pipefail "$f" >"$f.out" 2>"$f.err"
  echo $? >"$f.rc"
done
kill -TERM $pid
wait $pid
echo $? >"$DIR/tram.rc"
"""


def test_readme_curl_examples(tmp_path):
    blocks = examples()
    for i, b in enumerate(blocks):
        (tmp_path / f"example-{i}.sh").write_text(b)
    if namespaces_work():
        env = clean_env(TRAM=str(tram_bin()), MODEL=str(model_path()), DIR=str(tmp_path))
        r = subprocess.run(["unshare", "-rn", "bash", "-c", SCRIPT], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        log = (tmp_path / "tram.log").read_text()
        assert (tmp_path / "tram.rc").read_text().strip() == "0", log
    else:
        print("no network namespaces here: running the examples against a free port instead of 8080")
        srv = start(tmp_path)
        host, port = srv.host_port
        try:
            for i, b in enumerate(blocks):
                f = tmp_path / f"example-{i}.sh"
                with open(f"{f}.out", "w") as out, open(f"{f}.err", "w") as err:
                    rc = subprocess.run(["bash", "-o", "pipefail", "-c", b.replace(ADDRESS, f"{host}:{port}")],
                                        stdout=out, stderr=err, timeout=120).returncode
                (tmp_path / f"example-{i}.sh.rc").write_text(str(rc))
        finally:
            assert srv.stop() == 0
    for i, b in enumerate(blocks):
        f = tmp_path / f"example-{i}.sh"
        rc = int((tmp_path / f"example-{i}.sh.rc").read_text())
        out = (tmp_path / f"example-{i}.sh.out").read_text()
        assert rc == 0, f"{b}\nexit {rc}: {(tmp_path / f'example-{i}.sh.err').read_text()}"
        check_output(b, out)
