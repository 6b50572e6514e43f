/* kernels/cuda/moe.cu — the experts' weighted sum and gpt-oss's clamped
 * SwiGLU (see moe.cuh). */
#include "kernels/cuda/moe.cuh"

/* grid = (column blocks, rows): each thread one column of one row, its
 * terms in order. */
static __global__ void moe_combine_kernel(float *y, const float *src, const int32_t *slot, const float *w, int k,
                                          int dim) {
  const int64_t t = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  float acc = 0.0f;
  for (int j = 0; j < k; j++)
    acc = __fadd_rn(acc, __fmul_rn(w[t * k + j], src[(int64_t)slot[t * k + j] * dim + c]));
  y[t * dim + c] = acc;
}

void kern_cuda__moe_combine(kern_backend_t *be, float *y, const float *src, const int32_t *slot, const float *w,
                            int n, int k, int dim) {
  if (n <= 0 || dim <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  for (int r0 = 0; r0 < n; r0 += CUDA_GEOM_GRID_YZ_MAX) { /* grid.y limit */
    const int rows = n - r0 < CUDA_GEOM_GRID_YZ_MAX ? n - r0 : CUDA_GEOM_GRID_YZ_MAX;
    moe_combine_kernel<<<dim3((dim + 255) / 256, rows), 256, 0, cu->stream>>>(
        y + (int64_t)r0 * dim, src, slot + (int64_t)r0 * k, w + (int64_t)r0 * k, k, dim);
    CUDA_CHECK_LAUNCH();
  }
}

static __global__ void swiglu_oai_kernel(float *y, const float *gate, const float *up, int64_t n, float alpha,
                                         float limit) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float g = fminf(gate[i], limit), u = fmaxf(fminf(up[i], limit), -limit);
    y[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
  }
}

void kern_cuda__swiglu_oai(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count,
                           float alpha, float limit) {
  if (count <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  swiglu_oai_kernel<<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(y, gate, up, count, alpha, limit);
  CUDA_CHECK_LAUNCH();
}
