/* kernels/cuda/swiglu.cu — y = silu(gate) * up (see swiglu.cuh). */
#include "kernels/cuda/swiglu.cuh"

static __device__ __forceinline__ float swiglu1(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

static __global__ void swiglu_vec4(float4 *y, const float4 *gate, const float4 *up, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
       i += (int64_t)gridDim.x * blockDim.x) {
    float4 g = gate[i], u = up[i];
    y[i] = make_float4(swiglu1(g.x, u.x), swiglu1(g.y, u.y), swiglu1(g.z, u.z), swiglu1(g.w, u.w));
  }
}

static __global__ void swiglu_scalar(float *y, const float *gate, const float *up, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = swiglu1(gate[i], up[i]);
}

void kern_cuda__swiglu(kern_backend_t *be, float *y, const float *gate, const float *up,
                       int64_t count) {
  if (count <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  int64_t n4 = kern_cuda__aligned16(y, gate, up) ? count / 4 : 0;
  if (n4) {
    swiglu_vec4<<<kern_cuda__grid(n4, 256), 256, 0, cu->stream>>>(
        (float4 *)y, (const float4 *)gate, (const float4 *)up, n4);
    CUDA_CHECK_LAUNCH();
  }
  int64_t done = n4 * 4;
  if (done < count) {
    swiglu_scalar<<<kern_cuda__grid(count - done, 256), 256, 0, cu->stream>>>(
        y + done, gate + done, up + done, count - done);
    CUDA_CHECK_LAUNCH();
  }
}
