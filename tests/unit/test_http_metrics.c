/* tests/unit/test_http_metrics.c — the Prometheus text writer and tram's
 * standard metric set: exact output for small registries (the format is the
 * specification), cumulative histogram buckets against a direct count of
 * random observations, escaping, and number formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"
#include "server/prom.h"
#include "tests/unit/testutil.h"

static void counters_and_gauges(void **state) {
  prom_registry_t *r = prom_registry_create();
  prom_series_t *c = prom_series(prom_counter(r, "tram:prompt_tokens_total", "Prompt tokens.", 0, NULL), NULL);
  const char *lab[] = {"finished_reason"};
  prom_family_t *f = prom_counter(r, "tram:request_success_total", "Finished.", 1, lab);
  prom_series_t *g = prom_series(prom_gauge(r, "tram:num_requests_running", "Running\nnow \\ here.", 0, NULL), NULL);
  prom_add(c, 5);
  prom_add(c, 2.5);
  prom_add(c, -100); /* counters never go down */
  prom_add(prom_series(f, (const char *[]){"stop"}), 3);
  prom_add(prom_series(f, (const char *[]){"length"}), 1);
  prom_add(prom_series(f, (const char *[]){"stop"}), 1); /* the same series again */
  prom_set(g, 2);
  prom_add(g, -1);
  assert_float_equal(prom_value(c), 7.5, 0);
  assert_float_equal(prom_value(g), 1, 0);
  size_t len;
  char *text = prom_render(r, &len);
  const char *want =
      "# HELP tram:prompt_tokens_total Prompt tokens.\n"
      "# TYPE tram:prompt_tokens_total counter\n"
      "tram:prompt_tokens_total 7.5\n"
      "# HELP tram:request_success_total Finished.\n"
      "# TYPE tram:request_success_total counter\n"
      "tram:request_success_total{finished_reason=\"stop\"} 4.0\n"
      "tram:request_success_total{finished_reason=\"length\"} 1.0\n"
      "# HELP tram:num_requests_running Running\\nnow \\\\ here.\n"
      "# TYPE tram:num_requests_running gauge\n"
      "tram:num_requests_running 1.0\n";
  assert_string_equal(text, want);
  assert_int_equal(len, strlen(want));
  free(text);
  prom_registry_destroy(r);
}

static void const_labels_and_escaping(void **state) {
  prom_registry_t *r = prom_registry_create();
  prom_registry_const_label(r, "model_name", "smol \"135M\"\\v1\n");
  const char *lab[] = {"path"};
  prom_family_t *f = prom_counter(r, "tram:engine_steps_total", "Steps.", 1, lab);
  prom_set(prom_series(f, (const char *[]){"decode"}), 1e21);
  prom_set(prom_series(f, (const char *[]){"varlen"}), 0.1);
  prom_series_t *g = prom_series(prom_gauge(r, "x", "", 0, NULL), NULL);
  prom_set(g, -INFINITY);
  char *text = prom_render(r, NULL);
  const char *want =
      "# HELP tram:engine_steps_total Steps.\n"
      "# TYPE tram:engine_steps_total counter\n"
      "tram:engine_steps_total{model_name=\"smol \\\"135M\\\"\\\\v1\\n\",path=\"decode\"} 1e+21\n"
      "tram:engine_steps_total{model_name=\"smol \\\"135M\\\"\\\\v1\\n\",path=\"varlen\"} 0.1\n"
      "# HELP x \n"
      "# TYPE x gauge\n"
      "x{model_name=\"smol \\\"135M\\\"\\\\v1\\n\"} -Inf\n";
  assert_string_equal(text, want);
  free(text);
  prom_registry_destroy(r);
  /* an empty registry renders as "" */
  r = prom_registry_create();
  text = prom_render(r, NULL);
  assert_string_equal(text, "");
  free(text);
  prom_registry_destroy(r);
}

static void histogram_exact(void **state) {
  prom_registry_t *r = prom_registry_create();
  const double b[] = {0.1, 0.5, 1};
  prom_series_t *h = prom_series(prom_histogram(r, "lat_seconds", "Latency.", 0, NULL, b, 3), NULL);
  const double obs[] = {0.05, 0.1, 0.3, 2, 7, 0.5};
  for (int i = 0; i < 6; i++) prom_observe(h, obs[i]);
  char *text = prom_render(r, NULL);
  const char *want =
      "# HELP lat_seconds Latency.\n"
      "# TYPE lat_seconds histogram\n"
      "lat_seconds_bucket{le=\"0.1\"} 2.0\n"
      "lat_seconds_bucket{le=\"0.5\"} 4.0\n"
      "lat_seconds_bucket{le=\"1.0\"} 4.0\n"
      "lat_seconds_bucket{le=\"+Inf\"} 6.0\n"
      "lat_seconds_sum 9.95\n"
      "lat_seconds_count 6.0\n";
  assert_string_equal(text, want);
  free(text);
  /* a snapshot copied in replaces what was observed */
  const uint64_t counts[] = {1, 0, 2, 3};
  prom_hist_set(h, counts, 12.25);
  assert_float_equal(prom_value(h), 6, 0);
  text = prom_render(r, NULL);
  assert_non_null(strstr(text, "lat_seconds_bucket{le=\"1.0\"} 3.0\nlat_seconds_bucket{le=\"+Inf\"} 6.0\n"
                               "lat_seconds_sum 12.25\nlat_seconds_count 6.0\n"));
  free(text);
  prom_registry_destroy(r);
}

/* Random observations: each cumulative bucket equals a direct count. */
static void histogram_random(void **state) {
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  double bounds[16];
  int nb = prom_buckets_125(20000, bounds, 16);
  assert_int_equal(nb, 14); /* 1 2 5 10 20 50 100 200 500 1000 2000 5000 10000 20000 */
  assert_float_equal(bounds[13], 20000, 0);
  assert_int_equal(prom_buckets_125(19999, bounds, 16), 13);
  assert_int_equal(prom_buckets_125(20000, bounds, 5), 5);
  prom_registry_t *r = prom_registry_create();
  prom_series_t *h = prom_series(prom_histogram(r, "toks", "t", 0, NULL, bounds, nb), NULL);
  enum { N = 5000 };
  static double v[N];
  double sum = 0;
  for (int i = 0; i < N; i++) {
    v[i] = floor(exp(tu_uniform(&rng, 0, log(40000.0))));
    prom_observe(h, v[i]);
    sum += v[i];
  }
  char *text = prom_render(r, NULL);
  for (int k = 0; k <= nb; k++) {
    long want = 0;
    for (int i = 0; i < N; i++) want += k == nb || v[i] <= bounds[k];
    char line[96];
    if (k < nb) snprintf(line, sizeof line, "toks_bucket{le=\"%.1f\"} %ld.0\n", bounds[k], want);
    else snprintf(line, sizeof line, "toks_bucket{le=\"+Inf\"} %ld.0\n", want);
    if (!strstr(text, line)) fail_msg("missing line: %s", line);
  }
  char *s = strstr(text, "toks_sum ");
  assert_non_null(s);
  assert_float_equal(strtod(s + 9, NULL), sum, 0);
  free(text);
  prom_registry_destroy(r);
}

static void standard_set(void **state) {
  srv_metrics_t *m = srv_metrics_create("SmolLM2-135M", 8192);
  assert_non_null(m);
  prom_add(m->success_stop, 2);
  prom_observe(m->ttft, 0.03);
  prom_observe(m->output_len, 100);
  http_server_stats_t st = {.connections_open = 4, .requests = 10, .timeouts = 1};
  srv_metrics_http(m, &st);
  sched_stats_t es = {.running = 3, .block_size = 16, .kv_blocks_total = 100, .prefix_caching = 1, .prompt_tokens = 60000, .generated_tokens = 10000};
  const uint64_t log2[SCHED_STEP_TOKEN_BUCKETS] = {[0] = 1, [1] = 2, [2] = 1, [3] = 2, [4] = 1, [14] = 1, [15] = 1};
  memcpy(es.step_tokens_log2, log2, sizeof log2);
  srv_metrics_snapshot(m, &es);
  size_t len;
  char *text = srv_metrics_render(m, &len);
  const char *must[] = {
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"SmolLM2-135M\",engine=\"0\"} 3.0\n",
      "vllm:request_success_total{model_name=\"SmolLM2-135M\",engine=\"0\",finished_reason=\"stop\"} 2.0\n",
      "vllm:request_success_total{model_name=\"SmolLM2-135M\",engine=\"0\",finished_reason=\"abort\"} 0.0\n",
      "vllm:time_to_first_token_seconds_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"0.02\"} 0.0\n",
      "vllm:time_to_first_token_seconds_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"0.04\"} 1.0\n",
      "vllm:time_to_first_token_seconds_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"2560.0\"} 1.0\n",
      "vllm:request_generation_tokens_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"5000.0\"} 1.0\n",
      "# TYPE vllm:inter_token_latency_seconds histogram\n",
      "# TYPE vllm:e2e_request_latency_seconds histogram\n",
      "# TYPE vllm:request_queue_time_seconds histogram\n",
      "# TYPE vllm:prefix_cache_hits_total counter\n",
      "tram:engine_steps_total{model_name=\"SmolLM2-135M\",engine=\"0\",path=\"decode\"} 0.0\n",
      "tram:http_connections_open{model_name=\"SmolLM2-135M\",engine=\"0\"} 4.0\n",
      "tram:http_requests_total{model_name=\"SmolLM2-135M\",engine=\"0\"} 10.0\n",
      /* the engine's power-of-two step counts in vLLM's buckets */
      "vllm:iteration_tokens_total_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"1.0\"} 1.0\n",
      "vllm:iteration_tokens_total_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"8.0\"} 6.0\n",
      "vllm:iteration_tokens_total_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"16.0\"} 7.0\n",
      "vllm:iteration_tokens_total_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"16384.0\"} 8.0\n",
      "vllm:iteration_tokens_total_bucket{model_name=\"SmolLM2-135M\",engine=\"0\",le=\"+Inf\"} 9.0\n",
      "vllm:iteration_tokens_total_sum{model_name=\"SmolLM2-135M\",engine=\"0\"} 70000.0\n",
      "vllm:cache_config_info{block_size=\"16\",enable_prefix_caching=\"True\",num_gpu_blocks=\"100\",engine=\"0\"} "
      "1.0\n",
  };

  for (size_t i = 0; i < sizeof must / sizeof *must; i++)
    if (!strstr(text, must[i])) fail_msg("missing: %s", must[i]);
  assert_null(strstr(text, "le=\"10000.0\"")); /* token buckets stop at max_model_len */
  assert_int_equal(len, strlen(text));
  free(text);
  srv_metrics_destroy(m);
  assert_null(srv_metrics_create("x", 0));
  srv_metrics_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(counters_and_gauges),
      cmocka_unit_test(const_labels_and_escaping),
      cmocka_unit_test(histogram_exact),
      cmocka_unit_test(histogram_random),
      cmocka_unit_test(standard_set),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
