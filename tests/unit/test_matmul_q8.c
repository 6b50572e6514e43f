/* tests/unit/test_matmul_q8.c — the fast matmul (int16 activations,
 * kernels/cpu/matmul_q8.h), for every weight type it serves:
 *   - activation quantization against float64 (error at most half a step,
 *     the documented scale and sum) and AVX2 == portable bit for bit, with
 *     zero, subnormal, huge, infinite and NaN blocks;
 *   - each kernel against a float64 dot product of the same integers and
 *     scales, on random blocks (moderate and extreme f16 scales), ragged
 *     row counts and batch sizes, one block to many;
 *   - the threaded AVX2 driver equal to the portable scalar path bit for
 *     bit;
 *   - normalized MSE of fast against exact (f32) outputs <= 5e-4 on random
 *     activations, plain and with outliers;
 *   - the types and widths without a fast kernel give the exact path's bits.
 * Batch and thread invariance of the fast path: test_matmul (both
 * precisions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

static const kern_type_t fast_types[] = {KERN_Q4_0, KERN_Q4_1, KERN_Q5_0, KERN_Q5_1,
                                         KERN_Q8_0, KERN_Q4_K, KERN_Q5_K, KERN_Q6_K, KERN_MXFP4};
#define N_FAST (sizeof fast_types / sizeof *fast_types)
#define NMSE_MAX 5e-4

static kern_backend_t *fast_backend(int threads) {
  const kern_backend_opts_t o = {.n_threads = threads, .precision = KERN_PRECISION_FAST};
  kern_backend_t *be = kern_backend_create_opts("cpu", &o);
  assert_non_null(be);
  assert_int_equal(be->precision, KERN_PRECISION_FAST);
  return be;
}

static uint8_t *random_weight(tu_rng_t *r, kern_type_t type, int64_t rows, int64_t cols, int moderate) {
  int64_t rb = kern_type_row_bytes(type, cols);
  uint8_t *data = malloc((size_t)(rows * rb));
  for (int64_t i = 0; i < rows; i++) tq_random_row(r, type, data + i * rb, cols, moderate);
  return data;
}

static void check_quantized(const float *x, const kern_cpu_q8a_t *q, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; b++) {
    double amax = 0;
    int finite = 1;
    for (int e = 0; e < 32; e++) {
      double v = x[32 * b + e];
      if (isinf(v)) finite = 0;
      if (!isnan(v) && fabs(v) > amax) amax = fabs(v);
    }
    int sum = 0;
    for (int e = 0; e < 32; e++) sum += q[b].q[e];
    if (!finite || amax < FLT_MIN) {
      assert_true(q[b].d == 0.0f && q[b].s == 0.0f && sum == 0);
      continue;
    }
    const double sub = 32768 * 0x1p-149; /* d may be subnormal */
    assert_true(fabs(q[b].d * 32767.0 - amax) <= amax * 0x1p-22 + sub);
    assert_true((double)q[b].s == (double)(q[b].d * (float)sum));
    for (int e = 0; e < 32; e++) {
      double v = x[32 * b + e];
      assert_true(q[b].q[e] >= -32767 && q[b].q[e] <= 32767);
      if (isnan(v)) assert_int_equal(q[b].q[e], -32767);
      else if (!(fabs(v - q[b].d * (double)q[b].q[e]) <= 0.5 * q[b].d + fabs(v) * 0x1p-21 + sub))
        fail_msg("block %lld element %d: %.9g quantized to %d x %.9g", (long long)b, e, v, q[b].q[e], q[b].d);
    }
  }
}

static void quantize_rows(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 40);
  const int64_t cols = 32 * 64;
  float *x = malloc(sizeof(float) * cols);
  kern_cpu_q8a_t *a = malloc(sizeof *a * (cols / 32)), *b = malloc(sizeof *b * (cols / 32));
  for (int rep = 0; rep < 200; rep++) {
    tu_fill_normal(&r, x, (size_t)cols, (float)pow(10.0, tu_uniform(&r, -30, 30)));
    for (int64_t blk = 0; blk < cols / 32; blk++) { /* a different kind of block each time */
      float *p = x + 32 * blk;
      switch (tu_below(&r, 8)) {
      case 0: memset(p, 0, 32 * sizeof *p); break;
      case 1: for (int e = 0; e < 32; e++) p[e] = (float)(tu_normal(&r) * 1e-39); break; /* subnormal */
      case 2: p[tu_below(&r, 32)] = (float)tu_uniform(&r, -3.4e38, 3.4e38); break; /* huge, in range */
      case 3: p[tu_below(&r, 32)] = tu_below(&r, 2) ? INFINITY : -INFINITY; break;
      case 4: p[tu_below(&r, 32)] = NAN; break;
      case 5: p[tu_below(&r, 32)] *= 1000.0f; break; /* an outlier */
      default: break;
      }
    }
    kern_cpu_q8_quantize_row_scalar(x, a, cols);
    memset(b, 0x55, sizeof *b * (cols / 32));
    kern_cpu_q8_quantize_row(x, b, cols);
    if (memcmp(a, b, sizeof *a * (cols / 32)) != 0) fail_msg("quantization: AVX2 and portable differ (rep %d)", rep);
    check_quantized(x, a, cols);
  }
  free(x), free(a), free(b);
}

/* y from the fast backend, the portable path, and float64 of the same
 * integers: each output within (units + 4)·2^-22 of the magnitude of its
 * terms (four times the f32 rounding of the per-lane chain, the scale
 * products and the final sum). */
static void check_shape(kern_backend_t *be, tu_rng_t *r, kern_type_t type, int64_t rows, int64_t cols, int n,
                        int moderate) {
  uint8_t *data = random_weight(r, type, rows, cols, moderate);
  kern_weight_t w;
  assert_int_equal(be->weight_init(be, &w, type, rows, cols, data), 0);
  int64_t nb = cols / 32, rb = kern_type_row_bytes(type, cols);
  float *x = malloc(sizeof(float) * (size_t)(n * cols));
  float *y = malloc(sizeof(float) * (size_t)(n * rows)), *yref = malloc(sizeof(float) * (size_t)(n * rows));
  double *wrow = malloc(sizeof(double) * (size_t)cols);
  kern_cpu_q8a_t *xq = malloc(sizeof *xq * (size_t)(n * nb));
  tu_fill_normal(r, x, (size_t)(n * cols), moderate ? 1.0f : 1e3f);
  for (int i = 0; i < n; i++) kern_cpu_q8_quantize_row_scalar(x + i * cols, xq + i * nb, cols);
  tu_poison_f32(y, (size_t)(n * rows));
  tu_poison_f32(yref, (size_t)(n * rows));
  be->matmul(be, y, x, &w, n);
  kern_cpu_matmul_q8_ref(yref, x, &w, n);
  if (memcmp(y, yref, sizeof(float) * (size_t)(n * rows)) != 0)
    fail_msg("%s %lld x %lld, n %d: differs from the portable path", kern_type_name(type), (long long)rows,
             (long long)cols, n);
  for (int64_t c = 0; c < rows; c++) {
    tq_ref_dequant_row(type, data + c * rb, wrow, cols);
    for (int i = 0; i < n; i++) {
      double s = 0, mag = 0;
      for (int64_t b = 0; b < nb; b++) {
        double wmax = 0, xsum = 0;
        for (int e = 0; e < 32; e++) {
          const kern_cpu_q8a_t *qb = &xq[i * nb + b];
          double xv = (double)qb->d * qb->q[e], t = wrow[32 * b + e] * xv;
          s += t;
          mag += fabs(t);
          wmax = fmax(wmax, fabs(wrow[32 * b + e]));
          xsum += fabs(xv);
        }
        mag += 3 * wmax * xsum; /* the offset split: |dw·w| + |mw| <= 3·max |element| for these blocks */
      }
      double got = y[i * rows + c], bound = (double)(nb + 4) * 0x1p-22 * mag;
      if (!(fabs(got - s) <= bound))
        fail_msg("%s %lld x %lld, n %d: output [%d, %lld] = %.9g, float64 %.9g (bound %.3g)", kern_type_name(type),
                 (long long)rows, (long long)cols, n, i, (long long)c, got, s, bound);
    }
  }
  be->weight_release(be, &w);
  free(data), free(x), free(y), free(yref), free(wrow), free(xq);
}

static int64_t fit(kern_type_t type, int64_t want) {
  int64_t be = kern_type_block_elems(type);
  return want < be ? be : want / be * be;
}

static void kernels_match_float64_and_portable(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 41);
  kern_backend_t *be = fast_backend(3);
  const int64_t rows[] = {1, 5, 13, 40};
  const int64_t cols[] = {32, 96, 576, 1536};
  const int ns[] = {1, 2, 3, 4, 5, 9};
  for (size_t t = 0; t < N_FAST; t++)
    for (size_t a = 0; a < sizeof rows / sizeof *rows; a++)
      for (size_t b = 0; b < sizeof cols / sizeof *cols; b++)
        for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
          if (cols[b] > 576 && (rows[a] > 13 || ns[c] > 3)) continue; /* keep the float64 loop short */
          check_shape(be, &r, fast_types[t], rows[a], fit(fast_types[t], cols[b]), ns[c], (int)((a + b + c) % 3 != 0));
        }
  kern_backend_destroy(be);
}

/* sum (fast - exact)² / sum exact² over a whole output. */
static double nmse(const float *fast, const float *exact, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)fast[i] - exact[i]) * ((double)fast[i] - exact[i]);
    den += (double)exact[i] * exact[i];
  }
  return num / den;
}

static void nmse_against_exact(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 42);
  kern_backend_t *be = fast_backend(2);
  const int64_t rows = 64, cols = 1536;
  const int n = 8;
  float *x = malloc(sizeof(float) * n * cols), *y = malloc(sizeof(float) * n * rows), *ye = malloc(sizeof(float) * n * rows);
  for (size_t t = 0; t < N_FAST; t++)
    for (int outliers = 0; outliers < 2; outliers++) {
      uint8_t *data = random_weight(&r, fast_types[t], rows, cols, 1);
      kern_weight_t w;
      assert_int_equal(be->weight_init(be, &w, fast_types[t], rows, cols, data), 0);
      tu_fill_normal(&r, x, (size_t)(n * cols), 1.0f);
      if (outliers) /* a few channels 30x larger, as in real transformer activations */
        for (int i = 0; i < n; i++)
          for (int k = 0; k < cols; k += 97) x[i * cols + k] *= 30.0f;
      be->matmul(be, y, x, &w, n);
      kern_cpu_matmul_ref(ye, x, &w, n);
      double e = nmse(y, ye, (size_t)(n * rows));
      printf("%s%s: normalized MSE fast vs exact %.2e\n", kern_type_name(fast_types[t]), outliers ? " (outliers)" : "", e);
      if (!(e <= NMSE_MAX)) fail_msg("%s: normalized MSE %.3g > %.1g", kern_type_name(fast_types[t]), e, NMSE_MAX);
      be->weight_release(be, &w);
      free(data);
    }
  free(x), free(y), free(ye);
  kern_backend_destroy(be);
}

/* Prefill-sized batches through the threaded driver, bit for bit the
 * portable path: at a width of 4096 the row blocks hold about 25 rows, so
 * 24..51 rows make one to three blocks, odd ones leaving a row to the
 * tiles; 13 weight rows are one pair of panels with a ragged second, 40
 * two pairs and a lone panel (matmul_rp.c's work split). */
static void many_rows_match_portable(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 44);
  kern_backend_t *be = fast_backend(2);
  const int64_t rows[] = {13, 40}, cols = 4096;
  const int ns[] = {24, 25, 26, 51};
  float *x = malloc(sizeof(float) * 51 * cols), *y = malloc(sizeof(float) * 51 * 40), *yref = malloc(sizeof(float) * 51 * 40);
  for (size_t t = 0; t < N_FAST; t++)
    for (size_t a = 0; a < 2; a++) {
      uint8_t *data = random_weight(&r, fast_types[t], rows[a], cols, 1);
      kern_weight_t w;
      assert_int_equal(be->weight_init(be, &w, fast_types[t], rows[a], cols, data), 0);
      for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        tu_fill_normal(&r, x, (size_t)(ns[c] * cols), 1.0f);
        tu_poison_f32(y, (size_t)(ns[c] * rows[a]));
        be->matmul(be, y, x, &w, ns[c]);
        kern_cpu_matmul_q8_ref(yref, x, &w, ns[c]);
        if (memcmp(y, yref, sizeof(float) * (size_t)(ns[c] * rows[a])) != 0)
          fail_msg("%s %lld x %lld, n %d: differs from the portable path", kern_type_name(fast_types[t]),
                   (long long)rows[a], (long long)cols, ns[c]);
      }
      be->weight_release(be, &w);
      free(data);
    }
  free(x), free(y), free(yref);
  kern_backend_destroy(be);
}

/* Float weights and widths that are not whole 32-blocks keep the exact
 * arithmetic under FAST. */
static void others_stay_exact(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 43);
  kern_backend_t *be = fast_backend(2);
  const kern_type_t types[] = {KERN_F32, KERN_F16, KERN_BF16, KERN_F32};
  const int64_t cols[] = {64, 96, 128, 45};
  for (int t = 0; t < 4; t++) {
    assert_false(kern_cpu_q8_supported(types[t], cols[t]));
    uint8_t *data = random_weight(&r, types[t], 7, cols[t], 1);
    kern_weight_t w;
    assert_int_equal(be->weight_init(be, &w, types[t], 7, cols[t], data), 0);
    float x[3 * 128], y[3 * 7], ye[3 * 7];
    tu_fill_normal(&r, x, (size_t)(3 * cols[t]), 1.0f);
    be->matmul(be, y, x, &w, 3);
    kern_cpu_matmul_ref(ye, x, &w, 3);
    assert_memory_equal(y, ye, sizeof y);
    be->weight_release(be, &w);
    free(data);
  }
  kern_backend_destroy(be);
}

int main(void) {
#ifdef KERN_CPU_AVX512
  fprintf(stderr, "fast matmul path: AVX-512 (tiles and packed panels)\n");
#else
  fprintf(stderr, "fast matmul path: %s\n", kern_cpu_simd() ? "AVX2" : "portable");
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quantize_rows),
      cmocka_unit_test(kernels_match_float64_and_portable),
      cmocka_unit_test(nmse_against_exact),
      cmocka_unit_test(many_rows_match_portable),
      cmocka_unit_test(others_stay_exact),
  };
  return cmocka_run_group_tests_name("matmul_q8", tests, NULL, NULL);
}
