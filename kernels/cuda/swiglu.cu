/* kernels/cuda/swiglu.cu — y = silu(gate) * up (see swiglu.cuh), and the
 * gate of a joined [gate, up] matmul (glu_joined), with glu.cuh's formulas. */
#include "kernels/cuda/glu.cuh"
#include "kernels/cuda/swiglu.cuh"

static __global__ void swiglu_vec4(float4 *y, const float4 *gate, const float4 *up, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
       i += (int64_t)gridDim.x * blockDim.x) {
    float4 g = gate[i], u = up[i];
    y[i] = make_float4(kern_cuda__swiglu1(g.x, u.x), kern_cuda__swiglu1(g.y, u.y),
                       kern_cuda__swiglu1(g.z, u.z), kern_cuda__swiglu1(g.w, u.w));
  }
}

static __global__ void swiglu_scalar(float *y, const float *gate, const float *up, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = kern_cuda__swiglu1(gate[i], up[i]);
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

/* One thread per output element e = t·ff + i of y [n, ff]: gate x[t, i], up
 * x[t, ff + i]. */
template <int GELU>
static __global__ void glu_joined_kernel(float *y, const float *x, int64_t ff, int64_t count) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = e / ff, i = e % ff;
    const float g = x[t * 2 * ff + i], u = x[t * 2 * ff + ff + i];
    y[e] = GELU ? kern_cuda__geglu1(g, u) : kern_cuda__swiglu1(g, u);
  }
}

void kern_cuda__glu_joined(kern_backend_t *be, float *y, const float *x, int n, int64_t ff, int gelu) {
  if (n <= 0 || ff <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  const int64_t count = (int64_t)n * ff;
  if (gelu)
    glu_joined_kernel<1><<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(y, x, ff, count);
  else
    glu_joined_kernel<0><<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(y, x, ff, count);
  CUDA_CHECK_LAUNCH();
}
