/* kernels/cuda/sample.cuh — picks the next token of logit rows on the device
 * (kern.h sample; the arithmetic and what qualifies: kernels/kern_sample.h). */
#ifndef TRAM_KERN_CUDA_SAMPLE_CUH
#define TRAM_KERN_CUDA_SAMPLE_CUH

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/kern_sample.h"

/* outs[i] for each row i of logits [n_rows, n_vocab] with rows[i].on_device,
 * after its ops (the row's logits change). */
void kern_cuda__sample(kern_backend_t *be, kern_sample_out_t *outs, float *logits, const kern_sample_row_t *rows,
                       const kern_sample_op_t *ops, int n_rows, int32_t n_vocab);

#endif
