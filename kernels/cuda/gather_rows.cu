/* kernels/cuda/gather_rows.cu — y[i, :] = x[idx[i], :] (see gather_rows.cuh). */
#include "kernels/cuda/gather_rows.cuh"

/* grid.y = output row; threads stride over the row. */
template <typename T>
static __global__ void gather_rows_kernel(T *y, const T *x, const int32_t *idx, int dim) {
  const int64_t i = blockIdx.y;
  const T *src = x + (int64_t)idx[i] * dim;
  T *dst = y + i * dim;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < dim; c += gridDim.x * blockDim.x)
    dst[c] = src[c];
}

void kern_cuda__gather_rows(kern_backend_t *be, float *y, const float *x, const int32_t *idx,
                            int n_idx, int dim) {
  if (n_idx <= 0 || dim <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  const bool vec = dim % 4 == 0 && kern_cuda__aligned16(y, x);
  const int width = vec ? dim / 4 : dim;
  for (int r0 = 0; r0 < n_idx; r0 += 65535) { /* grid.y limit */
    int rows = n_idx - r0 < 65535 ? n_idx - r0 : 65535;
    dim3 grid((width + 255) / 256, rows);
    if (vec)
      gather_rows_kernel<float4><<<grid, 256, 0, cu->stream>>>(
          (float4 *)(y + (int64_t)r0 * dim), (const float4 *)x, idx + r0, width);
    else
      gather_rows_kernel<float><<<grid, 256, 0, cu->stream>>>(y + (int64_t)r0 * dim, x, idx + r0,
                                                              width);
    CUDA_CHECK_LAUNCH();
  }
}
