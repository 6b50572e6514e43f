/* kernels/cuda/add.cu — residual add and bias add (see add.cuh). */
#include "kernels/cuda/add.cuh"

static __global__ void add_vec4(float4 *y, const float4 *a, const float4 *b, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
       i += (int64_t)gridDim.x * blockDim.x) {
    float4 u = a[i], v = b[i];
    y[i] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
  }
}

static __global__ void add_scalar(float *y, const float *a, const float *b, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = a[i] + b[i];
}

void kern_cuda__add(kern_backend_t *be, float *y, const float *a, const float *b, int64_t count) {
  if (count <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  int64_t n4 = kern_cuda__aligned16(y, a, b) ? count / 4 : 0;
  if (n4) {
    add_vec4<<<kern_cuda__grid(n4, 256), 256, 0, cu->stream>>>((float4 *)y, (const float4 *)a,
                                                               (const float4 *)b, n4);
    CUDA_CHECK_LAUNCH();
  }
  int64_t done = n4 * 4;
  if (done < count) {
    add_scalar<<<kern_cuda__grid(count - done, 256), 256, 0, cu->stream>>>(y + done, a + done,
                                                                           b + done, count - done);
    CUDA_CHECK_LAUNCH();
  }
}

/* One block row per grid.y; threads stride over the row. */
static __global__ void add_bias_kernel(float *y, const float *bias, int dim) {
  float *row = y + (int64_t)blockIdx.y * dim;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < dim; c += gridDim.x * blockDim.x)
    row[c] += bias[c];
}

static __global__ void add_bias_vec4(float4 *y, const float4 *bias, int dim4) {
  float4 *row = y + (int64_t)blockIdx.y * dim4;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < dim4; c += gridDim.x * blockDim.x) {
    float4 u = row[c], v = bias[c];
    row[c] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
  }
}

void kern_cuda__add_bias(kern_backend_t *be, float *y, const float *bias, int n, int dim) {
  if (n <= 0 || dim <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  for (int r0 = 0; r0 < n; r0 += 65535) { /* grid.y limit */
    int rows = n - r0 < 65535 ? n - r0 : 65535;
    float *yr = y + (int64_t)r0 * dim;
    if (dim % 4 == 0 && kern_cuda__aligned16(yr, bias)) {
      int dim4 = dim / 4;
      dim3 grid((dim4 + 255) / 256, rows);
      add_bias_vec4<<<grid, 256, 0, cu->stream>>>((float4 *)yr, (const float4 *)bias, dim4);
    } else {
      dim3 grid((dim + 255) / 256, rows);
      add_bias_kernel<<<grid, 256, 0, cu->stream>>>(yr, bias, dim);
    }
    CUDA_CHECK_LAUNCH();
  }
}
