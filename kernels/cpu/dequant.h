/* kernels/cpu/dequant.h — weight rows of any weight type to f32.
 *
 * The value of each element is the GGML definition (kernels/quant_blocks.h)
 * computed with a single rounding to f32: d·q for the symmetric types,
 * fma(d, q, m) for Q4_1/Q5_1, fma(d·sc, q, -dmin·m) for Q4_K/Q5_K (d·sc and
 * dmin·m are exact in f32), (d·sc)·(q - 32) for Q6_K and 2^(e - 128)·v for
 * MXFP4. Every product of an f16 scale and a small integer is exact in f32,
 * and so is MXFP4's power of two times v (but where it overflows to ±inf),
 * so all of these equal the exactly computed value rounded once to f32 —
 * which a float64 reference can check bit for bit.
 *
 * Two implementations with identical results: the SIMD one (AVX2 + FMA +
 * F16C, when the build enables them) and the portable one, which is always
 * compiled so that the tests can compare the two. */
#ifndef TRAM_KERN_CPU_DEQUANT_H
#define TRAM_KERN_CPU_DEQUANT_H

#include <stdint.h>

#include "kernels/cpu/simd.h"
#include "kernels/kern_types.h"

/* dst[cols] = the `cols` elements stored at src (one row, GGUF layout) of a
 * weight type (kern_type_is_weight); cols is a multiple of the type's block
 * size. Uses SIMD when built with it. */
void kern_cpu_dequant_row(kern_type_t type, const void *src, float *dst, int64_t cols);

/* The same, portable C only (the fallback, and the tests' comparison). */
void kern_cpu_dequant_row_scalar(kern_type_t type, const void *src, float *dst, int64_t cols);

/* The 32 5-bit values of a Q5_0/Q5_1 block (qh8: the 4 qh bytes, qs: the
 * 16 nibble bytes), element order. */
void kern_cpu__q5_ints_scalar(const uint8_t qh8[4], const uint8_t qs[16], int q[32]);

/* MXFP4's 16 codes as integers: the E2M1 values doubled, {0, 1, 2, 3, 4,
 * 6, 8, 12} and their negatives (code 8, -0, is 0). */
extern const int8_t kern_cpu__mxfp4_values[16];

/* The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block from
 * its 12 scale bytes. */
void kern_cpu__k_scale_min(const uint8_t *sc, int s, int *scale, int *min);

/* The SIMD implementation (dequant_avx2.c). */
#ifdef KERN_CPU_AVX2
void kern_cpu__dequant_row_avx2(kern_type_t type, const void *src, float *dst, int64_t cols);
#endif

#endif
