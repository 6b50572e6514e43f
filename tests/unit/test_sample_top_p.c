/* tests/unit/test_sample_top_p.c — top-p over the whole vocabulary on the
 * device, checked on the CPU through its host emulation (kern_sample_ref:
 * the threshold searches of kernels/kern_sample.h, which
 * kernels/cuda/sample_top_p.cuh runs on a GPU) against the host sampler
 * (samp_sample, which buckets and sorts) on the same logits and stream.
 *
 * The same token unless the draw or the top-p cut falls within 1e-9 of a
 * boundary (the two sum in different orders); each draw's margin is
 * measured from the host sampler's own candidates and counted, and such
 * draws must stay rare. Rows: the default model's vocabulary and sizes with
 * a partial last chunk, temperatures, top_p from 0.05 to 0.99, with and
 * without min-p, penalties and a bias, rows with a NaN, a -inf, a few
 * dominant tokens, and rows of many equal logits (ties at the cut). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kern_sample.h"
#include "sample/sampler.h"
#include "tests/unit/testutil.h"

static int desc(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The smallest distance from u to a cumulative probability of the host
 * sampler's candidates, and from top_p to the cumulative probability of
 * the full sorted vocabulary (the cut). */
static double margin_of(const samp_params_t *p, samp_ws_t *ws, const float *x, double u) {
  const int32_t *ids;
  const float *probs;
  int n = samp_candidates(p, ws, x, &ids, &probs);
  double cum = 0, margin = 1.0;
  for (int i = 0; i < n - 1; i++) {
    cum += probs[i];
    if (fabs(u - cum) < margin) margin = fabs(u - cum);
  }
  samp_params_t q = *p; /* the cut: the whole row by weight, top-p and min-p off */
  q.top_p = 1.0f, q.min_p = 0.0f, q.top_k = 0;
  n = samp_candidates(&q, ws, x, &ids, &probs);
  float *sorted = malloc((size_t)n * sizeof *sorted);
  memcpy(sorted, probs, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, desc);
  cum = 0;
  for (int i = 0; i < n && cum < (double)p->top_p + 1e-6; i++) {
    if (fabs(cum - (double)p->top_p) < margin) margin = fabs(cum - (double)p->top_p);
    cum += sorted[i];
  }
  free(sorted);
  return margin;
}

static void fill(tu_rng_t *rng, float *x, int32_t V, int kind) {
  const float scale = 0.5f + (float)tu_uniform(rng, 0, 3);
  for (int32_t i = 0; i < V; i++) x[i] = (float)tu_normal(rng) * scale;
  if (kind == 1) x[tu_below(rng, (uint64_t)V)] = NAN;
  if (kind == 2) x[tu_below(rng, (uint64_t)V)] = -INFINITY;
  if (kind == 3)
    for (int j = 0; j < 3; j++) x[tu_below(rng, (uint64_t)V)] += 8.0f;
  if (kind == 4) /* ties: a few distinct values, each held by many ids */
    for (int32_t i = 0; i < V; i++) x[i] = (float)(tu_below(rng, 6)) * 0.5f;
}

static void same_tokens_as_the_host_sampler(void **state) {
  (void)state;
  enum { OPS = 4096 };
  static kern_sample_op_t ops[OPS];
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 23);
  const int32_t vocabs[] = {49152, 1000, 333};
  const float top_ps[] = {0.05f, 0.5f, 0.9f, 0.99f};
  const float temps[] = {0.4f, 1.0f, 1.7f};
  int trials = 0, near = 0, differ_near = 0;
  for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
    const int32_t V = vocabs[vi];
    float *x = malloc((size_t)V * sizeof *x), *xd = malloc((size_t)V * sizeof *xd);
    samp_ws_t *ws = samp_ws_create(V);
    const int reps = V > 10000 ? 5 : 10;
    for (int rep = 0; rep < reps; rep++) {
      fill(&rng, x, V, rep % 5);
      for (size_t pi = 0; pi < sizeof top_ps / sizeof *top_ps; pi++)
        for (size_t ti = 0; ti < sizeof temps / sizeof *temps; ti++) {
          samp_params_t p = samp_params_default();
          p.temperature = temps[ti];
          p.top_p = top_ps[pi];
          p.min_p = (rep + (int)ti) % 3 == 1 ? 0.05f : 0.0f;
          p.has_seed = 1, p.seed = tu_next(&rng);
          const int pen = (rep + (int)pi) % 3 == 2;
          samp_logit_bias_t bias[2] = {{(int32_t)tu_below(&rng, (uint64_t)V), 4.0f}, {3, -1.0f}};
          if (pen) p.repetition_penalty = 1.15f, p.presence_penalty = 0.4f, p.logit_bias = bias, p.n_logit_bias = 2;
          int32_t prompt[20];
          for (int j = 0; j < 20; j++) prompt[j] = (int32_t)tu_below(&rng, (uint64_t)V);
          samp_state_t *s = samp_state_create(&p, V, prompt, 20);
          assert_non_null(s);
          kern_sample_row_t row;
          assert_int_equal(samp_state_device_row(s, &row, ops, 0, OPS), 1);
          assert_int_equal(row.top_k, 0);
          assert_true(row.top_p == p.top_p);
          memcpy(xd, x, (size_t)V * sizeof *x);
          kern_sample_out_t out = {.token = -7};
          kern_sample_ref(&out, xd, &row, ops, 1, V);
          samp_result_t res;
          assert_int_equal(samp_sample(s, ws, x, &res), 0);
          memcpy(xd, x, (size_t)V * sizeof *x);
          samp_state_penalize(s, xd);
          const double margin = margin_of(&p, ws, xd, kern_sample_uniform(p.seed, 1));
          trials++;
          if (margin < 1e-9) {
            near++;
            differ_near += out.token != res.token;
          } else if (out.token != res.token) {
            fail_msg("V %d, kind %d, T %g, top_p %g, min_p %g, penalties %d, seed %llu: device %d, host %d "
                     "(margin %g)",
                     V, rep % 5, (double)p.temperature, (double)p.top_p, (double)p.min_p, pen,
                     (unsigned long long)p.seed, out.token, res.token, margin);
          }
          samp_state_destroy(s);
        }
    }
    samp_ws_destroy(ws);
    free(x);
    free(xd);
  }
  print_message("%d top-p draws, %d within 1e-9 of a boundary (%d of those differ)\n", trials, near, differ_near);
  assert_true(near * 20 <= trials);
}

/* The tie arithmetic: kept ties and the picked tie, against a plain
 * sequential walk where every sum is exact. */
static void tie_arithmetic(void **state) {
  (void)state;
  /* above 0.25, ties of 0.125, need 0.6: kept while 0.25 + k/8 < 0.6, k = 0, 1, 2 */
  assert_int_equal(kern_sample_tie_keep(0.25, 0.125f, 0.6, 10), 3);
  assert_int_equal(kern_sample_tie_keep(0.25, 0.125f, 0.6, 2), 2);
  assert_int_equal(kern_sample_tie_keep(0.25, 0.125f, 0.25, 5), 1); /* the first always */
  assert_int_equal(kern_sample_tie_keep(0.25, 0.125f, 0.375, 5), 1); /* 0.375 < 0.375 is false */
  assert_int_equal(kern_sample_tie_keep(0.0, 1.0f, 1e300, 7), 7);
  /* base 1, ties of 0.5, target 2.2: 1.5, 2.0, 2.5 -> the third (j = 2) */
  assert_int_equal(kern_sample_tie_pick(1.0, 0.5f, 2.2, 10), 2);
  assert_int_equal(kern_sample_tie_pick(1.0, 0.5f, 2.0, 10), 2); /* 2.0 < 2.0 is false */
  assert_int_equal(kern_sample_tie_pick(1.0, 0.5f, 1.0, 10), 0);
  assert_int_equal(kern_sample_tie_pick(1.0, 0.5f, 9.0, 4), 3); /* past the end: the last */
  /* buckets: larger weights never in larger buckets; tiny ones in the last */
  assert_int_equal(kern_sample_bucket(1.0f), 7); /* exponent 0, top mantissa bits 0 */
  assert_int_equal(kern_sample_bucket(0.99f), 8);
  assert_int_equal(kern_sample_bucket(0x1p-70f), KERN_SAMPLE_BUCKETS - 1);
  float prev = 1.0f;
  for (float w = 1.0f; w > 1e-30f; w *= 0.9f) {
    assert_true(kern_sample_bucket(w) >= kern_sample_bucket(prev));
    prev = w;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_tokens_as_the_host_sampler),
      cmocka_unit_test(tie_arithmetic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
