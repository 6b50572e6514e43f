/* kernels/cpu/ops_cpu.h — the dense operations of the CPU backend: the
 * embedding lookup, RMSNorm, RoPE, SwiGLU, residual adds, biases and the row
 * gather (contracts in kernels/kern.h).
 *
 * Portable C that the compiler vectorizes, except the SwiGLU's exp, which
 * has an AVX2 path (same bits as the portable one); each output row
 * depends only on its own inputs, through the same operations whatever the
 * batch, the split or the thread count (batch invariance). Large calls run
 * on the backend's pool. */
#ifndef TRAM_KERN_CPU_OPS_H
#define TRAM_KERN_CPU_OPS_H

#include "kernels/kern.h"

/* y[n, w->cols] = rows ids[i] of w, dequantized exactly (dequant.h). */
void kern_cpu_embed(kern_backend_t *be, float *y, const kern_weight_t *w, const int32_t *ids, int n);

/* y[i, :] = (x[i, :] · s) · weight, s = 1 / sqrt(mean(x[i, :]²) + eps): the
 * sum of squares in 8 f32 lanes (element k in lane k % 8, summed as the
 * matmul's lanes), s in double. */
void kern_cpu_rmsnorm(kern_backend_t *be, float *y, const float *x, const float *weight, int n, int dim,
                      float eps);

/* RoPE as kern.h says. Each angle is pos · inv_freq[p] computed exactly in
 * double (a 24-bit × 31-bit product fits 53 bits), and its cos and sin in
 * double, rounded once to f32: exact angles at any position, 128k and
 * beyond (an f32 angle would be off by up to ~0.008 rad there). */
void kern_cpu_rope(kern_backend_t *be, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
                   int rot_dim, const float *inv_freq, int neox);

/* y = silu(gate) · up = gate / (1 + exp(-gate)) · up, with an exp accurate
 * to ~2 ulp (kern_cpu_expf). */
void kern_cpu_swiglu(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count);

/* y = gelu_tanh(gate) · up (kernels/cpu/ops_gemma.c), with tanhf. */
void kern_cpu_geglu(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count);
/* kern.h glu_joined: swiglu's (gelu 0) or geglu's (gelu 1) bits, row by row of a joined [gate, up]. */
void kern_cpu_glu_joined(kern_backend_t *be, float *y, const float *x, int n, int64_t ff, int gelu);
/* gpt-oss's clamped SwiGLU (kernels/cpu/ops_oai.c; kernels/kern.h), with expf. */
void kern_cpu_swiglu_oai(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count, float alpha,
                         float limit);
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))): PyTorch's gelu(approximate="tanh"). */
float kern_cpu_gelu_tanh(float x);
/* y = x · s. */
void kern_cpu_scale(kern_backend_t *be, float *y, const float *x, float s, int64_t count);

void kern_cpu_add(kern_backend_t *be, float *y, const float *a, const float *b, int64_t count);
void kern_cpu_add_bias(kern_backend_t *be, float *y, const float *bias, int n, int dim);
void kern_cpu_gather_rows(kern_backend_t *be, float *y, const float *x, const int32_t *idx, int n_idx, int dim);
void kern_cpu_moe_combine(kern_backend_t *be, float *y, const float *src, const int32_t *slot, const float *w, int n,
                          int k, int dim);

/* The Gated DeltaNet operations (kernels/cpu/ops_gdn.c; contracts in
 * kernels/kern.h). */
void kern_cpu_gdn_conv(kern_backend_t *be, float *y, const float *x, const float *w, const kern_gdn_args_t *a);
void kern_cpu_gdn_rule(kern_backend_t *be, float *out, const float *y, const float *alpha, const float *beta,
                       const float *a_neg, const float *dt_bias, const kern_gdn_args_t *a);
void kern_cpu_sigmoid_mul(kern_backend_t *be, float *y, const float *x, const float *g, int64_t count);
void kern_cpu_copy_cols(kern_backend_t *be, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                        int64_t cols);

/* exp(x) for the SwiGLU: within a few ulp for x in [-87.3, 88]; x is
 * first clamped to that range (exp(-1000) gives 1.2e-38, exp(1000) 1.7e38,
 * NaN the lower bound), so silu(±large) is right to ~1e-36 and silu(NaN)
 * is NaN through the division. */
float kern_cpu_expf(float x);

/* The SwiGLU's portable path on the calling thread (the AVX2 path gives
 * the same bits; for tests). */
void kern_cpu__swiglu_scalar(float *y, const float *gate, const float *up, int64_t count);

#endif
