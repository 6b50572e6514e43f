/* tests/unit/test_matmul.c — the CPU backend's weights and matmul
 * (kernels/cpu/matmul_cpu.h) for every weight type:
 *   - against a float64 reference (tests/unit/quant_ref.c dequantization,
 *     double dot products);
 *   - bit for bit against kern_cpu_matmul_ref, the portable scalar path (so
 *     the AVX2 tiles, the fused tiles and the threaded driver all compute
 *     the documented arithmetic);
 *   - bitwise batch invariance: a row's outputs do not depend on the other
 *     rows of the call, its position in it, n, or the thread count, in both
 *     precisions (the fast path's own checks: test_matmul_q8). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

#define N_TYPES (sizeof tq_weight_types / sizeof *tq_weight_types)

/* A random weight of `type` with moderate scales (data owned by the caller). */
static uint8_t *random_weight(tu_rng_t *r, kern_type_t type, int64_t rows, int64_t cols) {
  int64_t rb = kern_type_row_bytes(type, cols);
  uint8_t *data = malloc((size_t)(rows * rb));
  for (int64_t i = 0; i < rows; i++) tq_random_row(r, type, data + i * rb, cols, 1);
  return data;
}

/* A multiple of the type's block size near `want` (at least one block). */
static int64_t fit_cols(kern_type_t type, int64_t want) {
  int64_t be = kern_type_block_elems(type);
  return want < be ? be : want / be * be;
}

/* Error bounds. The dequantized weights are exact (test_quant), so the only
 * error is the f32 arithmetic: each output is a chain of K/8 FMAs per lane
 * (K = cols rounded up to 8) and 3 additions, so |y - exact| <=
 * (K/8 + 3)·2^-24·sum_k |w_k x_k| (rounding-error analysis of a sum;
 * rigorous, never flaky). Wrong elements or scales give errors of the order
 * of the sum itself. Over a whole output, the rel L2 against the float64
 * result is typically ~2^-24·sqrt(K/8); 1e-5 bounds it at these widths
 * except where cancellation makes |y| tiny, which the per-output bound
 * covers. */
#define MATMUL_REL_TOL 1e-5

static void check_shape(kern_backend_t *be, tu_rng_t *r, kern_type_t type, int64_t rows, int64_t cols, int n) {
  uint8_t *data = random_weight(r, type, rows, cols);
  kern_weight_t w;
  assert_int_equal(be->weight_init(be, &w, type, rows, cols, data), 0);
  float *x = malloc(sizeof(float) * (size_t)(n * cols));
  float *y = malloc(sizeof(float) * (size_t)(n * rows)), *yref = malloc(sizeof(float) * (size_t)(n * rows));
  double *want = malloc(sizeof(double) * (size_t)(n * rows)), *wrow = malloc(sizeof(double) * (size_t)cols);
  double *mag = malloc(sizeof(double) * (size_t)(n * rows));
  tu_fill_normal(r, x, (size_t)(n * cols), 1.0f);
  tu_poison_f32(y, (size_t)(n * rows));
  tu_poison_f32(yref, (size_t)(n * rows));
  be->matmul(be, y, x, &w, n);
  kern_cpu_matmul_ref(yref, x, &w, n);
  int64_t rb = kern_type_row_bytes(type, cols);
  for (int64_t c = 0; c < rows; c++) {
    tq_ref_dequant_row(type, data + c * rb, wrow, cols);
    for (int i = 0; i < n; i++) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < cols; k++) {
        s += wrow[k] * x[i * cols + k];
        m += fabs(wrow[k] * x[i * cols + k]);
      }
      want[i * rows + c] = s;
      mag[i * rows + c] = m;
    }
  }
  double bound = (double)((cols + 7) / 8 + 3) * 0x1p-24;
  for (int64_t i = 0; i < n * rows; i++)
    if (!(fabs(y[i] - want[i]) <= bound * mag[i]))
      fail_msg("%s %lld x %lld, n %d: output %lld = %.9g, want %.9g (bound %.3g)", kern_type_name(type),
               (long long)rows, (long long)cols, n, (long long)i, y[i], want[i], bound * mag[i]);
  double err = tu_rel_l2(y, want, (size_t)(n * rows));
  if (n * rows >= 32 && !(err < MATMUL_REL_TOL))
    fail_msg("%s %lld x %lld, n %d: rel L2 %.3g", kern_type_name(type), (long long)rows, (long long)cols, n, err);
  if (memcmp(y, yref, sizeof(float) * (size_t)(n * rows)) != 0)
    fail_msg("%s %lld x %lld, n %d: differs from the portable path", kern_type_name(type), (long long)rows,
             (long long)cols, n);
  be->weight_release(be, &w);
  free(data), free(x), free(y), free(yref), free(want), free(wrow), free(mag);
}

static void matches_float64_and_portable(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 10);
  kern_backend_t *be = kern_backend_create("cpu", 3);
  assert_non_null(be);
  const int64_t rows[] = {1, 8, 13, 40};
  const int64_t cols[] = {1, 45, 256, 576, 1283, 1536};
  const int ns[] = {1, 2, 3, 4, 7};
  for (size_t t = 0; t < N_TYPES; t++)
    for (size_t a = 0; a < sizeof rows / sizeof *rows; a++)
      for (size_t b = 0; b < sizeof cols / sizeof *cols; b++)
        for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
          kern_type_t type = tq_weight_types[t];
          if (cols[b] > 576 && (rows[a] > 13 || ns[c] > 3)) continue; /* keep the float64 loop short */
          check_shape(be, &r, type, rows[a], fit_cols(type, cols[b]), ns[c]);
        }
  kern_backend_destroy(be);
}

/* Rows of x alone (n = 1), then in every batch size from 2 to n_x at several
 * offsets, on backends of 1, 2 and 3 threads: memcmp-equal rows. */
static void check_invariance(tu_rng_t *r, kern_backend_t *bes[3], kern_type_t type, int64_t rows, int64_t cols,
                             int n_x) {
  uint8_t *data = random_weight(r, type, rows, cols);
  float *x = malloc(sizeof(float) * (size_t)(n_x * cols));
  float *alone = malloc(sizeof(float) * (size_t)(n_x * rows)), *y = malloc(sizeof(float) * (size_t)(n_x * rows));
  tu_fill_normal(r, x, (size_t)(n_x * cols), 1.0f);
  kern_weight_t w[3];
  for (int b = 0; b < 3; b++) assert_int_equal(bes[b]->weight_init(bes[b], &w[b], type, rows, cols, data), 0);
  tu_poison_f32(alone, (size_t)(n_x * rows));
  for (int i = 0; i < n_x; i++) bes[0]->matmul(bes[0], alone + i * rows, x + i * cols, &w[0], 1);
  for (int s = 1; s <= n_x; s++) {
    int offsets[3] = {0, n_x - s, (n_x - s) / 2};
    for (int o = 0; o < 3; o++) {
      int b = (s + o) % 3, off = offsets[o];
      tu_poison_f32(y, (size_t)(s * rows));
      bes[b]->matmul(bes[b], y, x + off * cols, &w[b], s);
      for (int i = 0; i < s; i++)
        if (memcmp(y + i * rows, alone + (off + i) * rows, sizeof(float) * (size_t)rows) != 0)
          fail_msg("%s %lld x %lld: row %d differs in a batch of %d at offset %d (%d threads)", kern_type_name(type),
                   (long long)rows, (long long)cols, off + i, s, off, b + 1);
    }
  }
  for (int b = 0; b < 3; b++) bes[b]->weight_release(bes[b], &w[b]);
  free(data), free(x), free(alone), free(y);
}

static void batch_invariant(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 11);
  for (int p = KERN_PRECISION_EXACT; p <= KERN_PRECISION_FAST; p++) { /* both matmul arithmetics */
    kern_backend_t *bes[3];
    for (int b = 0; b < 3; b++) {
      const kern_backend_opts_t o = {.n_threads = b + 1, .precision = (kern_precision_t)p};
      assert_non_null(bes[b] = kern_backend_create_opts("cpu", &o));
    }
    for (size_t t = 0; t < N_TYPES; t++) check_invariance(&r, bes, tq_weight_types[t], 37, fit_cols(tq_weight_types[t], 512), 37);
    /* wide rows: several activation row blocks per call (L2 blocking) and
     * K in several chunks, also with a zero-padded tail; many rows (several
     * fast-path row blocks) */
    check_invariance(&r, bes, KERN_Q4_K, 19, 8192, 37);
    check_invariance(&r, bes, KERN_F16, 11, 8200, 37);
    check_invariance(&r, bes, KERN_F32, 25, 1001, 37);
    check_invariance(&r, bes, KERN_Q4_1, 29, 576, 150);
    for (int b = 0; b < 3; b++) kern_backend_destroy(bes[b]);
  }
}

static void weight_init_rejects_bad_input(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  uint8_t data[1024] = {0};
  kern_weight_t w;
  assert_int_equal(be->weight_init(be, &w, KERN_Q8_1, 1, 32, data), -EINVAL);          /* activations only */
  assert_int_equal(be->weight_init(be, &w, (kern_type_t)10, 1, 256, data), -EINVAL);    /* Q2_K */
  assert_int_equal(be->weight_init(be, &w, KERN_Q4_1, 1, 48, data), -EINVAL);           /* not whole blocks */
  assert_int_equal(be->weight_init(be, &w, KERN_Q6_K, 1, 128, data), -EINVAL);
  assert_int_equal(be->weight_init(be, &w, KERN_F32, 0, 8, data), -EINVAL);             /* no rows */
  assert_int_equal(be->weight_init(be, &w, KERN_F32, 4, 0, data), -EINVAL);
  assert_int_equal(be->weight_init(be, &w, KERN_F32, INT64_MAX / 2, 64, data), -EINVAL); /* size overflows */
  assert_int_equal(be->weight_init(be, &w, KERN_F32, 4, 8, NULL), -EINVAL);
  assert_int_equal(be->weight_init(be, &w, KERN_Q4_1, 2, 64, data), 0);
  assert_int_equal(w.type, KERN_Q4_1);
  assert_int_equal(w.rows, 2);
  assert_int_equal(w.cols, 64);
  be->weight_release(be, &w);
  kern_backend_destroy(be);
}

int main(void) {
  fprintf(stderr, "matmul path: %s\n", kern_cpu_simd() ? "AVX2" : "portable");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(matches_float64_and_portable),
      cmocka_unit_test(batch_invariant),
      cmocka_unit_test(weight_init_rejects_bad_input),
  };
  return cmocka_run_group_tests_name("matmul", tests, NULL, NULL);
}
