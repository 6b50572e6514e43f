/* tests/unit/test_kern_join.c — the layout of a joined weight
 * (kernels/kern_join.h, kern.h weight_join): parts stacked by rows, part i
 * from row (= output column) Σ_{j<i} rows_j, which must be the layout of a
 * GGUF tensor that stores the parts stacked (phi3's attn_qkv, llama.cpp's
 * fused QKV) for every weight type; the shapes of a dense model and of
 * Gemma 4's per-layer head sizes; and the refusals. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kern_join.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

static kern_weight_t shape(kern_type_t type, int64_t rows, int64_t cols) {
  return (kern_weight_t){.type = type, .rows = rows, .cols = cols};
}

/* For every weight type: Q, K, V parts of 6, 2 and 3 rows of 256 random
 * elements. Placing each part's values at its plan offset gives exactly
 * the values of the stacked file tensor [Wq; Wk; Wv] read as one matrix
 * (the float64 reference dequantization, row by row). */
static void every_type_stacks_like_the_file(void **state) {
  (void)state;
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  enum { COLS = 256, N = 3 };
  const int64_t rows[N] = {6, 2, 3};
  for (size_t t = 0; t < sizeof tq_weight_types / sizeof tq_weight_types[0]; t++) {
    const kern_type_t type = tq_weight_types[t];
    const int64_t rb = kern_type_row_bytes(type, COLS);
    assert_true(rb > 0);
    kern_weight_t w[N];
    const kern_weight_t *parts[N];
    uint8_t *raw[N];
    for (int i = 0; i < N; i++) {
      w[i] = shape(type, rows[i], COLS);
      parts[i] = &w[i];
      raw[i] = malloc((size_t)(rows[i] * rb));
      for (int64_t r = 0; r < rows[i]; r++) tq_random_row(&rng, type, raw[i] + r * rb, COLS, 1);
    }
    kern_join_plan_t p;
    char err[160];
    assert_int_equal(kern_join_plan(&p, parts, N, err, sizeof err), 0);
    assert_int_equal(p.n, N);
    assert_int_equal(p.rows, 11);
    assert_int_equal(p.cols, COLS);
    assert_int_equal(p.type, type);
    /* the file's stacked tensor: the parts' raw rows one after another */
    uint8_t *file = malloc((size_t)(p.rows * rb));
    for (int i = 0, at = 0; i < N; at += (int)rows[i], i++) memcpy(file + at * rb, raw[i], (size_t)(rows[i] * rb));
    double *want = malloc((size_t)(p.rows * COLS) * sizeof *want), *got = malloc((size_t)(p.rows * COLS) * sizeof *got);
    for (int64_t r = 0; r < p.rows; r++) tq_ref_dequant_row(type, file + r * rb, want + r * COLS, COLS);
    for (int64_t e = 0; e < p.rows * COLS; e++) got[e] = -12345.0; /* any element left out shows */
    for (int i = 0; i < N; i++)
      for (int64_t r = 0; r < rows[i]; r++) tq_ref_dequant_row(type, raw[i] + r * rb, got + (p.row0[i] + r) * COLS, COLS);
    assert_memory_equal(got, want, (size_t)(p.rows * COLS) * sizeof *got);
    free(want);
    free(got);
    free(file);
    for (int i = 0; i < N; i++) free(raw[i]);
  }
}

/* Output columns of each part: Llama-3-8B's QKV and gate/up, and Gemma 4's
 * per-layer head sizes (sliding layers 8 × 256 query, 2 × 256 KV; full
 * layers 8 × 512 query, 1 × 512 KV) — one plan per layer shape. */
static void model_shapes(void **state) {
  (void)state;
  static const struct {
    int64_t q, k, v, cols;
  } qkv[] = {{4096, 1024, 1024, 4096}, {8 * 256, 2 * 256, 2 * 256, 2560}, {8 * 512, 512, 512, 2560}};
  char err[160];
  for (size_t i = 0; i < sizeof qkv / sizeof qkv[0]; i++) {
    kern_weight_t q = shape(KERN_Q4_K, qkv[i].q, qkv[i].cols), k = shape(KERN_Q4_K, qkv[i].k, qkv[i].cols),
                  v = shape(KERN_Q6_K, qkv[i].v, qkv[i].cols); /* Q4_K_M keeps V at Q6_K */
    const kern_weight_t *parts[3] = {&q, &k, &v};
    kern_join_plan_t p;
    assert_int_equal(kern_join_plan(&p, parts, 3, err, sizeof err), 0);
    assert_int_equal(p.row0[0], 0);
    assert_int_equal(p.row0[1], qkv[i].q);
    assert_int_equal(p.row0[2], qkv[i].q + qkv[i].k);
    assert_int_equal(p.rows, qkv[i].q + qkv[i].k + qkv[i].v);
    assert_int_equal(p.type, KERN_BF16); /* mixed types: the backend's one element type */
  }
  kern_weight_t g = shape(KERN_Q8_0, 14336, 4096), u = shape(KERN_Q8_0, 14336, 4096);
  const kern_weight_t *gu[2] = {&g, &u};
  kern_join_plan_t p;
  assert_int_equal(kern_join_plan(&p, gu, 2, err, sizeof err), 0);
  assert_int_equal(p.row0[1], 14336);
  assert_int_equal(p.rows, 2 * 14336);
  assert_int_equal(p.type, KERN_Q8_0);
}

static void refusals(void **state) {
  (void)state;
  char err[160];
  kern_join_plan_t p;
  kern_weight_t a = shape(KERN_F16, 64, 256), b = shape(KERN_F16, 64, 512), z = shape(KERN_F16, 0, 256);
  const kern_weight_t *two[2] = {&a, &b};
  assert_int_equal(kern_join_plan(&p, two, 2, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "part 1 has 512 input features, part 0 256"));
  const kern_weight_t *one[1] = {&a};
  assert_int_equal(kern_join_plan(&p, one, 1, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "1 parts"));
  const kern_weight_t *five[5] = {&a, &a, &a, &a, &a};
  assert_int_equal(kern_join_plan(&p, five, 5, err, sizeof err), -EINVAL);
  const kern_weight_t *empty[2] = {&a, &z};
  assert_int_equal(kern_join_plan(&p, empty, 2, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "part 1 is 0 x 256"));
  kern_weight_t big = shape(KERN_F16, INT_MAX - 10, 32), more = shape(KERN_F16, 11, 32);
  const kern_weight_t *over[2] = {&big, &more};
  assert_int_equal(kern_join_plan(&p, over, 2, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "rows in all"));
  kern_weight_t wide = shape(KERN_F16, 1 << 20, (int64_t)1 << 42);
  const kern_weight_t *huge[2] = {&wide, &wide};
  assert_int_equal(kern_join_plan(&p, huge, 2, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "too large"));
  more.rows = 10; /* exactly INT_MAX rows: joins */
  assert_int_equal(kern_join_plan(&p, over, 2, err, sizeof err), 0);
  assert_int_equal(p.rows, INT_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_type_stacks_like_the_file),
      cmocka_unit_test(model_shapes),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
