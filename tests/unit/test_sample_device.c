/* tests/unit/test_sample_device.c — sampling on the device, checked on the
 * CPU through its host emulation (kern_sample_ref, which gives the GPU
 * kernel's bits: tests/gpu/check_sample.cu), against the host sampler
 * (samp_sample) on the same logits and the same stream.
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
#include "model/sampler.h"
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
 * request shape, at the default model's vocabulary and at sizes with a
 * partial last chunk and a tail the AVX2 pass leaves to expf. */
static void same_tokens_as_the_host_sampler(void **state) {
  (void)state;
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  const int32_t vocabs[] = {49152, 1000, 333};
  const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f};
  const float min_ps[] = {0.0f, 0.02f, 0.3f};
  int trials = 0, near = 0, differ_near = 0;
  for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
    const int32_t V = vocabs[vi];
    float *x = malloc((size_t)V * sizeof *x);
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
          samp_state_t *s = samp_state_create(&p, V, NULL, 0);
          assert_non_null(s);
          kern_sample_row_t row;
          assert_int_equal(samp_state_device_row(s, &row), 1);
          assert_int_equal((int64_t)row.draw, 1);
          int32_t dev = -7;
          kern_sample_ref(&dev, x, &row, 1, V);
          samp_result_t res;
          assert_int_equal(samp_sample(s, ws, x, &res), 0);
          const double margin = p.temperature > 0 ? draw_margin(&p, ws, x, kern_sample_uniform(p.seed, 1)) : 1.0;
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
  }
  print_message("%d draws, %d within 1e-9 of a boundary (%d of those differ)\n", trials, near, differ_near);
  assert_true(near * 100 <= trials); /* rare, or the margin measure is broken */
}

/* A row without a finite logit: the host sampler's -EDOM, the device's
 * KERN_SAMPLE_NO_TOKEN; +inf: the first one, greedy at any temperature. */
static void rows_without_a_finite_logit(void **state) {
  (void)state;
  enum { V = 64 };
  float x[V];
  for (int i = 0; i < V; i++) x[i] = i % 2 ? NAN : -INFINITY;
  kern_sample_row_t rows[2] = {{.on_device = 1}, {.on_device = 1, .temperature = 0.8f, .seed = 3, .draw = 1}};
  int32_t tok[2];
  float xx[2 * V];
  memcpy(xx, x, sizeof x);
  memcpy(xx + V, x, sizeof x);
  kern_sample_ref(tok, xx, rows, 2, V);
  assert_int_equal(tok[0], KERN_SAMPLE_NO_TOKEN);
  assert_int_equal(tok[1], KERN_SAMPLE_NO_TOKEN);
  xx[V + 9] = INFINITY;
  xx[V + 40] = INFINITY;
  kern_sample_ref(tok, xx, rows, 2, V);
  assert_int_equal(tok[1], 9);
  /* rows left to the host are not written */
  rows[0].on_device = 0;
  tok[0] = 1234;
  kern_sample_ref(tok, xx, rows, 2, V);
  assert_int_equal(tok[0], 1234);
}

/* What qualifies, and the stream: a device draw taken moves the stream on
 * as samp_sample does, so the next token (on either side) gets draw 2. */
static void qualifying_requests_and_the_stream(void **state) {
  (void)state;
  enum { V = 100 };
  kern_sample_row_t row;
  samp_params_t p = samp_params_default();
  samp_logit_bias_t bias = {.token = 5, .bias = 1.0f};
  samp_params_t bad[7];
  for (int i = 0; i < 7; i++) bad[i] = p, bad[i].temperature = 0.7f;
  bad[0].top_k = 40;
  bad[1].top_p = 0.9f;
  bad[2].repetition_penalty = 1.1f;
  bad[3].presence_penalty = 0.5f;
  bad[4].frequency_penalty = 0.5f;
  bad[5].logit_bias = &bias, bad[5].n_logit_bias = 1;
  bad[6].logprobs = 1;
  for (int i = 0; i < 7; i++) {
    samp_state_t *s = samp_state_create(&bad[i], V, NULL, 0);
    assert_non_null(s);
    assert_int_equal(samp_state_device_row(s, &row), 0);
    samp_state_destroy(s);
  }
  /* top_k past the vocabulary and greedy with top_k / top_p are whole-vocabulary draws */
  samp_params_t ok = p;
  ok.temperature = 0.5f, ok.top_k = V;
  samp_state_t *s = samp_state_create(&ok, V, NULL, 0);
  assert_int_equal(samp_state_device_row(s, &row), 1);
  samp_state_destroy(s);
  ok = p, ok.top_k = 3, ok.top_p = 0.5f; /* greedy ignores them */
  s = samp_state_create(&ok, V, NULL, 0);
  assert_int_equal(samp_state_device_row(s, &row), 1);
  assert_true(row.temperature == 0.0f);
  samp_state_destroy(s);

  ok = p, ok.temperature = 1.0f, ok.has_seed = 1, ok.seed = 77;
  s = samp_state_create(&ok, V, NULL, 0);
  assert_int_equal(samp_state_device_row(s, &row), 1);
  assert_int_equal((int64_t)row.seed, 77);
  assert_int_equal((int64_t)row.draw, 1);
  samp_state_take_draw(s);
  assert_int_equal(samp_state_device_row(s, &row), 1);
  assert_int_equal((int64_t)row.draw, 2);
  float x[V];
  for (int i = 0; i < V; i++) x[i] = (float)(i % 7);
  samp_ws_t *ws = samp_ws_create(V);
  samp_result_t res;
  assert_int_equal(samp_sample(s, ws, x, &res), 0); /* draw 2 */
  assert_int_equal(samp_state_device_row(s, &row), 1);
  assert_int_equal((int64_t)row.draw, 3);
  samp_ws_destroy(ws);
  samp_state_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_tokens_as_the_host_sampler),
      cmocka_unit_test(rows_without_a_finite_logit),
      cmocka_unit_test(qualifying_requests_and_the_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
