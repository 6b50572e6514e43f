/* kernels/cpu/dequant_avx2.c — AVX2/FMA/F16C row dequantization (see
 * dequant.h): the units of unit_avx2.h, stored. Bitwise equal to the
 * portable version in dequant.c. */
#include "kernels/cpu/dequant.h"

#ifdef KERN_CPU_AVX2

#include "kernels/cpu/unit_avx2.h"
#include "kernels/quant_blocks.h"

typedef void (*unit_fn)(const uint8_t *p, int s, __m256 v[4]);

/* Blocks of `bb` bytes holding `units` 32-element units each. */
static inline __attribute__((always_inline)) void blocks(unit_fn fn, const uint8_t *p, float *y, int64_t nb,
                                                         int64_t bb, int units) {
  for (int64_t i = 0; i < nb; i++, p += bb) {
    _mm_prefetch((const char *)p + 2048, _MM_HINT_T0); /* as the fused matmul tiles (matmul_avx2.c) */
    for (int s = 0; s < units; s++, y += 32) {
      __m256 v[4];
      fn(p, s, v);
      for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 8 * g, v[g]);
    }
  }
}

void kern_cpu__dequant_row_avx2(kern_type_t type, const void *src, float *dst, int64_t cols) {
  const uint8_t *p = src;
  int64_t n32 = cols / 32, done = 32 * n32;
  switch (type) {
  case KERN_F32: blocks(kern_cpu__unit_f32, p, dst, n32, 128, 1); break;
  case KERN_F16: blocks(kern_cpu__unit_f16, p, dst, n32, 64, 1); break;
  case KERN_BF16: blocks(kern_cpu__unit_bf16, p, dst, n32, 64, 1); break;
  case KERN_Q4_0: blocks(kern_cpu__unit_q4_0, p, dst, n32, sizeof(block_q4_0), 1); return;
  case KERN_Q4_1: blocks(kern_cpu__unit_q4_1, p, dst, n32, sizeof(block_q4_1), 1); return;
  case KERN_Q5_0: blocks(kern_cpu__unit_q5_0, p, dst, n32, sizeof(block_q5_0), 1); return;
  case KERN_Q5_1: blocks(kern_cpu__unit_q5_1, p, dst, n32, sizeof(block_q5_1), 1); return;
  case KERN_Q8_0: blocks(kern_cpu__unit_q8_0, p, dst, n32, sizeof(block_q8_0), 1); return;
  case KERN_Q4_K: blocks(kern_cpu__unit_q4_k, p, dst, cols / QK_K, sizeof(block_q4_K), 8); return;
  case KERN_Q5_K: blocks(kern_cpu__unit_q5_k, p, dst, cols / QK_K, sizeof(block_q5_K), 8); return;
  case KERN_Q6_K: blocks(kern_cpu__unit_q6_k, p, dst, cols / QK_K, sizeof(block_q6_K), 8); return;
  case KERN_MXFP4: blocks(kern_cpu__unit_mxfp4, p, dst, n32, sizeof(block_mxfp4), 1); return;
  default: return; /* not a weight type: the caller's error (see dequant.h) */
  }
  /* float types: the last cols % 32 elements */
  int64_t esize = type == KERN_F32 ? 4 : 2;
  kern_cpu_dequant_row_scalar(type, p + done * esize, dst + done, cols - done);
}

#endif
