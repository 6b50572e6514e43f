/* server/metrics.c — tram's standard metric set (see metrics.h). Bucket
 * boundaries follow vLLM's, so dashboards built for vLLM read them. */
#include "server/metrics.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/log.h"

static const double TTFT_BOUNDS[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25,  0.5,   0.75,
                                     1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double ITL_BOUNDS[] = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                    0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
static const double LATENCY_BOUNDS[] = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                        30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

#define N(a) ((int)(sizeof(a) / sizeof *(a)))

static prom_series_t *one(prom_family_t *f) { return prom_series(f, NULL); }

static prom_series_t *gauge(prom_registry_t *r, const char *name, const char *help) {
  return one(prom_gauge(r, name, help, 0, NULL));
}

static prom_series_t *counter(prom_registry_t *r, const char *name, const char *help) {
  return one(prom_counter(r, name, help, 0, NULL));
}

static prom_series_t *histogram(prom_registry_t *r, const char *name, const char *help, const double *b,
                                int n) {
  return one(prom_histogram(r, name, help, 0, NULL, b, n));
}

srv_metrics_t *srv_metrics_create(const char *model_name, int32_t max_model_len) {
  if (max_model_len < 1) {
    log_error("metrics: max_model_len must be >= 1, got %d", max_model_len);
    return NULL;
  }
  srv_metrics_t *m = calloc(1, sizeof *m);
  if (!m) xoom("server", 0);
  prom_registry_t *r = m->reg = prom_registry_create();
  prom_registry_const_label(r, "model_name", model_name ? model_name : "");

  m->requests_running = gauge(r, "tram:num_requests_running", "Number of requests in model execution batches.");
  m->requests_waiting = gauge(r, "tram:num_requests_waiting", "Number of requests waiting to be processed.");
  m->kv_usage = gauge(r, "tram:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
  m->kv_blocks_used = gauge(r, "tram:kv_cache_blocks_used", "KV-cache blocks in use.");
  m->kv_blocks_total = gauge(r, "tram:kv_cache_blocks_total", "KV-cache blocks in all.");

  m->prompt_tokens = counter(r, "tram:prompt_tokens_total", "Number of prefill tokens processed.");
  m->generation_tokens = counter(r, "tram:generation_tokens_total", "Number of generation tokens processed.");
  m->preemptions = counter(r, "tram:num_preemptions_total", "Cumulative number of preemptions from the engine.");
  m->prefix_cache_queries =
      counter(r, "tram:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.");
  m->prefix_cache_hits =
      counter(r, "tram:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.");
  const char *reason[] = {"finished_reason"};
  prom_family_t *success = prom_counter(r, "tram:request_success_total", "Count of finished requests.", 1, reason);
  m->success_stop = prom_series(success, (const char *[]){"stop"});
  m->success_length = prom_series(success, (const char *[]){"length"});
  m->success_abort = prom_series(success, (const char *[]){"abort"});
  const char *path[] = {"path"};
  prom_family_t *steps = prom_counter(r, "tram:engine_steps_total", "Engine steps by attention path.", 1, path);
  m->steps_varlen = prom_series(steps, (const char *[]){"varlen"});
  m->steps_decode = prom_series(steps, (const char *[]){"decode"});

  m->ttft = histogram(r, "tram:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                      TTFT_BOUNDS, N(TTFT_BOUNDS));
  m->itl = histogram(r, "tram:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                     ITL_BOUNDS, N(ITL_BOUNDS));
  m->e2e = histogram(r, "tram:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                     LATENCY_BOUNDS, N(LATENCY_BOUNDS));
  m->queue_time = histogram(r, "tram:request_queue_time_seconds",
                            "Histogram of time spent in WAITING phase for request.", LATENCY_BOUNDS,
                            N(LATENCY_BOUNDS));
  double tok[64];
  int n_tok = prom_buckets_125(max_model_len, tok, N(tok));
  m->prompt_len = histogram(r, "tram:request_prompt_tokens", "Number of prefill tokens processed.", tok, n_tok);
  m->output_len =
      histogram(r, "tram:request_generation_tokens", "Number of generation tokens processed.", tok, n_tok);

  m->http_open = gauge(r, "tram:http_connections_open", "Open client connections.");
  m->http_accepted = counter(r, "tram:http_connections_total", "Client connections accepted.");
  m->http_rejected =
      counter(r, "tram:http_connections_rejected_total", "Connections refused (503) over the connection cap.");
  m->http_requests = counter(r, "tram:http_requests_total", "HTTP requests received.");
  m->http_timeouts = counter(r, "tram:http_timeouts_total", "Requests cut off for arriving too slowly (408).");
  m->http_dropped =
      counter(r, "tram:http_clients_dropped_total", "Clients dropped for not reading their responses.");
  m->http_evicted = counter(r, "tram:http_connections_evicted_total",
                            "Idle connections closed at the connection cap to make room for a new one.");
  m->loop_stall_max = gauge(r, "tram:event_loop_stall_max_seconds",
                            "The longest the event loop was late running its 10 ms probe timer (blocked by work).");
  m->loop_stall_total =
      counter(r, "tram:event_loop_stall_seconds_total", "Summed lateness of the event loop's probe timer.");
  return m;
}

void srv_metrics_destroy(srv_metrics_t *m) {
  if (!m) return;
  prom_registry_destroy(m->reg);
  free(m);
}

void srv_metrics_http(srv_metrics_t *m, const http_server_stats_t *st) {
  prom_set(m->http_open, st->connections_open);
  prom_set(m->http_accepted, (double)st->connections_accepted);
  prom_set(m->http_rejected, (double)st->connections_rejected);
  prom_set(m->http_requests, (double)st->requests);
  prom_set(m->http_timeouts, (double)st->timeouts);
  prom_set(m->http_dropped, (double)st->dropped);
  prom_set(m->http_evicted, (double)st->evicted);
}

char *srv_metrics_render(const srv_metrics_t *m, size_t *len) { return prom_render(m->reg, len); }
