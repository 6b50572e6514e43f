/* kernels/cuda/weights.cu — weights dequantized to bf16 at load (see
 * weights.cuh).
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
 *         x = d * sc * (q - 32) */
#include <errno.h>
#include <limits.h>

#include "kernels/cuda/weights.cuh"
#include "kernels/quant_blocks.h"

static __device__ __forceinline__ float f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* The 4-bit quant i (0..31) of a 32-element block: low nibbles hold 0..15. */
static __device__ __forceinline__ int nibble32(const uint8_t *qs, int i) {
  return i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
}

/* The 5-bit quant i of a Q5_0 / Q5_1 block: bit i of the little-endian qh. */
static __device__ __forceinline__ int quant5(const uint8_t *qs, const uint8_t *qh, int i) {
  return nibble32(qs, i) | ((qh[i / 8] >> (i % 8)) & 1) << 4;
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. */
static __device__ __forceinline__ void scale_min_k4(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* Element c of a row starting at `row` (GGUF layout of type T). */
template <int T>
static __device__ __forceinline__ float dequant_elem(const uint8_t *row, int64_t c) {
  if (T == KERN_F32) return ((const float *)row)[c];
  if (T == KERN_F16) return f16(((const uint16_t *)row)[c]);
  if (T == KERN_Q4_0) {
    const block_q4_0 *b = (const block_q4_0 *)row + c / QK4_0;
    return f16(b->d) * (float)(nibble32(b->qs, (int)(c % QK4_0)) - 8);
  }
  if (T == KERN_Q4_1) {
    const block_q4_1 *b = (const block_q4_1 *)row + c / QK4_1;
    return f16(b->d) * (float)nibble32(b->qs, (int)(c % QK4_1)) + f16(b->m);
  }
  if (T == KERN_Q5_0) {
    const block_q5_0 *b = (const block_q5_0 *)row + c / QK5_0;
    return f16(b->d) * (float)(quant5(b->qs, b->qh, (int)(c % QK5_0)) - 16);
  }
  if (T == KERN_Q5_1) {
    const block_q5_1 *b = (const block_q5_1 *)row + c / QK5_1;
    return f16(b->d) * (float)quant5(b->qs, b->qh, (int)(c % QK5_1)) + f16(b->m);
  }
  if (T == KERN_Q8_0) {
    const block_q8_0 *b = (const block_q8_0 *)row + c / QK8_0;
    return f16(b->d) * (float)b->qs[c % QK8_0];
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
    scale_min_k4(scales, j, &sc, &m);
    return f16(d) * (float)sc * (float)q - f16(dmin) * (float)m;
  }
  if (T == KERN_Q6_K) {
    const block_q6_K *b = (const block_q6_K *)row + c / QK_K;
    const int i = (int)(c % QK_K), half = i / 128, g = (i % 128) / 32, l = i % 32;
    const uint8_t lbyte = b->ql[64 * half + l + 32 * (g & 1)];
    const int lo = g < 2 ? (lbyte & 0xF) : (lbyte >> 4);
    const int hi2 = (b->qh[32 * half + l] >> (2 * g)) & 3;
    const int sc = b->scales[8 * half + l / 16 + 2 * g];
    return f16(b->d) * (float)sc * (float)((lo | hi2 << 4) - 32);
  }
  return 0.0f; /* not reached: the host only instantiates supported types */
}

/* One thread per output element of `rows` rows starting at row0. */
template <int T>
static __global__ void dequant_kernel(__nv_bfloat16 *out, const uint8_t *raw, int64_t row_bytes,
                                      int64_t cols, int64_t count) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    out[e] = kern_cuda__bf16(dequant_elem<T>(raw + r * row_bytes, c));
  }
}

/* Launches the dequantization of `rows` rows from raw (device) into out. */
static void launch_dequant(kern_cuda_t *cu, kern_type_t type, __nv_bfloat16 *out,
                           const uint8_t *raw, int64_t row_bytes, int64_t rows, int64_t cols) {
  const int64_t count = rows * cols;
  const unsigned grid = kern_cuda__grid(count, 256);
#define DQ(T)                                                                                  \
  case T:                                                                                      \
    dequant_kernel<T><<<grid, 256, 0, cu->stream>>>(out, raw, row_bytes, cols, count);         \
    break
  switch (type) {
    DQ(KERN_F32);
    DQ(KERN_F16);
    DQ(KERN_Q4_0);
    DQ(KERN_Q4_1);
    DQ(KERN_Q5_0);
    DQ(KERN_Q5_1);
    DQ(KERN_Q8_0);
    DQ(KERN_Q4_K);
    DQ(KERN_Q5_K);
    DQ(KERN_Q6_K);
    default:
      log_error("weights: no dequantization kernel for type %d", (int)type);
      abort(); /* programmer error: weight_init checked the type */
  }
#undef DQ
  CUDA_CHECK_LAUNCH();
}

int kern_cuda__weight_init(kern_backend_t *be, kern_weight_t *w, kern_type_t type, int64_t rows,
                           int64_t cols, const void *data) {
  kern_cuda_t *cu = kern_cuda(be);
  w->type = type;
  w->rows = rows;
  w->cols = cols;
  w->impl = NULL;
  if (!kern_type_is_weight((uint32_t)type)) {
    log_error("weight_init: type %d (%s) is not a weight type the CUDA backend supports", (int)type,
              kern_type_name((uint32_t)type) ? kern_type_name((uint32_t)type) : "unknown");
    return -EINVAL;
  }
  const int64_t row_bytes = kern_type_row_bytes((uint32_t)type, cols);
  if (rows <= 0 || cols <= 0 || row_bytes < 0 || rows > INT_MAX || cols > INT_MAX ||
      rows > (int64_t)(SIZE_MAX / 2) / cols) {
    log_error("weight_init: bad %s shape %lld x %lld", kern_type_name((uint32_t)type),
              (long long)rows, (long long)cols);
    return -EINVAL;
  }
  kern_cuda__enter(cu);
  __nv_bfloat16 *out = NULL;
  cudaError_t err = cudaMalloc((void **)&out, (size_t)(rows * cols) * sizeof *out);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    log_error("weight_init: out of GPU memory for a %lld x %lld bf16 weight (%s)", (long long)rows,
              (long long)cols, cudaGetErrorString(err));
    return -ENOMEM;
  }
  const uint8_t *src = (const uint8_t *)data;
  if (type == KERN_BF16) {
    CUDA_CHECK(cudaMemcpyAsync(out, src, (size_t)(rows * row_bytes), cudaMemcpyHostToDevice,
                               cu->stream));
  } else {
    /* Raw rows go up through the scratch workspace, a chunk at a time; the
     * stream orders each copy after the kernel that read the previous one. */
    int64_t chunk = (int64_t)KERN_CUDA_WORK_BYTES / row_bytes;
    if (chunk < 1) {
      log_error("weight_init: a row of %lld bytes does not fit the staging buffer",
                (long long)row_bytes);
      CUDA_CHECK(cudaFree(out));
      return -EINVAL;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
      CUDA_CHECK(cudaMemcpyAsync(cu->work, src + r0 * row_bytes, (size_t)(n * row_bytes),
                                 cudaMemcpyHostToDevice, cu->stream));
      launch_dequant(cu, type, out + r0 * cols, (const uint8_t *)cu->work, row_bytes, n, cols);
    }
  }
  /* The model file's mapping may go away after load: finish reading it now. */
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  w->impl = out;
  return 0;
}

void kern_cuda__weight_release(kern_backend_t *be, kern_weight_t *w) {
  if (!w->impl) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  CUDA_CHECK(cudaFree(w->impl));
  w->impl = NULL;
}
