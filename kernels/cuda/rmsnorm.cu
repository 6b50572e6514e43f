/* kernels/cuda/rmsnorm.cu — RMSNorm, one 256-thread block per row (see
 * rmsnorm.cuh), into f32 or straight into a GEMM's bf16 input. The sum of squares is a fixed-order reduction: each thread
 * sums its strided elements in order, then a butterfly inside each warp
 * (every lane ends with the same bits) and warp 0 adds the 8 warp sums in
 * order. Nothing depends on the other rows. */
#include "kernels/cuda/rmsnorm.cuh"

#define RMS_THREADS 256

/* The mean square of the row, broadcast to every thread. */
static __device__ __forceinline__ float block_sum(float v, float *red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int w = 0; w < RMS_THREADS / 32; w++) s += red[w];
    red[RMS_THREADS / 32] = s;
  }
  __syncthreads();
  return red[RMS_THREADS / 32];
}

/* One output element: f32 as computed, or that f32 rounded to bf16 (to
 * nearest even, as matmul.cu's conversion rounds it: the same bits). */
static __device__ __forceinline__ void put(float *y, int64_t i, float v) { y[i] = v; }
static __device__ __forceinline__ void put(__nv_bfloat16 *y, int64_t i, float v) { y[i] = kern_cuda__bf16(v); }

/* VEC = 4: the row is read as float4 (dim % 4 == 0, 16-byte aligned).
 * OUT: float (kern.h rmsnorm) or __nv_bfloat16 (a GEMM's input). */
template <int VEC, typename OUT>
static __global__ void __launch_bounds__(RMS_THREADS)
    rmsnorm_kernel(OUT *y, const float *x, const float *weight, int dim, float eps) {
  __shared__ float red[RMS_THREADS / 32 + 1];
  const int64_t row = blockIdx.x;
  const float *xr = x + row * dim;
  OUT *yr = y + row * dim;
  float ss = 0.0f;
  if (VEC == 4) {
    const float4 *x4 = (const float4 *)xr;
    for (int i = threadIdx.x; i < dim / 4; i += RMS_THREADS) {
      float4 v = x4[i];
      ss = fmaf(v.x, v.x, ss);
      ss = fmaf(v.y, v.y, ss);
      ss = fmaf(v.z, v.z, ss);
      ss = fmaf(v.w, v.w, ss);
    }
  } else {
    for (int i = threadIdx.x; i < dim; i += RMS_THREADS) ss = fmaf(xr[i], xr[i], ss);
  }
  const float inv = 1.0f / sqrtf(block_sum(ss, red) / (float)dim + eps);
  /* Every read of x happened before block_sum's barriers: y may alias x. */
  if (VEC == 4) {
    const float4 *x4 = (const float4 *)xr, *w4 = (const float4 *)weight;
    for (int i = threadIdx.x; i < dim / 4; i += RMS_THREADS) {
      float4 v = x4[i], w = w4[i];
      const float4 o = make_float4(v.x * inv * w.x, v.y * inv * w.y, v.z * inv * w.z, v.w * inv * w.w);
      if constexpr (sizeof(OUT) == 4) {
        ((float4 *)yr)[i] = o;
      } else {
        put(yr, 4 * (int64_t)i, o.x), put(yr, 4 * (int64_t)i + 1, o.y);
        put(yr, 4 * (int64_t)i + 2, o.z), put(yr, 4 * (int64_t)i + 3, o.w);
      }
    }
  } else {
    for (int i = threadIdx.x; i < dim; i += RMS_THREADS) put(yr, i, xr[i] * inv * weight[i]);
  }
}

template <typename OUT>
static void launch(kern_cuda_t *cu, OUT *y, const float *x, const float *weight, int n, int dim, float eps) {
  if (dim % 4 == 0 && kern_cuda__aligned16(y, x, weight))
    rmsnorm_kernel<4, OUT><<<n, RMS_THREADS, 0, cu->stream>>>(y, x, weight, dim, eps);
  else
    rmsnorm_kernel<1, OUT><<<n, RMS_THREADS, 0, cu->stream>>>(y, x, weight, dim, eps);
  CUDA_CHECK_LAUNCH();
}

void kern_cuda__rmsnorm(kern_backend_t *be, float *y, const float *x, const float *weight, int n,
                        int dim, float eps) {
  if (n <= 0 || dim <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  launch(cu, y, x, weight, n, dim, eps);
}

void kern_cuda__rmsnorm_bf16(kern_cuda_t *cu, __nv_bfloat16 *y, const float *x, const float *weight, int n,
                             int dim, float eps) {
  if (n > 0 && dim > 0) launch(cu, y, x, weight, n, dim, eps);
}
