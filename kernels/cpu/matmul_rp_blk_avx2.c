/* kernels/cpu/matmul_rp_blk_avx2.c — the fast matmul's register-blocked
 * AVX2 kernel for many activation rows (prefill) over repacked 8-row
 * panels: 2 activation rows × 2 panels (16 outputs) a call, bit for bit
 * the portable arithmetic of matmul_q8.h, for the types whose weight
 * integers are 4-bit nibbles with one scale a 32-element unit (Q4_0, Q4_1,
 * Q4_K: the Q4_K_M files' main type and the default model's Q4_1).
 *
 * Why a second kernel. matmul_rp_avx2.c's R-row tiles take 2 vpmaddubsw
 * per weight register and activation row (q = 256·h + l), and 2 activation
 * broadcasts with them; at 4 rows a call their 12 integer accumulators, the
 * weight register and the constants do not fit the 16 ymm registers, and
 * GCC spills in the inner loop. Here, per weight register index i of a
 * unit, the two panels' registers are unpacked once and each broadcast
 * activation byte group (h or l of one row) meets both: 8 vpmaddubsw for 2
 * weight unpacks and 4 broadcasts, with 8 integer accumulators live:
 *   ah[p][r] = Σ_i pair sums of v·h  (int16: |pair| <= 2·15·128, 8 of
 *              them <= 30720, as matmul_rp_avx2.c's NH = 8)
 *   al[p][r] = Σ_i pair sums of l·v  (pairs >= 0 and <= 2·255·15 = 7650;
 *              8 of them <= 61200 < 2^16: exact as unsigned 16-bit, the
 *              int16 adds wrapping modulo 2^16)
 * and per unit isum = 256·Σ ah (vpmaddwd) + the two unsigned halves of
 * each 32-bit lane of al (a mask and a shift): the same exact integer as
 * every other kernel, so the same bits. The scale and accumulate steps are
 * kern_cpu__rp_scale_acc and the offsets as in matmul_rp_avx2.c, in the
 * same order per output.
 *
 * The driver (matmul_rp.c) calls it for pairs of activation rows against
 * pairs of panels of a row block that stays in L2 while the panels pass,
 * and the R-row tiles for what is left (a last odd row, a last lone
 * panel, the other types). */
#include "kernels/cpu/matmul_q8.h"

#ifdef KERN_CPU_AVX2

#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/repack.h"
#include "kernels/cpu/rp_avx2.h"

/* isum[p][r] of one 32-element unit for activation rows r = 0, 1 (bytes
 * xl[r], xh[r]) against panels p = 0, 1, register i of panel p being REG
 * (an expression of p and i). The empty asm ties each accumulator to a
 * register at every step: without it GCC 12 reassociates the fully
 * unrolled sums into trees of all 64 products, which spill. */
#define UNIT22(REG, xl, xh, isum)                                                                      \
  do {                                                                                                 \
    __m256i ah_[2][2], al_[2][2];                                                                      \
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                              \
      __m256i w_[2];                                                                                   \
      _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) w_[p] = (REG);                               \
      _Pragma("GCC unroll 2") for (int r_ = 0; r_ < 2; r_++) {                                         \
        const __m256i bh_ = kern_cpu__rp_bc4((xh)[r_] + 4 * i), bl_ = kern_cpu__rp_bc4((xl)[r_] + 4 * i); \
        _Pragma("GCC unroll 2") for (int p_ = 0; p_ < 2; p_++) {                                       \
          const __m256i ph_ = _mm256_maddubs_epi16(w_[p_], bh_), pl_ = _mm256_maddubs_epi16(bl_, w_[p_]); \
          ah_[p_][r_] = i == 0 ? ph_ : _mm256_add_epi16(ah_[p_][r_], ph_);                              \
          al_[p_][r_] = i == 0 ? pl_ : _mm256_add_epi16(al_[p_][r_], pl_);                              \
          __asm__("" : "+x"(ah_[p_][r_]), "+x"(al_[p_][r_])); /* keep the chains: see below */         \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
    const __m256i c256_ = _mm256_set1_epi16(256), lo16_ = _mm256_set1_epi32(0xffff);                   \
    _Pragma("GCC unroll 2") for (int p_ = 0; p_ < 2; p_++)                                             \
    _Pragma("GCC unroll 2") for (int r_ = 0; r_ < 2; r_++) {                                           \
      const __m256i l_ = _mm256_add_epi32(_mm256_and_si256(al_[p_][r_], lo16_), _mm256_srli_epi32(al_[p_][r_], 16)); \
      isum[p_][r_] = _mm256_add_epi32(_mm256_madd_epi16(ah_[p_][r_], c256_), l_);                      \
    }                                                                                                  \
  } while (0)

static inline __attribute__((always_inline)) void zero22(__m256 acc[2][2], __m256 off[2][2]) {
  for (int p = 0; p < 2; p++)
    for (int r = 0; r < 2; r++) acc[p][r] = off[p][r] = _mm256_setzero_ps();
}

/* out[r·ldo + 8p + c] = acc[p][r] + off[p][r], c < 8 (panel 0) or < ncols - 8. */
static inline __attribute__((always_inline)) void store22(__m256 acc[2][2], __m256 off[2][2], float *out, int64_t ldo,
                                                         int ncols) {
  for (int p = 0; p < 2; p++) {
    const __m256 a[2] = {acc[p][0], acc[p][1]}, o[2] = {off[p][0], off[p][1]};
    kern_cpu__rp_store_rows(2, a, o, out + 8 * p, ldo, p ? ncols - KERN_CPU_RP_ROWS : KERN_CPU_RP_ROWS);
  }
}

/* Q4_0, Q4_1: one block a unit; register g = chunk g % 4, low nibbles for g < 4. */
static inline __attribute__((always_inline)) void b_q4(const kern_type_t T, const kern_cpu_q8s_t *xs, int64_t ldq,
                                                      const uint8_t *panel, int64_t panel_bytes, int64_t nb,
                                                      float *out, int64_t ldo, int ncols) {
  const int has_m = T == KERN_Q4_1;
  const int64_t bytes = 16 + 16 * has_m + 128;
  __m256 acc[2][2], off[2][2];
  zero22(acc, off);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *pp[2] = {panel + b * bytes, panel + panel_bytes + b * bytes};
    const kern_cpu_q8s_t *x[2] = {xs + b, xs + ldq + b};
    const uint8_t *xl[2] = {x[0]->l, x[1]->l}, *xh[2] = {(const uint8_t *)x[0]->h, (const uint8_t *)x[1]->h};
    __m256i isum[2][2];
    UNIT22(kern_cpu__rp_nib(pp[p] + 16 + 16 * has_m + 32 * (i % 4), i / 4), xl, xh, isum);
    for (int r = 0; r < 2; r++) {
      const __m256i qoff = _mm256_set1_epi32(8 * (x[r]->qsum[0] + x[r]->qsum[1]));
      for (int p = 0; p < 2; p++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pp[p]));
        acc[p][r] = kern_cpu__rp_scale_acc(acc[p][r], dw, x[r]->d, has_m ? isum[p][r] : _mm256_sub_epi32(isum[p][r], qoff));
        if (has_m)
          off[p][r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pp[p] + 16))),
                                      _mm256_set1_ps(x[r]->s), off[p][r]);
      }
    }
  }
  store22(acc, off, out, ldo, ncols);
}

/* Q4_K: sub-block s of a super-block is the low (s even) or high nibbles
 * of the 8 chunks of pair s / 2; dw = d·sc, mw = dmin·m per sub-block. */
static void b_q4k(const kern_cpu_q8s_t *xs, int64_t ldq, const uint8_t *panel, int64_t panel_bytes, int64_t nsb,
                  float *out, int64_t ldo, int ncols) {
  const int64_t bytes = 128 + 4 * 256;
  __m256 acc[2][2], off[2][2];
  zero22(acc, off);
  for (int64_t sb = 0; sb < nsb; sb++) {
    const uint8_t *pp[2] = {panel + sb * bytes, panel + panel_bytes + sb * bytes};
    __m256 dw[2][8], mw[2][8];
    for (int p = 0; p < 2; p++)
      kern_cpu__rp_k_scales(pp[p] + 32, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pp[p])),
                            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pp[p] + 16))), dw[p], mw[p]);
    for (int s2 = 0; s2 < 8; s2 += 2)
#pragma GCC unroll 2
    for (int hi = 0; hi < 2; hi++) { /* sub-block s: pair s / 2, nibble s % 2 (hi a constant) */
      const int s = s2 + hi;
      const kern_cpu_q8s_t *x[2] = {xs + 8 * sb + s, xs + ldq + 8 * sb + s};
      const uint8_t *xl[2] = {x[0]->l, x[1]->l}, *xh[2] = {(const uint8_t *)x[0]->h, (const uint8_t *)x[1]->h};
      __m256i isum[2][2];
      UNIT22(kern_cpu__rp_nib(pp[p] + 128 + (s / 2) * 256 + 32 * i, hi), xl, xh, isum);
      for (int r = 0; r < 2; r++)
        for (int p = 0; p < 2; p++) {
          acc[p][r] = kern_cpu__rp_scale_acc(acc[p][r], dw[p][s], x[r]->d, isum[p][r]);
          off[p][r] = _mm256_fnmadd_ps(mw[p][s], _mm256_set1_ps(x[r]->s), off[p][r]);
        }
    }
  }
  store22(acc, off, out, ldo, ncols);
}

/* Q8_0: 16 pair registers of int16 (8 rows × elements 2k, 2k + 1, widened
 * from the panel's bytes once for both rows) against the broadcast
 * activation pairs (q[2k], q[2k + 1]) by vpmaddwd, exact in int32. */
static void b_q8(const kern_cpu_q8a_t *xq, int64_t ldq, const uint8_t *panel, int64_t panel_bytes, int64_t nb,
                 float *out, int64_t ldo, int ncols) {
  const int64_t bytes = 16 + 256;
  __m256 acc[2][2], off[2][2];
  zero22(acc, off);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *pp[2] = {panel + b * bytes, panel + panel_bytes + b * bytes};
    const kern_cpu_q8a_t *x[2] = {xq + b, xq + ldq + b};
    __m256i isum[2][2];
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) {
      __m256i w[2];
#pragma GCC unroll 2
      for (int p = 0; p < 2; p++) w[p] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(pp[p] + 16 + 16 * k)));
#pragma GCC unroll 2
      for (int r = 0; r < 2; r++) {
        const __m256i bq = kern_cpu__rp_bc4(x[r]->q + 2 * k);
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
          const __m256i prod = _mm256_madd_epi16(w[p], bq);
          isum[p][r] = k == 0 ? prod : _mm256_add_epi32(isum[p][r], prod);
          __asm__("" : "+x"(isum[p][r])); /* keep the chains (see UNIT22) */
        }
      }
    }
    for (int p = 0; p < 2; p++) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pp[p]));
      for (int r = 0; r < 2; r++) acc[p][r] = kern_cpu__rp_scale_acc(acc[p][r], dw, x[r]->d, isum[p][r]);
    }
  }
  store22(acc, off, out, ldo, ncols);
}

int kern_cpu__rp_block_avx2(kern_type_t type, const kern_cpu_q8a_t *xq, const kern_cpu_q8s_t *x, int64_t ldq,
                            const uint8_t *panel, int64_t cols, float *out, int64_t ldo, int ncols) {
  if (!kern_cpu_rp_supported(type, cols) || ncols <= KERN_CPU_RP_ROWS || ncols > 2 * KERN_CPU_RP_ROWS) return 0;
  const int64_t nb = cols / 32, pb = kern_cpu_rp_panel_bytes(type, cols);
  switch (type) {
  case KERN_Q4_0: b_q4(KERN_Q4_0, x, ldq, panel, pb, nb, out, ldo, ncols); return 1;
  case KERN_Q4_1: b_q4(KERN_Q4_1, x, ldq, panel, pb, nb, out, ldo, ncols); return 1;
  case KERN_Q4_K: b_q4k(x, ldq, panel, pb, nb / 8, out, ldo, ncols); return 1;
  case KERN_Q8_0: b_q8(xq, ldq, panel, pb, nb, out, ldo, ncols); return 1;
  default: return 0;
  }
}

#endif
