/* kernels/cuda/gemma_ops.cuh — the element-wise operations of Gemma's block
 * (kern.h geglu and scale), f32. */
#ifndef TRAM_KERN_CUDA_GEMMA_OPS_CUH
#define TRAM_KERN_CUDA_GEMMA_OPS_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i] = gelu_tanh(gate[i]) * up[i] over count elements; y may alias gate. */
void kern_cuda__geglu(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count);

/* y[i] = x[i] * s over count elements; y may alias x. */
void kern_cuda__scale(kern_backend_t *be, float *y, const float *x, float s, int64_t count);

#endif
