"""A short run of the soak (bench/soak.py; `make soak` runs it for an hour):
8 clients for 30 s of mixed requests on a small cache, random disconnects,
n > 1, seeded sampling, shared prefixes. Nothing may be lost (every request
ends in a complete answer or a clean error) and every greedy output must
equal its solo output. Marked `long` (make test-long, which CI runs after
make test): half a minute of load is a soak, not a unit of make test's
time."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import soak  # noqa: E402


@pytest.mark.long  # 30 s of load by design, and a floor on what it sends: make test-long (CI) runs it
def test_short_soak(tmp_path):
    res = soak.run(minutes=0.5, clients=8, seed=17, log_dir=tmp_path, sample_s=5)
    print({k: v for k, v in res.items() if k != "samples"})
    assert res["sent"] > 20 and res["completed"] > 10
    assert res["lost"] == 0, res["problems"]
    assert res["greedy_mismatch"] == 0, res["problems"]
    assert res["greedy_checked"] > 0 and res["exit_status"] == 0
