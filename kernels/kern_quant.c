/* kernels/kern_quant.c — GGML's reference quantizers for Q8_0, Q4_0 and
 * Q4_1 over F32/F16/BF16 rows (see kern_quant.h). */
#include "kernels/kern_quant.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/half.h"
#include "kernels/quant_blocks.h"

/* The reference rounds each product before the addition after it: a fused
 * multiply-add would change some codes. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define QK 32 /* elements per block of every target type */

/* trunc(v) clamped to [0, 15]: the reference's MIN(15, (int8_t)v), whose v
 * is never negative for finite input. */
static inline uint8_t nibble(float v) { return v >= 15.0f ? 15 : v > 0.0f ? (uint8_t)(int)v : 0; }

/* NaN → 0, everything else as it is (so every later step is defined). */
static inline float finite_or_zero(float x) { return x == x ? x : 0.0f; }

static void q8_0(block_q8_0 *y, const float *x) {
  float amax = 0.0f;
  for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = kern_cpu_f32_to_f16(d);
  for (int j = 0; j < QK; j++) {
    const float v = roundf(x[j] * id); /* half away from zero, as the reference's roundf */
    y->qs[j] = (int8_t)(v >= 127.0f ? 127 : v <= -127.0f ? -127 : v == v ? (int)v : 0);
  }
}

static void q4_0(block_q4_0 *y, const float *x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < QK; j++)
    if (amax < fabsf(x[j])) { /* strict: the first of equal magnitudes */
      amax = fabsf(x[j]);
      max = x[j];
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = kern_cpu_f32_to_f16(d);
  for (int j = 0; j < QK / 2; j++) {
    const float a = x[j] * id, b = x[QK / 2 + j] * id;
    y->qs[j] = (uint8_t)(nibble(a + 8.5f) | nibble(b + 8.5f) << 4);
  }
}

static void q4_1(block_q4_1 *y, const float *x) {
  float min = INFINITY, max = -INFINITY;
  for (int j = 0; j < QK; j++) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = kern_cpu_f32_to_f16(d);
  y->m = kern_cpu_f32_to_f16(min);
  for (int j = 0; j < QK / 2; j++) {
    const float a = (x[j] - min) * id, b = (x[QK / 2 + j] - min) * id;
    y->qs[j] = (uint8_t)(nibble(a + 0.5f) | nibble(b + 0.5f) << 4);
  }
}

int kern_quant_is_target(kern_type_t type) { return type == KERN_Q8_0 || type == KERN_Q4_0 || type == KERN_Q4_1; }

/* Element i of a row of `from` as f32 (NaN as 0). The row may be
 * unaligned (a view into a mapped file): loads go through memcpy. */
static inline float widen(kern_type_t from, const char *row, int64_t i) {
  if (from == KERN_F32) {
    float f;
    memcpy(&f, row + 4 * i, sizeof f);
    return finite_or_zero(f);
  }
  uint16_t h;
  memcpy(&h, row + 2 * i, sizeof h);
  return finite_or_zero(from == KERN_F16 ? kern_cpu_f16_to_f32(h) : kern_cpu_bf16_to_f32(h));
}

int kern_quantize_rows(kern_type_t to, void *dst, kern_type_t from, const void *src, int64_t rows, int64_t cols) {
  if (!kern_quant_is_target(to) || (from != KERN_F32 && from != KERN_F16 && from != KERN_BF16) || cols <= 0 ||
      cols % QK != 0 || rows < 0)
    return -EINVAL;
  const int64_t in_row = kern_type_row_bytes(from, cols), out_row = kern_type_row_bytes(to, cols);
  for (int64_t r = 0; r < rows; r++) {
    const char *in = (const char *)src + r * in_row;
    char *out = (char *)dst + r * out_row;
    for (int64_t b = 0; b < cols / QK; b++) {
      float x[QK];
      for (int j = 0; j < QK; j++) x[j] = widen(from, in, b * QK + j);
      switch (to) {
      case KERN_Q8_0: q8_0((block_q8_0 *)out + b, x); break;
      case KERN_Q4_0: q4_0((block_q4_0 *)out + b, x); break;
      default: q4_1((block_q4_1 *)out + b, x); break;
      }
    }
  }
  return 0;
}
