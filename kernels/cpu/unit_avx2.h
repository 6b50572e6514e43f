/* kernels/cpu/unit_avx2.h — AVX2 dequantization of one 32-element unit
 * into four registers (private to the CPU kernels; include only under
 * KERN_CPU_AVX2).
 *
 * A unit is 32 consecutive elements of a weight row: one block of the
 * 32-element types, sub-block s (0..7) of a 256-element K-quant block, or 32
 * elements of an F32/F16/BF16 row (blk points at the first). v[g] receives
 * elements 8g .. 8g + 7. Each group of 8 comes from 8 consecutive bytes
 * widened to 32-bit lanes (vpmovzxbd/vpmovsxbd), so a nibble is a mask or a
 * shift away and no byte shuffles are needed — but for MXFP4, whose codes
 * index a 16-entry table (one vpshufb per 16 codes). The arithmetic per element is
 * the portable version's (dequant.c): one mul or one fma, so the bits agree.
 *
 * The row dequantization (dequant_avx2.c) stores the units; the fused
 * matmul (matmul_avx2.c) multiplies them straight out of the registers. */
#ifndef TRAM_KERN_CPU_UNIT_AVX2_H
#define TRAM_KERN_CPU_UNIT_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/half.h"

static inline float kern_cpu__h2f(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* 8 bytes at p widened to 8 unsigned / signed 32-bit lanes. */
static inline __m256i kern_cpu__u8x8(const uint8_t *p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
static inline __m256i kern_cpu__s8x8(const uint8_t *p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* Lane k = bit (first + k) of qh, moved to bit 4 (Q5_0/Q5_1). */
static inline __m256i kern_cpu__q5_bits(uint32_t qh, int first) {
  __m256i sh = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(first));
  __m256i b = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)qh), sh), _mm256_set1_epi32(1));
  return _mm256_slli_epi32(b, 4);
}

static inline void kern_cpu__unit_f32(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  for (int g = 0; g < 4; g++) v[g] = _mm256_loadu_ps((const float *)p + 8 * g);
}

static inline void kern_cpu__unit_f16(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  for (int g = 0; g < 4; g++) v[g] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * g)));
}

static inline void kern_cpu__unit_bf16(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  for (int g = 0; g < 4; g++) {
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 16 * g)));
    v[g] = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
}

/* Q4_0: d·(q - 8); element j < 16 is the low nibble of qs[j], j + 16 the high. */
static inline void kern_cpu__unit_q4_0(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  const __m256i mask = _mm256_set1_epi32(15), off = _mm256_set1_epi32(8);
  __m256 d = _mm256_set1_ps(kern_cpu__h2f(p));
  for (int g = 0; g < 2; g++) {
    __m256i q = kern_cpu__u8x8(p + 2 + 8 * g);
    v[g] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(q, mask), off)));
    v[g + 2] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(q, 4), off)));
  }
}

/* Q4_1: fma(d, q, m). */
static inline void kern_cpu__unit_q4_1(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  const __m256i mask = _mm256_set1_epi32(15);
  __m256 d = _mm256_set1_ps(kern_cpu__h2f(p)), m = _mm256_set1_ps(kern_cpu__h2f(p + 2));
  for (int g = 0; g < 2; g++) {
    __m256i q = kern_cpu__u8x8(p + 4 + 8 * g);
    v[g] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(q, mask)), m);
    v[g + 2] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4)), m);
  }
}

/* The 5-bit values of a Q5_0/Q5_1 block as 32-bit lanes: q[g] holds
 * elements 8g .. 8g + 7; bit j of the u32 at qh is bit 4 of element j. */
static inline void kern_cpu__q5_ints(const uint8_t *qh8, const uint8_t *qs, __m256i q[4]) {
  const __m256i mask = _mm256_set1_epi32(15);
  uint32_t qh;
  memcpy(&qh, qh8, 4);
  for (int g = 0; g < 2; g++) {
    __m256i b = kern_cpu__u8x8(qs + 8 * g);
    q[g] = _mm256_or_si256(_mm256_and_si256(b, mask), kern_cpu__q5_bits(qh, 8 * g));
    q[g + 2] = _mm256_or_si256(_mm256_srli_epi32(b, 4), kern_cpu__q5_bits(qh, 16 + 8 * g));
  }
}

/* Q5_0: d·(q - 16). */
static inline void kern_cpu__unit_q5_0(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  __m256 d = _mm256_set1_ps(kern_cpu__h2f(p));
  __m256i q[4];
  kern_cpu__q5_ints(p + 2, p + 6, q);
  for (int g = 0; g < 4; g++) v[g] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(q[g], _mm256_set1_epi32(16))));
}

/* Q5_1: fma(d, q, m). */
static inline void kern_cpu__unit_q5_1(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  __m256 d = _mm256_set1_ps(kern_cpu__h2f(p)), m = _mm256_set1_ps(kern_cpu__h2f(p + 2));
  __m256i q[4];
  kern_cpu__q5_ints(p + 4, p + 8, q);
  for (int g = 0; g < 4; g++) v[g] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[g]), m);
}

/* Q8_0: d·q. */
static inline void kern_cpu__unit_q8_0(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  __m256 d = _mm256_set1_ps(kern_cpu__h2f(p));
  for (int g = 0; g < 4; g++) v[g] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(kern_cpu__s8x8(p + 2 + 8 * g)));
}

/* MXFP4's 16 nibble bytes at qs as the doubled E2M1 values (int8) through
 * a byte shuffle of kern_cpu__mxfp4_values: *lo = elements 0..15, *hi =
 * 16..31. */
static inline void kern_cpu__mxfp4_ints(const uint8_t *qs, __m128i *lo, __m128i *hi) {
  const __m128i table = _mm_loadu_si128((const __m128i *)kern_cpu__mxfp4_values), m = _mm_set1_epi8(15);
  __m128i b = _mm_loadu_si128((const __m128i *)qs);
  *lo = _mm_shuffle_epi8(table, _mm_and_si128(b, m));
  *hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(b, 4), m));
}

/* MXFP4: 2^(e - 128)·v (one exact mul, as dequant.c). */
static inline void kern_cpu__unit_mxfp4(const uint8_t *p, int s, __m256 v[4]) {
  (void)s;
  __m256 d = _mm256_set1_ps(kern_cpu_e8m0_half(p[0]));
  __m128i q[2];
  kern_cpu__mxfp4_ints(p + 1, &q[0], &q[1]);
  for (int h = 0; h < 2; h++) {
    v[2 * h] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q[h])));
    v[2 * h + 1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q[h], 8))));
  }
}

/* d·sc and dmin·m of sub-block s of a Q4_K/Q5_K block (both exact in f32). */
static inline void kern_cpu__k_scale(const uint8_t *p, int s, float *a, float *b) {
  const uint8_t *sc = p + 4;
  int scale, min;
  if (s < 4) {
    scale = sc[s] & 63;
    min = sc[s + 4] & 63;
  } else {
    scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
    min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
  }
  *a = kern_cpu__h2f(p) * (float)scale;
  *b = kern_cpu__h2f(p + 2) * (float)min;
}

/* Q4_K sub-block s: fma(d·sc, q, -dmin·m); chunk s/2 of qs, nibble s & 1. */
static inline void kern_cpu__unit_q4_k(const uint8_t *p, int s, __m256 v[4]) {
  float a, b;
  kern_cpu__k_scale(p, s, &a, &b);
  __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  __m128i shift = _mm_cvtsi32_si128(4 * (s & 1));
  const uint8_t *qs = p + 16 + 32 * (s >> 1);
  for (int g = 0; g < 4; g++) {
    __m256i q = _mm256_and_si256(_mm256_srl_epi32(kern_cpu__u8x8(qs + 8 * g), shift), _mm256_set1_epi32(15));
    v[g] = _mm256_fmsub_ps(va, _mm256_cvtepi32_ps(q), vb);
  }
}

/* Q5_K sub-block s: as Q4_K, bit s of qh[l] is bit 4 of element l. */
static inline void kern_cpu__unit_q5_k(const uint8_t *p, int s, __m256 v[4]) {
  float a, b;
  kern_cpu__k_scale(p, s, &a, &b);
  __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  __m128i shift = _mm_cvtsi32_si128(4 * (s & 1)), hshift = _mm_cvtsi32_si128(s);
  const uint8_t *qh = p + 16, *qs = p + 48 + 32 * (s >> 1);
  for (int g = 0; g < 4; g++) {
    __m256i q = _mm256_and_si256(_mm256_srl_epi32(kern_cpu__u8x8(qs + 8 * g), shift), _mm256_set1_epi32(15));
    __m256i h = _mm256_and_si256(_mm256_srl_epi32(kern_cpu__u8x8(qh + 8 * g), hshift), _mm256_set1_epi32(1));
    v[g] = _mm256_fmsub_ps(va, _mm256_cvtepi32_ps(_mm256_or_si256(q, _mm256_slli_epi32(h, 4))), vb);
  }
}

/* Q6_K unit s: half s/4, quarter j = s % 4: low 4 bits from ql[64·half +
 * 32·(j & 1) + l] >> 4·(j >> 1), high 2 bits from qh[32·half + l] >> 2j;
 * (d·sc)·(q - 32) with one int8 scale per 16 elements. */
static inline void kern_cpu__unit_q6_k(const uint8_t *p, int s, __m256 v[4]) {
  int half = s >> 2, j = s & 3;
  const uint8_t *ql = p + 64 * half + 32 * (j & 1), *qh = p + 128 + 32 * half;
  const int8_t *sc = (const int8_t *)(p + 192) + 8 * half + 2 * j;
  float d = kern_cpu__h2f(p + 208);
  __m128i lshift = _mm_cvtsi32_si128(4 * (j >> 1)), hshift = _mm_cvtsi32_si128(2 * j);
  for (int g = 0; g < 4; g++) {
    __m256i lo = _mm256_and_si256(_mm256_srl_epi32(kern_cpu__u8x8(ql + 8 * g), lshift), _mm256_set1_epi32(15));
    __m256i hi = _mm256_and_si256(_mm256_srl_epi32(kern_cpu__u8x8(qh + 8 * g), hshift), _mm256_set1_epi32(3));
    __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    v[g] = _mm256_mul_ps(_mm256_set1_ps(d * (float)sc[g >> 1]), _mm256_cvtepi32_ps(q));
  }
}

#endif
