/* tests/unit/test_sched_spec.c — speculative decoding's pieces that need no
 * model: the n-gram proposer (longest n first, most recent occurrence,
 * capped at k, nothing when no n-gram recurs) and a speculating decode on
 * the planner and allocator (planned with q_len = 1 + drafts, its blocks
 * not published before verification, the rollback releasing the blocks
 * only rejected drafts used, publishing only verified tokens, and the free
 * count restored), and the adaptive k (sched_spec_adapt.c) driven by
 * synthetic timings: a cost pushed past where no k gains does not turn
 * speculation off for good (a sequence out of a pause probes, and the cost
 * is measured again), while a regime where drafts do not pay still backs
 * off to a few draft steps in thousands. The engine's verification on the
 * real model is in tests/integration/test_speculative.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "cache/kv_alloc.h"
#include "scheduler/sched_plan.h"
#include "scheduler/sched_spec.h"
#include "scheduler/sched_spec_adapt.h"

#define LEN(a) ((int64_t)(sizeof(a) / sizeof *(a)))

static void ngram_proposals(void **state) {
  (void)state;
  int32_t out[8];
  const int32_t a[] = {1, 2, 3, 4, 1, 2};
  assert_int_equal(sched_spec_ngram(a, LEN(a), 1, 2, 3, out), 3);
  assert_memory_equal(out, ((int32_t[]){3, 4, 1}), 3 * sizeof *out);
  /* the most recent occurrence wins */
  const int32_t b[] = {1, 2, 9, 1, 2, 7, 1, 2};
  assert_int_equal(sched_spec_ngram(b, LEN(b), 2, 2, 8, out), 3);
  assert_memory_equal(out, ((int32_t[]){7, 1, 2}), 3 * sizeof *out);
  /* the longest n-gram first */
  const int32_t c[] = {5, 1, 2, 3, 8, 2, 3, 6, 1, 2, 3};
  assert_int_equal(sched_spec_ngram(c, LEN(c), 1, 3, 1, out), 1);
  assert_int_equal(out[0], 8);
  assert_int_equal(sched_spec_ngram(c, LEN(c), 1, 2, 1, out), 1);
  assert_int_equal(out[0], 6);
  /* nothing recurs; n as long as the sequence is skipped */
  const int32_t d[] = {1, 2, 3, 4};
  assert_int_equal(sched_spec_ngram(d, LEN(d), 1, 4, 4, out), 0);
  assert_int_equal(sched_spec_ngram(d, 1, 1, 4, 4, out), 0);
}

static void rollback_releases_and_publishes_verified_only(void **state) {
  (void)state;
  enum { BS = 4, BLOCKS = 8 };
  kv_alloc_t *a = kv_alloc_create(BLOCKS, BS);
  sched_plan_t c;
  assert_int_equal(sched_plan_init(&c, a, 64, 4, 1), 0);
  const int32_t prompt[] = {10, 11, 12, 13, 14, 15};
  sched_seq_t s;
  sched_seq_init(&s, prompt, LEN(prompt), 1);
  sched_plan_add(&c, &s);
  assert_int_equal(sched_plan_step(&c), 1);
  sched_plan_commit(&c);
  assert_int_equal(kv_alloc_published_blocks(a), 1);
  sched_seq_push(&s, 16); /* the sampled token: a decode */
  const int32_t drafts[] = {17, 18, 19, 20, 21, 22};
  for (int i = 0; i < 6; i++) sched_seq_push(&s, drafts[i]);
  s.spec = 6;
  assert_int_equal(sched_plan_step(&c), 1);
  assert_int_equal(c.items[0].q_len, 7);
  assert_int_equal(c.items[0].logits, 1);
  assert_int_equal(s.kv.n_blocks, 4); /* 13 tokens */
  sched_plan_commit(&c);
  assert_int_equal(kv_alloc_published_blocks(a), 1); /* nothing unverified published */
  /* verification: the first draft is kept, the second rejected */
  sched_seq_drop_drafts(&s);
  assert_int_equal(s.len, 7);
  sched_seq_push(&s, 17);
  sched_seq_push(&s, 99); /* the sampled token that replaced draft 18 */
  sched_plan_rollback(&c, &s, 8);
  assert_int_equal(s.kv.n_tokens, 8);
  assert_int_equal(s.kv.n_blocks, 2);
  assert_int_equal(kv_alloc_free_blocks(a), BLOCKS - 2);
  assert_int_equal(kv_alloc_published_blocks(a), 2); /* tokens 14, 15, 16, 17: all verified */
  const int32_t verified[] = {14, 15, 16, 17}, rejected[] = {18, 19, 20, 21};
  uint64_t h0 = 0;
  assert_true(kv_block_published(a, s.kv.blocks[0], &h0));
  assert_int_equal(kv_prefix_find(a, h0, verified), s.kv.blocks[1]);
  assert_int_equal(kv_prefix_find(a, kv_hash_block(h0, verified, BS), rejected), -1);
  /* the next step decodes the replacement token into the kept block */
  assert_int_equal(sched_plan_step(&c), 1);
  assert_int_equal(c.items[0].q_len, 1);
  sched_plan_commit(&c);
  sched_plan_remove(&c, &s);
  assert_int_equal(kv_alloc_free_blocks(a), BLOCKS);
  sched_seq_free(&s);
  sched_plan_free(&c);
  kv_alloc_destroy(a);
}

static void drafts_never_preempt(void **state) {
  (void)state;
  enum { BS = 4, BLOCKS = 3 };
  kv_alloc_t *a = kv_alloc_create(BLOCKS, BS);
  sched_plan_t c;
  assert_int_equal(sched_plan_init(&c, a, 64, 4, 0), 0);
  const int32_t p1[] = {1, 2, 3}, p2[] = {4, 5, 6, 7, 8};
  sched_seq_t s1, s2;
  sched_seq_init(&s1, p1, LEN(p1), 1);
  sched_seq_init(&s2, p2, LEN(p2), 1);
  sched_plan_add(&c, &s1);
  sched_plan_add(&c, &s2);
  assert_int_equal(sched_plan_step(&c), 2); /* 1 + 2 blocks: the cache is full */
  sched_plan_commit(&c);
  sched_seq_push(&s1, 9);
  sched_seq_push(&s2, 9);
  for (int i = 0; i < 4; i++) sched_seq_push(&s1, 20 + i);
  s1.spec = 4; /* 8 tokens need a second block: none is free */
  assert_int_equal(sched_plan_step(&c), 2);
  assert_int_equal(c.items[0].q_len, 1); /* drafts dropped, nobody preempted */
  assert_int_equal(s1.spec, 0);
  assert_int_equal(s1.len, 4);
  assert_int_equal((int)c.stats.preemptions, 0);
  sched_plan_commit(&c);
  sched_plan_remove(&c, &s1);
  sched_plan_remove(&c, &s2);
  assert_int_equal(kv_alloc_free_blocks(a), BLOCKS);
  sched_seq_free(&s1);
  sched_seq_free(&s2);
  sched_plan_free(&c);
  kv_alloc_destroy(a);
}

/* n decode steps of one sequence as the engine runs them: a step without
 * drafts when the baseline is due, else the k the policy gives (at most
 * 4); the step's forward takes 1 ms plus row_cost ms a draft row, and the
 * drafts are all accepted (accept_all) or all rejected. Returns the
 * number of steps that carried drafts. */
static int simulate(sched_spec_cost_t *c, sched_spec_adapt_t *a, int n, double row_cost, int accept_all) {
  int with_drafts = 0;
  for (int i = 0; i < n; i++) {
    const int32_t k = sched_spec_cost_plain_due(c) ? 0 : sched_spec_adapt_k(c, a, 4, 1);
    sched_spec_cost_timed(c, (int64_t)(1e6 * (1 + row_cost * k)), k);
    if (k == 0) continue;
    with_drafts++;
    sched_spec_adapt_verified(a, accept_all ? k : 0, k);
  }
  return with_drafts;
}

static void noisy_cost_does_not_stop_speculation_for_good(void **state) {
  (void)state;
  sched_spec_cost_t c = {0};
  sched_spec_adapt_t a = {0};
  /* drafts that are all accepted, but a loaded machine makes each draft
   * row cost 1.5 steps for a while: no k gains even at p -> 1 */
  assert_true(simulate(&c, &a, 40, 0.05, 1) > 20); /* it speculates while it pays */
  simulate(&c, &a, 300, 1.5, 1);
  assert_true(c.row_cost > 0.8); /* past where best_k is 0 at the optimistic p = 0.8 */
  /* the noise is gone: a draft row costs 0.05 steps again, and drafts come
   * back after the current pause (at most 512 steps) */
  const int back = simulate(&c, &a, 2000, 0.05, 1);
  assert_true(back > 1000);
  assert_true(c.row_cost < 0.2);
}

static void non_paying_speculation_backs_off(void **state) {
  (void)state;
  /* every draft rejected, a draft row cheap: after the first rounds only
   * the probes out of ever longer pauses carry drafts */
  sched_spec_cost_t c = {0};
  sched_spec_adapt_t a = {0};
  const int n = simulate(&c, &a, 8000, 0.3, 0);
  assert_true(n > 0);
  assert_true(n < 8000 / 25);
  /* every draft accepted, but a draft row costs more than a step: the
   * same (each probe is one draft row) */
  sched_spec_cost_t c2 = {0};
  sched_spec_adapt_t a2 = {0};
  const int m = simulate(&c2, &a2, 8000, 1.5, 1);
  assert_true(m > 0);
  assert_true(m < 8000 / 100);
  print_message("draft steps in 8000: %d (drafts rejected), %d (drafts too dear)\n", n, m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ngram_proposals),
      cmocka_unit_test(rollback_releases_and_publishes_verified_only),
      cmocka_unit_test(drafts_never_preempt),
      cmocka_unit_test(noisy_cost_does_not_stop_speculation_for_good),
      cmocka_unit_test(non_paying_speculation_backs_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
