/* tests/unit/test_srv_dash.c — the dashboard stream's JSON
 * (server/srv_dash_json.c) against the snapshot it renders: every count,
 * the cell string, owner runs, references, steps, sequences and latency
 * percentiles (checked against a sort of the same samples), and the
 * aggregated form of a large cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/srv_dash.h"

static double get(const cJSON *o, const char *path) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", path);
  const cJSON *x = o;
  for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
    x = cJSON_GetObjectItemCaseSensitive(x, k);
    assert_non_null(x);
  }
  assert_true(cJSON_IsNumber(x));
  return x->valuedouble;
}

static const srv_dash_info_t info = {.model = "m\"odel", .model_file = "/x.gguf", .device = "cpu", .threads = 2,
                                     .version = "0.1.0", .kv_cache_bytes = 1 << 20, .uptime_ns = 3000000000};

static void render_small(void **state) {
  sched_snap_t *sn = calloc(1, sizeof *sn);
  sn->seq = 7;
  sn->time_ns = 100000000000;
  sn->num_blocks = sn->n_cells = 6;
  sn->blocks_per_cell = 1;
  sn->stats.block_size = 16;
  sn->stats.waiting = 3;
  sn->stats.generated_tokens = 42;
  sn->stats.decode_steps = 5;
  sn->running = 2;
  sn->preempted = 1;
  sn->max_batch_tokens = 256;
  /* cells: free, cached, owned by 4.0, owned by 4.0, shared (4.0 first, 2 refs), owned by 5.1 */
  const int st[6] = {SCHED_BLK_FREE, SCHED_BLK_CACHED, SCHED_BLK_OWNED, SCHED_BLK_OWNED, SCHED_BLK_SHARED, SCHED_BLK_OWNED};
  const uint64_t own[6] = {0, 0, 4, 4, 4, 5};
  for (int i = 0; i < 6; i++) {
    sn->cells[i].n[st[i]] = 1;
    sn->blocks[st[i]]++;
    sn->cells[i].owner = own[i];
    sn->cells[i].owner_index = i == 5;
    sn->cells[i].max_refs = st[i] == SCHED_BLK_SHARED ? 2 : own[i] ? 1 : 0;
  }
  sn->n_steps = 1;
  sn->steps[0] = (sched_snap_step_t){.step = 9, .step_ns = 2500000, .prefill_tokens = 30, .decode_tokens = 2, .seqs = 3};
  sn->n_seqs = sn->n_seqs_total = 1;
  sn->seqs[0] = (sched_snap_seq_t){.id = 4, .state = SCHED_SEQ_ST_DECODE, .prompt_tokens = 20, .cached_tokens = 16,
                                   .generated = 11, .blocks = 3, .admissions = 1, .arrival_ns = 98000000000,
                                   .first_token_ns = 99000000000};
  srv_dash_lat_t *ttft = calloc(1, sizeof *ttft), *itl = calloc(1, sizeof *itl);
  srv__dash_lat_add(ttft, 1, 999000000); /* outside the window: ignored */
  for (int i = 1; i <= 100; i++) srv__dash_lat_add(ttft, 99000000000, i * 1000000);
  size_t len;
  char *json = srv__dash_json(sn, &info, ttft, itl, &len);
  assert_int_equal(strlen(json), len);
  cJSON *o = cJSON_Parse(json);
  assert_non_null(o);
  assert_int_equal(get(o, "seq"), 7);
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "info"), "model")->valuestring, "m\"odel");
  assert_int_equal(get(o, "info.uptime_s"), 3);
  assert_int_equal(get(o, "queues.running"), 2);
  assert_int_equal(get(o, "queues.waiting"), 3);
  assert_int_equal(get(o, "queues.preempted"), 1);
  assert_int_equal(get(o, "totals.generation_tokens"), 42);
  assert_int_equal(get(o, "totals.decode_steps"), 5);
  const cJSON *kv = cJSON_GetObjectItem(o, "kv");
  assert_string_equal(cJSON_GetObjectItem(kv, "cells")->valuestring, "012232");
  assert_int_equal(get(o, "kv.owned"), 3);
  assert_int_equal(get(o, "kv.shared"), 1);
  assert_null(cJSON_GetObjectItem(kv, "used")); /* one block per cell */
  char *owners = cJSON_PrintUnformatted(cJSON_GetObjectItem(kv, "owners"));
  assert_string_equal(owners, "[[2,3,4,0],[5,1,5,1]]");
  free(owners);
  char *refs = cJSON_PrintUnformatted(cJSON_GetObjectItem(kv, "refs"));
  assert_string_equal(refs, "[[4,2]]");
  free(refs);
  const cJSON *step = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "steps"), 0);
  assert_int_equal(get(step, "prefill"), 30);
  assert_int_equal(get(step, "decode"), 2);
  assert_string_equal(cJSON_GetObjectItem(step, "path")->valuestring, "varlen");
  assert_true(get(step, "ms") == 2.5);
  const cJSON *rq = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "requests"), 0);
  assert_string_equal(cJSON_GetObjectItem(rq, "state")->valuestring, "decode");
  assert_int_equal(get(rq, "ttft_ms"), 1000);
  assert_true(get(rq, "tokens_per_s") == 10.0); /* 10 tokens after the first in 1 s */
  assert_int_equal(get(rq, "age_ms"), 2000);
  assert_int_equal(get(o, "latency.ttft_n"), 100);
  assert_int_equal(get(o, "latency.ttft_p50_ms"), 50);
  assert_int_equal(get(o, "latency.ttft_p99_ms"), 99);
  assert_int_equal(get(o, "latency.itl_n"), 0);
  cJSON_Delete(o);
  free(json);
  free(ttft);
  free(itl);
  free(sn);
}

/* The window keeps the newest SRV_DASH_LAT_CAP samples; percentiles are
 * nearest-rank over the ones inside the time window. */
static int cmp(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void latency_window(void **state) {
  srv_dash_lat_t *l = calloc(1, sizeof *l);
  int64_t p50, p99;
  assert_int_equal(srv__dash_lat_pct(l, 100, 50, &p50, &p99), 0);
  assert_true(p50 == 0 && p99 == 0);
  const int n = SRV_DASH_LAT_CAP + 500;
  int64_t *ref = malloc(sizeof *ref * (size_t)n);
  uint64_t x = 12345;
  for (int i = 0; i < n; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ref[i] = (int64_t)(x >> 40);
    srv__dash_lat_add(l, 1000 + i, ref[i]);
  }
  /* window (now - 1000, now]: the last 1000 samples */
  const int64_t now = 1000 + n - 1;
  qsort(ref + n - 1000, 1000, sizeof *ref, cmp);
  assert_int_equal(srv__dash_lat_pct(l, now, 1000, &p50, &p99), 1000);
  assert_int_equal(p50, ref[n - 1000 + 499]);
  assert_int_equal(p99, ref[n - 1000 + 989]);
  /* a window wider than what is kept: the newest CAP */
  assert_int_equal(srv__dash_lat_pct(l, now, 1 << 30, &p50, &p99), SRV_DASH_LAT_CAP);
  free(ref);
  free(l);
}

static void render_aggregated(void **state) {
  sched_snap_t *sn = calloc(1, sizeof *sn);
  sn->num_blocks = 100000;
  sn->blocks_per_cell = 13;
  sn->n_cells = (100000 + 12) / 13;
  for (int32_t c = 0; c < sn->n_cells; c++) sn->cells[c].n[SCHED_BLK_FREE] = 13;
  sn->cells[3].n[SCHED_BLK_FREE] = 4;
  sn->cells[3].n[SCHED_BLK_OWNED] = 9;
  sn->cells[3].owner = 8;
  size_t len;
  char *json = srv__dash_json(sn, &info, NULL, NULL, &len);
  cJSON *o = cJSON_Parse(json);
  const cJSON *kv = cJSON_GetObjectItem(o, "kv");
  const char *cells = cJSON_GetObjectItem(kv, "cells")->valuestring;
  assert_int_equal(strlen(cells), sn->n_cells);
  assert_int_equal(cells[3], '2');
  assert_int_equal(cells[4], '0');
  const cJSON *used = cJSON_GetObjectItem(kv, "used");
  assert_int_equal(cJSON_GetArraySize(used), sn->n_cells);
  assert_int_equal(cJSON_GetArrayItem(used, 3)->valueint, 9);
  assert_null(cJSON_GetObjectItem(o, "latency"));
  assert_true(len < 64 * 1024); /* bounded whatever the cache's size */
  cJSON_Delete(o);
  free(json);
  free(sn);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(render_small),
      cmocka_unit_test(latency_window),
      cmocka_unit_test(render_aggregated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
