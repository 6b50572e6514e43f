/* kernels/cuda/kv_write.cu — f32 K/V rows into their bf16 cache slots
 * (see kv_write.cuh). */
#include "kernels/cuda/kv_write.cuh"

/* grid.y = row; 4 elements per thread step (float4 in, 8 bytes out). */
static __global__ void kv_write_vec4(__nv_bfloat16 *kc, __nv_bfloat16 *vc, const float *k,
                                     const float *v, const int32_t *slots, int kv_dim) {
  const int64_t i = blockIdx.y;
  const int slot = slots[i];
  if (slot < 0) return;
  const float4 *ks = (const float4 *)(k + i * kv_dim), *vs = (const float4 *)(v + i * kv_dim);
  uint2 *kd = (uint2 *)(kc + (int64_t)slot * kv_dim), *vd = (uint2 *)(vc + (int64_t)slot * kv_dim);
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < kv_dim / 4; c += gridDim.x * blockDim.x) {
    float4 a = ks[c], b = vs[c];
    __nv_bfloat162 a0 = __floats2bfloat162_rn(a.x, a.y), a1 = __floats2bfloat162_rn(a.z, a.w);
    __nv_bfloat162 b0 = __floats2bfloat162_rn(b.x, b.y), b1 = __floats2bfloat162_rn(b.z, b.w);
    kd[c] = make_uint2(*(uint32_t *)&a0, *(uint32_t *)&a1);
    vd[c] = make_uint2(*(uint32_t *)&b0, *(uint32_t *)&b1);
  }
}

static __global__ void kv_write_scalar(__nv_bfloat16 *kc, __nv_bfloat16 *vc, const float *k,
                                       const float *v, const int32_t *slots, int kv_dim) {
  const int64_t i = blockIdx.y;
  const int slot = slots[i];
  if (slot < 0) return;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < kv_dim; c += gridDim.x * blockDim.x) {
    kc[(int64_t)slot * kv_dim + c] = kern_cuda__bf16(k[i * kv_dim + c]);
    vc[(int64_t)slot * kv_dim + c] = kern_cuda__bf16(v[i * kv_dim + c]);
  }
}

void kern_cuda__kv_write(kern_backend_t *be, void *k_cache, void *v_cache, const float *k,
                         const float *v, const int32_t *slots, int n, int kv_dim) {
  if (n <= 0 || kv_dim <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  __nv_bfloat16 *kc = (__nv_bfloat16 *)k_cache, *vc = (__nv_bfloat16 *)v_cache;
  const bool vec = kv_dim % 4 == 0 && kern_cuda__aligned16(k, v) &&
                   (((uintptr_t)k_cache | (uintptr_t)v_cache) & 7u) == 0;
  for (int r0 = 0; r0 < n; r0 += 65535) { /* grid.y limit */
    int rows = n - r0 < 65535 ? n - r0 : 65535;
    const float *kr = k + (int64_t)r0 * kv_dim, *vr = v + (int64_t)r0 * kv_dim;
    if (vec) {
      dim3 grid((kv_dim / 4 + 127) / 128, rows);
      kv_write_vec4<<<grid, 128, 0, cu->stream>>>(kc, vc, kr, vr, slots + r0, kv_dim);
    } else {
      dim3 grid((kv_dim + 255) / 256, rows);
      kv_write_scalar<<<grid, 256, 0, cu->stream>>>(kc, vc, kr, vr, slots + r0, kv_dim);
    }
    CUDA_CHECK_LAUNCH();
  }
}
