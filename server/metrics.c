/* server/metrics.c — tram's standard metric set (see metrics.h): vLLM's
 * names, help texts, labels and bucket boundaries (vllm/v1/metrics/
 * loggers.py), so dashboards built for vLLM read them. */
#include "server/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/log.h"

static const double TTFT_BOUNDS[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25,  0.5,   0.75,
                                     1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double ITL_BOUNDS[] = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                    0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
static const double LATENCY_BOUNDS[] = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                        30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
/* vllm:iteration_tokens_total: 1 and the powers of two from 8 to 16384 */
static const double ITER_BOUNDS[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
static const double N_BOUNDS[] = {1, 2, 5, 10, 20};
static const double PREFILL_TOKEN_BOUNDS[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};

#define N(a) ((int)(sizeof(a) / sizeof *(a)))

/* vLLM's labels on every family: model_name, engine (then the family's own) */
static const char *const LABELS[] = {"model_name", "engine", "finished_reason", "path"};
#define ENGINE "0"

static prom_series_t *one(const srv_metrics_t *m, prom_family_t *f) {
  return prom_series(f, (const char *[]){m->model_name, ENGINE});
}

static prom_series_t *gauge(srv_metrics_t *m, const char *name, const char *help) {
  return one(m, prom_gauge(m->reg, name, help, 2, LABELS));
}

static prom_series_t *counter(srv_metrics_t *m, const char *name, const char *help) {
  return one(m, prom_counter(m->reg, name, help, 2, LABELS));
}

static prom_series_t *histogram(srv_metrics_t *m, const char *name, const char *help, const double *b, int n) {
  return one(m, prom_histogram(m->reg, name, help, 2, LABELS, b, n));
}

/* The series of a family with one label of its own (LABELS[extra]). */
static prom_series_t *labelled(srv_metrics_t *m, prom_family_t *f, const char *value) {
  return prom_series(f, (const char *[]){m->model_name, ENGINE, value});
}

static void create_histograms(srv_metrics_t *m, int32_t max_model_len) {
  m->iteration_tokens = histogram(m, "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                  ITER_BOUNDS, N(ITER_BOUNDS));
  m->ttft = histogram(m, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                      TTFT_BOUNDS, N(TTFT_BOUNDS));
  m->tpot = histogram(m, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                      ITL_BOUNDS, N(ITL_BOUNDS));
  m->itl = histogram(m, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                     ITL_BOUNDS, N(ITL_BOUNDS));
  const struct {
    prom_series_t **s;
    const char *name, *help;
  } latency[] = {
      {&m->e2e, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."},
      {&m->queue_time, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."},
      {&m->inference_time, "vllm:request_inference_time_seconds",
       "Histogram of time spent in RUNNING phase for request."},
      {&m->prefill_time, "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."},
      {&m->decode_time, "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."},
  };
  for (int i = 0; i < N(latency); i++)
    *latency[i].s = histogram(m, latency[i].name, latency[i].help, LATENCY_BOUNDS, N(LATENCY_BOUNDS));
  m->prefill_per_token = histogram(m, "vllm:time_per_prefill_token_request_seconds",
                                   "Time spent per token during prefill  phase in seconds", PREFILL_TOKEN_BOUNDS,
                                   N(PREFILL_TOKEN_BOUNDS));
  double tok[64];
  int n_tok = prom_buckets_125(max_model_len, tok, N(tok));
  m->prompt_len = histogram(m, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok, n_tok);
  m->output_len =
      histogram(m, "vllm:request_generation_tokens", "Number of generation tokens processed.", tok, n_tok);
  m->max_output_len = histogram(m, "vllm:request_max_num_generation_tokens",
                                "Histogram of maximum number of requested generation tokens.", tok, n_tok);
  m->params_n = histogram(m, "vllm:request_params_n", "Histogram of the n request parameter.", N_BOUNDS,
                          N(N_BOUNDS));
  m->params_max_tokens = histogram(m, "vllm:request_params_max_tokens",
                                   "Histogram of the max_tokens request parameter.", tok, n_tok);
}

static void create_http(srv_metrics_t *m) {
  m->http_open = gauge(m, "tram:http_connections_open", "Open client connections.");
  m->http_accepted = counter(m, "tram:http_connections_total", "Client connections accepted.");
  m->http_rejected =
      counter(m, "tram:http_connections_rejected_total", "Connections refused (503) over the connection cap.");
  m->http_over_client = counter(m, "tram:http_connections_over_client_total",
                               "Connections that arrived over max_connections_per_client (probe reserve or 503).");
  m->http_requests = counter(m, "tram:http_requests_total", "HTTP requests received.");
  m->http_timeouts = counter(m, "tram:http_timeouts_total", "Requests cut off for arriving too slowly (408).");
  m->http_dropped = counter(m, "tram:http_clients_dropped_total", "Clients dropped for not reading their responses.");
  m->http_evicted = counter(m, "tram:http_connections_evicted_total",
                            "Idle connections closed at the connection cap to make room for a new one.");
  m->loop_stall_max = gauge(m, "tram:event_loop_stall_max_seconds",
                            "The longest the event loop was late running its 10 ms probe timer (blocked by work).");
  m->loop_stall_total =
      counter(m, "tram:event_loop_stall_seconds_total", "Summed lateness of the event loop's probe timer.");
}

srv_metrics_t *srv_metrics_create(const char *model_name, int32_t max_model_len) {
  if (max_model_len < 1) {
    log_error("metrics: max_model_len must be >= 1, got %d", max_model_len);
    return NULL;
  }
  srv_metrics_t *m = xcalloc(1, sizeof *m);
  m->model_name = xstrdup(model_name ? model_name : "");
  m->reg = prom_registry_create();

  m->requests_running = gauge(m, "vllm:num_requests_running", "Number of requests in model execution batches.");
  m->requests_waiting = gauge(m, "vllm:num_requests_waiting", "Number of requests waiting to be processed.");
  m->seqs_paused = gauge(m, "tram:num_sequences_paused",
                         "Sequences held but not scheduled: their stream's client is not reading.");
  m->kv_usage = gauge(m, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
  m->prefix_cache_queries =
      counter(m, "vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.");
  m->prefix_cache_hits =
      counter(m, "vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.");
  m->preemptions = counter(m, "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.");
  m->prompt_tokens = counter(m, "vllm:prompt_tokens_total", "Number of prefill tokens processed.");
  m->generation_tokens = counter(m, "vllm:generation_tokens_total", "Number of generation tokens processed.");
  prom_family_t *success =
      prom_counter(m->reg, "vllm:request_success_total", "Count of successfully processed requests.", 3, LABELS);
  m->success_stop = labelled(m, success, "stop");
  m->success_length = labelled(m, success, "length");
  m->success_abort = labelled(m, success, "abort");
  create_histograms(m, max_model_len);
  /* vLLM's info gauge: the cache configuration as labels (no model_name) */
  static const char *const info[] = {"block_size", "enable_prefix_caching", "num_gpu_blocks", "engine"};
  m->cache_info = prom_gauge(m->reg, "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", 4, info);

  m->kv_blocks_used = gauge(m, "tram:kv_cache_blocks_used", "KV-cache blocks in use.");
  m->kv_blocks_total = gauge(m, "tram:kv_cache_blocks_total", "KV-cache blocks in all.");
  m->kv_blocks_cached =
      gauge(m, "tram:prefix_cache_blocks", "KV-cache blocks holding a prefix-cache entry (in use or free).");
  m->draft_kv_blocks_used = gauge(m, "tram:draft_kv_cache_blocks_used", "Draft model KV-cache blocks in use.");
  m->draft_kv_blocks_total = gauge(m, "tram:draft_kv_cache_blocks_total", "Draft model KV-cache blocks in all.");
  m->state_slots_used = gauge(m, "tram:recurrent_state_slots_used",
                              "Recurrent-state slots held by running sequences (hybrid models; 0 otherwise).");
  m->state_slots_total = gauge(m, "tram:recurrent_state_slots_total", "Recurrent-state slots in all (max_seqs).");
  m->state_bytes = gauge(m, "tram:recurrent_state_bytes", "Bytes of the recurrent-state pool.");
  m->snaps_used = gauge(m, "tram:recurrent_snapshots_used",
                        "Recurrent-state snapshots held at prefix-cache blocks (hybrid models).");
  m->snaps_total = gauge(m, "tram:recurrent_snapshots_total",
                         "Recurrent-state snapshots state_snapshot_bytes holds (at most one per KV-cache block).");
  m->snap_bytes = gauge(m, "tram:recurrent_snapshot_bytes", "Bytes of the recurrent-state snapshots.");
  m->snaps_taken = counter(m, "tram:recurrent_snapshots_taken_total", "Recurrent-state snapshots taken.");
  m->snaps_restored = counter(m, "tram:recurrent_snapshots_restored_total",
                              "Recurrent states restored from a snapshot by a prefix-cache hit.");
  m->snaps_dropped = counter(m, "tram:recurrent_snapshots_dropped_total",
                             "Snapshots dropped for room (least recently used), their blocks still cached.");
  m->step_target = gauge(m, "tram:step_target_seconds",
                         "Step time that prompt chunks are sized for while sequences decode (step_target_ms; "
                         "0 until auto has measured a decode-only step).");
  m->prefill_budget = gauge(m, "tram:prefill_budget_tokens", "Prompt tokens a step with decodes may compute now.");
  m->weight_gbps = gauge(m, "tram:weight_read_gbps",
                         "Model weight bytes the last step read divided by its forward time, GB/s.");
  m->weight_share = gauge(m, "tram:weight_read_bandwidth_share",
                          "tram:weight_read_gbps as a share of tram:memory_read_gbps (0 when that is unknown).");
  m->memory_gbps = gauge(m, "tram:memory_read_gbps",
                         "Memory read bandwidth the backend measured at start-up, GB/s (0: not measured).");
  const char *steps_labels[] = {LABELS[0], LABELS[1], LABELS[3]};
  prom_family_t *steps = prom_counter(m->reg, "tram:engine_steps_total", "Engine steps by attention path.", 3,
                                      steps_labels);
  m->steps_varlen = labelled(m, steps, "varlen");
  m->steps_decode = labelled(m, steps, "decode");
  m->spec_drafts = counter(m, "vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.");
  m->spec_draft_tokens = counter(m, "vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.");
  m->spec_accepted = counter(m, "vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.");
  const char *pos_labels[] = {LABELS[0], LABELS[1], "position"};
  m->spec_per_pos = prom_counter(m->reg, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                 "Accepted tokens per draft position.", 3, pos_labels);
  create_http(m);
  return m;
}

void srv_metrics_destroy(srv_metrics_t *m) {
  if (!m) return;
  prom_registry_destroy(m->reg);
  free(m->model_name);
  free(m);
}

void srv_metrics_snapshot(srv_metrics_t *m, const sched_stats_t *st) {
  prom_set(m->requests_running, st->running);
  prom_set(m->requests_waiting, st->waiting);
  prom_set(m->seqs_paused, st->paused);
  prom_set(m->kv_usage, st->kv_blocks_total ? (double)st->kv_blocks_used / st->kv_blocks_total : 0);
  prom_set(m->kv_blocks_used, st->kv_blocks_used);
  prom_set(m->kv_blocks_total, st->kv_blocks_total);
  prom_set(m->kv_blocks_cached, st->kv_blocks_cached);
  prom_set(m->draft_kv_blocks_used, st->draft_kv_blocks_used);
  prom_set(m->draft_kv_blocks_total, st->draft_kv_blocks_total);
  prom_set(m->state_slots_used, st->state_slots_used);
  prom_set(m->state_slots_total, st->state_slots_total);
  prom_set(m->state_bytes, (double)st->state_bytes);
  prom_set(m->snaps_used, st->state_snaps_used);
  prom_set(m->snaps_total, st->state_snaps_total);
  prom_set(m->snap_bytes, (double)st->state_snap_bytes);
  prom_set(m->snaps_taken, (double)st->state_snaps_taken);
  prom_set(m->snaps_restored, (double)st->state_snaps_restored);
  prom_set(m->snaps_dropped, (double)st->state_snaps_dropped);
  prom_set(m->step_target, (double)st->step_target_ns * 1e-9);
  prom_set(m->prefill_budget, st->prefill_budget);
  prom_set(m->weight_gbps, st->weight_gbps);
  prom_set(m->weight_share, st->memory_read_gbps > 0 ? st->weight_gbps / st->memory_read_gbps : 0);
  prom_set(m->memory_gbps, st->memory_read_gbps);
  prom_set(m->prompt_tokens, (double)st->prompt_tokens);
  prom_set(m->generation_tokens, (double)st->generated_tokens);
  prom_set(m->preemptions, (double)st->preemptions);
  prom_set(m->prefix_cache_queries, (double)st->prefix_query_tokens);
  prom_set(m->prefix_cache_hits, (double)st->prefix_hit_tokens);
  prom_set(m->steps_varlen, (double)st->varlen_steps);
  prom_set(m->steps_decode, (double)st->decode_steps);
  prom_set(m->spec_drafts, (double)st->spec_drafts);
  prom_set(m->spec_draft_tokens, (double)st->spec_draft_tokens);
  prom_set(m->spec_accepted, (double)st->spec_accepted_tokens);
  for (int k = 0; k < SCHED_SPEC_MAX_K && st->spec_accepted_per_pos[k] > 0; k++) {
    char pos[8];
    snprintf(pos, sizeof pos, "%d", k);
    prom_set(labelled(m, m->spec_per_pos, pos), (double)st->spec_accepted_per_pos[k]);
  }
  /* the engine counts steps by powers of two; vLLM's first bucket (le=1)
   * is [0], its second (le=8) [1..3], then one power each */
  uint64_t counts[N(ITER_BOUNDS) + 1] = {0};
  for (int k = 0; k < SCHED_STEP_TOKEN_BUCKETS; k++) counts[k <= 3 ? (k ? 1 : 0) : k - 2] += st->step_tokens_log2[k];
  prom_hist_set(m->iteration_tokens, counts, (double)(st->prompt_tokens + st->generated_tokens));
  char bs[16], nb[16];
  snprintf(bs, sizeof bs, "%d", st->block_size);
  snprintf(nb, sizeof nb, "%d", st->kv_blocks_total);
  prom_set(prom_series(m->cache_info, (const char *[]){bs, st->prefix_caching ? "True" : "False", nb, ENGINE}), 1);
}

void srv_metrics_finished(srv_metrics_t *m, uint64_t stop, uint64_t length, uint64_t abort) {
  prom_set(m->success_stop, (double)stop);
  prom_set(m->success_length, (double)length);
  prom_set(m->success_abort, (double)abort);
}

void srv_metrics_token(srv_metrics_t *m, double gap_s) {
  prom_observe(m->itl, gap_s);
  prom_observe(m->tpot, gap_s);
}

static double secs(int64_t from, int64_t to) { return from && to ? (double)(to - from) / 1e9 : 0; }

void srv_metrics_request(srv_metrics_t *m, const srv_metrics_req_t *r) {
  const sched_times_t *t = &r->times;
  if (t->first_token) prom_observe(m->ttft, secs(t->arrival, t->first_token));
  prom_observe(m->e2e, secs(t->arrival, t->finished));
  /* vLLM observes the phases of every finished request (0 for one that
   * never reached them) */
  prom_observe(m->queue_time, secs(t->arrival, t->first_scheduled));
  prom_observe(m->prefill_time, secs(t->first_scheduled, t->first_token));
  prom_observe(m->decode_time, secs(t->first_token, r->last_token));
  prom_observe(m->inference_time, secs(t->first_scheduled, r->last_token));
  if (r->prompt_tokens > 0)
    prom_observe(m->prefill_per_token, secs(t->first_scheduled, t->first_token) / (double)r->prompt_tokens);
  prom_observe(m->prompt_len, (double)r->prompt_tokens);
  prom_observe(m->output_len, (double)r->completion_tokens);
  prom_observe(m->max_output_len, (double)r->max_seq_tokens);
  prom_observe(m->params_n, (double)r->n);
  if (r->max_tokens > 0) prom_observe(m->params_max_tokens, (double)r->max_tokens);
}

void srv_metrics_http(srv_metrics_t *m, const http_server_stats_t *st) {
  prom_set(m->http_open, st->connections_open);
  prom_set(m->http_accepted, (double)st->connections_accepted);
  prom_set(m->http_rejected, (double)st->connections_rejected);
  prom_set(m->http_over_client, (double)st->connections_over_client);
  prom_set(m->http_requests, (double)st->requests);
  prom_set(m->http_timeouts, (double)st->timeouts);
  prom_set(m->http_dropped, (double)st->dropped);
  prom_set(m->http_evicted, (double)st->evicted);
}

char *srv_metrics_render(const srv_metrics_t *m, size_t *len) { return prom_render(m->reg, len); }
