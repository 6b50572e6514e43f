/* kernels/cuda/gather_rows.cuh — picks rows of an f32 matrix (kern.h gather_rows),
 * e.g. the hidden states that need logits. */
#ifndef TRAM_KERN_CUDA_GATHER_ROWS_CUH
#define TRAM_KERN_CUDA_GATHER_ROWS_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i, :] = x[idx[i], :]: y [n_idx, dim], x [*, dim], idx [n_idx]. */
void kern_cuda__gather_rows(kern_backend_t *be, float *y, const float *x, const int32_t *idx,
                            int n_idx, int dim);

#endif
