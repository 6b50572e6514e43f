/* kernels/cuda/glu.cuh — the element formulas of the gated MLPs, shared by
 * swiglu and geglu (one tensor each) and glu_joined (a joined [gate, up]
 * matmul's output, swiglu.cu), so both give the same bits. */
#ifndef TRAM_KERN_CUDA_GLU_CUH
#define TRAM_KERN_CUDA_GLU_CUH

#include "kernels/cuda/cuda_common.cuh"

/* silu(g) · u */
static __device__ __forceinline__ float kern_cuda__swiglu1(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

/* gelu_tanh(g) · u (PyTorch's gelu(approximate="tanh")) */
static __device__ __forceinline__ float kern_cuda__geglu1(float g, float u) {
  return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * fmaf(0.044715f * g, g * g, g))) * u;
}

#endif
