/* kernels/cuda/weights.cu — weights dequantized to bf16 at load (see
 * weights.cuh; the per-element formulas are in dequant.cuh). */
#include <errno.h>
#include <limits.h>

#include <stdio.h>
#include <string.h>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/graph.cuh"
#include "kernels/cuda/weights.cuh"
#include "kernels/kern_join.h"

/* One thread per output element of `rows` rows starting at row0. */
template <int T>
static __global__ void dequant_kernel(__nv_bfloat16 *out, const uint8_t *raw, int64_t row_bytes,
                                      int64_t cols, int64_t count) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    out[e] = kern_cuda__bf16(kern_cuda__dequant_elem<T>(raw + r * row_bytes, c));
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
    DQ(KERN_MXFP4);
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
  w->impl = w->packed = NULL;
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

/* The parts are copied into one allocation, device to device, then their
 * own matrices are freed and each becomes a view of its rows there
 * (w->packed holds the joined matrix: a view owns nothing). */
int kern_cuda__weight_join(kern_backend_t *be, kern_weight_t *out, kern_weight_t *const *parts, int n) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_join_plan_t p;
  char why[160];
  int rc = kern_join_plan(&p, (const kern_weight_t *const *)parts, n, why, sizeof why);
  for (int i = 0; rc == 0 && i < n; i++) {
    if (!parts[i]->impl || parts[i]->packed) {
      snprintf(why, sizeof why, "part %d is %s", i, parts[i]->impl ? "joined already" : "not prepared");
      rc = -EINVAL;
    }
    for (int j = 0; rc == 0 && j < i; j++)
      if (parts[j]->impl == parts[i]->impl) { /* its matrix would be freed twice */
        snprintf(why, sizeof why, "part %d is part %d again", i, j);
        rc = -EINVAL;
      }
  }
  if (rc != 0) {
    log_error("weight_join: %s", why);
    return rc;
  }
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "weight_join");
  __nv_bfloat16 *all = NULL;
  cudaError_t err = cudaMalloc((void **)&all, (size_t)(p.rows * p.cols) * sizeof *all);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    log_error("weight_join: out of GPU memory for a %lld x %lld bf16 weight (%s)", (long long)p.rows,
              (long long)p.cols, cudaGetErrorString(err));
    return -ENOMEM;
  }
  for (int i = 0; i < n; i++)
    CUDA_CHECK(cudaMemcpyAsync(all + p.row0[i] * p.cols, parts[i]->impl,
                               (size_t)(parts[i]->rows * p.cols) * sizeof *all, cudaMemcpyDeviceToDevice,
                               cu->stream));
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  for (int i = 0; i < n; i++) {
    CUDA_CHECK(cudaFree(parts[i]->impl));
    parts[i]->impl = all + p.row0[i] * p.cols;
    parts[i]->packed = all;
  }
  memset(out, 0, sizeof *out);
  out->type = p.type;
  out->rows = p.rows;
  out->cols = p.cols;
  out->impl = all;
  return 0;
}

void kern_cuda__weight_release(kern_backend_t *be, kern_weight_t *w) {
  if (w->packed) { /* a view of a joined matrix: its owner frees it */
    w->impl = w->packed = NULL;
    return;
  }
  if (!w->impl) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  CUDA_CHECK(cudaFree(w->impl));
  w->impl = NULL;
}
