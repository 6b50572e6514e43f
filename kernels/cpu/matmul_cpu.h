/* kernels/cpu/matmul_cpu.h — weights and the matmul of the CPU backend.
 *
 * Weights stay where weight_init found them (views into the model file's
 * mapping, w->impl is the data pointer); with the fast precision the types
 * of repack.h also get a repacked copy for the integer kernels (w->packed,
 * matmul_rp.c), which the exact path and the embedding never read.
 *
 * The matmul computes on the quantized blocks as stored, with f32
 * activations. Each task dequantizes a panel of 12 weight rows (the whole
 * input width) into the backend's scratch, exactly (dequant.h), and runs
 * every activation row of its row block against that panel in register
 * tiles of 2 activation rows × 6 weight rows (K in L1-sized chunks): many
 * rows share one pass over the weights. With 1 or 2 rows there is nothing
 * to amortize the panel over: fused tiles dequantize into registers and
 * multiply at once. The activations are not quantized here (the exact
 * precision): int8 activation blocks (GGML's Q8 path) change the default
 * model's logits by up to 12 % (rel L2), int16 by 6e-4, against the 1e-3
 * the forward must meet (docs/benchmarks/matmul.md). The fast precision
 * (matmul_q8.h, int16 activation blocks) is a separate path that
 * kern_cpu_matmul takes for quantized weights when be->precision is FAST.
 *
 * Arithmetic of one output y[i, c] (the same whatever n, the other rows, the
 * tiling or the thread count; bitwise batch invariant): with K = cols
 * rounded up to 8 and both rows zero-padded to K, eight f32 lanes
 * acc[j] = fma(w[8t + j], x[8t + j], acc[j]) for t = 0, 1, ..., K/8 - 1,
 * starting from +0, then y = ((acc0 + acc4) + (acc2 + acc6)) +
 * ((acc1 + acc5) + (acc3 + acc7)). kern_cpu_matmul_ref computes the same
 * with portable C, one output at a time. */
#ifndef TRAM_KERN_CPU_MATMUL_H
#define TRAM_KERN_CPU_MATMUL_H

#include "kernels/kern.h"

/* be->weight_init: keeps a view of data (which must outlive the weight),
 * and repacks it for the fast path where it applies (-ENOMEM when that
 * copy cannot be allocated). -EINVAL, after logging why, for a type that
 * is not a weight type, a non-positive or block-misaligned shape, or a
 * size that overflows. */
int kern_cpu_weight_init(kern_backend_t *be, kern_weight_t *w, kern_type_t type, int64_t rows, int64_t cols,
                         const void *data);
/* be->weight_release: forgets the view (the data is the caller's) and
 * frees the repacked copy. */
void kern_cpu_weight_release(kern_backend_t *be, kern_weight_t *w);
/* be->weight_use: repacks a lazy weight (w->lazy) the first time. */
void kern_cpu_weight_use(kern_backend_t *be, kern_weight_t *w);

/* be->matmul: y[n, w->rows] = x[n, w->cols] · wᵀ on the pool's threads; y
 * must not overlap x. Scratch: KERN_CPU_MM_PANEL·cols floats per thread
 * (plus a zero-padded copy of x when cols % 8 != 0) from kern_cpu_scratch. */
void kern_cpu_matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n);

/* The same result, bit for bit, from portable scalar code on the calling
 * thread (the fallback's arithmetic; for tests). */
void kern_cpu_matmul_ref(float *y, const float *x, const kern_weight_t *w, int n);

#endif
