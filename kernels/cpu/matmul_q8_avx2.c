/* kernels/cpu/matmul_q8_avx2.c — AVX2 activation quantization and register
 * tiles of the fast matmul (see matmul_q8.h; bitwise equal to the portable
 * code in matmul_q8.c).
 *
 * A weight unit is unpacked to two registers of 16 int16 (q8_unit_avx2.h);
 * vpmaddwd (or vpdpwssd) multiplies them by the int16 activations into
 * eight int32 lanes, whose exact sum is the unit's isum (matmul_q8.h), then
 * scaled and accumulated in f32 by one scalar fma per output. These tiles
 * serve CPUs without AVX-512; where it exists matmul_q8_avx512.c's are
 * used. */
#include "kernels/cpu/matmul_q8.h"

#ifdef KERN_CPU_AVX2

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/q8_unit_avx2.h"
#include "kernels/quant_blocks.h"

void kern_cpu__q8_quantize_row_avx2(const float *x, kern_cpu_q8a_t *out, int64_t cols) {
  const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-32767.0f), hi = _mm256_set1_ps(32767.0f);
  for (int64_t b = 0; b < cols / 32; b++, x += 32, out++) {
    __m256 v[4], m = _mm256_setzero_ps();
    for (int g = 0; g < 4; g++) {
      v[g] = _mm256_loadu_ps(x + 8 * g);
      m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v[g]), _mm256_setzero_ps())); /* NaN -> 0 */
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    if (!(amax >= 0x1p-126f && amax <= 0x1.fffffep127f)) {
      memset(out, 0, sizeof *out);
      continue;
    }
    __m256 id = _mm256_set1_ps(32767.0f / amax);
    __m256i q[4];
    for (int g = 0; g < 4; g++) {
      __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[g], id), lo), hi);
      q[g] = _mm256_cvtps_epi32(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    /* packs works within 128-bit halves: put the halves back in order */
    _mm256_storeu_si256((__m256i *)out->q, _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xd8));
    _mm256_storeu_si256((__m256i *)(out->q + 16), _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xd8));
    out->d = amax / 32767.0f;
    out->s = out->d * (float)_mm_cvtsi128_si32(s4);
  }
}

void kern_cpu__q8_split_avx2(const kern_cpu_q8a_t *in, kern_cpu_q8s_t *out, int64_t nb) {
  /* per 128-bit lane: the low bytes of its 8 int16, then the high bytes */
  const __m256i sh = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                      0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i one = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; b++, in++, out++) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)in->q), c = _mm256_loadu_si256((const __m256i *)(in->q + 16));
    /* l0..7 l8..15 | h0..7 h8..15 after the shuffle and a 64-bit permute */
    const __m256i a2 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, sh), 0xd8);
    const __m256i c2 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(c, sh), 0xd8);
    _mm256_storeu_si256((__m256i *)out->l, _mm256_permute2x128_si256(a2, c2, 0x20));
    _mm256_storeu_si256((__m256i *)out->h, _mm256_permute2x128_si256(a2, c2, 0x31));
    out->d = in->d;
    out->s = in->s;
    out->qsum[0] = kern_cpu__q8_hsum_i32(_mm256_madd_epi16(a, one));
    out->qsum[1] = kern_cpu__q8_hsum_i32(_mm256_madd_epi16(c, one));
  }
}

static inline __attribute__((always_inline)) void tile(const kern_type_t T, const int R, const int C,
                                                       const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *w,
                                                       int64_t row_bytes, int64_t nb, float *out, int64_t ldo) {
  const int has_off = T == KERN_Q4_1 || T == KERN_Q5_1 || T == KERN_Q4_K || T == KERN_Q5_K;
  float acc[4][4], off[4][4];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) acc[r][c] = off[r][c] = 0.0f;
  const int64_t unit_bytes = row_bytes / nb;
  for (int64_t u = 0; u < nb; u++) {
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      const uint8_t *wr = w + c * row_bytes;
      _mm_prefetch((const char *)(wr + u * unit_bytes) + Q8_PREFETCH, _MM_HINT_T0);
      float dw[2], mw;
      __m256i w0, w1;
      kern_cpu__q8_unit16(T, wr, u, dw, &mw, &w0, &w1);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const kern_cpu_q8a_t *xb = xq + r * ldq + u;
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)xb->q), x1 = _mm256_loadu_si256((const __m256i *)(xb->q + 16));
        if (T == KERN_Q6_K) { /* two units of 16 */
          acc[r][c] = fmaf(dw[0] * xb->d, (float)kern_cpu__q8_hsum_i32(_mm256_madd_epi16(w0, x0)), acc[r][c]);
          acc[r][c] = fmaf(dw[1] * xb->d, (float)kern_cpu__q8_hsum_i32(_mm256_madd_epi16(w1, x1)), acc[r][c]);
        } else {
          acc[r][c] = fmaf(dw[0] * xb->d, (float)kern_cpu__q8_hsum_i32(kern_cpu__q8_dot16(w0, x0, w1, x1)), acc[r][c]);
        }
        if (has_off) off[r][c] = fmaf(mw, xb->s, off[r][c]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) out[r * ldo + c] = acc[r][c] + off[r][c];
}

/* The shapes the driver uses get their own unrolled copy; others (ragged
 * edges) the generic one. */
#define Q8_TILES(T)                                                                  \
  do {                                                                               \
    if (R == 1 && C == 4) tile(T, 1, 4, xq, ldq, w, row_bytes, nb, out, ldo);        \
    else if (R == 2 && C == 4) tile(T, 2, 4, xq, ldq, w, row_bytes, nb, out, ldo);   \
    else if (R == 4 && C == 2) tile(T, 4, 2, xq, ldq, w, row_bytes, nb, out, ldo);   \
    else tile(T, R, C, xq, ldq, w, row_bytes, nb, out, ldo);                         \
  } while (0)

int kern_cpu__q8_tile_avx2(kern_type_t type, int R, int C, const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *w,
                           int64_t row_bytes, int64_t cols, float *out, int64_t ldo) {
  if (R < 1 || R > 4 || C < 1 || C > 4 || cols % 32 != 0) return 0;
  int64_t nb = cols / 32;
  switch (type) {
  case KERN_Q4_0: Q8_TILES(KERN_Q4_0); break;
  case KERN_Q4_1: Q8_TILES(KERN_Q4_1); break;
  case KERN_Q5_0: Q8_TILES(KERN_Q5_0); break;
  case KERN_Q5_1: Q8_TILES(KERN_Q5_1); break;
  case KERN_Q8_0: Q8_TILES(KERN_Q8_0); break;
  case KERN_Q4_K: Q8_TILES(KERN_Q4_K); break;
  case KERN_Q5_K: Q8_TILES(KERN_Q5_K); break;
  case KERN_Q6_K: Q8_TILES(KERN_Q6_K); break;
  case KERN_MXFP4: Q8_TILES(KERN_MXFP4); break;
  default: return 0;
  }
  return 1;
}

#endif
