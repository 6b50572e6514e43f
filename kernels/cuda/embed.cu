/* kernels/cuda/embed.cu — rows of the bf16 embedding table as f32
 * (see embed.cuh). */
#include "kernels/cuda/embed.cuh"
#include "kernels/cuda/weights.cuh"

/* grid.y = token; 8 bf16 (one 16-byte load) per thread step. */
static __global__ void embed_vec8(float *y, const uint4 *table, const int32_t *ids, int cols8) {
  const int64_t i = blockIdx.y;
  const uint4 *src = table + (int64_t)ids[i] * cols8;
  float4 *dst = (float4 *)(y + i * cols8 * 8);
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols8; c += gridDim.x * blockDim.x) {
    uint4 v = src[c];
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&v;
    float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    float2 d = __bfloat1622float2(h[2]), e = __bfloat1622float2(h[3]);
    dst[2 * c] = make_float4(a.x, a.y, b.x, b.y);
    dst[2 * c + 1] = make_float4(d.x, d.y, e.x, e.y);
  }
}

static __global__ void embed_scalar(float *y, const __nv_bfloat16 *table, const int32_t *ids,
                                    int cols) {
  const int64_t i = blockIdx.y;
  const __nv_bfloat16 *src = table + (int64_t)ids[i] * cols;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
    y[i * cols + c] = __bfloat162float(src[c]);
}

void kern_cuda__embed(kern_backend_t *be, float *y, const kern_weight_t *w, const int32_t *ids,
                      int n) {
  if (n <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  const __nv_bfloat16 *table = kern_cuda__weight_data(w);
  const int cols = (int)w->cols;
  const bool vec = cols % 8 == 0 && kern_cuda__aligned16(y, table);
  for (int r0 = 0; r0 < n; r0 += 65535) { /* grid.y limit */
    int rows = n - r0 < 65535 ? n - r0 : 65535;
    float *yr = y + (int64_t)r0 * cols;
    if (vec) {
      dim3 grid((cols / 8 + 127) / 128, rows);
      embed_vec8<<<grid, 128, 0, cu->stream>>>(yr, (const uint4 *)table, ids + r0, cols / 8);
    } else {
      dim3 grid((cols + 255) / 256, rows);
      embed_scalar<<<grid, 256, 0, cu->stream>>>(yr, table, ids + r0, cols);
    }
    CUDA_CHECK_LAUNCH();
  }
}
