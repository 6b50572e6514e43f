/* kernels/cuda/add.cuh — residual add and per-row bias add (kern.h add, add_bias);
 * f32, element-wise, 16-byte vectors where the pointers allow. */
#ifndef TRAM_KERN_CUDA_ADD_CUH
#define TRAM_KERN_CUDA_ADD_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i] = a[i] + b[i] over count elements; y may alias a or b. */
void kern_cuda__add(kern_backend_t *be, float *y, const float *a, const float *b, int64_t count);

/* y[i, :] += bias for n rows of dim: y [n, dim], bias [dim]. */
void kern_cuda__add_bias(kern_backend_t *be, float *y, const float *bias, int n, int dim);

#endif
