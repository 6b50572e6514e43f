/* tests/unit/test_sample_device.c — sampling on the device, checked on the
 * CPU through its host emulation (kern_sample_ref, which gives the GPU
 * kernel's bits: tests/gpu/check_sample.cu), against the host sampler
 * (samp_sample) on the same logits and the same stream, and its raw
 * logprobs against samp_logprobs.
 *
 * The same token, unless the draw falls within 1e-9 of a boundary between
 * two candidates (the two sum the weights in different orders); the test
 * measures each draw's margin from the host sampler's own candidates
 * (samp_candidates) and counts those, which must stay rare. Also: which
 * requests qualify (samp_state_device_row) and that both paths move the
 * request's stream on alike. */
#include <errno.h>
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

/* The host sampler's candidates of p on logits x in its walk order: the
 * smallest distance between u and a cumulative probability. */
static double draw_margin(const samp_params_t *p, samp_ws_t *ws, const float *x, double u) {
  const int32_t *ids;
  const float *probs;
  const int n = samp_candidates(p, ws, x, &ids, &probs);
  if (n <= 1) return 1.0;
  double cum = 0, margin = 1.0;
  for (int i = 0; i < n - 1; i++) {
    cum += probs[i];
    if (fabs(u - cum) < margin) margin = fabs(u - cum);
  }
  return margin;
}

static void fill_row(tu_rng_t *rng, float *x, int32_t V, float scale, int kind) {
  for (int32_t i = 0; i < V; i++) x[i] = (float)tu_normal(rng) * scale;
  if (kind == 1) x[tu_below(rng, (uint64_t)V)] = NAN;
  if (kind == 2) x[tu_below(rng, (uint64_t)V)] = -INFINITY;
  if (kind == 3) { /* a few dominant tokens */
    for (int j = 0; j < 3; j++) x[tu_below(rng, (uint64_t)V)] += 8.0f;
  }
}

/* The emulation picks the host sampler's token for every qualifying
 * request shape (greedy, temperatures, min-p; without penalties, with the
 * three penalties over a prompt and an output, and with a logit_bias naming
 * a token twice), at the default model's vocabulary and at sizes with a
 * partial last chunk and a tail the AVX2 pass leaves to expf. */
static void same_tokens_as_the_host_sampler(void **state) {
  (void)state;
  enum { OPS = 4096 };
  static kern_sample_op_t ops[OPS];
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  const int32_t vocabs[] = {49152, 1000, 333};
  const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f};
  const float min_ps[] = {0.0f, 0.02f, 0.3f};
  int trials = 0, near = 0, differ_near = 0;
  for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
    const int32_t V = vocabs[vi];
    float *x = malloc((size_t)V * sizeof *x), *xd = malloc((size_t)V * sizeof *xd);
    samp_ws_t *ws = samp_ws_create(V);
    const int reps = V > 10000 ? 12 : 60;
    for (int rep = 0; rep < reps; rep++) {
      fill_row(&rng, x, V, 0.5f + (float)tu_uniform(&rng, 0, 4), rep % 4);
      for (size_t ti = 0; ti < sizeof temps / sizeof *temps; ti++) {
        for (size_t mi = 0; mi < sizeof min_ps / sizeof *min_ps; mi++) {
          samp_params_t p = samp_params_default();
          p.temperature = temps[ti];
          p.min_p = min_ps[mi];
          p.has_seed = 1;
          p.seed = tu_next(&rng);
          const int pen = (rep + (int)ti) % 3; /* none; penalties; penalties and a bias */
          if (pen) {
            p.repetition_penalty = 0.8f + 0.1f * (float)(rep % 5);
            p.frequency_penalty = 0.3f * (float)(rep % 3);
            p.presence_penalty = -0.2f + 0.25f * (float)(rep % 4);
          }
          samp_logit_bias_t bias[3] = {{(int32_t)(tu_below(&rng, (uint64_t)V)), 3.0f}, {5 % V, -2.0f}, {5 % V, 0.5f}};
          if (pen == 2) p.logit_bias = bias, p.n_logit_bias = 3;
          int32_t prompt[40];
          for (int j = 0; j < 40; j++) prompt[j] = (int32_t)tu_below(&rng, (uint64_t)(j % 2 ? 50 : V));
          samp_state_t *s = samp_state_create(&p, V, prompt, 40);
          assert_non_null(s);
          for (int j = 0; j < 30; j++) samp_state_accept(s, (int32_t)tu_below(&rng, 60));
          kern_sample_row_t row;
          assert_int_equal(samp_state_device_row(s, &row, ops, 3, OPS), 1);
          assert_int_equal((int64_t)row.draw, 1);
          assert_int_equal(row.op_begin, 3);
          assert_int_equal(row.n_bias, pen == 2 ? 3 : 0);
          if (pen) assert_true(row.n_count > 0);
          kern_sample_out_t out = {.token = -7};
          memcpy(xd, x, (size_t)V * sizeof *x); /* the emulation, like the device, changes the row */
          kern_sample_ref(&out, xd, &row, ops, 1, V);
          const int32_t dev = out.token;
          samp_result_t res;
          assert_int_equal(samp_sample(s, ws, x, &res), 0);
          memcpy(xd, x, (size_t)V * sizeof *x);
          samp_state_penalize(s, xd);
          const double margin = p.temperature > 0 ? draw_margin(&p, ws, xd, kern_sample_uniform(p.seed, 1)) : 1.0;
          trials++;
          if (margin < 1e-9) {
            near++;
            differ_near += dev != res.token;
          } else if (dev != res.token) {
            fail_msg("V %d, T %g, min_p %g, seed %llu: device %d, host %d (margin %g)", V, (double)p.temperature,
                     (double)p.min_p, (unsigned long long)p.seed, dev, res.token, margin);
          }
          samp_state_destroy(s);
        }
      }
    }
    samp_ws_destroy(ws);
    free(x);
    free(xd);
  }
  print_message("%d draws, %d within 1e-9 of a boundary (%d of those differ)\n", trials, near, differ_near);
  assert_true(near * 100 <= trials); /* rare, or the margin measure is broken */
}

/* How near top-p's cut over the top k comes to a boundary: the host
 * sampler's own probabilities of the k best (top_p and min_p off). */
static double cut_margin(const samp_params_t *p, samp_ws_t *ws, const float *x) {
  samp_params_t q = *p;
  q.top_p = 1.0f, q.min_p = 0.0f;
  const int32_t *ids;
  const float *probs;
  const int n = samp_candidates(&q, ws, x, &ids, &probs);
  double cum = 0, margin = 1.0;
  for (int i = 0; i <= n; i++) {
    if (fabs(cum - (double)p->top_p) < margin) margin = fabs(cum - (double)p->top_p);
    if (i < n) cum += probs[i];
  }
  return margin;
}

/* Top-k draws (with top-p and min-p inside the top k): the same token as
 * the host sampler, unless a draw or the top-p cut comes within 1e-5 of a
 * boundary (the host sampler's expf and the device's exp differ by ulps). */
static void top_k_draws_match(void **state) {
  (void)state;
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 7);
  const int32_t vocabs[] = {49152, 1500};
  const int32_t ks[] = {1, 7, 40, 1024};
  int trials = 0, near = 0, differ_near = 0;
  kern_sample_op_t ops[1];
  for (size_t vi = 0; vi < 2; vi++) {
    const int32_t V = vocabs[vi];
    float *x = malloc((size_t)V * sizeof *x), *xd = malloc((size_t)V * sizeof *xd);
    samp_ws_t *ws = samp_ws_create(V);
    for (int rep = 0; rep < 2; rep++) {
      fill_row(&rng, x, V, 1.0f + (float)tu_uniform(&rng, 0, 3), rep % 4);
      for (size_t ki = 0; ki < 4; ki++)
        for (int variant = 0; variant < 6; variant++) {
          samp_params_t p = samp_params_default();
          p.temperature = 0.5f + 0.5f * (float)(variant % 3);
          p.top_k = ks[ki];
          p.top_p = variant < 3 ? 1.0f : 0.85f;
          p.min_p = variant % 2 ? 0.1f : 0.0f;
          p.has_seed = 1, p.seed = tu_next(&rng);
          samp_state_t *s = samp_state_create(&p, V, NULL, 0);
          kern_sample_row_t row;
          assert_int_equal(samp_state_device_row(s, &row, ops, 0, 1), 1);
          assert_int_equal(row.top_k, ks[ki]);
          memcpy(xd, x, (size_t)V * sizeof *x);
          kern_sample_out_t out = {.token = -7};
          kern_sample_ref(&out, xd, &row, ops, 1, V);
          const int32_t dev = out.token;
          samp_result_t res;
          assert_int_equal(samp_sample(s, ws, x, &res), 0);
          double margin = draw_margin(&p, ws, x, kern_sample_uniform(p.seed, 1));
          if (p.top_p < 1.0f) {
            const double cm = cut_margin(&p, ws, x);
            margin = cm < margin ? cm : margin;
          }
          trials++;
          if (margin < 1e-5) {
            near++;
            differ_near += dev != res.token;
          } else if (dev != res.token) {
            fail_msg("V %d, k %d, T %g, top_p %g, min_p %g: device %d, host %d (margin %g)", V, p.top_k,
                     (double)p.temperature, (double)p.top_p, (double)p.min_p, dev, res.token, margin);
          }
          samp_state_destroy(s);
        }
    }
    samp_ws_destroy(ws);
    free(x);
    free(xd);
  }
  print_message("%d top-k draws, %d within 1e-5 of a boundary (%d of those differ)\n", trials, near, differ_near);
  assert_true(near * 10 <= trials);
}

/* Raw logprobs on the device: the host sampler's (samp_logprobs) within a
 * float ulp or two, the same top ids in the same order, for greedy and
 * sampled rows, with a NaN and a -inf in the row. */
static void logprobs_match(void **state) {
  (void)state;
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 11);
  enum { V = 49152 };
  float *x = malloc(V * sizeof *x), *xd = malloc(V * sizeof *xd);
  samp_ws_t *ws = samp_ws_create(V);
  kern_sample_op_t ops[1];
  const int32_t tops[] = {0, 1, 5, 20};
  for (int rep = 0; rep < 8; rep++) {
    fill_row(&rng, x, V, 1.0f + (float)rep, rep % 4);
    samp_params_t p = samp_params_default();
    p.logprobs = 1;
    p.top_logprobs = tops[rep % 4];
    p.temperature = rep % 2 ? 0.0f : 0.8f;
    p.top_k = rep % 3 == 1 ? 30 : 0;
    p.has_seed = 1, p.seed = tu_next(&rng);
    samp_state_t *s = samp_state_create(&p, V, NULL, 0);
    kern_sample_row_t row;
    assert_int_equal(samp_state_device_row(s, &row, ops, 0, 1), 1);
    assert_int_equal(row.logprobs, 1);
    assert_int_equal(row.n_top, p.top_logprobs);
    memcpy(xd, x, V * sizeof *x);
    kern_sample_out_t out;
    kern_sample_ref(&out, xd, &row, ops, 1, V);
    samp_result_t res;
    assert_int_equal(samp_sample(s, ws, x, &res), 0);
    assert_int_equal(out.token, res.token);
    assert_float_equal(out.logprob, res.logprob, 2e-6 * (1 + fabsf(res.logprob)));
    for (int i = 0; i < p.top_logprobs; i++) {
      assert_int_equal(out.top_id[i], res.top[i].token);
      assert_float_equal(out.top_logprob[i], res.top[i].logprob, 2e-6 * (1 + fabsf(res.top[i].logprob)));
    }
    samp_state_destroy(s);
  }
  /* logprobs of a penalised or biased row stay with the host (raw logits) */
  samp_params_t p = samp_params_default();
  p.logprobs = 1, p.presence_penalty = 0.5f;
  samp_state_t *s = samp_state_create(&p, V, NULL, 0);
  kern_sample_row_t row;
  assert_int_equal(samp_state_device_row(s, &row, ops, 0, 1), 0);
  samp_state_destroy(s);
  samp_ws_destroy(ws);
  free(x);
  free(xd);
}

/* A row without a finite logit: the host sampler's -EDOM, the device's
 * KERN_SAMPLE_NO_TOKEN; +inf: the first one, greedy at any temperature. */
static void rows_without_a_finite_logit(void **state) {
  (void)state;
  enum { V = 64 };
  float x[V];
  for (int i = 0; i < V; i++) x[i] = i % 2 ? NAN : -INFINITY;
  kern_sample_row_t rows[2] = {{.on_device = 1}, {.on_device = 1, .temperature = 0.8f, .seed = 3, .draw = 1}};
  kern_sample_out_t out[2];
  float xx[2 * V];
  memcpy(xx, x, sizeof x);
  memcpy(xx + V, x, sizeof x);
  kern_sample_ref(out, xx, rows, NULL, 2, V);
  assert_int_equal(out[0].token, KERN_SAMPLE_NO_TOKEN);
  assert_int_equal(out[1].token, KERN_SAMPLE_NO_TOKEN);
  xx[V + 9] = INFINITY;
  xx[V + 40] = INFINITY;
  kern_sample_ref(out, xx, rows, NULL, 2, V);
  assert_int_equal(out[1].token, 9);
  /* rows left to the host are not written */
  rows[0].on_device = 0;
  out[0].token = 1234;
  kern_sample_ref(out, xx, rows, NULL, 2, V);
  assert_int_equal(out[0].token, 1234);
  /* a bias makes a finite logit the only candidate */
  const kern_sample_op_t op = {.token = 17, .flags = KERN_SAMPLE_BIAS, .bias = 1.0f};
  xx[17] = 0.0f;
  rows[0] = (kern_sample_row_t){.on_device = 1, .n_bias = 1};
  kern_sample_ref(out, xx, rows, &op, 1, V);
  assert_int_equal(out[0].token, 17);
  assert_true(xx[17] == 1.0f); /* applied to the row */
}

/* What qualifies, and the stream: a device draw taken moves the stream on
 * as samp_sample does, so the next token (on either side) gets draw 2. */
static void qualifying_requests_and_the_stream(void **state) {
  (void)state;
  enum { V = 100 };
  kern_sample_row_t row;
  samp_params_t p = samp_params_default();
  samp_logit_bias_t bias = {.token = 5, .bias = 1.0f};
  kern_sample_op_t ops[8];
  samp_params_t bad[2];
  for (int i = 0; i < 2; i++) bad[i] = p, bad[i].temperature = 0.7f;
  bad[0].logprobs = 1, bad[0].logit_bias = &bias, bad[0].n_logit_bias = 1; /* logprobs of a changed row */
  bad[1].top_logprobs = 2, bad[1].repetition_penalty = 1.1f;
  for (int i = 0; i < 2; i++) {
    samp_state_t *s = samp_state_create(&bad[i], V, NULL, 0);
    assert_non_null(s);
    assert_int_equal(samp_state_device_row(s, &row, ops, 0, 8), 0);
    samp_state_destroy(s);
  }
  /* a top-k past what the device sorts */
  samp_params_t wide = p;
  wide.temperature = 1.0f, wide.top_k = KERN_SAMPLE_MAX_TOP_K + 1;
  samp_state_t *ws_state = samp_state_create(&wide, 5000, NULL, 0);
  assert_int_equal(samp_state_device_row(ws_state, &row, ops, 0, 8), 0);
  samp_state_destroy(ws_state);
  /* penalties and a bias qualify while their ops fit: one bias op, then one
   * op per distinct token (all of them with a repetition penalty; only
   * those in the output without) */
  samp_params_t pen = p;
  pen.logit_bias = &bias, pen.n_logit_bias = 1, pen.repetition_penalty = 1.2f;
  const int32_t prompt[4] = {7, 8, 7, 9};
  samp_state_t *ps = samp_state_create(&pen, V, prompt, 4);
  samp_state_accept(ps, 9);
  samp_state_accept(ps, 11);
  assert_int_equal(samp_state_device_row(ps, &row, ops, 2, 8), 1);
  assert_int_equal(row.op_begin, 2);
  assert_int_equal(row.n_bias, 1);
  assert_int_equal(row.n_count, 4); /* 7, 8, 9, 11 */
  assert_int_equal(ops[2].token, 5);
  assert_int_equal(samp_state_device_row(ps, &row, ops, 4, 8), 0); /* 5 ops, room for 4 */
  samp_state_destroy(ps);
  pen.repetition_penalty = 1.0f, pen.presence_penalty = 0.5f;
  ps = samp_state_create(&pen, V, prompt, 4);
  samp_state_accept(ps, 11);
  assert_int_equal(samp_state_device_row(ps, &row, ops, 0, 8), 1);
  assert_int_equal(row.n_count, 1); /* 11 alone: prompt tokens change nothing */
  assert_true(ops[1].token == 11 && ops[1].flags == KERN_SAMPLE_SUB && ops[1].sub == 0.5f);
  samp_state_destroy(ps);
  /* top-p over the whole vocabulary qualifies (test_sample_top_p.c), with top_k past it too */
  samp_params_t tp = p;
  tp.temperature = 0.7f, tp.top_p = 0.9f, tp.top_k = V;
  samp_state_t *tps = samp_state_create(&tp, V, NULL, 0);
  assert_int_equal(samp_state_device_row(tps, &row, ops, 0, 8), 1);
  assert_true(row.top_k == 0 && row.top_p == 0.9f);
  samp_state_destroy(tps);
  /* top_k past the vocabulary and greedy with top_k / top_p are whole-vocabulary draws */
  samp_params_t ok = p;
  ok.temperature = 0.5f, ok.top_k = V;
  samp_state_t *s = samp_state_create(&ok, V, NULL, 0);
  assert_int_equal(samp_state_device_row(s, &row, ops, 0, 8), 1);
  samp_state_destroy(s);
  ok = p, ok.top_k = 3, ok.top_p = 0.5f; /* greedy ignores them */
  s = samp_state_create(&ok, V, NULL, 0);
  assert_int_equal(samp_state_device_row(s, &row, ops, 0, 8), 1);
  assert_true(row.temperature == 0.0f);
  samp_state_destroy(s);

  ok = p, ok.temperature = 1.0f, ok.has_seed = 1, ok.seed = 77;
  s = samp_state_create(&ok, V, NULL, 0);
  assert_int_equal(samp_state_device_row(s, &row, ops, 0, 8), 1);
  assert_int_equal((int64_t)row.seed, 77);
  assert_int_equal((int64_t)row.draw, 1);
  samp_state_take_draw(s);
  assert_int_equal(samp_state_device_row(s, &row, ops, 0, 8), 1);
  assert_int_equal((int64_t)row.draw, 2);
  float x[V];
  for (int i = 0; i < V; i++) x[i] = (float)(i % 7);
  samp_ws_t *ws = samp_ws_create(V);
  samp_result_t res;
  assert_int_equal(samp_sample(s, ws, x, &res), 0); /* draw 2 */
  assert_int_equal(samp_state_device_row(s, &row, ops, 0, 8), 1);
  assert_int_equal((int64_t)row.draw, 3);
  samp_ws_destroy(ws);
  samp_state_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_tokens_as_the_host_sampler),
      cmocka_unit_test(top_k_draws_match),
      cmocka_unit_test(logprobs_match),
      cmocka_unit_test(rows_without_a_finite_logit),
      cmocka_unit_test(qualifying_requests_and_the_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
