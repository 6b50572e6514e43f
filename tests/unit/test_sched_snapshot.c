/* tests/unit/test_sched_snapshot.c — the dashboard's engine snapshots
 * (scheduler/sched_snapshot.h) against the engine's own state:
 *   - on a core driven by hand (no model; the engine's private struct is
 *     filled with just what a snapshot reads), exact block states, owners,
 *     sharing by prefix hits, a preemption, the step records and the
 *     aggregated cells of a large cache;
 *   - on the real engine and model (skipped without the model file), every
 *     step of a workload with prefix sharing and preemption, summed over the
 *     snapshots, equals the engine's own counters, and each snapshot's block
 *     counts and queues agree with its statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "scheduler/sched_internal.h"
#include "scheduler/sched_snapshot.h"

/* --- a core driven by hand ------------------------------------------------------ */

typedef struct fake_seq {
  sched_eseq_t q; /* first: the engine's view */
  sched_req_t r;
} fake_seq_t;

static sched_engine_t *fake_engine(int32_t num_blocks, int32_t block_size) {
  sched_engine_t *e = calloc(1, sizeof *e);
  e->cache = calloc(1, sizeof *e->cache);
  e->cache->alloc = kv_alloc_create(num_blocks, block_size);
  assert_non_null(e->cache->alloc);
  e->cfg.max_batch_tokens = 64;
  e->cfg.max_seqs = 4;
  assert_int_equal(sched_plan_init(&e->plan, e->cache->alloc, 64, 4, 1), 0);
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->snap = sched__snap_create();
  e->stats.kv_blocks_total = num_blocks;
  return e;
}

static void fake_free(sched_engine_t *e) {
  sched__snap_destroy(e->snap);
  sched_plan_free(&e->plan);
  kv_alloc_destroy(e->cache->alloc);
  free(e->cache);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e);
}

static void fake_seq(fake_seq_t *f, uint64_t id, const int32_t *prompt, int32_t n) {
  memset(f, 0, sizeof *f);
  f->r.id = id;
  f->r.times.arrival = 1000 * (int64_t)id;
  f->q.req = &f->r;
  sched_seq_init(&f->q.s, prompt, n, 1);
}

/* One step as the engine runs it, without a model: plan, the step's record,
 * commit, a sampled token (7) for every row with logits, the statistics,
 * and a snapshot. */
static void fake_step(sched_engine_t *e, sched_snap_t *out) {
  sched_snap_request(e);
  const int n = sched_plan_step(&e->plan);
  sched__snap_plan(e);
  int decode = 1;
  for (int32_t i = 0; i < e->plan.n_items; i++) decode &= e->plan.items[i].q_len == 1;
  sched_plan_commit(&e->plan);
  for (int32_t i = 0; i < e->plan.n_items; i++)
    if (e->plan.items[i].logits) {
      sched_seq_push(e->plan.items[i].seq, 7);
      ((sched_eseq_t *)e->plan.items[i].seq)->generated++;
    }
  if (n > 0) {
    e->stats.steps++;
    e->stats.decode_steps += (uint64_t)decode;
    e->stats.last_step_ns = 5000;
    e->stats.last_progress = (int64_t)e->stats.steps * 10000;
  }
  e->stats.running = e->plan.running.n;
  e->stats.waiting = e->plan.waiting.n;
  sched__snap_step(e, n > 0);
  /* the engine spaces its builds (1 % of its time at most): retry as an idle engine would */
  const int64_t deadline = clock_now_ns() + (int64_t)300 * 1000000000; /* a bound, not a timing: ASan is slow */
  while (!sched_snap_get(e, out, out->seq)) {
    assert_true(clock_now_ns() < deadline);
    usleep(100);
    sched__snap_step(e, 0);
  }
}

static void hand_driven(void **state) {
  sched_engine_t *e = fake_engine(8, 4);
  sched_snap_t *sn = calloc(1, sizeof *sn);
  sched_snap_subscribe(e, 1);
  const int32_t pa[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int32_t pb[10] = {1, 2, 3, 4, 5, 6, 7, 8, 20, 21};
  fake_seq_t a, b;
  fake_seq(&a, 1, pa, 9);
  fake_seq(&b, 2, pb, 10);

  /* step 1: A's prompt, 9 tokens in 3 blocks of its own */
  sched_plan_add(&e->plan, &a.q.s);
  fake_step(e, sn);
  assert_int_equal(sn->seq, 1);
  assert_int_equal(sn->num_blocks, 8);
  assert_int_equal(sn->blocks_per_cell, 1);
  assert_int_equal(sn->n_cells, 8);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED], 3);
  assert_int_equal(sn->blocks[SCHED_BLK_FREE], 5);
  for (int i = 0; i < 3; i++) {
    const sched_snap_cell_t *c = &sn->cells[a.q.s.kv.blocks[i]];
    assert_int_equal(c->n[SCHED_BLK_OWNED], 1);
    assert_int_equal(c->owner, 1);
    assert_int_equal(c->max_refs, 1);
  }
  assert_int_equal(sn->n_steps, 1);
  assert_int_equal(sn->steps[0].step, 1);
  assert_int_equal(sn->steps[0].prefill_tokens, 9);
  assert_int_equal(sn->steps[0].decode_tokens, 0);
  assert_int_equal(sn->steps[0].decode_path, 0);
  assert_int_equal(sn->steps[0].step_ns, 5000);
  assert_int_equal(sn->n_seqs, 1);
  assert_int_equal(sn->seqs[0].id, 1);
  assert_int_equal(sn->seqs[0].state, SCHED_SEQ_ST_DECODE);
  assert_int_equal(sn->seqs[0].prompt_tokens, 9);
  assert_int_equal(sn->seqs[0].generated, 1);
  assert_int_equal(sn->seqs[0].blocks, 3);
  assert_int_equal(sn->running, 1);

  /* step 2: A decodes; B arrives, finds A's two full blocks (a prefix hit) and computes 2 tokens */
  sched_plan_add(&e->plan, &b.q.s);
  fake_step(e, sn);
  assert_int_equal(sn->n_steps, 1);
  assert_int_equal(sn->steps[0].decode_tokens, 1);
  assert_int_equal(sn->steps[0].prefill_tokens, 2);
  assert_int_equal(sn->steps[0].prefix_hit_blocks, 2);
  assert_int_equal(sn->steps[0].seqs, 2);
  assert_int_equal(sn->blocks[SCHED_BLK_SHARED], 2);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED], 2);
  assert_int_equal(sn->blocks[SCHED_BLK_FREE], 4);
  assert_int_equal(sn->cells[a.q.s.kv.blocks[0]].max_refs, 2);
  assert_int_equal(sn->cells[b.q.s.kv.blocks[2]].owner, 2);
  assert_int_equal(sn->seqs[1].cached_tokens, 8);
  assert_int_equal(sn->running, 2);

  /* step 3: both decode (the decode path) */
  fake_step(e, sn);
  assert_int_equal(sn->steps[0].decode_tokens, 2);
  assert_int_equal(sn->steps[0].decode_path, 1);

  /* A ends: its last block is free (not full: never published); B owns the shared ones alone */
  sched_plan_remove(&e->plan, &a.q.s);
  fake_step(e, sn);
  assert_int_equal(sn->blocks[SCHED_BLK_SHARED], 0);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED], 3);
  assert_int_equal(sn->cells[b.q.s.kv.blocks[0]].owner, 2);
  /* B ends: its three full, published blocks stay findable (cached), the rest is free */
  sched_plan_remove(&e->plan, &b.q.s);
  fake_step(e, sn); /* an empty step still builds a snapshot */
  assert_int_equal(sn->n_steps, 0);
  assert_int_equal(sn->blocks[SCHED_BLK_CACHED], 3);
  assert_int_equal(sn->blocks[SCHED_BLK_FREE], 5);
  assert_int_equal(sn->n_seqs_total, 0);
  sched_seq_free(&a.q.s);
  sched_seq_free(&b.q.s);
  free(sn);
  fake_free(e);
}

/* Two sequences fill a 4-block cache; when A needs a fifth block, B (the
 * most recently admitted) is preempted: it shows as preempted, the step
 * counts it, and its blocks are free again. */
static void preemption(void **state) {
  sched_engine_t *e = fake_engine(4, 4);
  sched_snap_t *sn = calloc(1, sizeof *sn);
  sched_snap_subscribe(e, 1);
  const int32_t pa[7] = {1, 2, 3, 4, 5, 6, 7}, pb[7] = {11, 12, 13, 14, 15, 16, 17};
  fake_seq_t a, b;
  fake_seq(&a, 1, pa, 7);
  fake_seq(&b, 2, pb, 7);
  sched_plan_add(&e->plan, &a.q.s);
  sched_plan_add(&e->plan, &b.q.s);
  fake_step(e, sn); /* both prompts: 4 blocks */
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED], 4);
  fake_step(e, sn); /* both decode position 7 */
  fake_step(e, sn); /* position 8 needs a block each: B is preempted */
  assert_int_equal(sn->steps[0].preemptions, 1);
  assert_int_equal(sn->preempted, 1);
  assert_int_equal(sn->running, 1);
  assert_int_equal(sn->n_seqs, 2);
  assert_int_equal(sn->seqs[1].id, 2);
  assert_int_equal(sn->seqs[1].state, SCHED_SEQ_ST_PREEMPTED);
  assert_int_equal(sn->seqs[1].blocks, 0);
  assert_int_equal(sn->seqs[1].generated, 2);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED], 3);
  sched_plan_remove(&e->plan, &a.q.s);
  sched_plan_remove(&e->plan, &b.q.s);
  sched_seq_free(&a.q.s);
  sched_seq_free(&b.q.s);
  free(sn);
  fake_free(e);
}

/* 100 000 blocks: cells of 13 blocks, the counts per cell add up; steps
 * past the ring are counted as dropped; nothing is built unsubscribed. */
static void large_cache_and_limits(void **state) {
  sched_engine_t *e = fake_engine(100000, 16);
  sched_snap_t *sn = calloc(1, sizeof *sn);
  sched_snap_request(e); /* no subscriber: a no-op */
  sched__snap_step(e, 0);
  assert_int_equal(sched_snap_get(e, sn, 0), 0);
  sched_snap_subscribe(e, 1);
  int32_t prompt[40];
  for (int i = 0; i < 40; i++) prompt[i] = i + 1;
  fake_seq_t a;
  fake_seq(&a, 9, prompt, 40);
  sched_plan_add(&e->plan, &a.q.s);
  fake_step(e, sn);
  assert_int_equal(sn->blocks_per_cell, (100000 + SCHED_SNAP_MAX_CELLS - 1) / SCHED_SNAP_MAX_CELLS);
  assert_true(sn->n_cells <= SCHED_SNAP_MAX_CELLS);
  int64_t sum = 0;
  for (int32_t c = 0; c < sn->n_cells; c++)
    for (int s = 0; s < SCHED_BLK_N_STATES; s++) sum += sn->cells[c].n[s];
  assert_int_equal(sum, 100000);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED], 3);
  assert_int_equal(sn->cells[a.q.s.kv.blocks[0] / sn->blocks_per_cell].owner, 9);
  /* 300 decode steps between two snapshots: the last 256 are kept */
  for (int i = 0; i < 300; i++) {
    sched_plan_step(&e->plan);
    sched__snap_plan(e);
    sched_plan_commit(&e->plan);
    sched_seq_push(&a.q.s, 7);
    e->stats.steps++;
    sched__snap_step(e, 1);
  }
  fake_step(e, sn);
  assert_int_equal(sn->n_steps, SCHED_SNAP_MAX_STEPS);
  assert_int_equal(sn->steps_dropped, 301 - SCHED_SNAP_MAX_STEPS);
  assert_int_equal(sn->steps[SCHED_SNAP_MAX_STEPS - 1].step, e->stats.steps);
  assert_int_equal(sn->steps[0].step, e->stats.steps - SCHED_SNAP_MAX_STEPS + 1);
  assert_true(sn->build_ns >= 0 && sn->builds == 2);
  sched_plan_remove(&e->plan, &a.q.s);
  sched_seq_free(&a.q.s);
  free(sn);
  fake_free(e);
}

/* --- the real engine ---------------------------------------------------------------- */

static const char *model_file(void) {
  const char *p = getenv("TRAM_MODEL");
  return p && *p ? p : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

/* Checks one snapshot against its own statistics. */
static void check_consistent(const sched_snap_t *sn) {
  int32_t sum[SCHED_BLK_N_STATES] = {0};
  for (int32_t c = 0; c < sn->n_cells; c++)
    for (int s = 0; s < SCHED_BLK_N_STATES; s++) sum[s] += sn->cells[c].n[s];
  for (int s = 0; s < SCHED_BLK_N_STATES; s++) assert_int_equal(sum[s], sn->blocks[s]);
  assert_int_equal(sn->num_blocks, sn->stats.kv_blocks_total);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED] + sn->blocks[SCHED_BLK_SHARED], sn->stats.kv_blocks_used);
  assert_int_equal(sn->blocks[SCHED_BLK_FREE] + sn->blocks[SCHED_BLK_CACHED], sn->stats.kv_blocks_free);
  assert_true(sn->blocks[SCHED_BLK_CACHED] <= sn->stats.kv_blocks_cached);
  assert_int_equal(sn->running, sn->stats.running);
  assert_int_equal(sn->waiting_new + sn->preempted + sn->inbox, sn->stats.waiting);
  int32_t held = 0;
  for (int32_t i = 0; i < sn->n_seqs; i++) held += sn->seqs[i].blocks;
  if (sn->n_seqs == sn->n_seqs_total) assert_true(held >= sn->stats.kv_blocks_used);
  for (int32_t c = 0; c < sn->n_cells; c++) /* every held cell names a listed owner */
    if (sn->cells[c].n[SCHED_BLK_OWNED] + sn->cells[c].n[SCHED_BLK_SHARED] > 0) {
      int found = 0;
      for (int32_t i = 0; i < sn->n_seqs; i++) found |= sn->seqs[i].id == sn->cells[c].owner;
      assert_true(found || sn->n_seqs < sn->n_seqs_total);
    }
}

static void real_engine(void **state) {
  if (access(model_file(), R_OK) != 0) skip();
  log_set_level(LOG_LEVEL_WARN);
  kern_backend_t *be = kern_backend_create("cpu", 2);
  char err[256];
  model_t *m = model_load(model_file(), be, err, sizeof err);
  assert_non_null(m);
  sched_config_t c = sched_config_default();
  c.kv_cache_blocks = 12; /* small: the six requests preempt each other */
  c.block_size = 16;
  c.max_seqs = 6;
  c.max_batch_tokens = 64;
  tok_t *tok = tok_create_from_gguf(model_gguf(m), err, sizeof err);
  assert_non_null(tok);
  sched_engine_t *e = sched_engine_create(m, tok, be, &c);
  assert_non_null(e);
  sched_snap_subscribe(e, 1);
  int32_t prompt[40];
  for (int i = 0; i < 40; i++) prompt[i] = 500 + i; /* a shared 32-token prefix, then per request */
  sched_req_t *reqs[6];
  for (int i = 0; i < 6; i++) {
    sched_req_params_t p = sched_req_params_default();
    p.max_tokens = 20;
    p.ignore_eos = 1;
    prompt[39] = 900 + i;
    reqs[i] = sched_req_create(prompt, 40, &p, NULL, err, sizeof err);
    assert_int_equal(sched_submit(e, reqs[i], err, sizeof err), 0);
  }
  sched_snap_t *sn = calloc(1, sizeof *sn);
  uint64_t steps = 0, last_step = 0, tokens = 0, decode_steps = 0, preemptions = 0, hits = 0;
  int finals = 0, snaps = 0;
  while (finals < 6) {
    sched_snap_request(e);
    sched_event_t ev[16];
    const int k = sched_wait_events(e, ev, 16, 2000000);
    for (int i = 0; i < k; i++) {
      finals += ev[i].final;
      sched_event_release(&ev[i]);
    }
    if (!sched_snap_get(e, sn, sn->seq)) continue;
    snaps++;
    check_consistent(sn);
    assert_int_equal(sn->steps_dropped, 0);
    for (int32_t i = 0; i < sn->n_steps; i++) {
      const sched_snap_step_t *s = &sn->steps[i];
      assert_int_equal(s->step, last_step + 1); /* every step, once, in order */
      last_step = s->step;
      steps++;
      tokens += (uint64_t)(s->prefill_tokens + s->decode_tokens);
      decode_steps += (uint64_t)s->decode_path;
      preemptions += (uint64_t)s->preemptions;
      hits += (uint64_t)s->prefix_hit_blocks;
      assert_true(s->prefill_tokens + s->decode_tokens <= sn->max_batch_tokens);
      if (s->decode_path) assert_int_equal(s->prefill_tokens + s->decode_tokens, s->seqs); /* one token each */
      else assert_true(s->prefill_tokens + s->decode_tokens > s->seqs);
    }
  }
  /* the steps still unseen */
  sched_stats_t st;
  sched_get_stats(e, &st);
  for (int tries = 0; sn->stats.steps < st.steps || sn->n_steps; tries++) {
    assert_true(tries < 1000);
    sched_snap_request(e);
    usleep(2000);
    if (!sched_snap_get(e, sn, sn->seq)) continue;
    check_consistent(sn);
    for (int32_t i = 0; i < sn->n_steps; i++) {
      assert_int_equal(sn->steps[i].step, ++last_step);
      steps++;
      tokens += (uint64_t)(sn->steps[i].prefill_tokens + sn->steps[i].decode_tokens);
      decode_steps += (uint64_t)sn->steps[i].decode_path;
      preemptions += (uint64_t)sn->steps[i].preemptions;
      hits += (uint64_t)sn->steps[i].prefix_hit_blocks;
    }
  }
  assert_true(snaps > 1);
  assert_int_equal(steps, st.steps);
  assert_int_equal(tokens, st.step_tokens);
  assert_int_equal(decode_steps, st.decode_steps);
  assert_int_equal(preemptions, st.preemptions);
  assert_int_equal(hits, st.prefix_hit_blocks);
  assert_true(st.preemptions > 0);
  assert_true(st.prefix_hit_blocks > 0);
  assert_int_equal(sn->running + sn->waiting_new + sn->preempted, 0);
  assert_int_equal(sn->blocks[SCHED_BLK_OWNED] + sn->blocks[SCHED_BLK_SHARED], 0);
  assert_int_equal(sn->blocks[SCHED_BLK_CACHED], st.kv_blocks_cached);
  sched_snap_subscribe(e, -1);
  free(sn);
  sched_engine_destroy(e);
  for (int i = 0; i < 6; i++) sched_req_destroy(reqs[i]);
  tok_destroy(tok);
  model_destroy(m);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hand_driven),
      cmocka_unit_test(preemption),
      cmocka_unit_test(large_cache_and_limits),
      cmocka_unit_test(real_engine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
