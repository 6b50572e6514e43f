/* kernels/cuda/dequant.cuh — element c of a GGUF row as f32, for every
 * supported weight type: the per-element formulas of the dequantization
 * kernel (weights.cu), host and device, so they can be checked anywhere.
 *
 * The formulas are GGML's (restated from the format, per element):
 *   Q4_0  x = d * (q - 8)          q = low nibble of qs[i] (i < 16) or high nibble of qs[i - 16]
 *   Q4_1  x = d * q + m
 *   Q5_0  x = d * (q - 16)         q = nibble | bit i of the little-endian 32-bit qh << 4
 *   Q5_1  x = d * q + m
 *   Q8_0  x = d * q
 *   Q4_K  256 elements in 4 chunks of 64: sub-block j = 2 * chunk + (i >= 32 in the chunk),
 *         q = nibble of qs[32 * chunk + i % 32] (low for the first 32, high for the next),
 *         (sc, m) = 6-bit scale and min j of scales[12], x = d * sc * q - dmin * m
 *   Q5_K  as Q4_K, plus 16 if bit j of qh[i % 32] is set
 *   Q6_K  two halves of 128: group g = (i % 128) / 32, l = i % 32,
 *         low 4 bits from ql[64 * half + l + 32 * (g & 1)] (low nibble for g < 2, else high),
 *         high 2 bits (qh[32 * half + l] >> 2g) & 3, scale scales[8 * half + l / 16 + 2g],
 *         x = d * sc * (q - 32)
 *   MXFP4 x = 2^(e - 128) * v      v = the doubled E2M1 value of the 4-bit code (nibbles as Q4_0):
 *         {0, 1, 2, 3, 4, 6, 8, 12} for codes 0..7, negated for 8..15; exact in bf16 (two
 *         significant bits) unless it overflows (e >= 254) */
#ifndef TRAM_KERN_CUDA_DEQUANT_CUH
#define TRAM_KERN_CUDA_DEQUANT_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/kern_types.h"
#include "kernels/quant_blocks.h"

static __host__ __device__ __forceinline__ float dq_f16(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

/* The 4-bit quant i (0..31) of a 32-element block: low nibbles hold 0..15. */
static __host__ __device__ __forceinline__ int dq_nibble32(const uint8_t *qs, int i) {
  return i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
}

/* The 5-bit quant i of a Q5_0 / Q5_1 block: bit i of the little-endian qh. */
static __host__ __device__ __forceinline__ int dq_quant5(const uint8_t *qs, const uint8_t *qh,
                                                         int i) {
  return dq_nibble32(qs, i) | ((qh[i / 8] >> (i % 8)) & 1) << 4;
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. */
static __host__ __device__ __forceinline__ void dq_scale_min_k4(const uint8_t *s, int j, int *sc,
                                                               int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* The doubled E2M1 value of an MXFP4 code (0..15): sign bit 3, magnitude
 * m = code & 7 is m for m < 2, else (2 + (m & 1)) << ((m >> 1) - 1). */
static __host__ __device__ __forceinline__ int dq_e2m1x2(int code) {
  const int m = code & 7, v = m < 2 ? m : (2 | (m & 1)) << ((m >> 1) - 1);
  return code & 8 ? -v : v;
}

/* Element c of a row starting at `row` (GGUF layout of type T; T a
 * supported weight type other than BF16). */
template <int T>
static __host__ __device__ __forceinline__ float kern_cuda__dequant_elem(const uint8_t *row,
                                                                       int64_t c) {
  if (T == KERN_F32) return ((const float *)row)[c];
  if (T == KERN_F16) return dq_f16(((const uint16_t *)row)[c]);
  if (T == KERN_Q4_0) {
    const block_q4_0 *b = (const block_q4_0 *)row + c / QK4_0;
    return dq_f16(b->d) * (float)(dq_nibble32(b->qs, (int)(c % QK4_0)) - 8);
  }
  if (T == KERN_Q4_1) {
    const block_q4_1 *b = (const block_q4_1 *)row + c / QK4_1;
    return dq_f16(b->d) * (float)dq_nibble32(b->qs, (int)(c % QK4_1)) + dq_f16(b->m);
  }
  if (T == KERN_Q5_0) {
    const block_q5_0 *b = (const block_q5_0 *)row + c / QK5_0;
    return dq_f16(b->d) * (float)(dq_quant5(b->qs, b->qh, (int)(c % QK5_0)) - 16);
  }
  if (T == KERN_Q5_1) {
    const block_q5_1 *b = (const block_q5_1 *)row + c / QK5_1;
    return dq_f16(b->d) * (float)dq_quant5(b->qs, b->qh, (int)(c % QK5_1)) + dq_f16(b->m);
  }
  if (T == KERN_Q8_0) {
    const block_q8_0 *b = (const block_q8_0 *)row + c / QK8_0;
    return dq_f16(b->d) * (float)b->qs[c % QK8_0];
  }
  if (T == KERN_Q4_K || T == KERN_Q5_K) {
    const int i = (int)(c % QK_K), chunk = i / 64, l = i % 64, hi = l >= 32, j = 2 * chunk + hi;
    const uint8_t *scales, *qs;
    uint16_t d, dmin;
    int extra = 0;
    if (T == KERN_Q4_K) {
      const block_q4_K *b = (const block_q4_K *)row + c / QK_K;
      scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
    } else {
      const block_q5_K *b = (const block_q5_K *)row + c / QK_K;
      scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
      extra = (b->qh[l % 32] >> j) & 1 ? 16 : 0;
    }
    const uint8_t byte = qs[32 * chunk + l % 32];
    const int q = (hi ? byte >> 4 : byte & 0xF) + extra;
    int sc, m;
    dq_scale_min_k4(scales, j, &sc, &m);
    return dq_f16(d) * (float)sc * (float)q - dq_f16(dmin) * (float)m;
  }
  if (T == KERN_Q6_K) {
    const block_q6_K *b = (const block_q6_K *)row + c / QK_K;
    const int i = (int)(c % QK_K), half = i / 128, g = (i % 128) / 32, l = i % 32;
    const uint8_t lbyte = b->ql[64 * half + l + 32 * (g & 1)];
    const int lo = g < 2 ? (lbyte & 0xF) : (lbyte >> 4);
    const int hi2 = (b->qh[32 * half + l] >> (2 * g)) & 3;
    const int sc = b->scales[8 * half + l / 16 + 2 * g];
    return dq_f16(b->d) * (float)sc * (float)((lo | hi2 << 4) - 32);
  }
  if (T == KERN_MXFP4) {
    const block_mxfp4 *b = (const block_mxfp4 *)row + c / QK_MXFP4;
    return ldexpf((float)dq_e2m1x2(dq_nibble32(b->qs, (int)(c % QK_MXFP4))), (int)b->e - 128);
  }
  return 0.0f; /* not reached: the host only instantiates supported types */
}

#endif
