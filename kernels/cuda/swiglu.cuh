/* kernels/cuda/swiglu.cuh — the SwiGLU gate (kern.h swiglu): y = silu(gate) * up,
 * f32, element-wise. */
#ifndef TRAM_KERN_CUDA_SWIGLU_CUH
#define TRAM_KERN_CUDA_SWIGLU_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i] = gate[i] / (1 + exp(-gate[i])) * up[i] over count elements; y may
 * alias gate. */
void kern_cuda__swiglu(kern_backend_t *be, float *y, const float *gate, const float *up,
                       int64_t count);

#endif
