/* tests/unit/test_cpu_ops.c — the CPU backend's dense operations
 * (kernels/cpu/ops_cpu.h: embed, rmsnorm, rope, swiglu, geglu, swiglu_oai, scale, add,
 * add_bias, gather_rows) against float64 references, with sizes that run both inline
 * and on the pool, in-place aliasing, and row-by-row batch invariance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops_cpu.h"
#include "kernels/kern.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

static kern_backend_t *be;

static int setup(void **state) {
  (void)state;
  be = kern_backend_create("cpu", 3);
  return be ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  kern_backend_destroy(be);
  return 0;
}

static float *fvec(size_t n) {
  float *p = malloc(n * sizeof(float));
  assert_non_null(p);
  return p;
}

/* Rows of every weight type come out exactly (the reference rounded once). */
static void embed_every_type(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 20);
  for (size_t t = 0; t < sizeof tq_weight_types / sizeof *tq_weight_types; t++) {
    kern_type_t type = tq_weight_types[t];
    int64_t be_ = kern_type_block_elems(type), cols = be_ == 1 ? 77 : (be_ == 32 ? 576 : 512), rows = 50;
    int64_t rb = kern_type_row_bytes(type, cols);
    uint8_t *data = malloc((size_t)(rows * rb));
    for (int64_t i = 0; i < rows; i++) tq_random_row(&r, type, data + i * rb, cols, 0);
    kern_weight_t w;
    assert_int_equal(be->weight_init(be, &w, type, rows, cols, data), 0);
    const int n = 300; /* enough rows for the pool */
    int32_t ids[300];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)tu_below(&r, (uint64_t)rows);
    float *y = fvec((size_t)(n * cols));
    double *want = malloc(sizeof(double) * (size_t)cols);
    tu_poison_f32(y, (size_t)(n * cols));
    be->embed(be, y, &w, ids, n);
    for (int i = 0; i < n; i++) {
      tq_ref_dequant_row(type, data + ids[i] * rb, want, cols);
      for (int64_t k = 0; k < cols; k++)
        if (!(y[i * cols + k] == (float)want[k]))
          fail_msg("%s row %d element %lld: %a vs %a", kern_type_name(type), ids[i], (long long)k, y[i * cols + k],
                   want[k]);
    }
    be->weight_release(be, &w);
    free(data), free(y), free(want);
  }
}

static void rmsnorm_matches_float64(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 21);
  const int dims[] = {1, 7, 64, 576, 1000};
  const int ns[] = {1, 3, 100};
  for (size_t a = 0; a < 5; a++)
    for (size_t b = 0; b < 3; b++) {
      int dim = dims[a], n = ns[b];
      float *x = fvec((size_t)(n * dim)), *y = fvec((size_t)(n * dim)), *w = fvec((size_t)dim);
      tu_fill_normal(&r, x, (size_t)(n * dim), 3.0f);
      tu_fill_normal(&r, w, (size_t)dim, 1.0f);
      tu_poison_f32(y, (size_t)(n * dim));
      be->rmsnorm(be, y, x, w, n, dim, 1e-5f);
      for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int k = 0; k < dim; k++) ss += (double)x[i * dim + k] * x[i * dim + k];
        double s = 1.0 / sqrt(ss / dim + 1e-5);
        /* the f32 sum of squares (dim/8 + 3 roundings, halved by the sqrt),
         * s rounded to f32, two products */
        double tol = ((dim / 8 + 3) / 2.0 + 4) * 0x1p-24;
        for (int k = 0; k < dim; k++) {
          double want = x[i * dim + k] * s * w[k];
          if (!(fabs(y[i * dim + k] - want) <= tol * fabs(want)))
            fail_msg("rmsnorm dim %d row %d element %d: %.9g vs %.9g", dim, i, k, y[i * dim + k], want);
        }
        /* one row alone gives the same bits */
        float alone[1000];
        be->rmsnorm(be, alone, x + i * dim, w, 1, dim, 1e-5f);
        assert_memory_equal(alone, y + i * dim, sizeof(float) * (size_t)dim);
      }
      be->rmsnorm(be, x, x, w, n, dim, 1e-5f); /* in place */
      assert_memory_equal(x, y, sizeof(float) * (size_t)(n * dim));
      free(x), free(y), free(w);
    }
}

/* RoPE against double angles and rotations, at positions up to past 128k. */
static void rope_matches_float64(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 22);
  const int n = 40, n_heads = 5, head_dim = 64;
  const int rot_dims[] = {64, 32};
  for (int neox = 0; neox < 2; neox++)
    for (int rd = 0; rd < 2; rd++) {
      int rot = rot_dims[rd], half = rot / 2;
      float inv[32];
      for (int p = 0; p < half; p++) inv[p] = (float)pow(100000.0, -2.0 * p / rot);
      int32_t pos[40];
      for (int i = 0; i < n; i++) pos[i] = i < 8 ? i : (int32_t)tu_below(&r, 140000);
      size_t count = (size_t)n * n_heads * head_dim;
      float *x = fvec(count), *orig = fvec(count);
      tu_fill_normal(&r, x, count, 1.0f);
      memcpy(orig, x, count * sizeof(float));
      be->rope(be, x, pos, n, n_heads, head_dim, rot, inv, neox);
      for (int i = 0; i < n; i++)
        for (int h = 0; h < n_heads; h++) {
          const float *o = orig + ((size_t)i * n_heads + h) * head_dim;
          const float *g = x + ((size_t)i * n_heads + h) * head_dim;
          for (int p = 0; p < half; p++) {
            int i0 = neox ? p : 2 * p, i1 = neox ? p + half : 2 * p + 1;
            double ang = (double)pos[i] * inv[p], c = cos(ang), s = sin(ang);
            double w0 = o[i0] * c - o[i1] * s, w1 = o[i0] * s + o[i1] * c;
            double tol = 4 * 0x1p-24 * (fabs(o[i0]) + fabs(o[i1]));
            if (!(fabs(g[i0] - w0) <= tol && fabs(g[i1] - w1) <= tol))
              fail_msg("rope neox %d rot %d pos %d pair %d: (%.9g, %.9g) vs (%.9g, %.9g)", neox, rot, pos[i], p, g[i0],
                       g[i1], w0, w1);
          }
          for (int k = rot; k < head_dim; k++) assert_true(g[k] == o[k]); /* past rot_dim: untouched */
        }
      free(x), free(orig);
    }
}

static void swiglu_matches_float64(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 23);
  const int64_t counts[] = {1, 7, 8, 13, 1000, 70001};
  for (size_t c = 0; c < 6; c++) {
    int64_t n = counts[c];
    float *g = fvec((size_t)n), *u = fvec((size_t)n), *y = fvec((size_t)n), *ys = fvec((size_t)n);
    for (int64_t i = 0; i < n; i++) {
      g[i] = (float)(i % 5 == 0 ? tu_uniform(&r, -100, 100) : tu_normal(&r) * 4);
      u[i] = (float)tu_normal(&r);
    }
    if (n > 4) g[3] = 0.0f, g[4] = -0.0f;
    tu_poison_f32(y, (size_t)n);
    be->swiglu(be, y, g, u, n);
    kern_cpu__swiglu_scalar(ys, g, u, n);
    assert_memory_equal(y, ys, sizeof(float) * (size_t)n); /* SIMD == portable */
    for (int64_t i = 0; i < n; i++) {
      double want = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
      if (!(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-30))
        fail_msg("swiglu g %.9g u %.9g: %.9g vs %.9g", g[i], u[i], y[i], want);
    }
    be->swiglu(be, g, g, u, n); /* in place */
    assert_memory_equal(g, y, sizeof(float) * (size_t)n);
    free(g), free(u), free(y), free(ys);
  }
  /* the exp itself: a few ulp over its whole range */
  for (int i = 0; i < 100000; i++) {
    float x = (float)tu_uniform(&r, -87.3, 88.0);
    double want = exp((double)x);
    assert_true(fabs(kern_cpu_expf(x) - want) <= 3e-7 * want);
  }
  assert_true(isnan(kern_cpu_expf(NAN) * NAN));
  assert_true(kern_cpu_expf(-1000.0f) > 0 && kern_cpu_expf(-1000.0f) < 2e-38f);
  assert_true(isfinite(kern_cpu_expf(1000.0f)));
}

static void add_bias_gather_exact(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 24);
  const int64_t n = 50000; /* several pool chunks */
  float *a = fvec((size_t)n), *b = fvec((size_t)n), *y = fvec((size_t)n);
  tu_fill_normal(&r, a, (size_t)n, 1.0f);
  tu_fill_normal(&r, b, (size_t)n, 1.0f);
  tu_poison_f32(y, (size_t)n);
  be->add(be, y, a, b, n);
  for (int64_t i = 0; i < n; i++) assert_true(y[i] == (float)((double)a[i] + b[i]));
  be->add(be, a, a, b, n); /* y aliases a */
  assert_memory_equal(a, y, sizeof(float) * (size_t)n);
  float b_old[5];
  memcpy(b_old, b, sizeof b_old);
  be->add(be, b, y, b, 5); /* y aliases b, a short call */
  for (int i = 0; i < 5; i++) assert_true(b[i] == (float)((double)y[i] + b_old[i]));

  const int rows = 100, dim = 500;
  float *m = fvec((size_t)(rows * dim)), *m0 = fvec((size_t)(rows * dim)), *bias = fvec((size_t)dim);
  tu_fill_normal(&r, m, (size_t)(rows * dim), 1.0f);
  tu_fill_normal(&r, bias, (size_t)dim, 1.0f);
  memcpy(m0, m, sizeof(float) * (size_t)(rows * dim));
  be->add_bias(be, m, bias, rows, dim);
  for (int i = 0; i < rows; i++)
    for (int k = 0; k < dim; k++) assert_true(m[i * dim + k] == m0[i * dim + k] + bias[k]);

  int32_t idx[7] = {99, 0, 5, 5, 42, 98, 1};
  float *g = fvec((size_t)(7 * dim));
  tu_poison_f32(g, (size_t)(7 * dim));
  be->gather_rows(be, g, m, idx, 7, dim);
  for (int i = 0; i < 7; i++) assert_memory_equal(g + i * dim, m + idx[i] * dim, sizeof(float) * (size_t)dim);
  free(a), free(b), free(y), free(m), free(m0), free(bias), free(g);
}

/* Gemma's GeGLU (PyTorch gelu approximate="tanh", written here from its
 * formula in float64) and the scale, on the pool and in place. */
static void geglu_scale_match_float64(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 29);
  const int64_t counts[] = {1, 13, 70001};
  for (size_t c = 0; c < 3; c++) {
    const int64_t n = counts[c];
    float *g = fvec((size_t)n), *u = fvec((size_t)n), *y = fvec((size_t)n);
    for (int64_t i = 0; i < n; i++) {
      g[i] = (float)(i % 5 == 0 ? tu_uniform(&r, -30, 30) : tu_normal(&r) * 3);
      u[i] = (float)tu_normal(&r);
    }
    tu_poison_f32(y, (size_t)n);
    be->geglu(be, y, g, u, n);
    for (int64_t i = 0; i < n; i++) {
      const double x = g[i];
      const double want = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
      if (!(fabs(y[i] - want) <= 2e-6 * fabs(u[i]) * (fabs(x) + 1)))
        fail_msg("geglu g %.9g u %.9g: %.9g vs %.9g", g[i], u[i], y[i], want);
    }
    be->geglu(be, g, g, u, n); /* in place */
    assert_memory_equal(g, y, sizeof(float) * (size_t)n);
    be->scale(be, y, u, 8.0f, n);
    for (int64_t i = 0; i < n; i++) assert_true(y[i] == u[i] * 8.0f);
    be->scale(be, u, u, 0.5f, n); /* in place */
    for (int64_t i = 0; i < n; i++) assert_true(u[i] == y[i] / 16.0f);
    free(g), free(u), free(y);
  }
}

/* gpt-oss's clamped SwiGLU (Hugging Face's GptOssExperts._apply_gate, written
 * here in float64): values on both sides of the clamps (±7), on the pool and
 * in place. */
static void swiglu_oai_matches_float64(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 31);
  const int64_t counts[] = {1, 13, 70001};
  const double alpha = 1.702, limit = 7.0;
  for (size_t c = 0; c < 3; c++) {
    const int64_t n = counts[c];
    float *g = fvec((size_t)n), *u = fvec((size_t)n), *y = fvec((size_t)n);
    for (int64_t i = 0; i < n; i++) {
      g[i] = (float)(i % 3 == 0 ? tu_uniform(&r, -40, 40) : tu_normal(&r) * 4);
      u[i] = (float)(i % 4 == 0 ? tu_uniform(&r, -40, 40) : tu_normal(&r) * 4);
    }
    tu_poison_f32(y, (size_t)n);
    be->swiglu_oai(be, y, g, u, n, (float)alpha, (float)limit);
    for (int64_t i = 0; i < n; i++) {
      const double gate = g[i] < limit ? g[i] : limit;
      const double up = u[i] > limit ? limit : u[i] < -limit ? -limit : u[i];
      const double want = (up + 1.0) * gate / (1.0 + exp(-alpha * gate));
      if (!(fabs(y[i] - want) <= 2e-6 * (fabs(want) + 1e-3)))
        fail_msg("swiglu_oai g %.9g u %.9g: %.9g vs %.9g", g[i], u[i], y[i], want);
    }
    be->swiglu_oai(be, g, g, u, n, (float)alpha, (float)limit); /* in place */
    assert_memory_equal(g, y, sizeof(float) * (size_t)n);
    free(g), free(u), free(y);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(embed_every_type),
      cmocka_unit_test(rmsnorm_matches_float64),
      cmocka_unit_test(rope_matches_float64),
      cmocka_unit_test(swiglu_matches_float64),
      cmocka_unit_test(geglu_scale_match_float64),
      cmocka_unit_test(swiglu_oai_matches_float64),
      cmocka_unit_test(add_bias_gather_exact),
  };
  return cmocka_run_group_tests_name("cpu_ops", tests, setup, teardown);
}
