/* kernels/cpu/dequant.c — the portable dequantization (see dequant.h).
 *
 * Element order inside the blocks (GGML's layouts):
 *   Q4_0/Q4_1   element j < 16 is the low nibble of qs[j], element j + 16 its
 *               high nibble.
 *   Q5_0/Q5_1   as Q4, plus bit j of the little-endian u32 qh as bit 4 of
 *               element j.
 *   Q4_K/Q5_K   64-element chunk c (0..3) uses qs[32c .. 32c + 32): its low
 *               nibbles are sub-block 2c, its high nibbles sub-block 2c + 1;
 *               Q5_K adds bit s of qh[l] as bit 4 of element l of sub-block s.
 *               The 12 scale bytes hold 8 6-bit scales and 8 6-bit mins:
 *               for s < 4 sc = b[s] & 63, m = b[s + 4] & 63; for s >= 4
 *               sc = (b[s + 4] & 15) | (b[s - 4] >> 6) << 4,
 *               m = (b[s + 4] >> 4) | (b[s] >> 6) << 4.
 *   Q6_K        half h (128 elements) uses ql[64h ..], qh[32h ..], scales[8h ..];
 *               for l < 32 the elements l, l + 32, l + 64, l + 96 of the half
 *               are ql[l] & 15, ql[l + 32] & 15, ql[l] >> 4, ql[l + 32] >> 4,
 *               each with two more bits (qh[l] >> 0, 2, 4, 6) & 3 as bits 4-5;
 *               one int8 scale per 16 elements.
 *   MXFP4       as Q4_0 (element j < 16 the low nibble of qs[j], j + 16 its
 *               high nibble); the nibble indexes the doubled E2M1 values
 *               kern_cpu__mxfp4_values, times 2^(e - 128). */
#include "kernels/cpu/dequant.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/half.h"
#include "kernels/quant_blocks.h"

static void dq_q4_0(const block_q4_0 *b, float *y) {
  float d = kern_cpu_f16_to_f32(b->d);
  for (int j = 0; j < 16; j++) {
    y[j] = d * (float)((b->qs[j] & 15) - 8);
    y[j + 16] = d * (float)((b->qs[j] >> 4) - 8);
  }
}

const int8_t kern_cpu__mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* v·2^(e - 128) is exact in f32 (a power of two times |v| <= 12, at worst a
 * subnormal with 2^-128's bits to spare) unless it overflows to ±inf (e >= 254). */
static void dq_mxfp4(const block_mxfp4 *b, float *y) {
  float d = kern_cpu_e8m0_half(b->e);
  for (int j = 0; j < 16; j++) {
    y[j] = d * (float)kern_cpu__mxfp4_values[b->qs[j] & 15];
    y[j + 16] = d * (float)kern_cpu__mxfp4_values[b->qs[j] >> 4];
  }
}

static void dq_q4_1(const block_q4_1 *b, float *y) {
  float d = kern_cpu_f16_to_f32(b->d), m = kern_cpu_f16_to_f32(b->m);
  for (int j = 0; j < 16; j++) {
    y[j] = fmaf(d, (float)(b->qs[j] & 15), m);
    y[j + 16] = fmaf(d, (float)(b->qs[j] >> 4), m);
  }
}

void kern_cpu__q5_ints_scalar(const uint8_t qh8[4], const uint8_t qs[16], int q[32]) {
  uint32_t qh;
  memcpy(&qh, qh8, 4);
  for (int j = 0; j < 16; j++) {
    q[j] = (qs[j] & 15) | ((qh >> j) & 1) << 4;
    q[j + 16] = (qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
  }
}

static void dq_q5_0(const block_q5_0 *b, float *y) {
  float d = kern_cpu_f16_to_f32(b->d);
  int q[32];
  kern_cpu__q5_ints_scalar(b->qh, b->qs, q);
  for (int j = 0; j < 32; j++) y[j] = d * (float)(q[j] - 16);
}

static void dq_q5_1(const block_q5_1 *b, float *y) {
  float d = kern_cpu_f16_to_f32(b->d), m = kern_cpu_f16_to_f32(b->m);
  int q[32];
  kern_cpu__q5_ints_scalar(b->qh, b->qs, q);
  for (int j = 0; j < 32; j++) y[j] = fmaf(d, (float)q[j], m);
}

static void dq_q8_0(const block_q8_0 *b, float *y) {
  float d = kern_cpu_f16_to_f32(b->d);
  for (int j = 0; j < 32; j++) y[j] = d * (float)b->qs[j];
}

void kern_cpu__k_scale_min(const uint8_t *sc, int s, int *scale, int *min) {
  if (s < 4) {
    *scale = sc[s] & 63;
    *min = sc[s + 4] & 63;
  } else {
    *scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
    *min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
  }
}

/* Q4_K (qh NULL) and Q5_K: fma(d·sc, q, -dmin·m) per sub-block. */
static void dq_q45_k(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qh, const uint8_t *qs,
                     float *y) {
  float d = kern_cpu_f16_to_f32(d16), dmin = kern_cpu_f16_to_f32(dmin16);
  for (int s = 0; s < 8; s++) {
    int sc, m;
    kern_cpu__k_scale_min(scales, s, &sc, &m);
    float a = d * (float)sc, b = dmin * (float)m;
    const uint8_t *q = qs + 32 * (s / 2);
    for (int l = 0; l < 32; l++) {
      int v = (q[l] >> (4 * (s & 1))) & 15;
      if (qh) v |= ((qh[l] >> s) & 1) << 4;
      y[32 * s + l] = fmaf(a, (float)v, -b);
    }
  }
}

static void dq_q6_k(const block_q6_K *b, float *y) {
  float d = kern_cpu_f16_to_f32(b->d);
  for (int h = 0; h < 2; h++) {
    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
    const int8_t *sc = b->scales + 8 * h;
    float *o = y + 128 * h;
    for (int l = 0; l < 32; l++) {
      int q1 = (ql[l] & 15) | (qh[l] & 3) << 4;
      int q2 = (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4;
      int q3 = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
      int q4 = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
      int s = l / 16;
      o[l] = (d * (float)sc[s]) * (float)(q1 - 32);
      o[l + 32] = (d * (float)sc[s + 2]) * (float)(q2 - 32);
      o[l + 64] = (d * (float)sc[s + 4]) * (float)(q3 - 32);
      o[l + 96] = (d * (float)sc[s + 6]) * (float)(q4 - 32);
    }
  }
}

void kern_cpu_dequant_row_scalar(kern_type_t type, const void *src, float *dst, int64_t cols) {
  const uint8_t *p = src;
  int64_t be = kern_type_block_elems(type), bb = kern_type_block_bytes(type);
  int64_t nb = cols / be;
  switch (type) {
  case KERN_F32:
    memcpy(dst, src, (size_t)cols * sizeof(float));
    return;
  case KERN_F16:
  case KERN_BF16:
    for (int64_t i = 0; i < cols; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      dst[i] = type == KERN_F16 ? kern_cpu_f16_to_f32(h) : kern_cpu_bf16_to_f32(h);
    }
    return;
  default:
    break;
  }
  /* Blocks may be unaligned inside a GGUF file (alignment 32 of a 18-byte
   * block): copy each one out before reading its fields. */
  union {
    block_q4_0 q4_0;
    block_q4_1 q4_1;
    block_q5_0 q5_0;
    block_q5_1 q5_1;
    block_q8_0 q8_0;
    block_q4_K q4_k;
    block_q5_K q5_k;
    block_q6_K q6_k;
    block_mxfp4 mxfp4;
  } blk;
  for (int64_t i = 0; i < nb; i++, p += bb, dst += be) {
    memcpy(&blk, p, (size_t)bb);
    switch (type) {
    case KERN_Q4_0: dq_q4_0(&blk.q4_0, dst); break;
    case KERN_Q4_1: dq_q4_1(&blk.q4_1, dst); break;
    case KERN_Q5_0: dq_q5_0(&blk.q5_0, dst); break;
    case KERN_Q5_1: dq_q5_1(&blk.q5_1, dst); break;
    case KERN_Q8_0: dq_q8_0(&blk.q8_0, dst); break;
    case KERN_Q4_K: dq_q45_k(blk.q4_k.d, blk.q4_k.dmin, blk.q4_k.scales, NULL, blk.q4_k.qs, dst); break;
    case KERN_Q5_K: dq_q45_k(blk.q5_k.d, blk.q5_k.dmin, blk.q5_k.scales, blk.q5_k.qh, blk.q5_k.qs, dst); break;
    case KERN_Q6_K: dq_q6_k(&blk.q6_k, dst); break;
    case KERN_MXFP4: dq_mxfp4(&blk.mxfp4, dst); break;
    default: return; /* not a weight type: the caller's error (see dequant.h) */
    }
  }
}

void kern_cpu_dequant_row(kern_type_t type, const void *src, float *dst, int64_t cols) {
#ifdef KERN_CPU_AVX2
  kern_cpu__dequant_row_avx2(type, src, dst, cols);
#else
  kern_cpu_dequant_row_scalar(type, src, dst, cols);
#endif
}

int kern_cpu_simd(void) {
#ifdef KERN_CPU_AVX2
  return 1;
#else
  return 0;
#endif
}
