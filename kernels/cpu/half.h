/* kernels/cpu/half.h — IEEE half (f16) and bfloat16 (bf16) conversions,
 * and MXFP4's E8M0 block scale.
 *
 * Portable bit manipulation, no SIMD and no libm: the CPU kernels use them
 * for block scales and for the scalar reference paths, the tests to build
 * blocks. Widening (to f32) is exact for every number and bit for bit what
 * F16C's vcvtph2ps gives for every input (a NaN keeps its payload and
 * becomes quiet). Narrowing (from f32) rounds to
 * nearest, ties to even, and keeps NaN a NaN. */
#ifndef TRAM_KERN_CPU_HALF_H
#define TRAM_KERN_CPU_HALF_H

#include <stdint.h>
#include <string.h>

static inline float kern_cpu__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t kern_cpu__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* f16 bits → f32, exact. */
static inline float kern_cpu_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return kern_cpu__bits_f32(sign | 0x7f800000u | (man ? 0x400000u : 0) | man << 13);
  if (exp != 0) return kern_cpu__bits_f32(sign | (exp + 112) << 23 | man << 13);
  if (man == 0) return kern_cpu__bits_f32(sign); /* ±0 */
  /* subnormal: man · 2^-24, renormalised */
  int shift = 0;
  while (!(man & 0x400u)) {
    man <<= 1;
    shift++;
  }
  return kern_cpu__bits_f32(sign | (uint32_t)(113 - shift) << 23 | (man & 0x3ffu) << 13);
}

/* f32 → f16 bits, round to nearest even; overflow gives ±inf. */
static inline uint16_t kern_cpu_f32_to_f16(float f) {
  uint32_t u = kern_cpu__f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu); /* NaN stays NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds past 65504: inf */
  if (a < 0x38800000u) {                      /* below 2^-14: subnormal or zero */
    if (a < 0x33000000u) return sign;         /* below half the smallest subnormal */
    uint32_t man = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(a >> 23); /* 14..24 */
    uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
  }
  uint32_t q = (a >> 13) - (112u << 10), rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;
  return sign | (uint16_t)q;
}

/* bf16 bits → f32, exact. */
static inline float kern_cpu_bf16_to_f32(uint16_t h) { return kern_cpu__bits_f32((uint32_t)h << 16); }

/* f32 → bf16 bits, round to nearest even; NaN stays NaN. */
static inline uint16_t kern_cpu_f32_to_bf16(float f) {
  uint32_t u = kern_cpu__f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* MXFP4's block scale e (an E8M0 byte) halved, as f32, exact: 2^(e - 128),
 * the factor of the doubled E2M1 values (quant_blocks.h). e = 0 and 1 are
 * the subnormals 2^-128 and 2^-127; e = 255 is 2^127 (GGML's reading, not
 * a NaN). */
static inline float kern_cpu_e8m0_half(uint8_t e) {
  return kern_cpu__bits_f32(e < 2 ? 0x200000u << e : (uint32_t)(e - 1) << 23);
}

#endif
