/* bench/snapshot_bench.c — what one dashboard snapshot costs the engine
 * thread (scheduler/sched_snapshot.c) on large caches: the block-state pass,
 * the owner pass over every running sequence's block table, the live list,
 * and the copy to the published buffer; and the size of its JSON
 * (server/srv_dash_json.c, built on the loop thread).
 *
 * No model: the engine's private struct holds just what a snapshot reads —
 * an allocator of N blocks, and S running sequences that hold most of them
 * (half of each sequence's blocks shared with the next one by prefix
 * hits). Prints, per cache size, the median build time of 20 snapshots
 * (spaced out as the engine spaces them: 1 % of its time at most),
 * the JSON's size and its render time.
 *
 *   build/bench/snapshot_bench [blocks ...]     (default 1000 10000 100000 1000000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "scheduler/sched_internal.h"
#include "scheduler/sched_snapshot.h"
#include "server/srv_dash.h"

#define SEQS 32
#define REPS 20

typedef struct fake_seq {
  sched_eseq_t q; /* first: the engine's view */
  sched_req_t r;
} fake_seq_t;

static void bench(int32_t num_blocks) {
  const int32_t bs = 16;
  sched_engine_t *e = calloc(1, sizeof *e);
  e->cache = calloc(1, sizeof *e->cache);
  e->cache->alloc = kv_alloc_create(num_blocks, bs);
  e->cfg.max_batch_tokens = 8192;
  e->cfg.max_seqs = SEQS;
  if (!e->cache->alloc || sched_plan_init(&e->plan, e->cache->alloc, 8192, SEQS, 1) != 0) abort();
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->snap = sched__snap_create();
  e->stats.kv_blocks_total = num_blocks;
  e->stats.block_size = bs;
  /* SEQS sequences filling ~90% of the cache: each takes its share by
   * reserving; one in two then also references its neighbour's blocks */
  fake_seq_t *f = calloc(SEQS, sizeof *f);
  const int64_t per = (int64_t)num_blocks * 9 / 10 / SEQS * bs;
  int32_t *prompt = calloc((size_t)per, sizeof *prompt);
  for (int i = 0; i < SEQS; i++) {
    for (int64_t t = 0; t < per; t++) prompt[t] = (int32_t)(i * 7 + t) % 1000;
    f[i].r.id = (uint64_t)i + 1;
    f[i].q.req = &f[i].r;
    sched_seq_init(&f[i].q.s, prompt, (int32_t)per, 1);
    if (kv_seq_reserve(e->cache->alloc, &f[i].q.s.kv, per) != 0) abort();
    f[i].q.s.where = SCHED_SEQ_RUNNING;
    f[i].q.s.prev = e->plan.running.tail;
    if (e->plan.running.tail) e->plan.running.tail->next = &f[i].q.s;
    else e->plan.running.head = &f[i].q.s;
    e->plan.running.tail = &f[i].q.s;
    e->plan.running.n++;
  }
  for (int i = 1; i < SEQS; i += 2)
    for (int32_t b = 0; b < f[i - 1].q.s.kv.n_blocks / 2; b++) kv_block_ref(e->cache->alloc, f[i - 1].q.s.kv.blocks[b]);
  sched_snap_subscribe(e, 1);
  double t[REPS];
  sched_snap_t *sn = calloc(1, sizeof *sn);
  for (int r = 0; r < REPS;) {
    sched_snap_request(e);
    sched__snap_step(e, 0);
    if (!sched_snap_get(e, sn, sn->seq)) { /* spaced out by the 1 % rule: wait */
      usleep(200);
      continue;
    }
    t[r++] = (double)sn->build_ns / 1e9;
  }
  qsort(t, REPS, sizeof *t, bench_cmp_double);
  const srv_dash_info_t info = {.model = "m", .device = "cpu", .version = "0"};
  srv_dash_lat_t *lat = calloc(1, sizeof *lat);
  size_t len = 0;
  double tj[21];
  for (int r = 0; r < 21; r++) {
    const double t0 = bench_clock_s(CLOCK_MONOTONIC);
    free(srv__dash_json(sn, &info, lat, lat, &len));
    tj[r] = bench_clock_s(CLOCK_MONOTONIC) - t0;
  }
  qsort(tj, 21, sizeof *tj, bench_cmp_double);
  printf("| %d | %d | %d | %.1f | %.1f | %.1f | %.2f |\n", num_blocks, sn->blocks_per_cell, sn->n_cells,
         t[REPS / 2] * 1e6, t[REPS * 9 / 10] * 1e6, (double)len / 1024, tj[10] * 1e3);
  for (int i = 1; i < SEQS; i += 2)
    for (int32_t b = 0; b < f[i - 1].q.s.kv.n_blocks / 2; b++) kv_block_unref(e->cache->alloc, f[i - 1].q.s.kv.blocks[b]);
  for (int i = 0; i < SEQS; i++) {
    kv_seq_free(e->cache->alloc, &f[i].q.s.kv);
    free(f[i].q.s.tokens);
  }
  free(lat);
  free(sn);
  free(prompt);
  free(f);
  sched__snap_destroy(e->snap);
  sched_plan_free(&e->plan);
  kv_alloc_destroy(e->cache->alloc);
  free(e->cache);
  free(e);
}

int main(int argc, char **argv) {
  printf("| KV blocks | blocks per cell | cells | build, µs (median) | build, µs (p90) | JSON, KiB | JSON render, ms |\n");
  printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  if (argc > 1)
    for (int i = 1; i < argc; i++) bench(atoi(argv[i]));
  else
    for (int32_t n = 1000; n <= 1000000; n *= 10) bench(n);
  return 0;
}
