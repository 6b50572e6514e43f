/* kernels/cuda/matmul.cuh — y = x · wᵀ (kern.h matmul) with cuBLAS: x is
 * rounded to bf16 in the scratch workspace (in row chunks that fit it), then
 * one bf16 × bf16 → f32 GEMM per chunk with f32 accumulation.
 *
 * Determinism: cuBLAS gives the same bits for the same shapes on the same
 * GPU and stream. Batch invariance (kern.h) is NOT guaranteed for matmul on
 * this backend: cuBLAS may pick a different kernel (tile shape, split-K) for
 * a different n, which changes the rounding of every row. See
 * docs/benchmarks/cuda.md. */
#ifndef TRAM_KERN_CUDA_MATMUL_CUH
#define TRAM_KERN_CUDA_MATMUL_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y [n, w->rows] = x [n, w->cols] · wᵀ; w prepared by kern_cuda__weight_init. */
void kern_cuda__matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n);

/* kern.h rmsnorm_matmul: y [n, w->rows] = rmsnorm(x [n, w->cols], weight,
 * eps) · wᵀ, the normed rows written to the workspace in bf16 as they are
 * computed (rmsnorm.cuh kern_cuda__rmsnorm_bf16): the bits of rmsnorm into
 * f32 then matmul, one f32 write and read of the [n, dim] rows and a
 * conversion kernel fewer. */
void kern_cuda__rmsnorm_matmul(kern_backend_t *be, float *y, const float *x, const float *weight, float eps,
                               const kern_weight_t *w, int n);

#endif
