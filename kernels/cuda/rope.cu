/* kernels/cuda/rope.cu — rotary position embedding (see rope.cuh). */
#include "kernels/cuda/rope.cuh"

#define ROPE_THREADS 128

/* One block per token; dynamic shared memory holds cos[half], sin[half]. */
static __global__ void __launch_bounds__(ROPE_THREADS)
    rope_kernel(float *x, const int32_t *pos, int n_heads, int head_dim, int half,
                const float *inv_freq, int neox) {
  extern __shared__ float cs[];
  const int64_t tok = blockIdx.x;
  const double p = (double)pos[tok];
  for (int i = threadIdx.x; i < half; i += ROPE_THREADS) {
    double s, c;
    sincos(p * (double)inv_freq[i], &s, &c);
    cs[i] = (float)c;
    cs[half + i] = (float)s;
  }
  __syncthreads();
  float *xt = x + tok * n_heads * head_dim;
  const int total = n_heads * half;
  for (int k = threadIdx.x; k < total; k += ROPE_THREADS) {
    const int h = k / half, q = k - h * half;
    float *xh = xt + (int64_t)h * head_dim;
    const int i0 = neox ? q : 2 * q, i1 = neox ? q + half : 2 * q + 1;
    const float a = xh[i0], b = xh[i1], c = cs[q], s = cs[half + q];
    xh[i0] = a * c - b * s;
    xh[i1] = a * s + b * c;
  }
}

void kern_cuda__rope(kern_backend_t *be, float *x, const int32_t *pos, int n, int n_heads,
                     int head_dim, int rot_dim, const float *inv_freq, int neox) {
  const int half = rot_dim / 2;
  if (n <= 0 || n_heads <= 0 || half <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  rope_kernel<<<n, ROPE_THREADS, 2 * half * sizeof(float), cu->stream>>>(
      x, pos, n_heads, head_dim, half, inv_freq, neox);
  CUDA_CHECK_LAUNCH();
}
