/* tests/unit/test_quant.c — f16/bf16 conversions and the dequantization of
 * every weight type (kernels/cpu/half.h, kernels/cpu/dequant.h), against
 * float64 references written from the format description
 * (tests/unit/quant_ref.c).
 *
 * Every dequantized element is the exact value rounded once to f32
 * (dequant.h), so both the SIMD and the portable paths must equal the
 * reference bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/half.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

#ifdef KERN_CPU_AVX2
#include <immintrin.h>
#endif

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Every f16 widens to its exact value (NaN to a NaN with the same payload
 * bits as F16C gives). */
static void f16_widening_is_exact(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float got = kern_cpu_f16_to_f32((uint16_t)h);
    double want = tq_f16_value((uint16_t)h);
    if (isnan(want)) {
      assert_true(isnan(got));
    } else if (bits(got) != bits((float)want)) {
      fail_msg("f16 %04x: got %a want %a", h, got, want);
    }
#ifdef KERN_CPU_AVX2
    assert_int_equal(bits(got), bits(_cvtsh_ss((uint16_t)h)));
#endif
    assert_int_equal(bits(kern_cpu_bf16_to_f32((uint16_t)h)) >> 16, h);
    if (!isnan(tq_bf16_value((uint16_t)h))) assert_true(kern_cpu_bf16_to_f32((uint16_t)h) == tq_bf16_value((uint16_t)h));
  }
}

/* x narrowed to `h` must be a nearest representable value (the neighbours
 * h - 1 and h + 1 of the same sign are not nearer), ties to the even one. */
static void check_nearest(float x, uint16_t h, double (*value)(uint16_t), uint16_t inf_bits) {
  double v = value(h), err = fabs((double)x - v);
  uint16_t mag = h & 0x7fff, sign = h & 0x8000;
  if (mag == inf_bits) { /* overflow: x must be at least halfway past the largest finite */
    double maxf = value(inf_bits - 1), next = 2 * maxf - value(inf_bits - 2);
    assert_true(fabs((double)x) >= (maxf + next) / 2);
    return;
  }
  if (mag > 0) {
    double e = fabs((double)x - value(sign | (mag - 1)));
    assert_true(err < e || (err == e && !(h & 1)));
  }
  if (mag + 1 < inf_bits) {
    double e = fabs((double)x - value(sign | (mag + 1)));
    assert_true(err < e || (err == e && !(h & 1)));
  }
}

static void narrowing_rounds_to_nearest_even(void **state) {
  (void)state;
  /* every value already representable comes back unchanged */
  for (uint32_t h = 0; h < 65536; h++) {
    if (isnan(tq_f16_value((uint16_t)h))) {
      assert_true(isnan(tq_f16_value(kern_cpu_f32_to_f16(kern_cpu_f16_to_f32((uint16_t)h)))));
      continue;
    }
    assert_int_equal(kern_cpu_f32_to_f16(kern_cpu_f16_to_f32((uint16_t)h)), h);
    assert_int_equal(kern_cpu_f32_to_bf16(kern_cpu_bf16_to_f32((uint16_t)h)), h);
  }
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  for (int i = 0; i < 200000; i++) {
    /* random f32 bits with exponents around the f16 range, ties included */
    uint32_t u = (uint32_t)tu_next(&r);
    int e = 127 - 30 + (int)tu_below(&r, 50);
    u = (u & 0x807fffffu) | (uint32_t)e << 23;
    if (i % 4 == 0) u &= ~0xfffu; /* many exact ties and near-ties */
    float x;
    memcpy(&x, &u, 4);
    uint16_t h = kern_cpu_f32_to_f16(x);
    check_nearest(x, h, tq_f16_value, 0x7c00);
#ifdef KERN_CPU_AVX2
    assert_int_equal(h, _cvtss_sh(x, 0));
#endif
    check_nearest(x, kern_cpu_f32_to_bf16(x), tq_bf16_value, 0x7f80);
  }
  assert_true(isnan(kern_cpu_f16_to_f32(kern_cpu_f32_to_f16(NAN))));
  assert_true(isnan(kern_cpu_bf16_to_f32(kern_cpu_f32_to_bf16(NAN))));
}

/* Dequantizes random rows of `type` (aligned and misaligned) with both paths
 * and compares each element with the float64 reference rounded to f32. */
static void check_type(tu_rng_t *r, kern_type_t type, int64_t cols) {
  int64_t bytes = kern_type_row_bytes(type, cols);
  uint8_t *buf = malloc((size_t)bytes + 1);
  float *got = malloc((size_t)cols * sizeof(float));
  double *want = malloc((size_t)cols * sizeof(double));
  for (int rep = 0; rep < 8; rep++) {
    uint8_t *row = buf + (rep & 1); /* GGUF blocks need not be aligned */
    tq_random_row(r, type, row, cols, rep % 4 == 3);
    tq_ref_dequant_row(type, row, want, cols);
    for (int path = 0; path < 2; path++) {
      tu_poison_f32(got, (size_t)cols);
      if (path == 0) kern_cpu_dequant_row(type, row, got, cols);
      else kern_cpu_dequant_row_scalar(type, row, got, cols);
      for (int64_t i = 0; i < cols; i++) {
        if (bits(got[i]) != bits((float)want[i]))
          fail_msg("%s cols %lld %s path: element %lld got %a want %a", kern_type_name(type), (long long)cols,
                   path ? "portable" : "default", (long long)i, got[i], want[i]);
      }
    }
  }
  free(buf);
  free(got);
  free(want);
}

static void every_type_matches_reference(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 1);
  for (size_t t = 0; t < sizeof tq_weight_types / sizeof *tq_weight_types; t++) {
    kern_type_t type = tq_weight_types[t];
    int64_t be = kern_type_block_elems(type);
    if (be == 1) {
      const int64_t cols[] = {1, 7, 8, 31, 33, 100, 576};
      for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) check_type(&r, type, cols[c]);
    } else {
      for (int64_t nb = 1; nb <= 4; nb++) check_type(&r, type, nb * be);
      check_type(&r, type, be == 32 ? 576 : 2048);
    }
  }
}

int main(void) {
  fprintf(stderr, "dequantization path: %s\n", kern_cpu_simd() ? "AVX2" : "portable");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(f16_widening_is_exact),
      cmocka_unit_test(narrowing_rounds_to_nearest_even),
      cmocka_unit_test(every_type_matches_reference),
  };
  return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
