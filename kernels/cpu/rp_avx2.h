/* kernels/cpu/rp_avx2.h — the pieces the AVX2 kernels over repacked panels
 * share (private to kernels/cpu/matmul_rp*_avx2.c; include only under
 * KERN_CPU_AVX2): a panel register's weight integers, the activation bytes
 * broadcast to the 8 row lanes, the Q4_K/Q5_K scales of a super-block, and
 * the per-unit scale-and-accumulate step of matmul_q8.h's arithmetic, 8
 * outputs at a time (repack.h for the layouts). */
#ifndef TRAM_KERN_CPU_RP_AVX2_H
#define TRAM_KERN_CPU_RP_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/repack.h"

/* The 4 bytes at p broadcast to every 32-bit lane. */
static inline __m256i kern_cpu__rp_bc4(const void *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/* A register (8 rows × 4 elements, bytes v) of a nibble chunk at qs: its
 * low nibbles, or with hi its high ones. */
static inline __attribute__((always_inline)) __m256i kern_cpu__rp_nib(const uint8_t *qs, int hi) {
  const __m256i v = _mm256_loadu_si256((const __m256i *)qs);
  return _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(15));
}

/* acc = fma(dw·d, (float)isum, acc), 8 outputs. */
static inline __m256 kern_cpu__rp_scale_acc(__m256 acc, __m256 dw, float d, __m256i isum) {
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(d)), _mm256_cvtepi32_ps(isum), acc);
}

/* out[r·ldo + c] = acc[r] + off[r], lanes c < ncols. */
static inline __attribute__((always_inline)) void kern_cpu__rp_store_rows(const int R, const __m256 *acc,
                                                                         const __m256 *off, float *out, int64_t ldo,
                                                                         int ncols) {
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) {
    const __m256 y = _mm256_add_ps(acc[r], off[r]);
    if (ncols == KERN_CPU_RP_ROWS) {
      _mm256_storeu_ps(out + r * ldo, y);
    } else {
      float t[8];
      _mm256_storeu_ps(t, y);
      memcpy(out + r * ldo, t, sizeof(float) * (size_t)ncols);
    }
  }
}

/* dw = d·sc and mw = dmin·m of the 8 sub-blocks of the 8 rows of a
 * Q4_K/Q5_K super-block, from its scale planes (repack.h; plane k byte r =
 * scale byte k of row r), decoded as kern_cpu__k_scale_min does for one
 * row: sc[s] = plane s & 63, m[s] = plane s + 4 & 63 (s < 4); sc[s] =
 * (plane s + 4 & 15) | (plane s - 4 >> 6) << 4, m[s] = (plane s + 4 >> 4) |
 * (plane s >> 6) << 4 (s >= 4). Both products are exact in f32. */
static inline __attribute__((always_inline)) void kern_cpu__rp_k_scales(const uint8_t *planes, __m256 d, __m256 dmin,
                                                                       __m256 dw[8], __m256 mw[8]) {
  const __m256i p03 = _mm256_loadu_si256((const __m256i *)planes), p47 = _mm256_loadu_si256((const __m256i *)(planes + 32));
  const __m256i p8b = _mm256_loadu_si256((const __m256i *)(planes + 64));
  const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(15), top = _mm256_set1_epi8(0x30);
  uint8_t sc[64], mn[64]; /* byte 8s + r */
  _mm256_storeu_si256((__m256i *)sc, _mm256_and_si256(p03, m6));
  _mm256_storeu_si256((__m256i *)(sc + 32),
                      _mm256_or_si256(_mm256_and_si256(p8b, m4), _mm256_and_si256(_mm256_srli_epi16(p03, 2), top)));
  _mm256_storeu_si256((__m256i *)mn, _mm256_and_si256(p47, m6));
  _mm256_storeu_si256((__m256i *)(mn + 32), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(p8b, 4), m4),
                                                             _mm256_and_si256(_mm256_srli_epi16(p47, 2), top)));
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) {
    dw[s] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 8 * s)))));
    mw[s] = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(mn + 8 * s)))));
  }
}

#endif
