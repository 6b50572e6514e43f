"""/metrics under vLLM's names: every family vLLM's PrometheusStatLogger
defines that tram has a meaning for, with vLLM's type, labels (model_name,
engine) and bucket boundaries, parsed with prometheus_client; and the values
each family takes after a known workload (two completions sharing a long
prompt, one with n=2), checked against what the workload implies."""
from prometheus_client.parser import text_string_to_metric_families

from tram_server import server_fixture

server = server_fixture("--served-model-name", "tram-test", use_external=False)

LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
           480.0, 960.0, 1920.0, 7680.0]
TOKEN_GAP = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0]


def one_two_five(limit):
    """vLLM's build_1_2_5_buckets."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > limit:
                return out
            out.append(m * scale)
        scale *= 10


COUNTS = one_two_five(1024)  # the fixture's --max-model-len
HISTOGRAMS = {
    "vllm:iteration_tokens_total": [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    "vllm:time_to_first_token_seconds": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                         2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0],
    "vllm:time_per_output_token_seconds": TOKEN_GAP,
    "vllm:inter_token_latency_seconds": TOKEN_GAP,
    "vllm:e2e_request_latency_seconds": LATENCY,
    "vllm:request_queue_time_seconds": LATENCY,
    "vllm:request_inference_time_seconds": LATENCY,
    "vllm:request_prefill_time_seconds": LATENCY,
    "vllm:request_decode_time_seconds": LATENCY,
    "vllm:time_per_prefill_token_request_seconds": [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0],
    "vllm:request_prompt_tokens": COUNTS,
    "vllm:request_generation_tokens": COUNTS,
    "vllm:request_max_num_generation_tokens": COUNTS,
    "vllm:request_params_n": [1, 2, 5, 10, 20],
    "vllm:request_params_max_tokens": COUNTS,
}
GAUGES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"]
# prometheus_client's parser names counter families without "_total"
COUNTERS = ["vllm:prompt_tokens", "vllm:generation_tokens", "vllm:num_preemptions", "vllm:prefix_cache_queries",
            "vllm:prefix_cache_hits", "vllm:request_success"]


def families(server):
    r = server.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.text
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(fams, family, sample, **labels):
    got = [s.value for s in fams[family].samples
           if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(got) == 1, (sample, labels, got)
    return got[0]


def test_families_types_labels_buckets(server):
    fams = families(server)
    expect = {**{n: "histogram" for n in HISTOGRAMS}, **{n: "gauge" for n in GAUGES},
              **{n: "counter" for n in COUNTERS}, "vllm:cache_config_info": "gauge"}
    for name, kind in expect.items():
        assert name in fams, name
        assert fams[name].type == kind, (name, fams[name].type)
    for name, f in fams.items():
        assert name.startswith(("vllm:", "tram:")), name
        for s in f.samples:
            if name == "vllm:cache_config_info":
                continue
            own = {"le"} if s.name.endswith("_bucket") else set()
            own |= {"finished_reason"} if name == "vllm:request_success" else set()
            own |= {"path"} if name == "tram:engine_steps" else set()
            assert set(s.labels) == {"model_name", "engine"} | own, s
            assert s.labels["model_name"] == "tram-test" and s.labels["engine"] == "0", s
    for name, bounds in HISTOGRAMS.items():
        les = [s.labels["le"] for s in fams[name].samples if s.name == name + "_bucket"]
        assert les == [str(float(b)) for b in bounds] + ["+Inf"], (name, les)
    reasons = {s.labels["finished_reason"] for s in fams["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort"}
    info = fams["vllm:cache_config_info"].samples
    assert len(info) == 1 and info[0].value == 1.0
    assert info[0].labels["block_size"] == "32" and info[0].labels["engine"] == "0"
    assert "model_name" not in info[0].labels
    assert info[0].labels["num_gpu_blocks"] == str(int(value(fams, "tram:kv_cache_blocks_total",
                                                            "tram:kv_cache_blocks_total")))


def test_values_after_a_known_workload(server):
    client = server.client()
    prompt = "Prometheus scrapes metrics. " * 16
    n_prompt = len(server.tokenize(prompt=prompt))
    assert n_prompt > 64  # at least two full blocks to share
    before = families(server)
    a = client.completions.create(model="tram-test", prompt=prompt, max_tokens=6, n=2, temperature=0.8, seed=1,
                                  extra_body={"ignore_eos": True})
    b = client.completions.create(model="tram-test", prompt=prompt, max_tokens=3, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert a.usage.completion_tokens == 12 and b.usage.completion_tokens == 3
    after = families(server)

    def delta(family, sample=None, **labels):
        sample = sample or family
        return value(after, family, sample, **labels) - value(before, family, sample, **labels)

    assert delta("vllm:request_success", "vllm:request_success_total", finished_reason="length") == 3
    assert delta("vllm:generation_tokens", "vllm:generation_tokens_total") == 15
    hits = delta("vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total")
    assert hits > 0 and hits % 32 == 0  # b finds a's full blocks
    assert delta("vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total") >= hits
    assert delta("vllm:prompt_tokens", "vllm:prompt_tokens_total") == 2 * n_prompt - hits
    assert delta("vllm:num_preemptions", "vllm:num_preemptions_total") == 0
    assert value(after, "vllm:num_requests_running", "vllm:num_requests_running") == 0
    assert value(after, "vllm:num_requests_waiting", "vllm:num_requests_waiting") == 0
    used = value(after, "tram:kv_cache_blocks_used", "tram:kv_cache_blocks_used")
    total = value(after, "tram:kv_cache_blocks_total", "tram:kv_cache_blocks_total")
    assert value(after, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc") == used / total

    def hist(name):
        return (delta(name, name + "_count"), delta(name, name + "_sum"))

    # per engine request: two (a with its two sequences, and b)
    assert hist("vllm:request_prompt_tokens") == (2, 2 * n_prompt)
    assert hist("vllm:request_generation_tokens") == (2, 15)
    assert hist("vllm:request_max_num_generation_tokens") == (2, 9)
    assert hist("vllm:request_params_n") == (2, 3)
    assert delta("vllm:request_params_n", "vllm:request_params_n_bucket", le="1.0") == 1
    assert hist("vllm:request_params_max_tokens") == (2, 9)
    for name in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                 "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                 "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds"):
        count, total_s = hist(name)
        assert count == 2 and total_s > 0, name
    # the phases add up: inference = prefill + decode; e2e covers queue + inference
    inference = hist("vllm:request_inference_time_seconds")[1]
    assert abs(inference - hist("vllm:request_prefill_time_seconds")[1]
               - hist("vllm:request_decode_time_seconds")[1]) < 1e-6
    assert hist("vllm:e2e_request_latency_seconds")[1] >= hist("vllm:request_queue_time_seconds")[1] + inference - 1e-6
    # prefill time per prompt token (both requests have n_prompt tokens)
    per_token = hist("vllm:time_per_prefill_token_request_seconds")
    assert per_token[0] == 2
    assert abs(per_token[1] - hist("vllm:request_prefill_time_seconds")[1] / n_prompt) < 1e-6
    # one gap per token after each sequence's first: 2 * 5 + 2
    assert hist("vllm:time_per_output_token_seconds")[0] == 12
    assert hist("vllm:inter_token_latency_seconds") == hist("vllm:time_per_output_token_seconds")
    # one observation per engine step, of its prompt + sampled tokens
    steps = sum(delta("tram:engine_steps", "tram:engine_steps_total", path=p) for p in ("varlen", "decode"))
    assert hist("vllm:iteration_tokens_total") == (steps, 2 * n_prompt - hits + 15)
