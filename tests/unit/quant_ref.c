/* tests/unit/quant_ref.c — see quant_ref.h.
 *
 * The reference reads each element on its own, by its index, from this
 * description of the blocks (byte offsets within a block):
 *   Q4_0 (18 B)  d@0; qs@2: element e is the low nibble of qs[e] for e < 16,
 *                the high nibble of qs[e - 16] otherwise; x = d (q - 8)
 *   Q4_1 (20 B)  d@0 m@2 qs@4; x = d q + m
 *   Q5_0 (22 B)  d@0 qh@2 (bit e of the 32 little-endian bits is bit 4 of
 *                element e) qs@6; x = d (q - 16)
 *   Q5_1 (24 B)  d@0 m@2 qh@4 qs@8; x = d q + m
 *   Q8_0 (34 B)  d@0 qs@2 int8; x = d q
 *   Q4_K (144 B) d@0 dmin@2 scales@4 (12 B) qs@16: sub-block b = e / 32 of 8;
 *                q = nibble (b odd: high) of qs[32 (b / 2) + e % 32];
 *                x = d sc[b] q - dmin mn[b]
 *   Q5_K (176 B) as Q4_K with qh@16 (32 B): bit b of qh[e % 32] is bit 4 of
 *                q; qs@48
 *   Q6_K (210 B) ql@0 (128 B) qh@128 (64 B) scales@192 (16 int8) d@208:
 *                half h = e / 128, r = e % 128, quarter j = r / 32,
 *                l = r % 32: the low 4 bits are the nibble (j >= 2: high)
 *                of ql[64 h + 32 (j % 2) + l], the high 2 bits are bits
 *                2j, 2j + 1 of qh[32 h + l]; x = d scales[e / 16] (q - 32)
 *   MXFP4 (17 B) e@0 (E8M0) qs@1: element e's 4-bit code is the low nibble
 *                of qs[e] for e < 16, the high nibble of qs[e - 16]
 *                otherwise; an FP4 E2M1 number (OCP Microscaling Formats
 *                v1.0: bit 3 sign, bits 2-1 exponent with bias 1, bit 0
 *                mantissa; exponent 0 subnormal), x = 2^(e - 127) · fp4;
 *                GGML's reading of the spec's two special cases: e = 255
 *                is 2^128 (not NaN), code 8 (-0) is +0
 * The K-quant 6-bit scales sc[8] and mins mn[8] in 12 bytes B: for b < 4,
 * sc[b] = low 6 bits of B[b] and mn[b] = low 6 bits of B[b + 4]; for
 * b >= 4, the low 4 bits of sc[b] / mn[b] are the low / high nibble of
 * B[b + 4], and their top 2 bits are the top 2 bits of B[b - 4] / B[b]. */
#include "tests/unit/quant_ref.h"

#include <math.h>
#include <string.h>

const kern_type_t tq_weight_types[12] = {KERN_F32,  KERN_F16,  KERN_BF16, KERN_Q4_0, KERN_Q4_1, KERN_Q5_0,
                                         KERN_Q5_1, KERN_Q8_0, KERN_Q4_K, KERN_Q5_K, KERN_Q6_K, KERN_MXFP4};

/* A 16-bit IEEE-style float with `mbits` mantissa bits (the rest, after
 * the sign, exponent bits with bias 2^(ebits-1) - 1). */
static double minifloat(uint16_t h, int mbits) {
  int ebits = 15 - mbits, emax = (1 << ebits) - 1, bias = emax / 2;
  int sign = h >> 15, e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
  double v;
  if (e == emax) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp(m, 1 - bias - mbits);                 /* subnormal */
  else v = ldexp((1 << mbits) + m, e - bias - mbits);
  return sign ? -v : v;
}

double tq_f16_value(uint16_t h) { return minifloat(h, 10); }
double tq_bf16_value(uint16_t h) { return minifloat(h, 7); }

uint16_t tq_random_f16(tu_rng_t *r, int moderate) {
  uint16_t sign = (uint16_t)(tu_below(r, 2) << 15);
  if (moderate) return sign | (uint16_t)((5 + tu_below(r, 12)) << 10) | (uint16_t)tu_below(r, 1024);
  return sign | (uint16_t)(tu_below(r, 31) << 10) | (uint16_t)tu_below(r, 1024);
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static uint16_t get16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

void tq_random_row(tu_rng_t *r, kern_type_t type, uint8_t *row, int64_t cols, int moderate) {
  int64_t bytes = kern_type_row_bytes(type, cols);
  for (int64_t i = 0; i < bytes; i++) row[i] = (uint8_t)tu_next(r);
  int64_t be = kern_type_block_elems(type), bb = kern_type_block_bytes(type);
  for (int64_t b = 0; b < cols / be; b++) {
    uint8_t *blk = row + b * bb;
    switch (type) {
    case KERN_F32: {
      float v = moderate ? (float)tu_normal(r) : 0;
      if (!moderate) {
        uint32_t u;
        memcpy(&u, blk, 4);
        if (((u >> 23) & 255) == 255) u &= ~(1u << 30); /* finite */
        memcpy(&v, &u, 4);
      }
      memcpy(blk, &v, 4);
      break;
    }
    case KERN_F16: put16(blk, tq_random_f16(r, moderate)); break;
    case KERN_BF16: {
      uint16_t h = get16(blk);
      if (moderate) h = (uint16_t)((h & 0x807f) | (uint16_t)(117 + tu_below(r, 12)) << 7);
      else if (((h >> 7) & 255) == 255) h &= (uint16_t)~(1u << 14);
      put16(blk, h);
      break;
    }
    case KERN_Q4_0:
    case KERN_Q5_0:
    case KERN_Q8_0: put16(blk, tq_random_f16(r, moderate)); break;
    case KERN_Q4_1:
    case KERN_Q5_1:
    case KERN_Q4_K:
    case KERN_Q5_K:
      put16(blk, tq_random_f16(r, moderate));
      put16(blk + 2, tq_random_f16(r, moderate));
      break;
    case KERN_Q6_K: put16(blk + 208, tq_random_f16(r, moderate)); break;
    case KERN_MXFP4: /* scales 2^-11 .. 2^2, or 2^-128 (subnormal) .. 2^32 */
      blk[0] = (uint8_t)(moderate ? 117 + tu_below(r, 14) : tu_below(r, 161));
      break;
    default: break;
    }
  }
}

/* 6-bit scale (which = 0) or min (which = 1) of sub-block b. */
static int k_six(const uint8_t *B, int b, int which) {
  if (b < 4) return B[b + 4 * which] & 63;
  int low = which ? B[b + 4] >> 4 : B[b + 4] & 15;
  int top = B[b - 4 + 4 * which] >> 6;
  return low | top << 4;
}

static double ref_elem(kern_type_t type, const uint8_t *k, int e) {
  int q;
  switch (type) {
  case KERN_Q4_0:
    q = e < 16 ? k[2 + e] & 15 : k[2 + e - 16] >> 4;
    return tq_f16_value(get16(k)) * (q - 8);
  case KERN_Q4_1:
    q = e < 16 ? k[4 + e] & 15 : k[4 + e - 16] >> 4;
    return tq_f16_value(get16(k)) * q + tq_f16_value(get16(k + 2));
  case KERN_Q5_0:
    q = (e < 16 ? k[6 + e] & 15 : k[6 + e - 16] >> 4) | ((k[2 + e / 8] >> (e % 8)) & 1) << 4;
    return tq_f16_value(get16(k)) * (q - 16);
  case KERN_Q5_1:
    q = (e < 16 ? k[8 + e] & 15 : k[8 + e - 16] >> 4) | ((k[4 + e / 8] >> (e % 8)) & 1) << 4;
    return tq_f16_value(get16(k)) * q + tq_f16_value(get16(k + 2));
  case KERN_Q8_0: return tq_f16_value(get16(k)) * (int8_t)k[2 + e];
  case KERN_Q4_K:
  case KERN_Q5_K: {
    int b = e / 32, l = e % 32;
    const uint8_t *qs = k + (type == KERN_Q4_K ? 16 : 48) + 32 * (b / 2);
    q = b % 2 ? qs[l] >> 4 : qs[l] & 15;
    if (type == KERN_Q5_K) q |= ((k[16 + l] >> b) & 1) << 4;
    return tq_f16_value(get16(k)) * k_six(k + 4, b, 0) * q - tq_f16_value(get16(k + 2)) * k_six(k + 4, b, 1);
  }
  case KERN_Q6_K: {
    int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    int byte = k[64 * h + 32 * (j % 2) + l];
    int low = j >= 2 ? byte >> 4 : byte & 15;
    int high = (k[128 + 32 * h + l] >> (2 * j)) & 3;
    return tq_f16_value(get16(k + 208)) * (int8_t)k[192 + e / 16] * ((low | high << 4) - 32);
  }
  case KERN_MXFP4: {
    int code = e < 16 ? k[1 + e] & 15 : k[1 + e - 16] >> 4;
    int ex = (code >> 1) & 3, man = code & 1;
    double fp4 = ex == 0 ? 0.5 * man : ldexp(1.0 + 0.5 * man, ex - 1);
    return (code & 8 ? -fp4 : fp4) * ldexp(1.0, k[0] - 127) + 0.0; /* + 0.0: -0 is +0 */
  }
  default: return NAN;
  }
}

void tq_ref_dequant_row(kern_type_t type, const uint8_t *row, double *out, int64_t cols) {
  switch (type) {
  case KERN_F32:
    for (int64_t i = 0; i < cols; i++) {
      float f;
      memcpy(&f, row + 4 * i, 4);
      out[i] = f;
    }
    return;
  case KERN_F16:
    for (int64_t i = 0; i < cols; i++) out[i] = tq_f16_value(get16(row + 2 * i));
    return;
  case KERN_BF16:
    for (int64_t i = 0; i < cols; i++) out[i] = tq_bf16_value(get16(row + 2 * i));
    return;
  default: break;
  }
  int64_t be = kern_type_block_elems(type), bb = kern_type_block_bytes(type);
  for (int64_t i = 0; i < cols; i++) out[i] = ref_elem(type, row + (i / be) * bb, (int)(i % be));
}
