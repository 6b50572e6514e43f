/* kernels/cuda/embed.cuh — embedding lookup (kern.h embed) from a weight the
 * backend holds as bf16 [rows, cols] (see weights.cuh). */
#ifndef TRAM_KERN_CUDA_EMBED_CUH
#define TRAM_KERN_CUDA_EMBED_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[i, :] = row ids[i] of w as f32: y [n, w->cols], ids [n] in [0, w->rows). */
void kern_cuda__embed(kern_backend_t *be, float *y, const kern_weight_t *w, const int32_t *ids,
                      int n);

#endif
