/* tests/unit/quant_ref.h — test support for the CPU kernels: random weight
 * rows of every type and an independent float64 dequantization, written
 * from the format description (GGML's block layouts) rather than from the
 * kernels' code. */
#ifndef TRAM_TEST_QUANT_REF_H
#define TRAM_TEST_QUANT_REF_H

#include <stdint.h>

#include "kernels/kern_types.h"
#include "tests/unit/testutil.h"

/* Every weight type, for loops. */
extern const kern_type_t tq_weight_types[12];

/* The value of f16 / bf16 bits, from sign, exponent and mantissa (inf and
 * NaN included). */
double tq_f16_value(uint16_t h);
double tq_bf16_value(uint16_t h);

/* A random finite f16: any finite bit pattern (moderate = 0: subnormals to
 * 65504), or ±[2^-10, 2^2) with a random mantissa (moderate = 1). */
uint16_t tq_random_f16(tu_rng_t *r, int moderate);

/* Fills one row of `cols` elements of `type` (kern_type_row_bytes bytes)
 * with random bytes, every scale field a random finite f16 as above (an
 * MXFP4 scale byte: 2^-11 .. 2^2 when moderate, else 2^-128 .. 2^32) and
 * F16/BF16/F32 elements random finite values. */
void tq_random_row(tu_rng_t *r, kern_type_t type, uint8_t *row, int64_t cols, int moderate);

/* out[cols] = the exact values of the row, in double. */
void tq_ref_dequant_row(kern_type_t type, const uint8_t *row, double *out, int64_t cols);

#endif
