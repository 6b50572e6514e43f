/* kernels/cpu/matmul_tile.h — the register tiles of the CPU matmul (private
 * to kernels/cpu/matmul*.c).
 *
 * A tile multiplies R activation rows by C dequantized weight rows, both f32
 * and zero-padded to kp (a multiple of 8) elements, with the per-output
 * arithmetic that matmul_cpu.h defines. The AVX2 tiles (matmul_avx2.c) and
 * the portable one (matmul.c) give the same bits. */
#ifndef TRAM_KERN_CPU_MATMUL_TILE_H
#define TRAM_KERN_CPU_MATMUL_TILE_H

#include <stdint.h>

#include "kernels/cpu/dequant.h"

/* Rows per panel: the weight rows a task dequantizes at once. */
#define KERN_CPU_MM_PANEL 8

/* out[r * KERN_CPU_MM_PANEL + c] = x[r, :] · w[c, :] for r < R (1..3),
 * c < C (4 or 8); x rows are ldx floats apart, w rows kp floats apart. */
void kern_cpu__mm_tile_scalar(int R, int C, const float *x, int64_t ldx, const float *w, int64_t kp,
                              float *out);
#ifdef KERN_CPU_AVX2
void kern_cpu__mm_tile_avx2(int R, int C, const float *x, int64_t ldx, const float *w, int64_t kp, float *out);

/* The same outputs as the tiles, for R = 1 or 2 activation rows and the
 * KERN_CPU_MM_PANEL weight rows w + c·row_bytes, computed straight from the
 * stored weights without a panel. Returns 0 (and does nothing) when it has
 * no such tile: cols not a multiple of 32, R > 2, or not a weight type. */
int kern_cpu__mm_fused_avx2(kern_type_t type, int R, const float *x, int64_t ldx, const uint8_t *w,
                            int64_t row_bytes, int64_t cols, float *out);
#endif

/* One output by the reference arithmetic: x[kp] · w[kp]. */
float kern_cpu__mm_dot_scalar(const float *x, const float *w, int64_t kp);

#endif
