/* kernels/cpu/matmul_tile.h — the register tiles of the CPU matmul (private
 * to kernels/cpu/matmul*.c).
 *
 * A tile multiplies R activation rows by C dequantized weight rows, both f32
 * and zero-padded to kp (a multiple of 8) elements, with the per-output
 * arithmetic that matmul_cpu.h defines, over a chunk of K at a time. The
 * AVX2 tiles (matmul_avx2.c) and the portable one (matmul.c) give the same
 * bits. */
#ifndef TRAM_KERN_CPU_MATMUL_TILE_H
#define TRAM_KERN_CPU_MATMUL_TILE_H

#include <stdint.h>

#include "kernels/cpu/dequant.h"

/* Rows per panel: the weight rows a task dequantizes at once. */
#define KERN_CPU_MM_PANEL 12

/* Accumulates R activation rows (1..2, ldx floats apart) times C weight
 * rows (1..6, ldw floats apart) over k in [k0, k1) (multiples of 8) into
 * eight lanes per output, acc[r·ldacc + 8c + l] = fma(w[c, k + l],
 * x[r, k + l], acc[...]) for k = k0, k0 + 8, ...; the lanes start at +0
 * when k0 == 0 and from acc otherwise (so K can be split in chunks). With
 * out (the last chunk), out[r·KERN_CPU_MM_PANEL + c] receives the outputs
 * (kern_cpu__mm_hsum of their lanes) and acc may be left unwritten. */
void kern_cpu__mm_tile_scalar(int R, int C, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                              int64_t k1, float *acc, int64_t ldacc, float *out);

/* An output from its eight lanes: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) +
 * (a3 + a7)). */
static inline float kern_cpu__mm_hsum(const float *a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

#ifdef KERN_CPU_AVX2
#include <immintrin.h>

/* kern_cpu__mm_hsum of the eight lanes of v. */
static inline float kern_cpu__mm_hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void kern_cpu__mm_tile_avx2(int R, int C, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                            int64_t k1, float *acc, int64_t ldacc, float *out);

/* The same outputs as the tiles, for R = 1 or 2 activation rows and the
 * KERN_CPU_MM_PANEL weight rows w + c·row_bytes, computed straight from the
 * stored weights without a panel. Returns 0 (and does nothing) when it has
 * no such tile: cols not a multiple of 32, R > 2, or not a weight type. */
int kern_cpu__mm_fused_avx2(kern_type_t type, int R, const float *x, int64_t ldx, const uint8_t *w,
                            int64_t row_bytes, int64_t cols, float *out);
#endif

#endif
