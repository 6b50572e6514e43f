/* kernels/cpu/matmul_q8.h — the fast matmul of the CPU backend: integer
 * (int16) activations on the quantized weights (`--precision fast`; private to
 * kernels/cpu/).
 *
 * Activations. Each activation row is cut into 32-element blocks, each
 * quantized to int16 (one level of int8 per block, GGML's Q8 form, misses
 * the accuracy gates on the default model, and a second int8 residual byte
 * costs more: docs/benchmarks/precision.md). For block b, kern_cpu_q8a_t:
 * amax = max |x| over the block (a NaN element counts as 0), id = 32767 /
 * amax, q[e] = round-half-even(clamp(x[e]·id, -32767, 32767)) (a NaN
 * product clamps to -32767), d = amax / 32767, s = d·(sum of q). A block
 * whose amax is below FLT_MIN (zero or subnormal) or not finite gets d = s
 * = 0 and q = 0.
 *
 * Weights. Each 32-element block of a weight row (a block of the 32-element
 * types, a 32-element sub-block of the K-quants) is read as 32 small
 * integers w[e], f32 scales and an f32 offset mw, so that element e is
 * dw·w[e] + mw:
 *   Q4_0  w = q - 8, dw = d, mw = 0      Q4_1  w = q, dw = d, mw = m
 *   Q5_0  w = q - 16, dw = d, mw = 0     Q5_1  w = q, dw = d, mw = m
 *   Q8_0  w = q, dw = d, mw = 0
 *   Q4_K/Q5_K  w = q, dw = d·sc, mw = -(dmin·m)
 *   Q6_K  w = q - 32, two units of 16 with dw = d·sc[h] (h = 0, 1), mw = 0
 *   MXFP4 w = the doubled E2M1 value of the code (-12..12), dw = 2^(e - 128),
 *         mw = 0 (dw·x.d is exact unless it leaves f32's range)
 * A unit is the 32 elements (16 for Q6_K, whose halves have their own
 * scale). |w| <= 128. F32/F16/BF16 weights and widths that are not a
 * multiple of 32 have no fast kernel: they take the exact path
 * (matmul_cpu.h).
 *
 * Arithmetic of one output y[i, c], fixed whatever n, the other rows, the
 * tiling or the thread count (bitwise batch invariant), with x the
 * quantized row i, over the units of weight row c in order:
 *   isum = sum over the unit's e of w[e]·x.q[e]        (int32, exact)
 *   acc = fma(dw·x.d, (float)isum, acc)
 *   off = fma(mw, x.s, off)                             (once per block)
 * from acc = off = +0, then y = acc + off. Every integer is exact in int32
 * (|isum| <= 32·128·32767 < 2^31) and its conversion to f32 is correctly
 * rounded, so the order in which a kernel adds the products does not
 * matter: the AVX2 tiles (vpmaddwd, or vpdpwssd), the AVX-512 ones (two
 * weight rows per register, or a packed panel of 16 weight rows whose
 * int32 lanes are 16 outputs) and the portable code give the same bits.
 * One f32 accumulator per output (not eight lanes) keeps the float work per
 * block at one fma, which the 16-output packed kernel does for 16 outputs
 * in one instruction. */
#ifndef TRAM_KERN_CPU_MATMUL_Q8_H
#define TRAM_KERN_CPU_MATMUL_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/simd.h"
#include "kernels/kern.h"

/* One quantized 32-element activation block (72 bytes). */
typedef struct kern_cpu_q8a {
  int16_t q[32]; /* x ≈ d·q */
  float d;
  float s;       /* d·sum(q), for the weight offset */
} kern_cpu_q8a_t;

/* The same block split into the bytes of its integers, for the kernels
 * over repacked weights (matmul_rp_avx2.c): q[e] = 256·h[e] + l[e] exactly
 * (h = q >> 8, l = q & 255), d and s as above, qsum the sums of q over
 * elements 0..15 and 16..31 (80 bytes). */
typedef struct kern_cpu_q8s {
  uint8_t l[32];
  int8_t h[32];
  float d;
  float s;
  int32_t qsum[2];
} kern_cpu_q8s_t;

/* 1 when weights of `type` and width `cols` have a fast kernel. */
int kern_cpu_q8_supported(kern_type_t type, int64_t cols);

/* Quantizes one activation row x[cols] (cols a multiple of 32) into
 * cols / 32 blocks, portable C / AVX2 (same bits). */
void kern_cpu_q8_quantize_row_scalar(const float *x, kern_cpu_q8a_t *out, int64_t cols);
void kern_cpu_q8_quantize_row(const float *x, kern_cpu_q8a_t *out, int64_t cols);

/* Splits nb quantized blocks (portable C / AVX2, same bytes). */
void kern_cpu_q8_split_scalar(const kern_cpu_q8a_t *in, kern_cpu_q8s_t *out, int64_t nb);
void kern_cpu_q8_split(const kern_cpu_q8a_t *in, kern_cpu_q8s_t *out, int64_t nb);

/* y[n, w->rows] = x[n, w->cols] · wᵀ by the arithmetic above on the pool's
 * threads, for a supported weight (kern_cpu_q8_supported); y must not
 * overlap x. Scratch: the quantized rows, from kern_cpu_scratch. */
void kern_cpu_matmul_q8(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n);

/* The weights repacked for it (matmul_rp.c, repack.h): at weight_init (a
 * lazy one at its first weight_use), w->packed becomes a repacked copy
 * when the backend's precision is fast, the build has the AVX2 kernels and
 * the type has a layout (else NULL);
 * 0 or -ENOMEM (logged). The release frees it. kern_cpu_matmul_q8 takes
 * kern_cpu__matmul_rp for a weight with a copy: same bits. */
int kern_cpu__rp_weight_init(kern_backend_t *be, kern_weight_t *w);
void kern_cpu__rp_weight_release(kern_backend_t *be, kern_weight_t *w);
/* be->weight_use: a lazy weight (w->lazy, left unpacked by weight_init) is
 * repacked now, once; out of memory leaves it unpacked (logged). */
void kern_cpu__rp_weight_use(kern_backend_t *be, kern_weight_t *w);
void kern_cpu__matmul_rp(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n);

/* The same result, bit for bit, from portable scalar code on the calling
 * thread (the fallback's arithmetic; for tests). */
void kern_cpu_matmul_q8_ref(float *y, const float *x, const kern_weight_t *w, int n);

/* One output from a quantized row and a stored weight row, portable C. */
float kern_cpu__q8_dot_scalar(kern_type_t type, const uint8_t *wrow, const kern_cpu_q8a_t *xq, int64_t cols);

#ifdef KERN_CPU_AVX2
void kern_cpu__q8_quantize_row_avx2(const float *x, kern_cpu_q8a_t *out, int64_t cols);

/* Outputs out[r·ldo + c] for R activation rows (xq + r·ldq blocks) × C
 * weight rows (w + c·row_bytes), R and C in 1..4; 0 for a type without a
 * kernel (then nothing is written). */
int kern_cpu__q8_tile_avx2(kern_type_t type, int R, int C, const kern_cpu_q8a_t *xq, int64_t ldq,
                           const uint8_t *w, int64_t row_bytes, int64_t cols, float *out, int64_t ldo);

/* Outputs out[r·ldo + c] for R (1..4) activation rows × the first ncols
 * (1..8) rows of one repacked panel (repack.h) of a weight of width cols:
 * xq / x the rows' quantized blocks (+ r·ldq), the int16 form for Q8_0,
 * the split one for the other types. 0 for a type without a kernel (then
 * nothing is written). */
int kern_cpu__rp_tile_avx2(kern_type_t type, int R, const kern_cpu_q8a_t *xq, const kern_cpu_q8s_t *x, int64_t ldq,
                           const uint8_t *panel, int64_t cols, float *out, int64_t ldo, int ncols);
/* The same outputs for 2 activation rows (xq / x, + ldq) × the first
 * ncols (9..16) rows of two consecutive panels (panel, then panel + its
 * kern_cpu_rp_panel_bytes), register-blocked for many rows
 * (matmul_rp_blk_avx2.c): Q4_0, Q4_1, Q4_K (the split blocks x) and Q8_0
 * (the int16 ones xq); 0 for another type (then nothing is written). */
int kern_cpu__rp_block_avx2(kern_type_t type, const kern_cpu_q8a_t *xq, const kern_cpu_q8s_t *x, int64_t ldq,
                            const uint8_t *panel, int64_t cols, float *out, int64_t ldo, int ncols);
void kern_cpu__q8_split_avx2(const kern_cpu_q8a_t *in, kern_cpu_q8s_t *out, int64_t nb);
#endif

#ifdef KERN_CPU_AVX512
/* The same outputs, bit for bit, from 512-bit tiles (two weight rows per
 * register; matmul_q8_avx512.c): R in 1..4, C in 1..8; 0 for a type
 * without a kernel. */
int kern_cpu__q8_tile_avx512(kern_type_t type, int R, int C, const kern_cpu_q8a_t *xq, int64_t ldq,
                             const uint8_t *w, int64_t row_bytes, int64_t cols, float *out, int64_t ldo);

/* The packed panel of 16 weight rows (for many activation rows): its
 * size for a width of cols; kern_cpu__q8_pack_avx512 unpacks the ncols
 * (1..16) weight rows w + c·row_bytes into it (0, and nothing written, for a
 * type without a kernel); kern_cpu__q8_packed_avx512 writes
 * out[r·ldo + c] for R (1..8) activation rows × the ncols rows. */
size_t kern_cpu__q8_panel_bytes(int64_t cols);
int kern_cpu__q8_pack_avx512(kern_type_t type, const uint8_t *w, int64_t row_bytes, int64_t cols, int ncols,
                             void *panel);
void kern_cpu__q8_packed_avx512(kern_type_t type, int R, const kern_cpu_q8a_t *xq, int64_t ldq, const void *panel,
                                int64_t cols, int ncols, float *out, int64_t ldo);
#endif

#endif
