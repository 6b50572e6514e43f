/* kernels/cuda/gdn.cuh — the Gated DeltaNet operations (kern.h gdn_conv,
 * gdn_rule, sigmoid_mul, copy_cols; kern_gdn_args_t) of Qwen3.5's linear-
 * attention layers, f32, in the recurrent form: the same arithmetic for a
 * prompt chunk as for a decode step (kernels/cpu/ops_gdn.c's semantics).
 *
 * Batch invariance, as on the CPU: the convolution runs one thread per
 * (sequence, channel) and the rule one thread block per (sequence, value
 * head), each over the sequence's rows in token order with loops of a fixed
 * order, so a row's bits depend on its own sequence only. The recurrent
 * state stays in device memory (the pool's slot); nothing is allocated. */
#ifndef TRAM_KERN_CUDA_GDN_CUH
#define TRAM_KERN_CUDA_GDN_CUH

#include "kernels/cuda/cuda_common.cuh"

/* The depthwise causal convolution with its cached window (kern.h). */
void kern_cuda__gdn_conv(kern_backend_t *be, float *y, const float *x, const float *w, const kern_gdn_args_t *a);

/* The gated delta rule, recurrent form (kern.h); head_k, head_v <= 512
 * (model/ checks it). */
void kern_cuda__gdn_rule(kern_backend_t *be, float *out, const float *y, const float *alpha, const float *beta,
                         const float *a_neg, const float *dt_bias, const kern_gdn_args_t *a);

/* y[i] = x[i] · sigmoid(g[i]); y may alias x. */
void kern_cuda__sigmoid_mul(kern_backend_t *be, float *y, const float *x, const float *g, int64_t count);

/* y[r · ldy + c] = x[r · ldx + c] for r < rows, c < cols (a 2-D copy on
 * the stream). */
void kern_cuda__copy_cols(kern_backend_t *be, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                          int64_t cols);

#endif
