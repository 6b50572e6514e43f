/* kernels/cuda/rmsnorm.cuh — RMSNorm (kern.h rmsnorm): one thread block per row,
 * a fixed-order f32 reduction, so a row's bits depend on that row alone. */
#ifndef TRAM_KERN_CUDA_RMSNORM_CUH
#define TRAM_KERN_CUDA_RMSNORM_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight: x, y [n, dim],
 * weight [dim]; y may alias x. */
void kern_cuda__rmsnorm(kern_backend_t *be, float *y, const float *x, const float *weight, int n,
                        int dim, float eps);

/* The same rows rounded to bf16 as they are written (to nearest even: the
 * bits of kern_cuda__rmsnorm's f32 output converted by matmul.cu), into y
 * [n, dim] bf16, which must not overlap x; the caller has entered the
 * device (rmsnorm_matmul's normed GEMM input, matmul.cu). */
void kern_cuda__rmsnorm_bf16(kern_cuda_t *cu, __nv_bfloat16 *y, const float *x, const float *weight, int n,
                             int dim, float eps);

#endif
