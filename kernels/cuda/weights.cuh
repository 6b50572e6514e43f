/* kernels/cuda/weights.cuh — weights on the GPU: every supported GGUF type
 * (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) is
 * dequantized to bf16 [rows, cols] in device memory at load. The raw blocks
 * go up through the scratch workspace in row chunks and a kernel expands
 * them; w->impl is the bf16 device matrix (owned by the weight, unless
 * weight_join made it a view of a joined one). */
#ifndef TRAM_KERN_CUDA_WEIGHTS_CUH
#define TRAM_KERN_CUDA_WEIGHTS_CUH

#include "kernels/cuda/cuda_common.cuh"

/* The bf16 matrix [w->rows, w->cols] behind a prepared weight. */
static inline const __nv_bfloat16 *kern_cuda__weight_data(const kern_weight_t *w) {
  return (const __nv_bfloat16 *)w->impl;
}

/* kern.h weight_init / weight_release. */
int kern_cuda__weight_init(kern_backend_t *be, kern_weight_t *w, kern_type_t type, int64_t rows,
                           int64_t cols, const void *data);
void kern_cuda__weight_release(kern_backend_t *be, kern_weight_t *w);
/* kern.h weight_join: the bf16 matrices stacked (kernels/kern_join.h) in one
 * allocation that `out` owns; each part becomes a view of its rows
 * (w->packed non-NULL: released without a free). */
int kern_cuda__weight_join(kern_backend_t *be, kern_weight_t *out, kern_weight_t *const *parts, int n);

#endif
