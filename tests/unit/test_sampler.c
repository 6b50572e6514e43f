/* tests/unit/test_sampler.c — the sampler: parameters, edge cases, the
 * penalties against their formulas in double, the two top-k paths, seed
 * reproducibility across interleavings, logprobs, and a chi-square test of
 * the draws. (tests/integration/test_sampler.py checks every step against a
 * float64 numpy reference.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sampler.h"
#include "tests/unit/testutil.h"

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

static samp_params_t sampling(float t, int32_t k, float top_p, float min_p, uint64_t seed) {
  samp_params_t p = samp_params_default();
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.has_seed = 1;
  p.seed = seed;
  return p;
}

/* One token from a fresh state. */
static int32_t sample_once(const samp_params_t *p, const float *logits, int32_t V) {
  samp_state_t *s = samp_state_create(p, V, NULL, 0);
  assert_non_null(s);
  samp_ws_t *w = samp_ws_create(V);
  samp_result_t r;
  assert_int_equal(samp_sample(s, w, logits, &r), 0);
  samp_ws_destroy(w);
  samp_state_destroy(s);
  return r.token;
}

static void defaults_are_greedy_and_change_nothing(void **state) {
  (void)state;
  samp_params_t p = samp_params_default();
  assert_true(p.temperature == 0 && p.top_k == 0 && p.top_p == 1 && p.min_p == 0);
  assert_true(p.repetition_penalty == 1 && p.presence_penalty == 0 && p.frequency_penalty == 0);
  assert_int_equal(p.has_seed, 0);
  assert_int_equal(p.n_logit_bias, 0);
  assert_int_equal(p.logprobs + p.top_logprobs, 0);
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  enum { V = 5000 };
  float x[V], y[V];
  tu_fill_normal(&r, x, V, 3.0f);
  int32_t prompt[] = {1, 2, 3, (int32_t)argmax(x, V)};
  samp_state_t *s = samp_state_create(&p, V, prompt, 4);
  assert_non_null(s);
  samp_state_accept(s, 7);
  memcpy(y, x, sizeof y);
  samp_state_penalize(s, y);
  assert_memory_equal(x, y, sizeof x);
  samp_ws_t *w = samp_ws_create(V);
  samp_result_t res;
  assert_int_equal(samp_sample(s, w, x, &res), 0);
  assert_int_equal(res.token, argmax(x, V));
  samp_ws_destroy(w);
  samp_state_destroy(s);
}

static void validation_rejects_bad_params(void **state) {
  (void)state;
  char err[128];
  samp_logit_bias_t bias[] = {{5, 1.0f}};
  for (int k = 0; k < 10; k++) {
    samp_params_t p = samp_params_default();
    switch (k) {
    case 0: p.temperature = -1; break;
    case 1: p.temperature = NAN; break;
    case 2: p.top_p = 1.5f; break;
    case 3: p.min_p = -0.1f; break;
    case 4: p.repetition_penalty = 0; break;
    case 5: p.presence_penalty = INFINITY; break;
    case 6: p.logit_bias = bias; p.n_logit_bias = 1; bias[0].token = 10; break; /* V = 10 */
    case 7: p.logit_bias = bias; p.n_logit_bias = 1; bias[0].token = 1; bias[0].bias = NAN; break;
    case 8: p.top_logprobs = 21; break;
    case 9: p.n_logit_bias = 2; break; /* no array */
    }
    err[0] = 0;
    assert_int_equal(samp_params_validate(&p, 10, err, sizeof err), -EINVAL);
    assert_true(strlen(err) > 0);
    assert_null(samp_state_create(&p, 10, NULL, 0));
  }
  samp_params_t ok = sampling(0.7f, 5, 0.0f, 1.0f, 1);
  assert_int_equal(samp_params_validate(&ok, 10, NULL, 0), 0);
}

/* The one table of request fields (samp_params.h): its ranges are the API's
 * (temperature 0..2 as OpenAI documents), each bound is honoured, and every
 * value it accepts passes the sampler's own preconditions, so a request the
 * readers accepted is never refused by the engine. */
static void field_table_ranges_fit_the_sampler(void **state) {
  (void)state;
  int seen = 0;
  for (int i = 0; i < samp_n_fields; i++) {
    const samp_field_t *f = &samp_fields[i];
    if (strcmp(f->name, "temperature") == 0) {
      assert_true(f->lo == 0 && f->hi == 2 && !f->lo_open);
      seen++;
    }
    const double lo_in = f->lo_open ? nextafterf((float)f->lo, (float)f->hi) : f->lo; /* as stored */
    const double mid = (f->lo + f->hi) / 2;
    const double in[] = {lo_in, f->hi, !f->integral ? mid : mid > 1e6 ? 40 : floor(mid)};
    for (int k = 0; k < 3; k++) {
      assert_true(samp_field_accepts(f, in[k]));
      samp_params_t p = samp_params_default();
      samp_field_set(&p, f, in[k]);
      assert_int_equal(samp_params_validate(&p, 10, NULL, 0), 0);
    }
    assert_false(samp_field_accepts(f, f->hi + 1));
    assert_false(samp_field_accepts(f, f->lo - 1));
    assert_false(samp_field_accepts(f, NAN));
    if (f->lo_open) assert_false(samp_field_accepts(f, f->lo + 1e-300)); /* 0 once stored as a float */
    assert_int_equal(samp_field_accepts(f, f->lo), !f->lo_open);
    if (f->integral) assert_false(samp_field_accepts(f, 1.5));
  }
  assert_int_equal(seen, 1);
}

static void greedy_breaks_ties_by_lowest_id(void **state) {
  (void)state;
  float x[6] = {1, 3, 2, 3, 3, -1};
  samp_params_t p = samp_params_default();
  assert_int_equal(sample_once(&p, x, 6), 1);
  p = sampling(0.5f, 0, 0.0f, 0, 9); /* top_p 0 keeps one: the first of the ties too */
  assert_int_equal(sample_once(&p, x, 6), 1);
}

/* Whatever the parameters, a single finite logit wins; none is an error. */
static void one_finite_logit_wins_none_is_an_error(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 1);
  enum { V = 300 };
  float x[V];
  for (int trial = 0; trial < 50; trial++) {
    for (int i = 0; i < V; i++) x[i] = tu_below(&r, 3) == 0 ? NAN : -INFINITY;
    int32_t only = (int32_t)tu_below(&r, V);
    x[only] = (float)tu_uniform(&r, -50, 50);
    samp_params_t p = sampling((float)tu_uniform(&r, 0, 2), (int32_t)tu_below(&r, 5), (float)tu_uniform(&r, 0, 1),
                               (float)tu_uniform(&r, 0, 1), tu_next(&r));
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.5f;
    p.logprobs = 1;
    samp_state_t *s = samp_state_create(&p, V, &only, 1);
    samp_state_accept(s, only);
    samp_ws_t *w = samp_ws_create(V);
    samp_result_t res;
    assert_int_equal(samp_sample(s, w, x, &res), 0);
    assert_int_equal(res.token, only);
    assert_true(fabsf(res.logprob) < 1e-6f);
    x[only] = -INFINITY;
    res.token = -7;
    assert_int_equal(samp_sample(s, w, x, &res), -EDOM);
    assert_int_equal(res.token, -7);
    samp_ws_destroy(w);
    samp_state_destroy(s);
  }
}

/* The candidates of two parameter sets are the same ids and probabilities. */
static void assert_same_candidates(const samp_params_t *a, const samp_params_t *b, const float *x, int32_t V) {
  samp_ws_t *wa = samp_ws_create(V), *wb = samp_ws_create(V);
  const int32_t *ia, *ib;
  const float *pa, *pb;
  int na = samp_candidates(a, wa, x, &ia, &pa), nb = samp_candidates(b, wb, x, &ib, &pb);
  assert_int_equal(na, nb);
  assert_true(na > 0);
  float *dense = calloc((size_t)V, sizeof *dense);
  for (int i = 0; i < na; i++) dense[ia[i]] = pa[i];
  for (int i = 0; i < nb; i++) assert_true(fabsf(dense[ib[i]] - pb[i]) <= 1e-6f * (1 + pb[i]) && pb[i] > 0);
  free(dense);
  samp_ws_destroy(wa);
  samp_ws_destroy(wb);
}

static void edge_parameters(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 2);
  enum { V = 2000 };
  float x[V];
  tu_fill_normal(&r, x, V, 2.0f);
  /* top_k beyond the vocabulary is no top_k */
  samp_params_t a = sampling(0.8f, V + 5, 0.9f, 0.01f, 1), b = sampling(0.8f, 0, 0.9f, 0.01f, 1);
  assert_same_candidates(&a, &b, x, V);
  a.top_k = V;
  assert_same_candidates(&a, &b, x, V);
  /* top_p 0 and tiny temperatures pick the argmax whatever the draw */
  int32_t best = argmax(x, V);
  for (int k = 0; k < 20; k++) {
    samp_params_t p = sampling(1.0f, 0, 0.0f, 0, tu_next(&r));
    assert_int_equal(sample_once(&p, x, V), best);
    p = sampling(1e-6f, 0, 1.0f, 0, tu_next(&r));
    assert_int_equal(sample_once(&p, x, V), best);
    p = sampling(1e-30f, 50, 1.0f, 0, tu_next(&r));
    assert_int_equal(sample_once(&p, x, V), best);
  }
  /* min_p 1 keeps only the maximum */
  samp_params_t m = sampling(2.0f, 0, 1.0f, 1.0f, 3);
  assert_int_equal(sample_once(&m, x, V), best);
}

/* Top-k by heap (k <= 256) and by quickselect agree, ties included. */
static void top_k_paths_agree(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 3);
  enum { V = 6000 };
  float x[V];
  for (int i = 0; i < V; i++) x[i] = (float)(int)tu_uniform(&r, -40, 40) * 0.25f; /* many ties */
  samp_params_t small = sampling(1.0f, 200, 1.0f, 0, 1), big = sampling(1.0f, 3000, 1.0f, 0, 1);
  samp_ws_t *ws = samp_ws_create(V), *wb = samp_ws_create(V);
  const int32_t *is, *ib;
  const float *ps, *pb;
  assert_int_equal(samp_candidates(&small, ws, x, &is, &ps), 200);
  assert_int_equal(samp_candidates(&big, wb, x, &ib, &pb), 3000);
  for (int i = 0; i < 200; i++) {
    assert_int_equal(is[i], ib[i]); /* same order: value down, id up */
    if (i) assert_true(x[is[i - 1]] > x[is[i]] || (x[is[i - 1]] == x[is[i]] && is[i - 1] < is[i]));
  }
  /* and the 3000 are exactly those with the 3000 best (value, -id) */
  int above = 0;
  float kth = x[ib[2999]];
  for (int i = 0; i < V; i++) above += x[i] > kth || (x[i] == kth && i <= ib[2999]);
  assert_int_equal(above, 3000);
  samp_ws_destroy(ws);
  samp_ws_destroy(wb);
}

static void penalties_follow_their_formulas(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 4);
  enum { V = 1000, NP = 60, NO = 80 };
  float x[V], y[V];
  tu_fill_normal(&r, x, V, 4.0f);
  int32_t prompt[NP], outs[NO];
  int count[V] = {0}, in_prompt[V] = {0};
  for (int i = 0; i < NP; i++) in_prompt[prompt[i] = (int32_t)tu_below(&r, 200)] = 1;
  samp_logit_bias_t bias[] = {{3, 2.5f}, {999, -100.0f}, {3, 0.5f}};
  samp_params_t p = sampling(1.0f, 0, 1.0f, 0, 1);
  p.repetition_penalty = 1.7f;
  p.presence_penalty = 0.6f;
  p.frequency_penalty = -0.3f;
  p.logit_bias = bias;
  p.n_logit_bias = 3;
  samp_state_t *s = samp_state_create(&p, V, prompt, NP);
  bias[0].bias = 1000; /* the state kept its own copy */
  for (int i = 0; i < NO; i++) {
    outs[i] = (int32_t)tu_below(&r, 300);
    count[outs[i]]++;
    samp_state_accept(s, outs[i]);
  }
  samp_state_accept(s, -1); /* ignored */
  samp_state_accept(s, V);
  memcpy(y, x, sizeof y);
  samp_state_penalize(s, y);
  for (int t = 0; t < V; t++) {
    double v = x[t];
    if (t == 3) v += 2.5 + 0.5;
    if (t == 999) v -= 100.0;
    if (in_prompt[t] || count[t]) v = v > 0 ? v / 1.7 : v * 1.7;
    if (count[t]) v -= -0.3 * count[t] + 0.6;
    assert_true(fabs(y[t] - v) <= 1e-5 * (1 + fabs(v)));
  }
  samp_state_destroy(s);
}

/* The same seed gives the same tokens alone or interleaved with other
 * requests on a shared workspace; another seed gives others. */
static void seeds_reproduce_across_interleavings(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 5);
  enum { V = 3000, N = 64 };
  float x[V], other[V];
  tu_fill_normal(&r, x, V, 1.0f);
  tu_fill_normal(&r, other, V, 1.0f);
  uint64_t seed = tu_next(&r);
  samp_params_t p = sampling(1.0f, 0, 0.95f, 0, seed);
  p.frequency_penalty = 0.2f;
  int32_t alone[N], mixed[N], diff[N];
  samp_ws_t *w = samp_ws_create(V);
  samp_result_t res;
  samp_state_t *a = samp_state_create(&p, V, NULL, 0);
  assert_int_equal(samp_state_seed(a), seed);
  for (int i = 0; i < N; i++) {
    assert_int_equal(samp_sample(a, w, x, &res), 0);
    samp_state_accept(a, alone[i] = res.token);
  }
  samp_state_t *b = samp_state_create(&p, V, NULL, 0);
  samp_params_t q = sampling(0.7f, 40, 0.9f, 0.02f, seed + 1);
  samp_state_t *o1 = samp_state_create(&q, V, NULL, 0), *o2 = samp_state_create(&q, V, NULL, 0);
  for (int i = 0; i < N; i++) {
    for (uint64_t k = tu_below(&r, 3); k-- > 0;) {
      samp_sample(o1, w, other, &res);
      samp_state_accept(o1, res.token);
    }
    assert_int_equal(samp_sample(b, w, x, &res), 0);
    samp_state_accept(b, mixed[i] = res.token);
    samp_sample(o2, w, x, &res);
  }
  assert_memory_equal(alone, mixed, sizeof alone);
  samp_params_t d = p;
  d.seed = seed ^ 0x5555;
  samp_state_t *c = samp_state_create(&d, V, NULL, 0);
  for (int i = 0; i < N; i++) {
    samp_sample(c, w, x, &res);
    samp_state_accept(c, diff[i] = res.token);
  }
  assert_true(memcmp(alone, diff, sizeof alone) != 0);
  /* without a seed, requests get different ones */
  samp_params_t u = samp_params_default();
  samp_state_t *u1 = samp_state_create(&u, V, NULL, 0), *u2 = samp_state_create(&u, V, NULL, 0);
  assert_true(samp_state_seed(u1) != samp_state_seed(u2));
  samp_state_destroy(u1);
  samp_state_destroy(u2);
  samp_state_destroy(a);
  samp_state_destroy(b);
  samp_state_destroy(c);
  samp_state_destroy(o1);
  samp_state_destroy(o2);
  samp_ws_destroy(w);
}

static void logprobs_are_the_raw_log_softmax(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 6);
  enum { V = 4000 };
  float x[V];
  tu_fill_normal(&r, x, V, 3.0f);
  double m = x[argmax(x, V)], sum = 0;
  for (int i = 0; i < V; i++) sum += exp((double)x[i] - m);
  double lse = m + log(sum);
  samp_params_t p = sampling(0.9f, 30, 0.8f, 0, tu_next(&r));
  p.top_logprobs = 20;
  p.repetition_penalty = 2.0f; /* changes what is drawn, not the logprobs */
  int32_t prompt[] = {argmax(x, V)};
  samp_state_t *s = samp_state_create(&p, V, prompt, 1);
  samp_ws_t *w = samp_ws_create(V);
  samp_result_t res;
  assert_int_equal(samp_sample(s, w, x, &res), 0);
  assert_int_equal(res.n_top, 20);
  assert_true(fabs(res.logprob - ((double)x[res.token] - lse)) < 1e-5);
  assert_int_equal(res.top[0].token, argmax(x, V));
  for (int i = 0; i < 20; i++) {
    assert_true(fabs(res.top[i].logprob - ((double)x[res.top[i].token] - lse)) < 1e-5);
    if (i) assert_true(res.top[i - 1].logprob >= res.top[i].logprob);
  }
  int better = 0; /* nothing outside the list beats its last entry */
  for (int i = 0; i < V; i++) better += x[i] > x[res.top[19].token];
  assert_int_equal(better, 19);
  samp_ws_destroy(w);
  samp_state_destroy(s);
}

/* Pearson's chi-square of n draws against probabilities q[V]; bins with
 * q = 0 must stay empty. */
static double chi_square(samp_state_t *s, samp_ws_t *w, const float *x, const double *q, int V, int n) {
  long counts[16] = {0};
  samp_result_t res;
  for (int i = 0; i < n; i++) {
    assert_int_equal(samp_sample(s, w, x, &res), 0);
    counts[res.token]++;
  }
  double chi = 0;
  for (int i = 0; i < V; i++) {
    if (q[i] == 0) {
      assert_int_equal(counts[i], 0);
      continue;
    }
    double e = q[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

static void draws_follow_the_distribution(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 7);
  enum { V = 8, N = 200000 };
  float x[V];
  for (int i = 0; i < V; i++) x[i] = (float)tu_uniform(&r, -2, 2);
  double q[V], z = 0;
  const float t = 0.8f;
  for (int i = 0; i < V; i++) z += q[i] = exp(x[i] / (double)t);
  for (int i = 0; i < V; i++) q[i] /= z;
  samp_params_t p = sampling(t, 0, 1.0f, 0, tu_next(&r));
  samp_state_t *s = samp_state_create(&p, V, NULL, 0);
  samp_ws_t *w = samp_ws_create(V);
  /* df 7, P(chi2 > 40.52) = 1e-6 */
  assert_true(chi_square(s, w, x, q, V, N) < 40.52);
  samp_state_destroy(s);
  /* top-k 4: the four best renormalised, the others never drawn */
  int order[V];
  for (int i = 0; i < V; i++) order[i] = i;
  for (int i = 0; i < V; i++)
    for (int j = i + 1; j < V; j++)
      if (x[order[j]] > x[order[i]]) { int k = order[i]; order[i] = order[j]; order[j] = k; }
  double qk[V] = {0}, zk = 0;
  for (int i = 0; i < 4; i++) zk += q[order[i]];
  for (int i = 0; i < 4; i++) qk[order[i]] = q[order[i]] / zk;
  p.top_k = 4;
  s = samp_state_create(&p, V, NULL, 0);
  /* df 3, P(chi2 > 30.66) = 1e-6 */
  assert_true(chi_square(s, w, x, qk, V, N) < 30.66);
  samp_state_destroy(s);
  samp_ws_destroy(w);
}

static void destroy_null_is_noop(void **state) {
  (void)state;
  samp_state_destroy(NULL);
  samp_ws_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_are_greedy_and_change_nothing),
      cmocka_unit_test(validation_rejects_bad_params),
      cmocka_unit_test(field_table_ranges_fit_the_sampler),
      cmocka_unit_test(greedy_breaks_ties_by_lowest_id),
      cmocka_unit_test(one_finite_logit_wins_none_is_an_error),
      cmocka_unit_test(edge_parameters),
      cmocka_unit_test(top_k_paths_agree),
      cmocka_unit_test(penalties_follow_their_formulas),
      cmocka_unit_test(seeds_reproduce_across_interleavings),
      cmocka_unit_test(logprobs_are_the_raw_log_softmax),
      cmocka_unit_test(draws_follow_the_distribution),
      cmocka_unit_test(destroy_null_is_noop),
  };
  return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
