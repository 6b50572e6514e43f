/* kernels/cuda/rmsnorm.cuh — RMSNorm (kern.h rmsnorm): one thread block per row,
 * a fixed-order f32 reduction, so a row's bits depend on that row alone. */
#ifndef TRAM_KERN_CUDA_RMSNORM_CUH
#define TRAM_KERN_CUDA_RMSNORM_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight: x, y [n, dim],
 * weight [dim]; y may alias x. */
void kern_cuda__rmsnorm(kern_backend_t *be, float *y, const float *x, const float *weight, int n,
                        int dim, float eps);

#endif
