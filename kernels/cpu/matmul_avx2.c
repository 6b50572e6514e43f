/* kernels/cpu/matmul_avx2.c — AVX2/FMA register tiles of the matmul (see
 * matmul_tile.h).
 *
 * One 8-lane accumulator per (activation row, weight row); each step loads
 * 8 elements of each of the R activation rows once and of each of the C
 * weight rows once and issues R·C FMAs. 2×6: 12 accumulators (enough
 * independent FMA chains to hide the FMA latency) and 8 loads per 12 FMAs
 * (within two loads a cycle); 1×6 serves a leftover row with the very same
 * per-output operations.
 *
 * The fused tiles (1 or 2 activation rows) skip the panel: they dequantize
 * each 32-element unit of C weight rows into registers and use it at once,
 * which saves the panel's stores and loads when there are too few rows to
 * amortize them. Same units, same FMA order: same bits. */
#include "kernels/cpu/matmul_tile.h"

#ifdef KERN_CPU_AVX2

#include <immintrin.h>

#include "kernels/cpu/unit_avx2.h"
#include "kernels/quant_blocks.h"

/* ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), as in the reference. */
#define hsum kern_cpu__mm_hsum_avx2

static inline __attribute__((always_inline)) void tile(int R, int C, const float *x, int64_t ldx, const float *w,
                                                       int64_t ldw, int64_t k0, int64_t k1, float *st,
                                                       int64_t ldst, float *out) {
  __m256 acc[2][6];
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int c = 0; c < C; c++) acc[r][c] = k0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(st + r * ldst + 8 * c);
  for (int64_t k = k0; k < k1; k += 8) {
    __m256 xv[2];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++) xv[r] = _mm256_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 6
    for (int c = 0; c < C; c++) {
      __m256 wv = _mm256_loadu_ps(w + c * ldw + k);
      __asm__("" : "+x"(wv)); /* one load, kept in a register, for all R rows */
#pragma GCC unroll 2
      for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(wv, xv[r], acc[r][c]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int c = 0; c < C; c++) {
      if (out) out[r * KERN_CPU_MM_PANEL + c] = hsum(acc[r][c]);
      else _mm256_storeu_ps(st + r * ldst + 8 * c, acc[r][c]);
    }
}

void kern_cpu__mm_tile_avx2(int R, int C, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                            int64_t k1, float *acc, int64_t ldacc, float *out) {
  if (R == 2 && C == 6) tile(2, 6, x, ldx, w, ldw, k0, k1, acc, ldacc, out);
  else if (R == 1 && C == 6) tile(1, 6, x, ldx, w, ldw, k0, k1, acc, ldacc, out);
  else kern_cpu__mm_tile_scalar(R, C, x, ldx, w, ldw, k0, k1, acc, ldacc, out);
}

typedef void (*unit_fn)(const uint8_t *p, int s, __m256 v[4]);

/* How far ahead of its use the fused tiles prefetch each weight row, in
 * bytes: measured on the 49152×576 Q8_0 output projection at n = 1, one
 * thread, this doubles the weight GB/s (hardware prefetch alone leaves
 * single-thread streaming latency-bound). */
#define MM_PREFETCH 2048

static inline __attribute__((always_inline)) void fused(unit_fn fn, int64_t bb, int units, int R, int C,
                                                        const float *x, int64_t ldx, const uint8_t *w,
                                                        int64_t row_bytes, int64_t nb, float *out) {
  __m256 acc[2][4]; /* R <= 2, C <= 4 */
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    for (int s = 0; s < units; s++) {
      const float *xb = x + (b * units + s) * 32;
#pragma GCC unroll 4
      for (int c = 0; c < C; c++) {
        __m256 v[4];
        if (s == 0) _mm_prefetch((const char *)(w + c * row_bytes + b * bb) + MM_PREFETCH, _MM_HINT_T0);
        fn(w + c * row_bytes + b * bb, s, v);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++)
#pragma GCC unroll 2
          for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(v[g], _mm256_loadu_ps(xb + r * ldx + 8 * g), acc[r][c]);
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) out[r * KERN_CPU_MM_PANEL + c] = hsum(acc[r][c]);
}

/* The fused tiles of one type over a whole panel: 1 row × 4 weight rows,
 * or 2 × 2 (few accumulators, so the dequantized unit and the constants
 * stay in registers too). */
#define FUSED_TYPE(fn, bb, units)                                                                         \
  do {                                                                                                    \
    if (R == 1) {                                                                                         \
      for (int c = 0; c < KERN_CPU_MM_PANEL; c += 4)                                                      \
        fused(fn, bb, units, 1, 4, x, ldx, w + c * row_bytes, row_bytes, nb, out + c);                    \
    } else {                                                                                              \
      for (int c = 0; c < KERN_CPU_MM_PANEL; c += 2)                                                      \
        fused(fn, bb, units, 2, 2, x, ldx, w + c * row_bytes, row_bytes, nb, out + c);                    \
    }                                                                                                     \
  } while (0)

int kern_cpu__mm_fused_avx2(kern_type_t type, int R, const float *x, int64_t ldx, const uint8_t *w,
                            int64_t row_bytes, int64_t cols, float *out) {
  if (cols % 32 != 0 || R < 1 || R > 2) return 0;
  int64_t n32 = cols / 32, nk = cols / QK_K;
  switch (type) {
  case KERN_F32: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_f32, 128, 1); } break;
  case KERN_F16: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_f16, 64, 1); } break;
  case KERN_BF16: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_bf16, 64, 1); } break;
  case KERN_Q4_0: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_q4_0, sizeof(block_q4_0), 1); } break;
  case KERN_Q4_1: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_q4_1, sizeof(block_q4_1), 1); } break;
  case KERN_Q5_0: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_q5_0, sizeof(block_q5_0), 1); } break;
  case KERN_Q5_1: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_q5_1, sizeof(block_q5_1), 1); } break;
  case KERN_Q8_0: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_q8_0, sizeof(block_q8_0), 1); } break;
  case KERN_Q4_K: { int64_t nb = nk; FUSED_TYPE(kern_cpu__unit_q4_k, sizeof(block_q4_K), 8); } break;
  case KERN_Q5_K: { int64_t nb = nk; FUSED_TYPE(kern_cpu__unit_q5_k, sizeof(block_q5_K), 8); } break;
  case KERN_Q6_K: { int64_t nb = nk; FUSED_TYPE(kern_cpu__unit_q6_k, sizeof(block_q6_K), 8); } break;
  case KERN_MXFP4: { int64_t nb = n32; FUSED_TYPE(kern_cpu__unit_mxfp4, sizeof(block_mxfp4), 1); } break;
  default: return 0;
  }
  return 1;
}

#endif
