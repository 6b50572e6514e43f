"""The benchmark harness's arithmetic and client, checked by hand.

bench/metrics.py must compute TTFT, TPOT, ITL, E2E and the throughputs
exactly as `vllm bench serve` defines them (docs/benchmarks/methodology.md);
here synthetic timestamps go in and the expected numbers are worked out from
those definitions directly (percentiles by the linear-interpolation formula,
not numpy). bench/loadgen.py's streaming client is run against a small local
SSE server whose chunk timing and usage are known.
"""
import asyncio
import json
import math
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import loadgen  # noqa: E402
import metrics as M  # noqa: E402
import workloads as W  # noqa: E402


def pct(values, p):
    """Linear-interpolation percentile (numpy's default, written out)."""
    v = sorted(values)
    rank = p / 100 * (len(v) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (rank - lo) * (v[hi] - v[lo])


def result(prompt, expected, chunk_times, start=10.0, usage=0, text=""):
    """A successful record whose choice chunks arrived at the given absolute times."""
    r = M.RequestResult(prompt_len=prompt, expected_output_len=expected, success=True, start=start,
                        output_tokens=usage, generated_text=text, chunks=len(chunk_times))
    r.ttft = chunk_times[0] - start
    r.itl = [b - a for a, b in zip(chunk_times, chunk_times[1:])]
    r.latency = chunk_times[-1] - start
    return r


def test_metrics_match_vllm_definitions_by_hand():
    a = result(100, 4, [10.5, 10.6, 10.8, 11.0], usage=4)            # usage counts 4 tokens
    b = result(50, 2, [20.3, 20.6], start=20.0, text="two words")   # no usage: tokenizer counts 2
    c = M.RequestResult(prompt_len=70, expected_output_len=8, error="HTTP 500")
    d = result(30, 1, [30.2], start=30.0, usage=1)                   # one token: no TPOT, no ITL
    words = lambda s: len(s.split())  # noqa: E731
    m = M.compute_metrics([a, b, c, d], 2.0, tokenize=words, percentiles=(50, 99))

    assert (m["completed"], m["failed"]) == (3, 1)
    assert m["total_input_tokens"] == 100 + 50 + 30           # failed requests do not count
    assert m["total_output_tokens"] == 4 + 2 + 1
    assert m["request_throughput"] == pytest.approx(3 / 2.0)
    assert m["output_throughput"] == pytest.approx(7 / 2.0)
    assert m["total_token_throughput"] == pytest.approx((180 + 7) / 2.0)

    ttft = [0.5, 0.3, 0.2]
    tpot = [(1.0 - 0.5) / (4 - 1), (0.6 - 0.3) / (2 - 1)]     # (latency - ttft) / (out - 1), out > 1 only
    itl = [0.1, 0.2, 0.2, 0.3]                                 # pooled over requests
    e2e = [1.0, 0.6, 0.2]
    for key, vals in (("ttft_ms", ttft), ("tpot_ms", tpot), ("itl_ms", itl), ("e2el_ms", e2e)):
        s = m[key]
        ms = [v * 1000 for v in vals]
        assert s["n"] == len(vals), key
        assert s["mean"] == pytest.approx(sum(ms) / len(ms)), key
        assert s["median"] == pytest.approx(pct(ms, 50)), key
        assert s["p50"] == pytest.approx(pct(ms, 50)), key
        assert s["p99"] == pytest.approx(pct(ms, 99)), key
        mean = sum(ms) / len(ms)
        assert s["std"] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in ms) / len(ms))), key
    assert m["ttft_ms"]["p99"] == pytest.approx(300 + 0.98 * 200)  # rank 1.98 between 300 and 500


def test_output_token_fallbacks_follow_vllm():
    r = result(10, 5, [1.0, 1.1], start=0.0, text="a b c")
    assert M.count_output_tokens(r, None) == 1                   # nothing to count with: 1
    assert M.count_output_tokens(r, lambda s: len(s.split())) == 3
    r.output_tokens = 5
    assert M.count_output_tokens(r, lambda s: 999) == 5          # the server's usage wins


def test_empty_run_and_bad_duration():
    m = M.compute_metrics([M.RequestResult(10, 10, error="x")], 1.0)
    assert m["completed"] == 0 and m["failed"] == 1 and m["output_throughput"] == 0
    assert m["ttft_ms"]["mean"] == 0 and m["ttft_ms"]["n"] == 0   # vLLM reports zeros
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            M.compute_metrics([], bad)


def test_sanity_problems_catch_bad_records():
    good = result(10, 2, [1.0, 1.5], start=0.0, usage=2)
    assert M.sanity_problems([good]) == []
    short = result(10, 8, [1.0, 1.5], start=0.0, usage=2)
    assert any("asked for 8" in p for p in M.sanity_problems([short]))
    broken = result(10, 2, [1.0, 1.5], start=0.0, usage=2)
    broken.latency = 0.5                                          # E2E before the first token
    probs = M.sanity_problems([broken])
    assert any("ttft" in p for p in probs) and any("sum(itl)" in p for p in probs)
    assert any("failed" in p for p in M.sanity_problems([M.RequestResult(1, 1, error="boom")]))


def test_sse_parser_reassembles_split_events():
    p = loadgen.SSEParser()
    stream = b'data: {"a": 1}\n\n: ping\n\ndata: {"b":\r\n\r\ndata: [DONE]\n\n'
    out = []
    for i in range(len(stream)):                                  # one byte at a time
        out += p.feed(stream[i:i + 1])
    assert out == ['{"a": 1}', '{"b":', "[DONE]"]


def test_conversation_lengths_are_seeded_and_clipped():
    a = W.conversation_lengths(500, seed=3)
    assert a == W.conversation_lengths(500, seed=3)
    assert a != W.conversation_lengths(500, seed=4)
    assert all(W.CONV_MIN <= p <= W.CONV_PROMPT_MAX and W.CONV_MIN <= o <= W.CONV_OUTPUT_MAX for p, o in a)
    prompts = sorted(p for p, _ in a)
    assert 120 < prompts[len(prompts) // 2] < 300                 # median near 200


def test_workload_specs():
    assert W.parse("fixed:128:128") == W.Workload("fixed", 128, 128)
    assert W.parse("prefix:512:32:64").max_seq_len() == 608
    assert W.parse("conv").spec == "conv"
    for bad in ("fixed:1", "fixed:a:b", "conv:3", "prefix:0:1:1", "zipf:1:2"):
        with pytest.raises(ValueError):
            W.parse(bad)


class FakeTokenizer:
    """Stand-in for the model tokenizer where only word counts matter."""

    def words(self, rng, n):
        return "".join(" w%d" % rng.randrange(10 ** 6) for _ in range(n))

    def count(self, text):
        return len(text.split())


def test_prefix_workload_shares_exactly_the_system_prompt():
    reqs = W.parse("prefix:20:5:7").requests(FakeTokenizer(), 6, seed=1)
    assert all(r.prompt_len == 25 and r.output_len == 7 for r in reqs)
    heads = {" ".join(r.prompt.split()[:20]) for r in reqs}
    tails = {" ".join(r.prompt.split()[20:]) for r in reqs}
    assert len(heads) == 1 and len(tails) == 6


def test_client_times_a_real_stream():
    """loadgen.send against a local SSE server with known gaps and usage."""
    gaps = [0.05, 0.02, 0.03, 0.02]           # before each of 4 choice chunks
    seen = {}

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")))
        seen["body"] = json.loads(await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for i, g in enumerate(gaps):
            await asyncio.sleep(g)
            ev = json.dumps({"choices": [{"text": f" t{i}", "finish_reason": "length" if i == 3 else None}]})
            half = len(ev) // 2                                      # an event split across writes
            writer.write(b"data: " + ev[:half].encode())
            await writer.drain()
            writer.write(ev[half:].encode() + b"\n\n")
            await writer.drain()
        await asyncio.sleep(0.05)                                    # usage comes later: not part of E2E
        usage = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}
        writer.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def go():
        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        import httpx
        async with srv, httpx.AsyncClient() as client:
            return await loadgen.send(client, f"http://127.0.0.1:{port}/v1/completions",
                                      W.Request(" a b c", 3, 4), "m")

    r = asyncio.run(go())
    assert r.success, r.error
    assert seen["body"]["max_tokens"] == 4 and seen["body"]["ignore_eos"] is True
    assert seen["body"]["stream"] is True and seen["body"]["stream_options"] == {"include_usage": True}
    assert r.chunks == 4 and len(r.itl) == 3
    assert r.ttft >= gaps[0] and all(i >= g * 0.9 for i, g in zip(r.itl, gaps[1:]))
    assert r.ttft + sum(r.itl) == pytest.approx(r.latency, abs=1e-9)
    assert r.latency < sum(gaps) + 0.045                             # the late usage chunk is excluded
    assert (r.output_tokens, r.prompt_len, r.finish_reason) == (4, 7, "length")
    assert r.generated_text == " t0 t1 t2 t3"
    assert M.sanity_problems([r]) == []


def _run(server, spec, c, out_tps=100.0, ttft=(50.0, 90.0), tpot=10.0, n=8, prompt=128, out=128):
    stat = lambda mean, p99: {"mean": mean, "median": mean, "std": 0.0, "n": n, "p50": mean,  # noqa: E731
                              "p90": p99, "p95": p99, "p99": p99}
    m = {"completed": n, "failed": 0, "duration_s": 1.0, "total_input_tokens": n * prompt,
         "total_output_tokens": n * out, "request_throughput": n, "output_throughput": out_tps,
         "total_token_throughput": out_tps * 2, "ttft_ms": stat(*ttft), "tpot_ms": stat(tpot, tpot),
         "itl_ms": stat(tpot, tpot), "e2el_ms": stat(1000.0, 1200.0)}
    return {"server": server, "workload": spec, "concurrency": c, "metrics": m, "command": f"{server} -x",
            "problems": [], "load_before": "0", "load_after": "0", "usage_counted": n, "chunks_per_request": out}


def test_report_goals_and_files(tmp_path):
    """report.write renders the plots and README; goal ratios are tram / llama.cpp."""
    import bounds
    import report

    specs = ["fixed:128:128", "fixed:512:64", "fixed:32:256"]
    runs = []
    for spec in specs:
        for c in (1, 16, 32):
            runs.append(_run("tram", spec, c, out_tps=300.0, ttft=(100.0, 150.0), tpot=8.0))
            runs.append(_run("llamacpp", spec, c, out_tps=100.0, ttft=(200.0, 120.0), tpot=10.0))
    cost = bounds.ModelCost(weight_bytes=96_577_380, matmul_weights=134_479_872, layers=30, heads=9, head_dim=64)
    results = {"meta": {"title": "t", "notes": ["n1"], "servers": ["tram", "llamacpp"],
                        "labels": {"tram": "tram", "llamacpp": "llama.cpp"}, "workloads": specs,
                        "concurrency": [1, 16, 32], "machine": {"date": "d", "cpus": 2},
                        "load_start": "1", "load_end": "2", "threads": 1, "model": "m.gguf",
                        "versions": {"tram": "v1", "llamacpp": "v2"}, "invocation": "x", "elapsed_s": 60,
                        "cost": __import__("dataclasses").asdict(cost),
                        "machine_probe": {"bandwidth_gbs": 10.0, "peak_gflops": None,
                                          "notes": ["no flops probe"], "outputs": {}}},
               "runs": runs}
    gv = report.goal_values(results)
    assert gv["decode1"]["tram"] == pytest.approx(1000 / 8.0) and gv["decode1"]["llamacpp"] == pytest.approx(100.0)
    assert gv["agg32"] == {"tram": 300.0, "llamacpp": 100.0}
    assert gv["prefill512"]["tram"] == pytest.approx(512 / 0.1)
    assert gv["ttft16"] == {"tram": 150.0, "llamacpp": 120.0}
    report.write(results, tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "| 1.25 | ≥ 1.2 | yes |" in text                   # decode: 125 / 100
    assert "| 3.00 | ≥ 2.0 | yes |" in text                   # aggregate at 32
    assert "| 1.25 | ≤ 1.0 | no (+25% slower) |" in text      # TTFT p99 150 vs 120
    assert "no flops probe" in text
    # bandwidth-only bound: B x 10 GB/s / 96.6 MB
    assert bounds.decode_bound(cost, report._mach(results["meta"]), 4, 128, 128) == pytest.approx(4 * 10e9 / 96_577_380)
    for f in report.FIGS.values():
        assert (tmp_path / f).stat().st_size > 10_000


def test_bounds_by_hand():
    """Decode, step and prefill bounds from their definitions."""
    import bounds

    cost = bounds.ModelCost(weight_bytes=100_000_000, matmul_weights=100_000_000, layers=2, heads=2, head_dim=4)
    assert cost.flops(10) == 2e8 + 4 * 2 * 2 * 4 * 10
    mach = bounds.Machine(bandwidth_gbs=10.0, peak_gflops=100.0, notes=[], outputs={})
    # bandwidth: 10e9 / 1e8 = 100 tokens/s per stream
    assert bounds.decode_bound(cost, mach, 1, 0, 1) == pytest.approx(100.0)
    # compute, P=100, O=50: 100e9 * 50 / (100 f(50) + 50 f(125))
    work = 100 * cost.flops(50) + 50 * cost.flops(125)
    assert bounds.decode_bound(cost, mach, 64, 100, 50) == pytest.approx(100e9 * 50 / work)
    # 80 of the 100 prompt tokens cached: only 20 computed, at contexts 80..100
    work = 20 * cost.flops(90) + 50 * cost.flops(125)
    assert bounds.decode_bound(cost, mach, 64, 100, 50, cached=80) == pytest.approx(100e9 * 50 / work)
    assert bounds.step_time_bound(cost, mach, 1, 10) == pytest.approx(0.01)            # weights / bandwidth
    assert bounds.step_time_bound(cost, mach, 1000, 10) == pytest.approx(1000 * cost.flops(10) / 100e9)
    assert bounds.prefill_time_bound(cost, mach, 512) == pytest.approx(512 * cost.flops(256) / 100e9)
    none = bounds.Machine(None, None, [], {})
    assert bounds.decode_bound(cost, none, 4, 10, 10) is None and bounds.step_time_bound(cost, none, 4, 10) is None


def test_probe_output_parsing():
    """The peak is the flops table's row for the servers' thread count."""
    import bounds

    table = ("FMA peak (AVX2+FMA), best of 5 runs of 2000000 rounds per thread\n"
             " threads      GFLOP/s   GFLOP/s/thread\n"
             "       1         61.5             61.5\n"
             "       2        118.0             59.0\n")
    assert bounds.parse_flops(table, 1) == 61.5
    assert bounds.parse_flops(table, 2) == 118.0
    assert bounds.parse_flops(table, 8) == 118.0          # no such row: the best one
    assert bounds.parse_flops("peak: 42.5 GFLOP/s", 1) == 42.5
    assert bounds.parse_flops("nothing here", 1) is None
