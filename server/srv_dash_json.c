/* server/srv_dash_json.c — the dashboard's data (server/srv_dash.h): the
 * latency window behind the TTFT and ITL percentiles, and the JSON of one
 * engine snapshot (its fields are documented in docs/api.md, "Dashboard
 * stream"). Pure functions of their arguments. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/alloc.h"
#include "server/srv_dash.h"

void srv__dash_lat_add(srv_dash_lat_t *l, int64_t t, int64_t v) {
  const size_t i = (size_t)(l->n++ % SRV_DASH_LAT_CAP);
  l->t[i] = t;
  l->v[i] = v;
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The nearest-rank percentile p (0..100) of sorted v[n] (n >= 1). */
static int64_t rank(const int64_t *v, int n, int p) {
  int k = (int)((p * (int64_t)n + 99) / 100); /* ceil(p/100 * n) */
  if (k < 1) k = 1;
  return v[k - 1];
}

int srv__dash_lat_pct(const srv_dash_lat_t *l, int64_t now, int64_t window, int64_t *p50, int64_t *p99) {
  int64_t v[SRV_DASH_LAT_CAP];
  int n = 0;
  const uint64_t have = l->n < SRV_DASH_LAT_CAP ? l->n : SRV_DASH_LAT_CAP;
  for (uint64_t i = 0; i < have; i++)
    if (l->t[i] > now - window && l->t[i] <= now) v[n++] = l->v[i];
  *p50 = *p99 = 0;
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_i64);
  *p50 = rank(v, n, 50);
  *p99 = rank(v, n, 99);
  return n;
}

/* ---- JSON ------------------------------------------------------------------------ */

static cJSON *obj(cJSON *parent, const char *name) {
  cJSON *o = cJSON_AddObjectToObject(parent, name);
  if (!o) xoom("server", 0);
  return o;
}

static cJSON *arr(cJSON *parent, const char *name) {
  cJSON *a = cJSON_AddArrayToObject(parent, name);
  if (!a) xoom("server", 0);
  return a;
}

static void num(cJSON *o, const char *name, double v) {
  if (!cJSON_AddNumberToObject(o, name, v)) xoom("server", 0);
}

static void str(cJSON *o, const char *name, const char *v) {
  if (!cJSON_AddStringToObject(o, name, v ? v : "")) xoom("server", 0);
}

/* Appends [a, b, c, ...] (n numbers) to array `to`. */
static void tuple(cJSON *to, const double *v, int n) {
  cJSON *t = cJSON_CreateArray();
  if (!t) xoom("server", 0);
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(v[i]));
  cJSON_AddItemToArray(to, t);
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

static void add_info(cJSON *root, const sched_snap_t *sn, const srv_dash_info_t *in) {
  cJSON *o = obj(root, "info");
  str(o, "model", in->model);
  str(o, "model_file", in->model_file);
  str(o, "device", in->device);
  num(o, "threads", in->threads);
  str(o, "version", in->version);
  num(o, "uptime_s", (double)in->uptime_ns / 1e9);
  num(o, "kv_blocks", sn->num_blocks);
  num(o, "block_size", sn->stats.block_size);
  num(o, "kv_cache_bytes", (double)in->kv_cache_bytes);
  num(o, "state_slots", sn->stats.state_slots_total); /* a hybrid model's recurrent-state pool (0: none) */
  num(o, "state_slots_used", sn->stats.state_slots_used);
  num(o, "state_bytes", (double)sn->stats.state_bytes);
  num(o, "state_snapshots", sn->stats.state_snaps_total); /* its snapshots at prefix-cache blocks (0: none) */
  num(o, "state_snapshots_used", sn->stats.state_snaps_used);
  num(o, "max_batch_tokens", sn->max_batch_tokens);
  num(o, "max_seqs", sn->max_seqs);
  num(o, "max_model_len", sn->stats.max_model_len);
  num(o, "clients", (double)in->clients);
  num(o, "dropped", (double)in->dropped);
  num(o, "loop_ms", (double)in->loop_ns / 1e6);
  num(o, "weight_gbps", sn->stats.weight_gbps);           /* the last step's weight read rate */
  num(o, "memory_read_gbps", sn->stats.memory_read_gbps); /* the bound measured at start-up (0: none) */
  num(o, "step_target_ms", ms(sn->stats.step_target_ns));
  num(o, "prefill_budget", sn->stats.prefill_budget);
}

static void add_totals(cJSON *root, const sched_snap_t *sn) {
  const sched_stats_t *s = &sn->stats;
  cJSON *q = obj(root, "queues");
  num(q, "running", sn->running);
  num(q, "waiting", s->waiting); /* new + preempted + submitted not yet taken: as /metrics */
  num(q, "preempted", sn->preempted);
  cJSON *t = obj(root, "totals");
  num(t, "steps", (double)s->steps);
  num(t, "decode_steps", (double)s->decode_steps);
  num(t, "varlen_steps", (double)s->varlen_steps);
  num(t, "prompt_tokens", (double)s->prompt_tokens);
  num(t, "generation_tokens", (double)s->generated_tokens);
  num(t, "preemptions", (double)s->preemptions);
  num(t, "prefix_hit_blocks", (double)s->prefix_hit_blocks);
  num(t, "prefix_cache_queries", (double)s->prefix_query_tokens);
  num(t, "prefix_cache_hits", (double)s->prefix_hit_tokens);
  num(t, "requests_submitted", (double)s->requests_submitted);
  num(t, "requests_finished", (double)s->requests_finished);
  num(t, "busy_ms", (double)s->busy_ns / 1e6);
  num(t, "snapshot_builds", (double)sn->builds);
  num(t, "snapshot_build_ms", (double)sn->build_ns_total / 1e6);
}

/* The cell's drawn state: its majority, ties to the busier state. */
static int cell_state(const sched_snap_cell_t *c) {
  int best = 0;
  for (int s = 1; s < SCHED_BLK_N_STATES; s++)
    if (c->n[s] >= c->n[best]) best = s;
  return best;
}

static void add_kv(cJSON *root, const sched_snap_t *sn) {
  cJSON *o = obj(root, "kv");
  num(o, "blocks", sn->num_blocks);
  num(o, "per_cell", sn->blocks_per_cell);
  for (int s = 0; s < SCHED_BLK_N_STATES; s++) num(o, sched_blk_state_name((sched_blk_state_t)s), sn->blocks[s]);
  char *cells = xmalloc((size_t)sn->n_cells + 1);
  for (int32_t c = 0; c < sn->n_cells; c++) cells[c] = (char)('0' + cell_state(&sn->cells[c]));
  cells[sn->n_cells] = '\0';
  str(o, "cells", cells);
  free(cells);
  if (sn->blocks_per_cell > 1) { /* held blocks per cell */
    cJSON *used = arr(o, "used");
    for (int32_t c = 0; c < sn->n_cells; c++)
      cJSON_AddItemToArray(used, cJSON_CreateNumber(sn->cells[c].n[SCHED_BLK_OWNED] + sn->cells[c].n[SCHED_BLK_SHARED]));
  }
  cJSON *owners = arr(o, "owners"); /* runs of cells with one owner: [first, count, id, index] */
  for (int32_t c = 0; c < sn->n_cells;) {
    const sched_snap_cell_t *a = &sn->cells[c];
    int32_t e = c + 1;
    while (e < sn->n_cells && sn->cells[e].owner == a->owner && sn->cells[e].owner_index == a->owner_index) e++;
    if (a->owner) tuple(owners, (const double[]){c, e - c, (double)a->owner, a->owner_index}, 4);
    c = e;
  }
  cJSON *refs = arr(o, "refs"); /* cells holding a block with several references: [cell, refs] */
  for (int32_t c = 0; c < sn->n_cells; c++)
    if (sn->cells[c].max_refs > 1) tuple(refs, (const double[]){c, sn->cells[c].max_refs}, 2);
}

static void add_steps(cJSON *root, const sched_snap_t *sn) {
  cJSON *a = arr(root, "steps");
  for (int32_t i = 0; i < sn->n_steps; i++) {
    const sched_snap_step_t *s = &sn->steps[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) xoom("server", 0);
    cJSON_AddItemToArray(a, o);
    num(o, "step", (double)s->step);
    num(o, "prefill", s->prefill_tokens);
    num(o, "decode", s->decode_tokens);
    num(o, "seqs", s->seqs);
    str(o, "path", s->decode_path ? "decode" : "varlen");
    num(o, "ms", ms(s->step_ns));
    num(o, "preemptions", s->preemptions);
    num(o, "prefix_hits", s->prefix_hit_blocks);
  }
  num(root, "steps_dropped", (double)sn->steps_dropped);
}

static void add_requests(cJSON *root, const sched_snap_t *sn) {
  cJSON *a = arr(root, "requests");
  for (int32_t i = 0; i < sn->n_seqs; i++) {
    const sched_snap_seq_t *q = &sn->seqs[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) xoom("server", 0);
    cJSON_AddItemToArray(a, o);
    num(o, "id", (double)q->id);
    num(o, "seq", q->index);
    str(o, "state", sched_seq_state_name((sched_seq_state_t)q->state));
    num(o, "prompt", q->prompt_tokens);
    num(o, "cached", q->cached_tokens);
    num(o, "generated", q->generated);
    num(o, "blocks", q->blocks);
    num(o, "preempted", q->admissions > 1 || q->state == SCHED_SEQ_ST_PREEMPTED);
    num(o, "age_ms", ms(sn->time_ns - q->arrival_ns));
    if (q->first_token_ns) {
      num(o, "ttft_ms", ms(q->first_token_ns - q->arrival_ns));
      const int64_t since = sn->time_ns - q->first_token_ns;
      num(o, "tokens_per_s", since > 0 && q->generated > 1 ? (double)(q->generated - 1) * 1e9 / (double)since : 0);
    } else {
      cJSON_AddNullToObject(o, "ttft_ms");
      cJSON_AddNullToObject(o, "tokens_per_s");
    }
  }
  num(root, "requests_total", sn->n_seqs_total);
}

static void add_latency(cJSON *root, int64_t now, const srv_dash_lat_t *ttft, const srv_dash_lat_t *itl) {
  cJSON *o = obj(root, "latency");
  num(o, "window_s", (double)SRV_DASH_WINDOW_NS / 1e9);
  int64_t p50, p99;
  num(o, "ttft_n", srv__dash_lat_pct(ttft, now, SRV_DASH_WINDOW_NS, &p50, &p99));
  num(o, "ttft_p50_ms", ms(p50));
  num(o, "ttft_p99_ms", ms(p99));
  num(o, "itl_n", srv__dash_lat_pct(itl, now, SRV_DASH_WINDOW_NS, &p50, &p99));
  num(o, "itl_p50_ms", ms(p50));
  num(o, "itl_p99_ms", ms(p99));
}

char *srv__dash_json(const sched_snap_t *sn, const srv_dash_info_t *info, const srv_dash_lat_t *ttft,
                     const srv_dash_lat_t *itl, size_t *len) {
  cJSON *root = cJSON_CreateObject();
  if (!root) xoom("server", 0);
  num(root, "seq", (double)sn->seq);
  num(root, "time_ms", ms(sn->time_ns));
  num(root, "build_us", (double)sn->build_ns / 1e3);
  add_info(root, sn, info);
  add_totals(root, sn);
  add_kv(root, sn);
  add_steps(root, sn);
  add_requests(root, sn);
  if (ttft && itl) add_latency(root, sn->time_ns, ttft, itl);
  char *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!out) xoom("server", 0);
  *len = strlen(out);
  return out;
}
