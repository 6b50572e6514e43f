/* kernels/cuda/gemma_ops.cu — GeGLU and scale (see gemma_ops.cuh): one
 * thread per element, grid-stride. */
#include "kernels/cuda/gemma_ops.cuh"
#include "kernels/cuda/glu.cuh"

static __global__ void geglu_kernel(float *y, const float *gate, const float *up, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = kern_cuda__geglu1(gate[i], up[i]);
}

static __global__ void scale_kernel(float *y, const float *x, float s, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] * s;
}

void kern_cuda__geglu(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count) {
  if (count <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  geglu_kernel<<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(y, gate, up, count);
  CUDA_CHECK_LAUNCH();
}

void kern_cuda__scale(kern_backend_t *be, float *y, const float *x, float s, int64_t count) {
  if (count <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  scale_kernel<<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(y, x, s, count);
  CUDA_CHECK_LAUNCH();
}
