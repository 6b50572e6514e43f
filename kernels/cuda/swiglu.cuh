/* kernels/cuda/swiglu.cuh — the SwiGLU gate (kern.h swiglu): y = silu(gate) * up,
 * f32, element-wise. */
#ifndef TRAM_KERN_CUDA_SWIGLU_CUH
#define TRAM_KERN_CUDA_SWIGLU_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i] = gate[i] / (1 + exp(-gate[i])) * up[i] over count elements; y may
 * alias gate. */
void kern_cuda__swiglu(kern_backend_t *be, float *y, const float *gate, const float *up,
                       int64_t count);

/* kern.h glu_joined: y [n, ff] from x [n, 2 ff] = [gate, up] per row, with
 * swiglu's (gelu 0) or geglu's (gelu 1) formula (glu.cuh). */
void kern_cuda__glu_joined(kern_backend_t *be, float *y, const float *x, int n, int64_t ff, int gelu);

#endif
