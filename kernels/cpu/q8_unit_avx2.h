/* kernels/cpu/q8_unit_avx2.h — the fast matmul's weight units in AVX2
 * registers, shared by its AVX2 and AVX-512 tiles (private to
 * kernels/cpu/matmul_q8_avx*.c; include only under KERN_CPU_AVX2).
 *
 * A weight unit is unpacked into one register of 32 bytes in element order
 * (nibbles by a mask and a 16-bit shift, Q5's fifth bits by a byte shuffle
 * and compare), then widened to two registers of 16 int16 (elements 0..15,
 * 16..31), as matmul_q8.h defines w, dw and mw. */
#ifndef TRAM_KERN_CPU_Q8_UNIT_AVX2_H
#define TRAM_KERN_CPU_Q8_UNIT_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/unit_avx2.h"
#include "kernels/kern.h"
#include "kernels/quant_blocks.h"

/* 16 nibble bytes at qs as 32 bytes: low nibbles (elements 0..15), then high. */
static inline __m256i kern_cpu__q8_nibbles(const uint8_t *qs) {
  __m128i b = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Byte e = 16 where bit e of the u32 at qh8 is set, else 0. */
static inline __m256i kern_cpu__q8_fifth_bits(const uint8_t *qh8) {
  uint32_t qh;
  memcpy(&qh, qh8, 4);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                  _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
}

/* Unit u of a weight row of type T (a constant after inlining): the 32
 * integers w as bytes, dw, mw and the Q6_K lane multipliers. */
static inline __attribute__((always_inline)) __m256i kern_cpu__q8_unit(const kern_type_t T, const uint8_t *row, int64_t u,
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
  case KERN_Q4_0: return _mm256_sub_epi8(kern_cpu__q8_nibbles(p + 2), _mm256_set1_epi8(8));
  case KERN_Q4_1: *mw = kern_cpu__h2f(p + 2); return kern_cpu__q8_nibbles(p + 4);
  case KERN_Q5_0: return _mm256_sub_epi8(_mm256_or_si256(kern_cpu__q8_nibbles(p + 6), kern_cpu__q8_fifth_bits(p + 2)), _mm256_set1_epi8(16));
  case KERN_Q5_1: *mw = kern_cpu__h2f(p + 2); return _mm256_or_si256(kern_cpu__q8_nibbles(p + 8), kern_cpu__q8_fifth_bits(p + 4));
  default: return _mm256_loadu_si256((const __m256i *)(p + 2)); /* Q8_0 */
  }
}

/* Unit u as two registers of 16 int16 (elements 0..15, 16..31) and the
 * scales of its two halves, dw[0] and dw[1] (equal but for Q6_K, whose
 * halves are units of their own: dw[h] = d·sc[h], matmul_q8.h): the 4-bit,
 * MXFP4 and 8-bit types straight from their bytes, the others through
 * kern_cpu__q8_unit() (which has no MXFP4 case). */
static inline __attribute__((always_inline)) void kern_cpu__q8_unit16(const kern_type_t T, const uint8_t *row,
                                                                      int64_t u, float dw[2], float *mw, __m256i *w0,
                                                                      __m256i *w1) {
  if (T == KERN_Q4_0 || T == KERN_Q4_1) {
    const uint8_t *p = row + u * (T == KERN_Q4_0 ? 18 : 20);
    __m128i b = _mm_loadu_si128((const __m128i *)(p + (T == KERN_Q4_0 ? 2 : 4))), m = _mm_set1_epi8(15);
    *w0 = _mm256_cvtepu8_epi16(_mm_and_si128(b, m));
    *w1 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(b, 4), m));
    dw[0] = dw[1] = kern_cpu__h2f(p);
    *mw = T == KERN_Q4_1 ? kern_cpu__h2f(p + 2) : 0.0f;
    if (T == KERN_Q4_0) *w0 = _mm256_sub_epi16(*w0, _mm256_set1_epi16(8)), *w1 = _mm256_sub_epi16(*w1, _mm256_set1_epi16(8));
    return;
  }
  if (T == KERN_MXFP4) {
    const uint8_t *p = row + u * (int64_t)sizeof(block_mxfp4);
    __m128i lo, hi;
    kern_cpu__mxfp4_ints(p + 1, &lo, &hi);
    *w0 = _mm256_cvtepi8_epi16(lo);
    *w1 = _mm256_cvtepi8_epi16(hi);
    dw[0] = dw[1] = kern_cpu_e8m0_half(p[0]);
    *mw = 0.0f;
    return;
  }
  if (T == KERN_Q8_0) {
    const uint8_t *p = row + u * 34;
    *w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 2)));
    *w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 18)));
    dw[0] = dw[1] = kern_cpu__h2f(p);
    *mw = 0.0f;
    return;
  }
  __m256i lm = _mm256_setzero_si256();
  __m256i wv = kern_cpu__q8_unit(T, row, u, &dw[0], mw, &lm);
  *w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(wv));
  *w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(wv, 1));
  dw[1] = dw[0];
  if (T == KERN_Q6_K) {
    float d = dw[0];
    dw[0] = d * (float)_mm256_extract_epi32(lm, 0);
    dw[1] = d * (float)_mm256_extract_epi32(lm, 1);
  }
}

/* The sum of the eight int32 lanes of v (exact). */
static inline int32_t kern_cpu__q8_hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

/* Lane l = a[2l]·b[2l] + a[2l + 1]·b[2l + 1] + c[2l]·d[2l] + c[2l + 1]·d[2l + 1]
 * (int16 in, int32 out, no overflow at these ranges): two vpdpwssd where
 * the build has AVX-VNNI, else two vpmaddwd and an add. Same sums. */
static inline __m256i kern_cpu__q8_dot16(__m256i a, __m256i b, __m256i c, __m256i d) {
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
#ifndef Q8_PREFETCH
#define Q8_PREFETCH 2048
#endif

#endif
