/* server/metrics.h — tram's /metrics: vLLM's metric families under vLLM's
 * own names (`vllm:` prefix), labels (`model_name`, `engine`) and bucket
 * boundaries, so dashboards, autoscalers and routers built for vLLM read
 * tram unchanged; tram's own extras are under `tram:`.
 *
 * The integration fills it on the loop thread: gauges and counters from the
 * engine's stats snapshot when /metrics is asked (srv_metrics_snapshot),
 * per-token and per-request histograms as events arrive (srv_metrics_token,
 * srv_metrics_request), the HTTP counters with srv_metrics_http(); then
 * serves srv_metrics_render() as text/plain; version=0.0.4. */
#ifndef TRAM_SRV_METRICS_H
#define TRAM_SRV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler/sched.h"
#include "http/http.h"
#include "server/prom.h"

typedef struct srv_metrics {
  prom_registry_t *reg;
  prom_family_t *cache_info; /* vllm:cache_config_info (series made by srv_metrics_snapshot) */
  char *model_name;
  /* gauges */
  prom_series_t *requests_running; /* vllm:num_requests_running */
  prom_series_t *requests_waiting; /* vllm:num_requests_waiting */
  prom_series_t *seqs_paused;      /* tram:num_sequences_paused */
  prom_series_t *kv_usage;         /* vllm:kv_cache_usage_perc (0..1) */
  prom_series_t *kv_blocks_used;   /* tram:kv_cache_blocks_used */
  prom_series_t *kv_blocks_total;  /* tram:kv_cache_blocks_total */
  prom_series_t *kv_blocks_cached; /* tram:prefix_cache_blocks */
  prom_series_t *draft_kv_blocks_used, *draft_kv_blocks_total; /* tram:draft_kv_cache_blocks_{used,total} */
  prom_series_t *state_slots_used, *state_slots_total, *state_bytes; /* tram:recurrent_state_{slots_used,
                                                                         slots_total,bytes} */
  prom_series_t *snaps_used, *snaps_total, *snap_bytes; /* tram:recurrent_snapshots_{used,total},
                                                           tram:recurrent_snapshot_bytes */
  prom_series_t *snaps_taken, *snaps_restored, *snaps_dropped; /* tram:recurrent_snapshots_{taken,restored,
                                                                  dropped}_total */
  prom_series_t *step_target, *prefill_budget; /* tram:step_target_seconds, tram:prefill_budget_tokens */
  prom_series_t *weight_gbps, *weight_share;   /* tram:weight_read_gbps, tram:weight_read_bandwidth_share */
  prom_series_t *memory_gbps;                  /* tram:memory_read_gbps */
  /* counters */
  prom_series_t *prompt_tokens;        /* vllm:prompt_tokens_total */
  prom_series_t *generation_tokens;    /* vllm:generation_tokens_total */
  prom_series_t *preemptions;          /* vllm:num_preemptions_total */
  prom_series_t *prefix_cache_queries; /* vllm:prefix_cache_queries_total (tokens) */
  prom_series_t *prefix_cache_hits;    /* vllm:prefix_cache_hits_total (tokens) */
  prom_series_t *success_stop;         /* vllm:request_success_total{finished_reason="stop"} */
  prom_series_t *success_length;       /* ... "length" */
  prom_series_t *success_abort;        /* ... "abort" */
  prom_series_t *steps_varlen;         /* tram:engine_steps_total{path="varlen"} */
  prom_series_t *steps_decode;         /* ... "decode" */
  prom_series_t *spec_drafts;          /* vllm:spec_decode_num_drafts_total: verification rounds */
  prom_series_t *spec_draft_tokens;    /* vllm:spec_decode_num_draft_tokens_total */
  prom_series_t *spec_accepted;        /* vllm:spec_decode_num_accepted_tokens_total */
  prom_family_t *spec_per_pos;         /* vllm:spec_decode_num_accepted_tokens_per_pos_total{position} */
  /* histograms (vllm:) */
  prom_series_t *iteration_tokens; /* iteration_tokens_total: prompt + sampled tokens per engine step */
  prom_series_t *ttft;             /* time_to_first_token_seconds */
  prom_series_t *tpot;             /* time_per_output_token_seconds (per token, as ITL) */
  prom_series_t *itl;              /* inter_token_latency_seconds */
  prom_series_t *e2e;              /* e2e_request_latency_seconds */
  prom_series_t *queue_time;       /* request_queue_time_seconds */
  prom_series_t *inference_time;   /* request_inference_time_seconds */
  prom_series_t *prefill_time;     /* request_prefill_time_seconds */
  prom_series_t *decode_time;      /* request_decode_time_seconds */
  prom_series_t *prefill_per_token; /* time_per_prefill_token_request_seconds */
  prom_series_t *prompt_len;       /* request_prompt_tokens */
  prom_series_t *output_len;       /* request_generation_tokens */
  prom_series_t *max_output_len;   /* request_max_num_generation_tokens */
  prom_series_t *params_n;         /* request_params_n */
  prom_series_t *params_max_tokens; /* request_params_max_tokens */
  /* the HTTP layer (srv_metrics_http) */
  prom_series_t *http_open;     /* tram:http_connections_open */
  prom_series_t *http_accepted; /* tram:http_connections_total */
  prom_series_t *http_rejected; /* tram:http_connections_rejected_total */
  prom_series_t *http_over_client; /* tram:http_connections_over_client_total */
  prom_series_t *http_requests; /* tram:http_requests_total */
  prom_series_t *http_timeouts; /* tram:http_timeouts_total */
  prom_series_t *http_dropped;  /* tram:http_clients_dropped_total */
  prom_series_t *http_evicted;  /* tram:http_connections_evicted_total */
  /* the loop's stall probe */
  prom_series_t *loop_stall_max;   /* tram:event_loop_stall_max_seconds */
  prom_series_t *loop_stall_total; /* tram:event_loop_stall_seconds_total */
} srv_metrics_t;

/* One finished engine request (one prompt with its n sequences), for the
 * per-request histograms. Times on CLOCK_MONOTONIC ns; 0: did not happen. */
typedef struct srv_metrics_req {
  sched_times_t times;
  int64_t last_token;        /* the last token of any of its sequences */
  int64_t prompt_tokens;
  int64_t completion_tokens; /* all sequences */
  int32_t max_seq_tokens;    /* the longest sequence */
  int32_t n;                 /* the n parameter */
  int32_t max_tokens;        /* the effective max_tokens (the room left when the request set none) */
} srv_metrics_req_t;

/* Registers the set; every series gets model_name="<model_name>",
 * engine="0"; token-count histograms get 1-2-5 buckets up to max_model_len.
 * Returns NULL only if max_model_len < 1 (after logging). */
srv_metrics_t *srv_metrics_create(const char *model_name, int32_t max_model_len);
void srv_metrics_destroy(srv_metrics_t *m); /* NULL: no-op */

/* Copies the engine's counters and gauges (and vllm:cache_config_info) from
 * a stats snapshot. */
void srv_metrics_snapshot(srv_metrics_t *m, const sched_stats_t *st);

/* Sets the request_success_total counters (finished sequences by reason). */
void srv_metrics_finished(srv_metrics_t *m, uint64_t stop, uint64_t length, uint64_t abort);

/* A token of a sequence gap_s seconds after the sequence's previous one. */
void srv_metrics_token(srv_metrics_t *m, double gap_s);

/* Observes one finished engine request. */
void srv_metrics_request(srv_metrics_t *m, const srv_metrics_req_t *r);

/* Copies the HTTP server's counters into the http_* series. */
void srv_metrics_http(srv_metrics_t *m, const http_server_stats_t *st);

/* The text format (malloc'd; see prom_render). */
char *srv_metrics_render(const srv_metrics_t *m, size_t *len);

#endif
