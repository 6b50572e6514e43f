/* tests/unit/test_sched_plan.c — the scheduling core on the block allocator
 * alone (no model): budgets and order, chunked prefill next to decodes,
 * FIFO admission, preemption in a tiny cache, prefix caching, fork, and a
 * random storm.
 *
 * The simulation stands in for the forward with what the scheduler must
 * preserve: every cache slot records which prefix its "K/V" was computed
 * for (a hash of the sequence's tokens up to that position). At each step
 * the test checks that every planned sequence reads slots holding exactly
 * its own prefix, and writes its new tokens only into slots it reserved in
 * blocks no one else holds. The next token of a sequence is a function of
 * its prefix hash and its index (like greedy decoding, or a seeded stream
 * per completion), so each sequence's output must equal the one it has when
 * run alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv_alloc.h"
#include "scheduler/sched_pace.h"
#include "scheduler/sched_plan.h"
#include "tests/unit/testutil.h"

static uint64_t mix(uint64_t h, int32_t t) {
  h ^= (uint64_t)(uint32_t)t + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

/* the "model": next token from the prefix hash and the completion index */
static int32_t next_token(uint64_t prefix, int32_t index) { return 1 + (int32_t)(mix(prefix, index) % 500); }

typedef struct sim_seq {
  sched_seq_t s; /* first: the core's items point here */
  int32_t index;
  int32_t max_new;
  int32_t n_children; /* for a lead: completions to fork at its first token */
  int done, cancelled;
  int forked;
} sim_seq_t;

typedef struct sim {
  kv_alloc_t *a;
  sched_plan_t c;
  uint64_t *slot_hash; /* [num_blocks * block_size] the prefix each slot's K/V belongs to; 0 = never written */
  int32_t num_blocks, bs;
  int steps;
} sim_t;

static uint64_t prefix_hash(const sched_seq_t *s, int64_t pos) { /* hash of tokens[0..pos] */
  uint64_t h = 1;
  for (int64_t i = 0; i <= pos; i++) h = mix(h, s->tokens[i]);
  return h;
}

static void sim_init(sim_t *m, int32_t num_blocks, int32_t bs, int max_tokens, int max_seqs, int prefix) {
  memset(m, 0, sizeof *m);
  m->a = kv_alloc_create(num_blocks, bs);
  assert_non_null(m->a);
  assert_int_equal(sched_plan_init(&m->c, m->a, max_tokens, max_seqs, prefix), 0);
  m->slot_hash = calloc((size_t)num_blocks * (size_t)bs, sizeof *m->slot_hash);
  m->num_blocks = num_blocks;
  m->bs = bs;
}

static void sim_free(sim_t *m) {
  assert_int_equal(m->c.running.n + m->c.waiting.n, 0);
  assert_int_equal(kv_alloc_free_blocks(m->a), m->num_blocks); /* every block back */
  sched_plan_free(&m->c);
  kv_alloc_destroy(m->a);
  free(m->slot_hash);
}

static void seq_new(sim_seq_t *q, const int32_t *prompt, int32_t n, int32_t max_new, int32_t n_children) {
  memset(q, 0, sizeof *q);
  sched_seq_init(&q->s, prompt, n, 1 + n_children);
  q->max_new = max_new;
  q->n_children = n_children;
}

static void finish(sim_t *m, sim_seq_t *q) {
  sched_plan_remove(&m->c, &q->s);
  q->done = 1;
}

/* One step: plan, check, "compute", commit, sample. A lead's children are
 * taken from fork_pool[fork_cap] (*n_fork_used so far). Returns the items
 * planned. */
static int sim_step(sim_t *m, sim_seq_t *fork_pool, int *n_fork_used, int fork_cap) {
  const int n = sched_plan_step(&m->c);
  m->steps++;
  assert_true(m->c.n_tokens <= m->c.max_batch_tokens);
  assert_true(n <= m->c.max_seqs);
  assert_true(m->c.running_places <= m->c.max_seqs);
  int32_t total = 0;
  for (int i = 0; i < n; i++) {
    const sched_item_t *it = &m->c.items[i];
    const sched_seq_t *s = it->seq;
    assert_int_equal(s->where, SCHED_SEQ_RUNNING);
    assert_true(it->q_len >= 1);
    assert_true(s->kv.n_tokens + it->q_len <= s->len);
    assert_int_equal(it->logits, s->kv.n_tokens + it->q_len == s->len);
    total += it->q_len;
    for (int64_t p = 0; p < s->kv.n_tokens; p++) { /* reads its own prefix */
      int32_t slot = kv_seq_slot(m->a, &s->kv, p);
      assert_true(slot >= 0);
      assert_true(m->slot_hash[slot] == prefix_hash(s, p));
    }
    for (int64_t p = s->kv.n_tokens; p < s->kv.n_tokens + it->q_len; p++) { /* writes only its own */
      int32_t slot = kv_seq_slot(m->a, &s->kv, p);
      assert_true(slot >= 0);
      assert_int_equal(kv_block_refs(m->a, slot / m->bs), 1);
    }
  }
  assert_int_equal(total, m->c.n_tokens);
  for (int i = 0; i < n; i++) { /* the forward */
    const sched_item_t *it = &m->c.items[i];
    const sched_seq_t *s = it->seq;
    for (int64_t p = s->kv.n_tokens; p < s->kv.n_tokens + it->q_len; p++)
      m->slot_hash[kv_seq_slot(m->a, &s->kv, p)] = prefix_hash(s, p);
  }
  sched_plan_commit(&m->c);
  for (int i = 0; i < n; i++) { /* sampling */
    const sched_item_t *it = &m->c.items[i];
    if (!it->logits) continue;
    sim_seq_t *q = (sim_seq_t *)it->seq;
    const uint64_t h = prefix_hash(&q->s, q->s.len - 1);
    const int first = q->s.len == q->s.n_prompt;
    sched_seq_push(&q->s, next_token(h, q->index));
    if (first && q->n_children > 0 && !q->forked) {
      q->forked = 1;
      sched_plan_release_places(&m->c, &q->s);
      for (int k = 1; k <= q->n_children; k++) {
        assert_true(*n_fork_used < fork_cap);
        sim_seq_t *ch = &fork_pool[(*n_fork_used)++];
        seq_new(ch, q->s.tokens, q->s.n_prompt, q->max_new, 0);
        ch->index = k;
        sched_seq_push(&ch->s, next_token(h, k));
        if (ch->max_new == 1) { /* ends with its first token: nothing to compute */
          ch->done = 1;
          continue;
        }
        int32_t src = -1, dst = -1;
        int rc = sched_plan_fork(&m->c, &q->s, &ch->s, &src, &dst);
        if (rc == 1) /* the device copy of the partial block */
          memcpy(m->slot_hash + (size_t)dst * m->bs, m->slot_hash + (size_t)src * m->bs, (size_t)m->bs * sizeof(uint64_t));
        if (rc < 0) assert_int_equal(rc, -ENOSPC);
      }
    }
    if (q->s.len - q->s.n_prompt >= q->max_new) finish(m, q);
  }
  return n;
}

/* What the sequence produces alone. */
static void solo(const int32_t *prompt, int32_t n, int32_t index, int32_t max_new, int32_t *out) {
  sched_seq_t s;
  sched_seq_init(&s, prompt, n, 1);
  for (int i = 0; i < max_new; i++) {
    out[i] = next_token(prefix_hash(&s, s.len - 1), index);
    sched_seq_push(&s, out[i]);
  }
  sched_seq_free(&s);
}

static void check_solo(const sim_seq_t *q) {
  int32_t want[512];
  assert_true(q->max_new <= 512);
  solo(q->s.tokens, q->s.n_prompt, q->index, q->max_new, want);
  assert_int_equal(q->s.len, q->s.n_prompt + q->max_new);
  assert_memory_equal(q->s.tokens + q->s.n_prompt, want, (size_t)q->max_new * sizeof(int32_t));
}

static void random_prompt(tu_rng_t *r, int32_t *p, int32_t n) {
  for (int32_t i = 0; i < n; i++) p[i] = 1 + (int32_t)tu_below(r, 500);
}

/* Decodes go first, one token each, every step; a long prompt fills the
 * rest of the budget chunk by chunk; a step never passes the budget. */
static void chunked_prefill_keeps_decodes_going(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  sim_t m;
  sim_init(&m, 256, 16, 64, 16, 0);
  sim_seq_t q[9];
  int32_t prompt[1500];
  for (int i = 0; i < 8; i++) {
    random_prompt(&r, prompt, 5 + i);
    seq_new(&q[i], prompt, 5 + i, 100, 0);
    sched_plan_add(&m.c, &q[i].s);
  }
  sim_step(&m, NULL, NULL, 0); /* the 8 prompts in one step: 5+..+12 = 68 > 64: the last is chunked */
  sim_step(&m, NULL, NULL, 0);
  for (int i = 0; i < 8; i++) assert_true(q[i].s.len > q[i].s.n_prompt);
  random_prompt(&r, prompt, 1500);
  seq_new(&q[8], prompt, 1500, 4, 0);
  sched_plan_add(&m.c, &q[8].s);
  int prefill_steps = 0;
  while (q[8].s.len == 1500) {
    int64_t before[8];
    for (int i = 0; i < 8; i++) before[i] = q[i].s.len;
    sim_step(&m, NULL, NULL, 0);
    for (int i = 0; i < 8; i++) assert_int_equal(q[i].s.len, before[i] + 1); /* every decode advanced */
    if (q[8].s.len == 1500) assert_int_equal(m.c.n_tokens, 64);              /* the prompt took the rest */
    prefill_steps++;
  }
  assert_int_equal(prefill_steps, (1500 + 55) / 56);
  while (!q[8].done || !q[0].done) sim_step(&m, NULL, NULL, 0);
  for (int i = 0; i < 8; i++) {
    while (!q[i].done) sim_step(&m, NULL, NULL, 0);
    check_solo(&q[i]);
  }
  check_solo(&q[8]);
  for (int i = 0; i < 9; i++) sched_seq_free(&q[i].s);
  sim_free(&m);
}

/* With decodes running, a step computes at most prefill_budget prompt
 * tokens (the engine's pacing); without decodes, max_batch_tokens; every
 * output is still the solo run's. */
static void prefill_budget_paces_prompts(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 7);
  sim_t m;
  sim_init(&m, 256, 16, 64, 16, 0);
  m.c.prefill_budget = 10;
  sim_seq_t q[3];
  int32_t prompt[300];
  random_prompt(&r, prompt, 100);
  seq_new(&q[0], prompt, 100, 50, 0);
  sched_plan_add(&m.c, &q[0].s);
  sim_step(&m, NULL, NULL, 0); /* no decode yet: a full budget */
  assert_int_equal(m.c.n_tokens, 64);
  sim_step(&m, NULL, NULL, 0);
  assert_int_equal(m.c.n_tokens, 36); /* the rest of the prompt, still no decode */
  random_prompt(&r, prompt, 300);
  seq_new(&q[1], prompt, 300, 3, 0);
  sched_plan_add(&m.c, &q[1].s);
  int steps = 0;
  while (q[1].s.len == 300) {
    const int64_t before = q[0].s.len;
    sim_step(&m, NULL, NULL, 0);
    assert_int_equal(q[0].s.len, before + 1);
    if (q[1].s.len == 300) assert_int_equal(m.c.n_tokens, 1 + 10); /* one decode + the budget */
    steps++;
  }
  assert_int_equal(steps, 30);
  m.c.prefill_budget = 0;
  while (!q[0].done || !q[1].done) sim_step(&m, NULL, NULL, 0);
  check_solo(&q[0]);
  check_solo(&q[1]);
  for (int i = 0; i < 2; i++) sched_seq_free(&q[i].s);
  sim_free(&m);
}

/* The pacing's arithmetic: unbounded until a decode-only step and a step
 * with prompt tokens were seen, then (target - base) / per_token tokens,
 * at least 1, at most max_tokens; the auto target is 2.5 decode steps. */
static void pacing_learns_the_budget(void **state) {
  (void)state;
  sched_pace_t p = {0};
  assert_int_equal(sched_pace_budget(&p, 256), 256);
  assert_int_equal(sched_pace_target_ns(&p), 0);
  sched_pace_observe(&p, 8, 0, 40000000); /* decode-only: 40 ms */
  assert_int_equal(sched_pace_budget(&p, 256), 256); /* no per-token cost yet */
  assert_int_equal(sched_pace_target_ns(&p), 100000000);
  sched_pace_observe(&p, 8, 100, 40000000 + 100 * 2000000); /* 2 ms a prompt token */
  assert_int_equal(sched_pace_budget(&p, 256), 30); /* (100 - 40) / 2 */
  assert_int_equal(sched_pace_budget(&p, 16), 16);
  p.target_ns = 41000000;
  assert_int_equal(sched_pace_budget(&p, 256), 1); /* under one token of room: still 1 */
  p.target_ns = 0;
  sched_pace_observe(&p, 8, 0, 60000000); /* the average moves by a fifth */
  assert_true(p.base_ns > 43999999 && p.base_ns < 44000001);
  sched_pace_observe(&p, 0, 0, 5000000); /* an empty step teaches nothing */
  assert_true(p.base_ns > 43999999 && p.base_ns < 44000001);
}

/* Admission is first come first served, within max_seqs. */
static void fifo_within_max_seqs(void **state) {
  (void)state;
  sim_t m;
  sim_init(&m, 64, 8, 32, 3, 0);
  sim_seq_t q[7];
  int32_t prompt[4] = {7, 8, 9, 10};
  for (int i = 0; i < 7; i++) {
    seq_new(&q[i], prompt, 4, 3 + i % 2, 0);
    sched_plan_add(&m.c, &q[i].s);
  }
  sim_step(&m, NULL, NULL, 0);
  assert_int_equal(m.c.running.n, 3);
  for (int i = 0; i < 7; i++) assert_int_equal(q[i].s.where, i < 3 ? SCHED_SEQ_RUNNING : SCHED_SEQ_WAITING);
  int order[7], n_order = 0;
  while (n_order < 7) {
    sim_step(&m, NULL, NULL, 0);
    for (int i = 0; i < 7; i++)
      if (q[i].s.admissions == 1 && q[i].s.where == SCHED_SEQ_RUNNING) {
        int seen = 0;
        for (int k = 0; k < n_order; k++) seen |= order[k] == i;
        if (!seen) order[n_order++] = i;
      }
    for (int i = 0; i < 7; i++)
      if (q[i].done) {
        int seen = 0;
        for (int k = 0; k < n_order; k++) seen |= order[k] == i;
        if (!seen) order[n_order++] = i;
      }
    assert_true(m.c.running.n <= 3);
    assert_true(m.steps < 100);
  }
  for (int i = 0; i < 7; i++) assert_int_equal(order[i], i);
  while (m.c.running.n + m.c.waiting.n > 0) sim_step(&m, NULL, NULL, 0);
  for (int i = 0; i < 7; i++) {
    check_solo(&q[i]);
    sched_seq_free(&q[i].s);
  }
  sim_free(&m);
}

/* A paused sequence takes no step and keeps its blocks; a waiting one that
 * needs its place preempts it; a paused waiting one is passed over; resumed,
 * it ends with the output it has alone. */
static void paused_sequences_step_aside(void **state) {
  (void)state;
  sim_t m;
  sim_init(&m, 64, 8, 32, 3, 0);
  sim_seq_t q[5];
  atomic_int pause[5];
  int32_t prompt[4] = {3, 1, 4, 1};
  for (int i = 0; i < 5; i++) {
    seq_new(&q[i], prompt, 4, i == 1 ? 8 : 16, 0);
    q[i].index = i;
    atomic_init(&pause[i], 0);
    q[i].s.pause = &pause[i];
  }
  for (int i = 0; i < 3; i++) sched_plan_add(&m.c, &q[i].s);
  sim_step(&m, NULL, NULL, 0);
  sim_step(&m, NULL, NULL, 0);
  atomic_store(&pause[0], 1);
  const int64_t len0 = q[0].s.len;
  const int32_t blocks0 = q[0].s.kv.n_blocks;
  for (int k = 0; k < 2; k++) {
    assert_int_equal(sim_step(&m, NULL, NULL, 0), 2); /* q1, q2 only */
    assert_int_equal(m.c.n_paused, 1);
    assert_int_equal(q[0].s.len, len0);
    assert_int_equal(q[0].s.where, SCHED_SEQ_RUNNING);
    assert_int_equal(q[0].s.kv.n_blocks, blocks0);
  }
  sched_plan_add(&m.c, &q[3].s); /* no place left but the paused one's */
  sim_step(&m, NULL, NULL, 0);
  assert_int_equal(q[3].s.where, SCHED_SEQ_RUNNING);
  assert_int_equal(q[0].s.where, SCHED_SEQ_WAITING);
  assert_int_equal(q[0].s.kv.n_blocks, 0);
  assert_int_equal(m.c.stats.preemptions, 1);
  sched_plan_add(&m.c, &q[4].s); /* behind the paused q0 in the waiting list */
  while (!q[1].done) sim_step(&m, NULL, NULL, 0);
  sim_step(&m, NULL, NULL, 0);
  assert_int_equal(q[4].s.where, SCHED_SEQ_RUNNING); /* admitted past q0 */
  assert_int_equal(q[0].s.where, SCHED_SEQ_WAITING);
  assert_int_equal(q[0].s.len, len0);
  atomic_store(&pause[0], 0);
  while (m.c.running.n + m.c.waiting.n > 0) {
    sim_step(&m, NULL, NULL, 0);
    assert_true(m.steps < 200);
  }
  assert_int_equal(m.c.n_paused, 0);
  for (int i = 0; i < 5; i++) {
    check_solo(&q[i]);
    sched_seq_free(&q[i].s);
  }
  sim_free(&m);
}

/* A cache of a few blocks: preemptions happen, every sequence still ends
 * with its solo output, and the blocks all come back. */
static void tiny_cache_preempts(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 1);
  sim_t m;
  sim_init(&m, 12, 4, 32, 8, 0); /* 48 tokens of cache for 8 sequences of ~30 */
  sim_seq_t q[8];
  int32_t prompt[12];
  for (int i = 0; i < 8; i++) {
    random_prompt(&r, prompt, 6 + i % 5);
    seq_new(&q[i], prompt, 6 + i % 5, 20, 0);
    sched_plan_add(&m.c, &q[i].s);
  }
  int left = 8;
  while (left > 0) {
    assert_true(sim_step(&m, NULL, NULL, 0) > 0); /* never stuck */
    left = 0;
    for (int i = 0; i < 8; i++) left += !q[i].done;
    assert_true(m.steps < 2000);
  }
  assert_true(m.c.stats.preemptions > 0);
  for (int i = 0; i < 8; i++) {
    check_solo(&q[i]);
    sched_seq_free(&q[i].s);
  }
  sim_free(&m);
}

/* A second request with the same long prompt: the cached full blocks are
 * reused (counted), only the tail is computed, the output is the same. */
static void prefix_cache_computes_the_tail(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 2);
  sim_t m;
  sim_init(&m, 64, 16, 512, 4, 1);
  int32_t prompt[100];
  random_prompt(&r, prompt, 100);
  sim_seq_t a, b, c;
  seq_new(&a, prompt, 100, 5, 0);
  sched_plan_add(&m.c, &a.s);
  while (!a.done) sim_step(&m, NULL, NULL, 0);
  assert_int_equal(m.c.stats.prefix_hit_tokens, 0);
  seq_new(&b, prompt, 100, 5, 0);
  sched_plan_add(&m.c, &b.s);
  sched_plan_step(&m.c);
  assert_int_equal(m.c.n_items, 1);
  assert_int_equal(m.c.items[0].q_len, 100 - 96); /* 6 full blocks cached */
  assert_int_equal(m.c.stats.prefix_hit_tokens, 96);
  assert_int_equal(m.c.stats.prefix_hit_blocks, 6);
  assert_int_equal(m.c.stats.prefix_query_tokens, 200);
  /* rerun that step through the simulation (re-plan is not allowed: undo by finishing) */
  sched_plan_commit(&m.c);
  finish(&m, &b);
  sched_seq_free(&b.s);
  seq_new(&b, prompt, 100, 5, 0);
  sched_plan_add(&m.c, &b.s);
  while (!b.done) sim_step(&m, NULL, NULL, 0);
  check_solo(&a);
  check_solo(&b);
  assert_memory_equal(a.s.tokens, b.s.tokens, 105 * sizeof(int32_t));
  /* a prompt of exactly 6 blocks leaves its last token to compute */
  seq_new(&c, prompt, 96, 3, 0);
  sched_plan_add(&m.c, &c.s);
  sched_plan_step(&m.c);
  assert_int_equal(m.c.items[0].q_len, 16);
  sched_plan_commit(&m.c);
  finish(&m, &c);
  sched_seq_free(&a.s);
  sched_seq_free(&b.s);
  sched_seq_free(&c.s);
  sim_free(&m);
}

/* n completions: the lead takes n places at admission, the children share
 * its prompt's full blocks, and each ends with its solo output. */
static void fork_shares_prompt_blocks(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 3);
  sim_t m;
  sim_init(&m, 32, 8, 64, 4, 0);
  int32_t prompt[21];
  random_prompt(&r, prompt, 21);
  sim_seq_t lead, other, kids[3];
  int used = 0;
  seq_new(&lead, prompt, 21, 6, 3);
  seq_new(&other, prompt, 3, 6, 0);
  sched_plan_add(&m.c, &lead.s);
  sched_plan_add(&m.c, &other.s);
  sim_step(&m, kids, &used, 3);
  assert_int_equal(used, 3);
  assert_int_equal(other.s.where, SCHED_SEQ_WAITING); /* 4 places: all the lead's */
  assert_int_equal(m.c.running.n, 4);
  for (int k = 0; k < 3; k++) {
    assert_int_equal(kids[k].s.kv.n_tokens, 21);
    assert_int_equal(kids[k].s.kv.blocks[0], lead.s.kv.blocks[0]);
    assert_int_equal(kids[k].s.kv.blocks[1], lead.s.kv.blocks[1]);
    assert_true(kids[k].s.kv.blocks[2] != lead.s.kv.blocks[2]);
  }
  assert_int_equal(kv_block_refs(m.a, lead.s.kv.blocks[0]), 4);
  while (!lead.done || !other.done || !kids[0].done || !kids[1].done || !kids[2].done) sim_step(&m, kids, &used, 3);
  check_solo(&lead);
  check_solo(&other);
  for (int k = 0; k < 3; k++) {
    check_solo(&kids[k]);
    sched_seq_free(&kids[k].s);
  }
  sched_seq_free(&lead.s);
  sched_seq_free(&other.s);
  sim_free(&m);
}

/* The storm: arrivals at random steps, shared prompt prefixes, n > 1,
 * cancellations, a small cache, prefix caching on or off. */
static void storm_one(uint64_t seed, int prefix) {
  tu_rng_t r;
  tu_rng_init(&r, seed);
  enum { N = 40, MAXK = 3 };
  sim_t m;
  sim_init(&m, 20, 8, 48, 6, prefix);
  sim_seq_t *q = calloc(N, sizeof *q), *kids = calloc(N * MAXK, sizeof *kids);
  int used = 0, added = 0;
  int32_t base[80], prompt[80];
  random_prompt(&r, base, 80);
  int arrive[N];
  for (int i = 0; i < N; i++) arrive[i] = (int)tu_below(&r, 120);
  for (int step = 0;; step++) {
    for (int i = 0; i < N; i++) {
      if (arrive[i] != step) continue;
      int32_t n = 1 + (int32_t)tu_below(&r, 70);
      int32_t shared = (int32_t)tu_below(&r, (uint64_t)n + 1);
      memcpy(prompt, base, (size_t)shared * sizeof *prompt);
      random_prompt(&r, prompt + shared, n - shared);
      seq_new(&q[i], prompt, n, 1 + (int32_t)tu_below(&r, 40), tu_below(&r, 5) == 0 ? 1 + (int32_t)tu_below(&r, 2) : 0);
      sched_plan_add(&m.c, &q[i].s);
      added++;
    }
    if (tu_below(&r, 10) == 0) { /* cancel one */
      sim_seq_t *v = &q[tu_below(&r, N)];
      if (v->s.tokens && !v->done) {
        finish(&m, v);
        v->cancelled = 1;
      }
    }
    sim_step(&m, kids, &used, N * MAXK);
    if (added == N && m.c.running.n + m.c.waiting.n == 0) break;
    assert_true(step < 5000);
  }
  for (int i = 0; i < N; i++) {
    if (!q[i].cancelled) check_solo(&q[i]);
    sched_seq_free(&q[i].s);
  }
  for (int k = 0; k < used; k++) {
    check_solo(&kids[k]);
    sched_seq_free(&kids[k].s);
  }
  if (prefix) assert_true(m.c.stats.prefix_hit_blocks > 0);
  assert_true(m.c.stats.preemptions > 0);
  free(q);
  free(kids);
  sim_free(&m);
}

static void storm(void **state) {
  (void)state;
  for (int k = 0; k < 6; k++) {
    storm_one(tu_seed() + 100 + (uint64_t)k, k % 2);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chunked_prefill_keeps_decodes_going),
      cmocka_unit_test(prefill_budget_paces_prompts),
      cmocka_unit_test(pacing_learns_the_budget),
      cmocka_unit_test(fifo_within_max_seqs),
      cmocka_unit_test(paused_sequences_step_aside),
      cmocka_unit_test(tiny_cache_preempts),
      cmocka_unit_test(prefix_cache_computes_the_tail),
      cmocka_unit_test(fork_shares_prompt_blocks),
      cmocka_unit_test(storm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
