/* kernels/cpu/matmul_q8_avx2.c — AVX2 activation quantization and register
 * tiles of the fast matmul (see matmul_q8.h; bitwise equal to the portable
 * code in matmul_q8.c).
 *
 * A weight unit is unpacked into one register of 32 bytes in element order
 * (nibbles by a mask and a 16-bit shift, Q5's fifth bits by a byte shuffle
 * and compare), then widened to two registers of 16 int16 (elements 0..15,
 * 16..31). vpmaddwd (or AVX-VNNI's vpdpwssd) multiplies them by the int16
 * activations and adds neighbouring pairs: int32 lane l of the two summed
 * holds elements 2l, 2l + 1, 16 + 2l, 17 + 2l, the lanes of the documented
 * arithmetic. */
#include "kernels/cpu/matmul_q8.h"

#ifdef KERN_CPU_AVX2

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/unit_avx2.h"
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

/* 16 nibble bytes at qs as 32 bytes: low nibbles (elements 0..15), then high. */
static inline __m256i nibbles(const uint8_t *qs) {
  __m128i b = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Byte e = 16 where bit e of the u32 at qh8 is set, else 0. */
static inline __m256i fifth_bits(const uint8_t *qh8) {
  uint32_t qh;
  memcpy(&qh, qh8, 4);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                  _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
}

/* Unit u of a weight row of type T (a constant after inlining): the 32
 * integers w as bytes, dw, mw and the Q6_K lane multipliers. */
static inline __attribute__((always_inline)) __m256i unit(const kern_type_t T, const uint8_t *row, int64_t u,
                                                          float *dw, float *mw, __m256i *lm) {
  *mw = 0.0f;
  if (T == KERN_Q4_K || T == KERN_Q5_K) {
    const uint8_t *p = row + (u >> 3) * (int64_t)(T == KERN_Q4_K ? sizeof(block_q4_K) : sizeof(block_q5_K));
    int s = (int)(u & 7);
    float a, b;
    kern_cpu__k_scale(p, s, &a, &b);
    *dw = a;
    *mw = -b;
    __m128i sh = _mm_cvtsi32_si128(4 * (s & 1));
    const uint8_t *qs = p + (T == KERN_Q4_K ? 16 : 48) + 32 * (s >> 1);
    __m256i q = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)qs), sh), _mm256_set1_epi8(15));
    if (T == KERN_Q5_K) {
      __m256i h = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(p + 16)), _mm_cvtsi32_si128(s));
      q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(1)), 4));
    }
    return q;
  }
  if (T == KERN_Q6_K) {
    const uint8_t *p = row + (u >> 3) * (int64_t)sizeof(block_q6_K);
    int s = (int)(u & 7), half = s >> 2, j = s & 3;
    const uint8_t *ql = p + 64 * half + 32 * (j & 1), *qh = p + 128 + 32 * half;
    __m256i lo = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)ql), _mm_cvtsi32_si128(4 * (j >> 1))),
                                  _mm256_set1_epi8(15));
    __m256i hi = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)qh), _mm_cvtsi32_si128(2 * j)),
                                  _mm256_set1_epi8(3));
    const int8_t *sc = (const int8_t *)(p + 192) + 8 * half + 2 * j;
    *lm = _mm256_setr_epi32(sc[0], sc[1], 0, 0, 0, 0, 0, 0);
    *dw = kern_cpu__h2f(p + 208);
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
  }
  const int64_t bb = T == KERN_Q4_0 ? 18 : T == KERN_Q4_1 ? 20 : T == KERN_Q5_0 ? 22 : T == KERN_Q5_1 ? 24 : 34;
  const uint8_t *p = row + u * bb;
  *dw = kern_cpu__h2f(p);
  switch (T) {
  case KERN_Q4_0: return _mm256_sub_epi8(nibbles(p + 2), _mm256_set1_epi8(8));
  case KERN_Q4_1: *mw = kern_cpu__h2f(p + 2); return nibbles(p + 4);
  case KERN_Q5_0: return _mm256_sub_epi8(_mm256_or_si256(nibbles(p + 6), fifth_bits(p + 2)), _mm256_set1_epi8(16));
  case KERN_Q5_1: *mw = kern_cpu__h2f(p + 2); return _mm256_or_si256(nibbles(p + 8), fifth_bits(p + 4));
  default: return _mm256_loadu_si256((const __m256i *)(p + 2)); /* Q8_0 */
  }
}

/* Unit u as two registers of 16 int16 (elements 0..15, 16..31; Q6_K: times
 * their sub-scale): the 4-bit and 8-bit types straight from their bytes,
 * the others through unit(). */
static inline __attribute__((always_inline)) void unit16(const kern_type_t T, const uint8_t *row, int64_t u, float *dw,
                                                         float *mw, __m256i *w0, __m256i *w1) {
  if (T == KERN_Q4_0 || T == KERN_Q4_1) {
    const uint8_t *p = row + u * (T == KERN_Q4_0 ? 18 : 20);
    __m128i b = _mm_loadu_si128((const __m128i *)(p + (T == KERN_Q4_0 ? 2 : 4))), m = _mm_set1_epi8(15);
    *w0 = _mm256_cvtepu8_epi16(_mm_and_si128(b, m));
    *w1 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(b, 4), m));
    *dw = kern_cpu__h2f(p);
    *mw = T == KERN_Q4_1 ? kern_cpu__h2f(p + 2) : 0.0f;
    if (T == KERN_Q4_0) *w0 = _mm256_sub_epi16(*w0, _mm256_set1_epi16(8)), *w1 = _mm256_sub_epi16(*w1, _mm256_set1_epi16(8));
    return;
  }
  if (T == KERN_Q8_0) {
    const uint8_t *p = row + u * 34;
    *w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 2)));
    *w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 18)));
    *dw = kern_cpu__h2f(p);
    *mw = 0.0f;
    return;
  }
  __m256i lm = _mm256_setzero_si256();
  __m256i wv = unit(T, row, u, dw, mw, &lm);
  *w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(wv));
  *w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(wv, 1));
  if (T == KERN_Q6_K) {
    *w0 = _mm256_mullo_epi16(*w0, _mm256_broadcastw_epi16(_mm256_castsi256_si128(lm)));
    *w1 = _mm256_mullo_epi16(*w1, _mm256_broadcastw_epi16(_mm_srli_si128(_mm256_castsi256_si128(lm), 4)));
  }
}

/* Lane l = a[2l]·b[2l] + a[2l + 1]·b[2l + 1] + c[2l]·d[2l] + c[2l + 1]·d[2l + 1]
 * (int16 in, int32 out, no overflow at these ranges): two vpdpwssd where
 * the build has AVX-VNNI, else two vpmaddwd and an add. Same sums. */
static inline __m256i dot16(__m256i a, __m256i b, __m256i c, __m256i d) {
#if defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(_mm256_dpwssd_avx_epi32(_mm256_setzero_si256(), a, b), c, d);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(_mm256_dpwssd_epi32(_mm256_setzero_si256(), a, b), c, d);
#else
  return _mm256_add_epi32(_mm256_madd_epi16(a, b), _mm256_madd_epi16(c, d));
#endif
}

/* How far ahead the tiles prefetch each weight row, in bytes (as the exact
 * path's fused tiles, matmul_avx2.c). */
#define Q8_PREFETCH 1024

static inline __attribute__((always_inline)) void tile(const kern_type_t T, const int R, const int C,
                                                       const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *w,
                                                       int64_t row_bytes, int64_t nb, float *out, int64_t ldo) {
  const int has_off = T == KERN_Q4_1 || T == KERN_Q5_1 || T == KERN_Q4_K || T == KERN_Q5_K;
  __m256 acc[4][4];
  float off[4][4];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      acc[r][c] = _mm256_setzero_ps();
      off[r][c] = 0.0f;
    }
  const int64_t unit_bytes = row_bytes / nb;
  for (int64_t u = 0; u < nb; u++) {
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      const uint8_t *wr = w + c * row_bytes;
      _mm_prefetch((const char *)(wr + u * unit_bytes) + Q8_PREFETCH, _MM_HINT_T0);
      float dw, mw;
      __m256i w0, w1;
      unit16(T, wr, u, &dw, &mw, &w0, &w1);
      const __m256 vdw = _mm256_set1_ps(dw);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const kern_cpu_q8a_t *xb = xq + r * ldq + u;
        __m256i lane = dot16(w0, _mm256_loadu_si256((const __m256i *)xb->q), w1,
                             _mm256_loadu_si256((const __m256i *)(xb->q + 16)));
        acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(vdw, _mm256_broadcast_ss(&xb->d)), _mm256_cvtepi32_ps(lane), acc[r][c]);
        if (has_off) off[r][c] = fmaf(mw, xb->s, off[r][c]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) out[r * ldo + c] = kern_cpu__mm_hsum_avx2(acc[r][c]) + off[r][c];
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
  default: return 0;
  }
  return 1;
}

#endif
