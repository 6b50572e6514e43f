/* kernels/cpu/matmul_rp_avx2.c — the fast matmul's AVX2 kernels over
 * weights repacked into 8-row panels (repack.h), bit for bit the portable
 * arithmetic of matmul_q8.h.
 *
 * A panel register holds 4 consecutive elements of each of 8 weight rows
 * (32-bit lane r: row r), so every product lands in its output's lane and
 * nothing is ever summed across lanes. The weights of the 4-, 5- and 6-bit
 * types are non-negative integers v (w = v minus 8, 16 or 32 for Q4_0,
 * Q5_0, Q6_K; the offset is taken out afterwards as offset·Σq of the
 * activation, exact in int32) and the int16 activation q splits exactly
 * into its bytes, q = 256·h + l (h = q >> 8 signed, l = q & 255 unsigned;
 * kern_cpu_q8s_t), so two vpmaddubsw give v·h and l·v pair sums for 8 rows
 * × 4 elements: no widening of the weights, 32 products an instruction.
 * The pair sums add up in int16 while they cannot overflow (NH / NL below),
 * then vpmaddwd by 256 or 1 widens them exactly to int32. Q8_0 (signed
 * 8-bit weights, which vpmaddubsw cannot take against a signed l) widens
 * its weights to int16 pairs instead and uses vpmaddwd against q itself.
 * Per unit, the 8 rows' exact isums are converted, and one multiply (dw
 * times the activation's d, as the portable code rounds it) and one fma
 * accumulate them: the same operations, in the same order, as
 * kern_cpu__q8_dot_scalar, 8 outputs at a time.
 *
 * Order of work: unit by unit; inside a unit, register by register (each
 * unpacked once), every activation row of the tile taking its products
 * from it before the next is unpacked, so a tile of R rows keeps 3R
 * integer accumulators and one weight register live. One activation row
 * streams the panels with software prefetch (the decode case: every
 * weight byte is read once, at memory speed). For pairs of rows against
 * pairs of panels the driver takes matmul_rp_blk_avx2.c's register-blocked
 * kernel where the type has one; rp_avx2.h holds what both files share. */
#include "kernels/cpu/matmul_q8.h"

#ifdef KERN_CPU_AVX2

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/q8_unit_avx2.h"
#include "kernels/cpu/repack.h"
#include "kernels/cpu/rp_avx2.h"
#include "kernels/quant_blocks.h"

/* How far ahead one streaming row prefetches the panels, in bytes. */
#ifndef RP_PREFETCH
#define RP_PREFETCH 1536
#endif

#define RP_RMAX 4 /* activation rows per call */

/* always_inline: a plain inline function holding only prefetches looks
 * side-effect free to GCC 12, whose calls it then deletes. */
static inline __attribute__((always_inline)) void prefetch(const uint8_t *p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + RP_PREFETCH + o, _MM_HINT_T0);
}

/* Register g's fifth bits from a bit plane, as 16 or 0 a byte. */
static inline __attribute__((always_inline)) __m256i plane_bit4(const uint8_t *plane, int g) {
  const __m256i b = _mm256_loadu_si256((const __m256i *)plane);
  const __m256i at4 = g <= 4 ? _mm256_slli_epi16(b, 4 - g) : _mm256_srli_epi16(b, g - 4);
  return _mm256_and_si256(at4, _mm256_set1_epi8(16));
}

/* Q6_K register i: the nibbles of chunk qs (hi: the high ones) with the
 * top 2 bits from bit pair i of the high-bit chunk at hb. */
static inline __attribute__((always_inline)) __m256i q6_reg(const uint8_t *qs, int hi, const uint8_t *hb, int i) {
  const __m256i b = _mm256_loadu_si256((const __m256i *)hb);
  const __m256i top = i == 0 ? _mm256_slli_epi16(b, 4) : i == 1 ? _mm256_slli_epi16(b, 2) : i == 2 ? b : _mm256_srli_epi16(b, 2);
  return _mm256_or_si256(kern_cpu__rp_nib(qs, hi), _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
}

/* The isums of one unit for R activation rows: Σ over its n registers
 * (reg(i), i < n) of v · (256·h + l) of the rows' activation bytes at
 * xl[r] + 4i, xh[r] + 4i (broadcast). The v·h pair sums add in int16 nh
 * registers at a time, the l·v ones nl at a time (|pair| <= 2·128·vmax and
 * 2·255·vmax); nh and nl divide n. */
#define UNIT_ISUMS(R, n, nh, nl, REG, xl, xh, isum)                                                    \
  do {                                                                                                 \
    const __m256i c256_ = _mm256_set1_epi16(256), one_ = _mm256_set1_epi16(1);                          \
    __m256i ah_[RP_RMAX], al_[RP_RMAX];                                                                \
    _Pragma("GCC unroll 16") for (int r_ = 0; r_ < (R); r_++) isum[r_] = _mm256_setzero_si256();       \
    _Pragma("GCC unroll 16") for (int i = 0; i < (n); i++) {                                           \
      const __m256i w_ = (REG);                                                                        \
      _Pragma("GCC unroll 16") for (int r_ = 0; r_ < (R); r_++) {                                      \
        const __m256i ph_ = _mm256_maddubs_epi16(w_, kern_cpu__rp_bc4((xh)[r_] + 4 * i));                         \
        const __m256i pl_ = _mm256_maddubs_epi16(kern_cpu__rp_bc4((xl)[r_] + 4 * i), w_);                         \
        ah_[r_] = i % (nh) == 0 ? ph_ : _mm256_add_epi16(ah_[r_], ph_);                               \
        al_[r_] = i % (nl) == 0 ? pl_ : _mm256_add_epi16(al_[r_], pl_);                               \
        if (i % (nh) == (nh) - 1) isum[r_] = _mm256_add_epi32(isum[r_], _mm256_madd_epi16(ah_[r_], c256_)); \
        if (i % (nl) == (nl) - 1) isum[r_] = _mm256_add_epi32(isum[r_], _mm256_madd_epi16(al_[r_], one_));  \
      }                                                                                                \
    }                                                                                                  \
  } while (0)

/* The scales 2^(e - 128) of MXFP4's 8 E8M0 bytes at e (as
 * kern_cpu_e8m0_half: subnormal bits for e < 2). */
static inline __m256 e8m0_half8(const uint8_t *e) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
  const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x200000), v);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v)));
}

/* Q4_0, Q4_1, Q5_0, Q5_1, MXFP4: one 32-element block per unit. Register g
 * (0..7) holds elements 4g .. 4g + 3: the low nibbles of chunk g (g < 4)
 * or the high nibbles of chunk g - 4, so it meets activation group g.
 * MXFP4's codes become v = w + 12 (0..24, non-negative as vpmaddubsw
 * needs) by a byte shuffle, and the 12 comes out as 12·Σq like Q4_0's 8;
 * its pair sums fit int16 in the Q5 groups (4 · 2·128·24, 2 · 2·255·24). */
static inline __attribute__((always_inline)) void k_nib(const kern_type_t T, const int R, const kern_cpu_q8s_t *xs,
                                                        int64_t ldq, const uint8_t *panel, int64_t nb, float *out,
                                                        int64_t ldo, int ncols) {
  const int has_m = T == KERN_Q4_1 || T == KERN_Q5_1, five = T == KERN_Q5_0 || T == KERN_Q5_1, mx = T == KERN_MXFP4;
  const int64_t bytes = mx ? 8 + 128 : 16 + 16 * has_m + 32 * five + 128;
  const int32_t voff = T == KERN_Q4_0 ? 8 : T == KERN_Q5_0 ? 16 : mx ? 12 : 0;
  const __m256i vtab = _mm256_broadcastsi128_si256(
      _mm_add_epi8(_mm_loadu_si128((const __m128i *)kern_cpu__mxfp4_values), _mm_set1_epi8(12)));
  __m256 acc[RP_RMAX], off[RP_RMAX];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) acc[r] = off[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = panel + b * bytes, *qh = p + 16 + 16 * has_m, *qs = mx ? p + 8 : qh + 32 * five;
    if (R == 1) prefetch(p, bytes);
    const uint8_t *xl[RP_RMAX], *xh[RP_RMAX];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) xl[r] = xs[r * ldq + b].l, xh[r] = (const uint8_t *)xs[r * ldq + b].h;
    __m256i isum[RP_RMAX];
    if (five)
      UNIT_ISUMS(R, 8, 4, 2, _mm256_or_si256(kern_cpu__rp_nib(qs + 32 * (i % 4), i / 4), plane_bit4(qh, i)), xl, xh, isum);
    else if (mx)
      UNIT_ISUMS(R, 8, 4, 2, _mm256_shuffle_epi8(vtab, kern_cpu__rp_nib(qs + 32 * (i % 4), i / 4)), xl, xh, isum);
    else
      UNIT_ISUMS(R, 8, 8, 4, kern_cpu__rp_nib(qs + 32 * (i % 4), i / 4), xl, xh, isum);
    const __m256 dw = mx ? e8m0_half8(p) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      const kern_cpu_q8s_t *x = xs + r * ldq + b;
      if (voff) isum[r] = _mm256_sub_epi32(isum[r], _mm256_set1_epi32(voff * (x->qsum[0] + x->qsum[1])));
      acc[r] = kern_cpu__rp_scale_acc(acc[r], dw, x->d, isum[r]);
      if (has_m) off[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16))), _mm256_set1_ps(x->s), off[r]);
    }
  }
  kern_cpu__rp_store_rows(R, acc, off, out, ldo, ncols);
}

/* Q8_0: 16 pair registers of int16 (8 rows × elements 2k, 2k + 1) against
 * the activation pairs (q[2k], q[2k + 1]) by vpmaddwd. */
static inline __attribute__((always_inline)) void k_q8_0(const int R, const kern_cpu_q8a_t *xq, int64_t ldq,
                                                         const uint8_t *panel, int64_t nb, float *out, int64_t ldo,
                                                         int ncols) {
  const int64_t bytes = 16 + 256;
  __m256 acc[RP_RMAX], off[RP_RMAX];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) acc[r] = off[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = panel + b * bytes;
    if (R == 1) prefetch(p, bytes);
    __m256i isum[RP_RMAX];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int k = 0; k < 16; k += 2) {
      const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 16 + 16 * k)));
      const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 32 + 16 * k)));
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        const int16_t *q = xq[r * ldq + b].q;
        isum[r] = _mm256_add_epi32(isum[r], kern_cpu__q8_dot16(w0, kern_cpu__rp_bc4(q + 2 * k), w1, kern_cpu__rp_bc4(q + 2 * k + 2)));
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) acc[r] = kern_cpu__rp_scale_acc(acc[r], dw, xq[r * ldq + b].d, isum[r]);
  }
  kern_cpu__rp_store_rows(R, acc, off, out, ldo, ncols);
}

/* Q4_K, Q5_K: per super-block and sub-block pair q, chunk c's low nibbles
 * are elements 4c .. 4c + 3 of sub-block 2q, its high nibbles those of
 * sub-block 2q + 1. dw = d·sc and mw = -(dmin·m) per sub-block (exact). */
static inline __attribute__((always_inline)) void k_k45(const kern_type_t T, const int R, const kern_cpu_q8s_t *xs,
                                                        int64_t ldq, const uint8_t *panel, int64_t nsb, float *out,
                                                        int64_t ldo, int ncols) {
  const int five = T == KERN_Q5_K;
  const int64_t pair_bytes = 256 + 64 * five, bytes = 128 + 4 * pair_bytes;
  __m256 acc[RP_RMAX], off[RP_RMAX];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) acc[r] = off[r] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; sb++) {
    const uint8_t *p = panel + sb * bytes;
    __m256 dw[8], mw[8];
    kern_cpu__rp_k_scales(p + 32, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)),
             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16))), dw, mw);
    for (int s2 = 0; s2 < 8; s2 += 2)
#pragma GCC unroll 2
    for (int hi = 0; hi < 2; hi++) { /* sub-block s: pair s / 2, nibble s % 2 */
      const int s = s2 + hi;
      const uint8_t *q4 = p + 128 + (s / 2) * pair_bytes, *qs = q4 + 64 * five;
      if (R == 1 && hi == 0) prefetch(q4, pair_bytes);
      const uint8_t *xl[RP_RMAX], *xh[RP_RMAX];
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) xl[r] = xs[r * ldq + 8 * sb + s].l, xh[r] = (const uint8_t *)xs[r * ldq + 8 * sb + s].h;
      __m256i isum[RP_RMAX];
      if (five)
        UNIT_ISUMS(R, 8, 4, 2, _mm256_or_si256(kern_cpu__rp_nib(qs + 32 * i, hi), plane_bit4(q4 + 32 * hi, i)), xl, xh, isum);
      else
        UNIT_ISUMS(R, 8, 8, 4, kern_cpu__rp_nib(qs + 32 * i, hi), xl, xh, isum);
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        const kern_cpu_q8s_t *x = xs + r * ldq + 8 * sb + s;
        acc[r] = kern_cpu__rp_scale_acc(acc[r], dw[s], x->d, isum[r]);
        off[r] = _mm256_fnmadd_ps(mw[s], _mm256_set1_ps(x->s), off[r]);
      }
    }
  }
  kern_cpu__rp_store_rows(R, acc, off, out, ldo, ncols);
}

/* Q6_K: units of 16 elements (sub-block s, half) with dw = d·sc (int8) and
 * w = v - 32; the low 4 bits as Q4_K's chunks, the top 2 from high-bit
 * chunk t = c / 2, byte lane 2·(c % 2) + (sub-block odd). */
static inline __attribute__((always_inline)) void k_q6(const int R, const kern_cpu_q8s_t *xs, int64_t ldq,
                                                       const uint8_t *panel, int64_t nsb, float *out, int64_t ldo,
                                                       int ncols) {
  const int64_t bytes = 144 + 4 * 384;
  __m256 acc[RP_RMAX], off[RP_RMAX];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) acc[r] = off[r] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; sb++) {
    const uint8_t *p = panel + sb * bytes;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    for (int u4 = 0; u4 < 16; u4 += 4)
#pragma GCC unroll 4
    for (int u = u4; u < u4 + 4; u++) { /* unit u: sub-block s = u / 2, half u % 2 */
      const int s = u / 2, hi = s % 2, half = u % 2;
      const uint8_t *q6 = p + 144 + (s / 2) * 384;
      if (R == 1 && u % 4 == 0) prefetch(q6, 384);
      const uint8_t *xl[RP_RMAX], *xh[RP_RMAX];
#pragma GCC unroll 16
      for (int r = 0; r < R; r++)
        xl[r] = xs[r * ldq + 8 * sb + s].l + 16 * half, xh[r] = (const uint8_t *)xs[r * ldq + 8 * sb + s].h + 16 * half;
      __m256i isum[RP_RMAX];
      UNIT_ISUMS(R, 4, 2, 1,
                 q6_reg(q6 + 32 * (4 * half + i), hi, q6 + 256 + 32 * ((4 * half + i) / 2), 2 * ((4 * half + i) % 2) + hi),
                 xl, xh, isum);
      const __m256 dw = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 16 + 8 * u)))));
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        const kern_cpu_q8s_t *x = xs + r * ldq + 8 * sb + s;
        acc[r] = kern_cpu__rp_scale_acc(acc[r], dw, x->d, _mm256_sub_epi32(isum[r], _mm256_set1_epi32(32 * x->qsum[half])));
      }
    }
  }
  kern_cpu__rp_store_rows(R, acc, off, out, ldo, ncols);
}

#define RP_CASES(R)                                                                                        \
  case R:                                                                                                  \
    switch (type) {                                                                                        \
    case KERN_Q4_0: k_nib(KERN_Q4_0, R, x, ldq, panel, nb, out, ldo, ncols); return 1;                     \
    case KERN_Q4_1: k_nib(KERN_Q4_1, R, x, ldq, panel, nb, out, ldo, ncols); return 1;                     \
    case KERN_Q5_0: k_nib(KERN_Q5_0, R, x, ldq, panel, nb, out, ldo, ncols); return 1;                     \
    case KERN_Q5_1: k_nib(KERN_Q5_1, R, x, ldq, panel, nb, out, ldo, ncols); return 1;                     \
    case KERN_MXFP4: k_nib(KERN_MXFP4, R, x, ldq, panel, nb, out, ldo, ncols); return 1;                   \
    case KERN_Q8_0: k_q8_0(R, xq, ldq, panel, nb, out, ldo, ncols); return 1;                              \
    case KERN_Q4_K: k_k45(KERN_Q4_K, R, x, ldq, panel, nb / 8, out, ldo, ncols); return 1;                 \
    case KERN_Q5_K: k_k45(KERN_Q5_K, R, x, ldq, panel, nb / 8, out, ldo, ncols); return 1;                 \
    case KERN_Q6_K: k_q6(R, x, ldq, panel, nb / 8, out, ldo, ncols); return 1;                             \
    default: return 0;                                                                                     \
    }

int kern_cpu__rp_tile_avx2(kern_type_t type, int R, const kern_cpu_q8a_t *xq, const kern_cpu_q8s_t *x, int64_t ldq,
                           const uint8_t *panel, int64_t cols, float *out, int64_t ldo, int ncols) {
  if (!kern_cpu_rp_supported(type, cols) || ncols < 1 || ncols > KERN_CPU_RP_ROWS) return 0;
  const int64_t nb = cols / 32;
  switch (R) {
    RP_CASES(1)
    RP_CASES(2)
    RP_CASES(3)
    RP_CASES(4)
  default:
    return 0;
  }
}

#endif
