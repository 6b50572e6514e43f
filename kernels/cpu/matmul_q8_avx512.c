/* kernels/cpu/matmul_q8_avx512.c — AVX-512 kernels of the fast matmul
 * (see matmul_q8.h; bitwise equal to the AVX2 tiles and the portable code).
 *
 * Two kinds:
 *  - Register tiles straight from the stored weights (few activation rows):
 *    two weight rows share a 512-bit register, the unit of row a in the low
 *    256 bits and of row b in the high 256, as two registers of 32 int16
 *    (elements 0..15 of a | of b, 16..31 of a | of b). The activation
 *    block's halves are broadcast to both halves of a register, so one
 *    vpmaddwd and one vpdpwssd (AVX-512 VNNI) give sixteen int32 partial
 *    sums of two outputs' isum; a tree of permutes and adds reduces four
 *    such registers to the eight isums of eight weight rows, which one
 *    convert, one multiply and one fma scale and accumulate.
 *  - A packed panel (many activation rows): the units of 16 weight rows are
 *    unpacked once per work item into int16 pairs interleaved by row
 *    (pair k of rows 0..15 in one 512-bit register), with their scales as
 *    f32 vectors. Then each vpdpwssd multiplies the pair k of one
 *    activation row (a broadcast dword) by 16 weight rows at once, so the
 *    int32 lanes are 16 outputs' isums with no reduction, and one convert,
 *    multiply and fma per unit scale and accumulate 16 outputs.
 * Lane by lane the arithmetic is the documented one: exact int32 isums,
 * the same products dw·d, the same fma order. */
#include "kernels/cpu/matmul_q8.h"

#ifdef KERN_CPU_AVX512

#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/q8_unit_avx2.h"

/* Unit u of weight rows ra and rb: *a0 = elements 0..15 of ra | of rb, *a1
 * = elements 16..31 (int16), the f32 scales and offsets as [dw_a, mw_a,
 * dw_b, mw_b] (Q6_K: its first half's dw), and *dh1 = [dw_a, 0, dw_b, 0]
 * of Q6_K's second half. */
static inline __attribute__((always_inline)) __m128 pair(const kern_type_t T, const uint8_t *ra, const uint8_t *rb,
                                                         int64_t u, __m512i *a0, __m512i *a1, __m128 *dh1) {
  if (T == KERN_Q4_0 || T == KERN_Q4_1 || T == KERN_Q8_0) {
    const int64_t bb = T == KERN_Q4_0 ? 18 : T == KERN_Q4_1 ? 20 : 34;
    const uint8_t *pa = ra + u * bb, *pb = rb + u * bb;
    uint32_t ha, hb; /* d, then m (Q4_1) or the first quants (ignored) */
    memcpy(&ha, pa, 4);
    memcpy(&hb, pb, 4);
    if (T == KERN_Q8_0) {
      __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(pa + 2))),
                                           _mm_loadu_si128((const __m128i *)(pb + 2)), 1);
      __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(pa + 18))),
                                           _mm_loadu_si128((const __m128i *)(pb + 18)), 1);
      *a0 = _mm512_cvtepi8_epi16(lo);
      *a1 = _mm512_cvtepi8_epi16(hi);
    } else {
      const int qo = T == KERN_Q4_0 ? 2 : 4;
      __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(pa + qo))),
                                          _mm_loadu_si128((const __m128i *)(pb + qo)), 1);
      const __m256i m = _mm256_set1_epi8(15);
      __m256i lo = _mm256_and_si256(b, m), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
      if (T == KERN_Q4_0) {
        *a0 = _mm512_cvtepi8_epi16(_mm256_sub_epi8(lo, _mm256_set1_epi8(8)));
        *a1 = _mm512_cvtepi8_epi16(_mm256_sub_epi8(hi, _mm256_set1_epi8(8)));
      } else {
        *a0 = _mm512_cvtepu8_epi16(lo);
        *a1 = _mm512_cvtepu8_epi16(hi);
      }
    }
    return _mm_cvtph_ps(_mm_setr_epi32((int)ha, (int)hb, 0, 0)); /* mw lanes: Q4_1 only */
  }
  float dwa[2], mwa, dwb[2], mwb;
  __m256i wa0, wa1, wb0, wb1;
  kern_cpu__q8_unit16(T, ra, u, dwa, &mwa, &wa0, &wa1);
  kern_cpu__q8_unit16(T, rb, u, dwb, &mwb, &wb0, &wb1);
  *a0 = _mm512_inserti64x4(_mm512_castsi256_si512(wa0), wb0, 1);
  *a1 = _mm512_inserti64x4(_mm512_castsi256_si512(wa1), wb1, 1);
  if (T == KERN_Q6_K) *dh1 = _mm_setr_ps(dwa[1], 0.0f, dwb[1], 0.0f);
  return _mm_setr_ps(dwa[0], mwa, dwb[0], mwb);
}

/* a0·x0 + a1·x1, neighbours summed: sixteen int32 partial sums. */
static inline __m512i dot_pair(__m512i a0, __m512i x0, __m512i a1, __m512i x1) {
#if defined(__AVX512VNNI__)
  return _mm512_dpwssd_epi32(_mm512_madd_epi16(a0, x0), a1, x1);
#else
  return _mm512_add_epi32(_mm512_madd_epi16(a0, x0), _mm512_madd_epi16(a1, x1));
#endif
}

/* Lane c of the result = the sum of the eight lanes of column c, where z[p]
 * holds column 2p in lanes 0..7 and 2p + 1 in lanes 8..15 (exact). */
static inline __m256i reduce8(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
  const __m512i i1 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i i2 = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const __m512i j1 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
  const __m512i j2 = _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  __m512i s01 = _mm512_add_epi32(_mm512_permutex2var_epi32(z0, i1, z1), _mm512_permutex2var_epi32(z0, i2, z1));
  __m512i s23 = _mm512_add_epi32(_mm512_permutex2var_epi32(z2, i1, z3), _mm512_permutex2var_epi32(z2, i2, z3));
  __m512i s = _mm512_add_epi32(_mm512_permutex2var_epi32(s01, j1, s23), _mm512_permutex2var_epi32(s01, j2, s23));
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
  return _mm512_cvtepi64_epi32(s);
}

/* Lanes 0..7 = dm[p] lanes sel0, sel1 for p = 0..3 (dw or mw of column c). */
#define Q8_COLS8(dm, P, sel)                                                                                       \
  _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_shuffle_ps(dm[0], (P) > 1 ? dm[1] : dm[0], sel)),               \
                       (P) > 2 ? _mm_shuffle_ps(dm[2], (P) > 3 ? dm[3] : dm[2], sel) : _mm_setzero_ps(), 1)

/* R activation rows × P pairs of weight rows (columns 2p, 2p + 1; a
 * column c >= C repeats column 0 and is not stored). */
static inline __attribute__((always_inline)) void tile(const kern_type_t T, const int R, const int P, int C,
                                                       const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *w,
                                                       int64_t row_bytes, int64_t nb, float *out, int64_t ldo) {
  const int has_off = T == KERN_Q4_1 || T == KERN_Q5_1 || T == KERN_Q4_K || T == KERN_Q5_K;
  const uint8_t *rows[8];
  for (int c = 0; c < 2 * P; c++) rows[c] = w + (c < C ? c : 0) * row_bytes;
  __m256 acc[4], off[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) acc[r] = off[r] = _mm256_setzero_ps();
  const int64_t unit_bytes = row_bytes / nb;
  for (int64_t u = 0; u < nb; u++) {
    __m512i a0[4], a1[4];
    __m128 dm[4], dh[4];
#pragma GCC unroll 4
    for (int p = 0; p < P; p++) {
      _mm_prefetch((const char *)(rows[2 * p] + u * unit_bytes) + Q8_PREFETCH, _MM_HINT_T0);
      _mm_prefetch((const char *)(rows[2 * p + 1] + u * unit_bytes) + Q8_PREFETCH, _MM_HINT_T0);
      dm[p] = pair(T, rows[2 * p], rows[2 * p + 1], u, &a0[p], &a1[p], &dh[p]);
    }
    const __m256 dw = Q8_COLS8(dm, P, _MM_SHUFFLE(2, 0, 2, 0));
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const kern_cpu_q8a_t *xb = xq + r * ldq + u;
      const __m512i x0 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->q));
      const __m512i x1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb->q + 16)));
      const __m512i zero = _mm512_setzero_si512();
      const __m256 xd = _mm256_set1_ps(xb->d);
      if (T == KERN_Q6_K) { /* two units of 16: a0 and a1 reduce apart */
        __m512i z[4] = {zero, zero, zero, zero}, h[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) z[p] = _mm512_madd_epi16(a0[p], x0), h[p] = _mm512_madd_epi16(a1[p], x1);
        const __m256 dw1 = Q8_COLS8(dh, P, _MM_SHUFFLE(2, 0, 2, 0));
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(reduce8(z[0], z[1], z[2], z[3])), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw1, xd), _mm256_cvtepi32_ps(reduce8(h[0], h[1], h[2], h[3])), acc[r]);
      } else {
        __m512i z[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) z[p] = dot_pair(a0[p], x0, a1[p], x1);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(reduce8(z[0], z[1], z[2], z[3])), acc[r]);
      }
    }
    if (has_off) {
      const __m256 mw = Q8_COLS8(dm, P, _MM_SHUFFLE(3, 1, 3, 1));
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) off[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xq[r * ldq + u].s), off[r]);
    }
  }
  for (int r = 0; r < R; r++) {
    float o[8];
    _mm256_storeu_ps(o, _mm256_add_ps(acc[r], off[r]));
    for (int c = 0; c < C; c++) out[r * ldo + c] = o[c];
  }
}

/* The shapes the driver uses (R rows × 8 columns) get their own unrolled
 * copy; ragged edges take the pair count they need. */
#define Q8_TILES(T)                                                                         \
  do {                                                                                      \
    const int P = (C + 1) / 2;                                                              \
    if (R == 1 && P == 4) tile(T, 1, 4, C, xq, ldq, w, row_bytes, nb, out, ldo);            \
    else if (R == 2 && P == 4) tile(T, 2, 4, C, xq, ldq, w, row_bytes, nb, out, ldo);       \
    else if (R == 3 && P == 4) tile(T, 3, 4, C, xq, ldq, w, row_bytes, nb, out, ldo);       \
    else if (R == 4 && P == 4) tile(T, 4, 4, C, xq, ldq, w, row_bytes, nb, out, ldo);       \
    else if (P == 1) tile(T, R, 1, C, xq, ldq, w, row_bytes, nb, out, ldo);                 \
    else if (P == 2) tile(T, R, 2, C, xq, ldq, w, row_bytes, nb, out, ldo);                 \
    else if (P == 3) tile(T, R, 3, C, xq, ldq, w, row_bytes, nb, out, ldo);                 \
    else tile(T, R, 4, C, xq, ldq, w, row_bytes, nb, out, ldo);                             \
  } while (0)

int kern_cpu__q8_tile_avx512(kern_type_t type, int R, int C, const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *w,
                             int64_t row_bytes, int64_t cols, float *out, int64_t ldo) {
  if (R < 1 || R > 4 || C < 1 || C > 8 || cols % 32 != 0) return 0;
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

/* The packed panel, per 32-element block u (Q8_PANEL_BLOCK bytes, a
 * multiple of 64): int32 pw[16][16] (pw[k][c] = the int16 pair of
 * elements 2k, 2k + 1 of weight row c), float dw[2][16] (the scales of the
 * units of rows 0..15; row 1 differs from row 0 for Q6_K only), float
 * mw[16]. Rows past ncols are zeros. */
#define Q8_PANEL_BLOCK (16 * 16 * 4 + 2 * 16 * 4 + 16 * 4)

size_t kern_cpu__q8_panel_bytes(int64_t cols) { return (size_t)(cols / 32) * Q8_PANEL_BLOCK; }

/* t[k] = dword k of r[0..15] (a 16 × 16 dword transpose, in place). */
static inline void transpose16(__m512i r[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; i++) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) { /* b[4i + j], 128-bit lane L: rows 4i..4i+3 at dword 4L + j */
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int j = 0; j < 4; j++) {
    __m512i e0 = _mm512_shuffle_i32x4(b[j], b[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
    __m512i e1 = _mm512_shuffle_i32x4(b[j], b[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
    __m512i e2 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
    __m512i e3 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
    r[j] = _mm512_shuffle_i32x4(e0, e2, _MM_SHUFFLE(2, 0, 2, 0));
    r[8 + j] = _mm512_shuffle_i32x4(e0, e2, _MM_SHUFFLE(3, 1, 3, 1));
    r[4 + j] = _mm512_shuffle_i32x4(e1, e3, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + j] = _mm512_shuffle_i32x4(e1, e3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

static inline __attribute__((always_inline)) void pack(const kern_type_t T, const uint8_t *w, int64_t row_bytes,
                                                       int64_t nb, int ncols, uint8_t *panel) {
  for (int64_t u = 0; u < nb; u++) {
    uint8_t *blk = panel + u * Q8_PANEL_BLOCK;
    float *pdw = (float *)(blk + 1024), *pmw = pdw + 32;
    __m512i col[16];
    for (int c = 0; c < 16; c++) {
      if (c >= ncols) {
        col[c] = _mm512_setzero_si512();
        pdw[c] = pdw[16 + c] = pmw[c] = 0.0f;
        continue;
      }
      float dw[2], mw;
      __m256i w0, w1;
      kern_cpu__q8_unit16(T, w + c * row_bytes, u, dw, &mw, &w0, &w1);
      col[c] = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
      pdw[c] = dw[0];
      pdw[16 + c] = dw[1];
      pmw[c] = mw;
    }
    transpose16(col);
    for (int k = 0; k < 16; k++) _mm512_storeu_si512((void *)(blk + 64 * k), col[k]);
  }
}

int kern_cpu__q8_pack_avx512(kern_type_t type, const uint8_t *w, int64_t row_bytes, int64_t cols, int ncols,
                             void *panel) {
  if (ncols < 1 || ncols > 16 || cols % 32 != 0) return 0;
  int64_t nb = cols / 32;
  switch (type) {
  case KERN_Q4_0: pack(KERN_Q4_0, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q4_1: pack(KERN_Q4_1, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q5_0: pack(KERN_Q5_0, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q5_1: pack(KERN_Q5_1, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q8_0: pack(KERN_Q8_0, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q4_K: pack(KERN_Q4_K, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q5_K: pack(KERN_Q5_K, w, row_bytes, nb, ncols, panel); break;
  case KERN_Q6_K: pack(KERN_Q6_K, w, row_bytes, nb, ncols, panel); break;
  case KERN_MXFP4: pack(KERN_MXFP4, w, row_bytes, nb, ncols, panel); break;
  default: return 0;
  }
  return 1;
}

static inline __attribute__((always_inline)) void packed(const int Q6K, const int has_off, const int R,
                                                         const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *panel,
                                                         int64_t nb, int ncols, float *out, int64_t ldo) {
  __m512 acc[8], off[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; r++) acc[r] = off[r] = _mm512_setzero_ps();
  for (int64_t u = 0; u < nb; u++) {
    const uint8_t *blk = panel + u * Q8_PANEL_BLOCK;
    const float *pdw = (const float *)(blk + 1024), *pmw = pdw + 32;
    for (int h = 0; h < (Q6K ? 2 : 1); h++) {
      __m512i is[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; r++) is[r] = _mm512_setzero_si512();
      const int k0 = Q6K ? 8 * h : 0, k1 = Q6K ? k0 + 8 : 16;
#pragma GCC unroll 16
      for (int k = k0; k < k1; k++) {
        const __m512i wk = _mm512_loadu_si512((const void *)(blk + 64 * k));
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
          int32_t xk;
          memcpy(&xk, xq[r * ldq + u].q + 2 * k, 4);
#if defined(__AVX512VNNI__)
          is[r] = _mm512_dpwssd_epi32(is[r], wk, _mm512_set1_epi32(xk));
#else
          is[r] = _mm512_add_epi32(is[r], _mm512_madd_epi16(wk, _mm512_set1_epi32(xk)));
#endif
        }
      }
      const __m512 dw = _mm512_loadu_ps(pdw + 16 * h);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xq[r * ldq + u].d)), _mm512_cvtepi32_ps(is[r]),
                                 acc[r]);
    }
    if (has_off) {
      const __m512 mw = _mm512_loadu_ps(pmw);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) off[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xq[r * ldq + u].s), off[r]);
    }
  }
  const __mmask16 m = (__mmask16)((1u << ncols) - 1);
  for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(out + r * ldo, m, _mm512_add_ps(acc[r], off[r]));
}

#define Q8_PACKED(Q6K, OFF)                                                                  \
  do {                                                                                       \
    if (R == 8) packed(Q6K, OFF, 8, xq, ldq, panel, nb, ncols, out, ldo);                    \
    else if (R == 4) packed(Q6K, OFF, 4, xq, ldq, panel, nb, ncols, out, ldo);               \
    else packed(Q6K, OFF, R, xq, ldq, panel, nb, ncols, out, ldo);                           \
  } while (0)

void kern_cpu__q8_packed_avx512(kern_type_t type, int R, const kern_cpu_q8a_t *xq, int64_t ldq, const void *panel,
                                int64_t cols, int ncols, float *out, int64_t ldo) {
  int64_t nb = cols / 32;
  if (type == KERN_Q6_K) Q8_PACKED(1, 0);
  else if (type == KERN_Q4_1 || type == KERN_Q5_1 || type == KERN_Q4_K || type == KERN_Q5_K) Q8_PACKED(0, 1);
  else Q8_PACKED(0, 0);
}

#endif
