/* tests/unit/test_matmul_q8_tiles.c — each SIMD kernel of the fast matmul
 * (kernels/cpu/matmul_q8*.c) against the portable arithmetic, bit for bit,
 * shape by shape, for every weight type it serves: the AVX2 tiles (R 1..4 ×
 * C 1..4), the AVX2 kernels over repacked 8-row panels (R 1..4 × 1..16
 * weight rows, i.e. full and ragged panels; repack.h) and the register-
 * blocked one (2 rows × two panels, 9..16 weight rows), the AVX-512
 * register tiles (R 1..4 × C 1..8) and the AVX-512 packed panels (1..16
 * weight rows × R 1..8), on random blocks with moderate and extreme
 * scales, activations with outliers, and the largest integer sums the
 * format allows (every |q| = 32767, or every q = -32513 whose bytes give
 * the largest byte products, against the largest weight integers). The threaded driver, which picks among them by batch
 * size, is checked against the same portable code in test_matmul_q8.c;
 * this file pins each kernel apart, so a build that does not pick one still
 * tests it. Kernels the build does not target are skipped (and said so). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/repack.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

static const kern_type_t fast_types[] = {KERN_Q4_0, KERN_Q4_1, KERN_Q5_0, KERN_Q5_1,
                                         KERN_Q8_0, KERN_Q4_K, KERN_Q5_K, KERN_Q6_K, KERN_MXFP4};
#define N_FAST (sizeof fast_types / sizeof *fast_types)
#define WROWS 16 /* weight rows */
#define XROWS 8  /* activation rows */

/* One case: weights [WROWS, cols], quantized activations [XROWS, cols / 32]
 * and the portable outputs ref[r][c]. */
typedef struct {
  kern_type_t type;
  int64_t cols, nb, rb;
  uint8_t *w;
  kern_cpu_q8a_t *xq;
  float ref[XROWS][WROWS];
} tcase_t;

/* Every stored weight integer of a row at its largest magnitude: all
 * quant bits set (15, 31, 63 before the offsets), Q8_0 at -128, MXFP4 at
 * +12 (the largest panel byte, 24); the scales
 * are left as they are. */
static void max_ints(kern_type_t type, uint8_t *row, int64_t cols) {
  const int64_t bb = kern_type_block_bytes(type), nb = cols / kern_type_block_elems(type);
  for (int64_t b = 0; b < nb; b++) {
    uint8_t *p = row + b * bb;
    switch (type) {
    case KERN_Q4_0: memset(p + 2, 0xff, 16); break;
    case KERN_Q4_1: memset(p + 4, 0xff, 16); break;
    case KERN_Q5_0: memset(p + 2, 0xff, 20); break;
    case KERN_Q5_1: memset(p + 4, 0xff, 20); break;
    case KERN_Q8_0: memset(p + 2, 0x80, 32); break;
    case KERN_Q4_K: memset(p + 16, 0xff, 128); break;
    case KERN_Q5_K: memset(p + 16, 0xff, 160); break;
    case KERN_Q6_K: memset(p, 0xff, 192); break;
    case KERN_MXFP4: memset(p + 1, 0x77, 16); break; /* code 7: +12, 24 in the panels (v + 12) */
    default: break;
    }
  }
}

static void make_case(tcase_t *t, tu_rng_t *r, kern_type_t type, int64_t cols, int kind) {
  t->type = type, t->cols = cols, t->nb = cols / 32, t->rb = kern_type_row_bytes(type, cols);
  t->w = malloc((size_t)(WROWS * t->rb));
  for (int c = 0; c < WROWS; c++) tq_random_row(r, type, t->w + c * t->rb, cols, kind != 1);
  float *x = malloc(sizeof(float) * (size_t)(XROWS * cols));
  tu_fill_normal(r, x, (size_t)(XROWS * cols), kind == 1 ? 1e3f : 1.0f);
  if (kind == 2) /* outlier channels */
    for (int64_t k = 0; k < XROWS * cols; k += 37) x[k] *= 300.0f;
  if (kind == 3) { /* every q at ±32767 and every weight integer at its largest */
    for (int64_t k = 0; k < XROWS * cols; k++) x[k] = (k / 32) % 2 ? 2.5f : -2.5f;
    for (int64_t c = 0; c < WROWS; c++) max_ints(type, t->w + c * t->rb, cols);
  }
  if (kind == 4) { /* q = -32513 = 256·(-128) + 255 (the largest byte products) but one 32767 a block */
    for (int64_t k = 0; k < XROWS * cols; k++) x[k] = k % 32 == 5 ? 1.0f : -32513.0f / 32767.0f;
    for (int64_t c = 0; c < WROWS; c++) max_ints(type, t->w + c * t->rb, cols);
  }
  t->xq = malloc(sizeof *t->xq * (size_t)(XROWS * t->nb));
  for (int i = 0; i < XROWS; i++) kern_cpu_q8_quantize_row_scalar(x + i * cols, t->xq + i * t->nb, cols);
  for (int i = 0; i < XROWS; i++)
    for (int c = 0; c < WROWS; c++) t->ref[i][c] = kern_cpu__q8_dot_scalar(type, t->w + c * t->rb, t->xq + i * t->nb, cols);
  free(x);
}

/* out[r][c] (ldo WROWS) of an R × C kernel call against ref; the unwritten
 * cells keep their poison. */
static void check(const tcase_t *t, const char *what, int R, int C, const float out[XROWS][WROWS]) {
  for (int i = 0; i < XROWS; i++)
    for (int c = 0; c < WROWS; c++) {
      int inside = i < R && c < C;
      float want = inside ? t->ref[i][c] : -7.0f;
      if (memcmp(&out[i][c], &want, sizeof want) != 0)
        fail_msg("%s %s cols %lld, R %d C %d: [%d][%d] = %.9g, want %.9g%s", what, kern_type_name(t->type),
                 (long long)t->cols, R, C, i, c, out[i][c], want, inside ? "" : " (outside the tile)");
    }
}

static void poison(float out[XROWS][WROWS]) {
  for (int i = 0; i < XROWS; i++)
    for (int c = 0; c < WROWS; c++) out[i][c] = -7.0f;
}

static void run_kernels(const tcase_t *t) {
  float out[XROWS][WROWS];
#ifdef KERN_CPU_AVX2
  for (int R = 1; R <= 4; R++)
    for (int C = 1; C <= 4; C++) {
      poison(out);
      assert_true(kern_cpu__q8_tile_avx2(t->type, R, C, t->xq, t->nb, t->w, t->rb, t->cols, &out[0][0], WROWS));
      check(t, "AVX2 tile", R, C, out);
    }
  /* the repacked panels: WROWS rows are two panels; rows r of the
   * activations start at any of the XROWS (a kernel reads only its R) */
  uint8_t *packed = malloc(kern_cpu_rp_bytes(t->type, WROWS, t->cols));
  kern_cpu_rp_pack(t->type, t->w, WROWS, t->cols, packed, 0, WROWS / KERN_CPU_RP_ROWS);
  kern_cpu_q8s_t *xs = malloc(sizeof *xs * (size_t)(XROWS * t->nb));
  kern_cpu_q8_split_scalar(t->xq, xs, XROWS * t->nb);
  const int64_t pb = kern_cpu_rp_panel_bytes(t->type, t->cols);
  for (int R = 1; R <= 4; R++)
    for (int C = 1; C <= WROWS; C++) {
      poison(out);
      for (int p = 0; p * KERN_CPU_RP_ROWS < C; p++) {
        const int nc = C - p * KERN_CPU_RP_ROWS < KERN_CPU_RP_ROWS ? C - p * KERN_CPU_RP_ROWS : KERN_CPU_RP_ROWS;
        assert_true(kern_cpu__rp_tile_avx2(t->type, R, t->xq, xs, t->nb, packed + p * pb, t->cols,
                                           &out[0][p * KERN_CPU_RP_ROWS], WROWS, nc));
      }
      check(t, "AVX2 repacked", R, C, out);
    }
  /* the register-blocked kernel: pairs of activation rows (starting at
   * each even row) × the two panels, the second full or ragged */
  const int blocked = t->type == KERN_Q4_0 || t->type == KERN_Q4_1 || t->type == KERN_Q4_K || t->type == KERN_Q8_0;
  for (int C = KERN_CPU_RP_ROWS + 1; C <= WROWS; C++) {
    poison(out);
    for (int r = 0; r < XROWS; r += 2)
      assert_int_equal(kern_cpu__rp_block_avx2(t->type, t->xq + r * t->nb, xs + r * t->nb, t->nb, packed, t->cols, &out[r][0], WROWS, C),
                       blocked);
    if (blocked) check(t, "AVX2 blocked", XROWS, C, out);
    else check(t, "AVX2 blocked (none for the type)", 0, 0, out);
  }
  for (int C = 0; C <= KERN_CPU_RP_ROWS; C++) /* one panel: not its case */
    assert_int_equal(kern_cpu__rp_block_avx2(t->type, t->xq, xs, t->nb, packed, t->cols, &out[0][0], WROWS, C), 0);
  free(packed), free(xs);
#endif
#ifdef KERN_CPU_AVX512
  for (int R = 1; R <= 4; R++)
    for (int C = 1; C <= 8; C++) {
      poison(out);
      assert_true(kern_cpu__q8_tile_avx512(t->type, R, C, t->xq, t->nb, t->w, t->rb, t->cols, &out[0][0], WROWS));
      check(t, "AVX-512 tile", R, C, out);
    }
  void *panel = malloc(kern_cpu__q8_panel_bytes(t->cols));
  for (int C = 1; C <= WROWS; C++) {
    assert_true(kern_cpu__q8_pack_avx512(t->type, t->w, t->rb, t->cols, C, panel));
    for (int R = 1; R <= XROWS; R++) {
      poison(out);
      kern_cpu__q8_packed_avx512(t->type, R, t->xq, t->nb, panel, t->cols, C, &out[0][0], WROWS);
      check(t, "AVX-512 packed", R, C, out);
    }
  }
  free(panel);
#endif
  (void)out;
}

static void tiles_equal_portable(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 51);
  const int64_t cols[] = {32, 256, 576, 1536};
  for (size_t ty = 0; ty < N_FAST; ty++)
    for (size_t b = 0; b < sizeof cols / sizeof *cols; b++)
      for (int kind = 0; kind < 5; kind++) {
        int64_t be = kern_type_block_elems(fast_types[ty]);
        if (cols[b] % be != 0) continue; /* K-quants: 256-element blocks */
        tcase_t *t = malloc(sizeof *t);
        make_case(t, &r, fast_types[ty], cols[b], kind);
        run_kernels(t);
        free(t->w), free(t->xq), free(t);
      }
}

int main(void) {
#ifndef KERN_CPU_AVX2
  fprintf(stderr, "no AVX2 in this build: the SIMD tiles are not compiled, nothing to compare\n");
#elif !defined(KERN_CPU_AVX512)
  fprintf(stderr, "AVX2 tiles only (no AVX-512 in this build)\n");
#else
  fprintf(stderr, "AVX2 and AVX-512 tiles and packed panels\n");
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tiles_equal_portable),
  };
  return cmocka_run_group_tests_name("matmul_q8_tiles", tests, NULL, NULL);
}
