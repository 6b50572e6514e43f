/* server/metrics.h — tram's /metrics: the standard metric set, named the way
 * vLLM users expect (`tram:` prefix, vLLM's names, suffixes and bucket
 * boundaries), on a prom registry with a model_name label on every series.
 *
 * The integration fills it on the loop thread when /metrics is asked: gauges
 * and counters from the engine's stats snapshot (prom_set), histograms from
 * per-request observations (prom_observe) or snapshot buckets
 * (prom_hist_set), the HTTP counters with srv_metrics_http(); then serves
 * srv_metrics_render() as text/plain; version=0.0.4. */
#ifndef TRAM_SRV_METRICS_H
#define TRAM_SRV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "server/http.h"
#include "server/prom.h"

typedef struct srv_metrics {
  prom_registry_t *reg;
  /* gauges */
  prom_series_t *requests_running; /* tram:num_requests_running */
  prom_series_t *requests_waiting; /* tram:num_requests_waiting */
  prom_series_t *kv_usage;         /* tram:kv_cache_usage_perc (0..1) */
  prom_series_t *kv_blocks_used;   /* tram:kv_cache_blocks_used */
  prom_series_t *kv_blocks_total;  /* tram:kv_cache_blocks_total */
  /* counters */
  prom_series_t *prompt_tokens;        /* tram:prompt_tokens_total */
  prom_series_t *generation_tokens;    /* tram:generation_tokens_total */
  prom_series_t *preemptions;          /* tram:num_preemptions_total */
  prom_series_t *prefix_cache_queries; /* tram:prefix_cache_queries_total (tokens) */
  prom_series_t *prefix_cache_hits;    /* tram:prefix_cache_hits_total (tokens) */
  prom_series_t *success_stop;         /* tram:request_success_total{finished_reason="stop"} */
  prom_series_t *success_length;       /* ... "length" */
  prom_series_t *success_abort;        /* ... "abort" */
  prom_series_t *steps_varlen;         /* tram:engine_steps_total{path="varlen"} */
  prom_series_t *steps_decode;         /* ... "decode" */
  /* histograms */
  prom_series_t *ttft;       /* tram:time_to_first_token_seconds */
  prom_series_t *itl;        /* tram:inter_token_latency_seconds */
  prom_series_t *e2e;        /* tram:e2e_request_latency_seconds */
  prom_series_t *queue_time; /* tram:request_queue_time_seconds */
  prom_series_t *prompt_len; /* tram:request_prompt_tokens */
  prom_series_t *output_len; /* tram:request_generation_tokens */
  /* the HTTP layer (srv_metrics_http) */
  prom_series_t *http_open;     /* tram:http_connections_open */
  prom_series_t *http_accepted; /* tram:http_connections_total */
  prom_series_t *http_rejected; /* tram:http_connections_rejected_total */
  prom_series_t *http_requests; /* tram:http_requests_total */
  prom_series_t *http_timeouts; /* tram:http_timeouts_total */
  prom_series_t *http_dropped;  /* tram:http_clients_dropped_total */
  prom_series_t *http_evicted;  /* tram:http_connections_evicted_total */
  /* the loop's stall probe */
  prom_series_t *loop_stall_max;   /* tram:event_loop_stall_max_seconds */
  prom_series_t *loop_stall_total; /* tram:event_loop_stall_seconds_total */
} srv_metrics_t;

/* Registers the set with model_name="<model_name>"; token-count histograms
 * get 1-2-5 buckets up to max_model_len. Returns NULL only if max_model_len
 * < 1 (after logging). */
srv_metrics_t *srv_metrics_create(const char *model_name, int32_t max_model_len);
void srv_metrics_destroy(srv_metrics_t *m); /* NULL: no-op */

/* Copies the HTTP server's counters into the http_* series. */
void srv_metrics_http(srv_metrics_t *m, const http_server_stats_t *st);

/* The text format (malloc'd; see prom_render). */
char *srv_metrics_render(const srv_metrics_t *m, size_t *len);

#endif
