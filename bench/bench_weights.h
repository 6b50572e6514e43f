/* bench/bench_weights.h — random weight matrices for the C benchmarks
 * (matmul_bench, decode_bench): random bytes of any GGUF weight type with
 * every scale field small, normal and positive (no subnormal
 * arithmetic to slow a kernel down), from one seeded generator.
 * Header-only: each benchmark is its own program. */
#ifndef TRAM_BENCH_WEIGHTS_H
#define TRAM_BENCH_WEIGHTS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/half.h"
#include "kernels/kern_types.h"

static uint64_t bench_rng_state = 0x9e3779b97f4a7c15ull;

static inline uint32_t bench_rnd(void) {
  bench_rng_state = bench_rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(bench_rng_state >> 33);
}

/* Uniform in [-1, 1). */
static inline float bench_rnd_unit(void) { return (float)bench_rnd() / 2147483648.0f - 1.0f; }

/* rows × cols of type t (malloc'd; aborts when out of memory): F32/F16/BF16
 * elements uniform in ±0.05, quantized blocks of random bytes whose scale
 * fields are f16 values in [0.001, 0.021) (MXFP4: scale bytes 2^-10 ..
 * 2^-7). */
static inline void *bench_random_weight(kern_type_t t, int64_t rows, int64_t cols) {
  const int64_t bytes = rows * kern_type_row_bytes(t, cols), bb = kern_type_block_bytes(t);
  uint8_t *d = malloc((size_t)bytes);
  if (!d) abort();
  if (t == KERN_F32) {
    for (int64_t i = 0; i < bytes / 4; i++) ((float *)d)[i] = bench_rnd_unit() * 0.05f;
    return d;
  }
  for (int64_t i = 0; i < bytes; i++) d[i] = (uint8_t)bench_rnd();
  if (t == KERN_F16 || t == KERN_BF16) {
    for (int64_t i = 0; i < bytes / 2; i++) {
      const float v = bench_rnd_unit() * 0.05f;
      const uint16_t h = t == KERN_F16 ? kern_cpu_f32_to_f16(v) : kern_cpu_f32_to_bf16(v);
      memcpy(d + 2 * i, &h, 2);
    }
    return d;
  }
  if (t == KERN_MXFP4) { /* E8M0 scales 2^-10 .. 2^-7: elements up to 0.09 */
    for (int64_t b = 0; b < bytes / bb; b++) d[b * bb] = (uint8_t)(118 + bench_rnd() % 4);
    return d;
  }
  int off[2] = {0, 2}, k = 1; /* byte offsets of the f16 scales in a block (quant_blocks.h) */
  if (t == KERN_Q4_1 || t == KERN_Q5_1 || t == KERN_Q4_K || t == KERN_Q5_K) k = 2;
  if (t == KERN_Q6_K) off[0] = 208;
  for (int64_t b = 0; b < bytes / bb; b++)
    for (int j = 0; j < k; j++) {
      const uint16_t h = kern_cpu_f32_to_f16(0.001f + 0.01f * (bench_rnd_unit() + 1.0f));
      memcpy(d + b * bb + off[j], &h, 2);
    }
  return d;
}

#endif
