/* kernels/cpu/repack.h — weights of the fast matmul repacked at load into
 * panels of 8 rows (private to kernels/cpu/).
 *
 * Why. The fast matmul (matmul_q8.h) sums each weight unit's products with
 * the int16 activations exactly in int32 and accumulates one f32 per
 * output. Read as stored, a unit of one row sits in one register and its
 * int32 lanes must be summed across (a horizontal sum per unit and output)
 * before the scalar fma. Interleaved by row, the 32-bit lane r of a
 * register holds 4 consecutive elements of row r, so one multiply serves 8
 * outputs, the lanes are the 8 outputs' partial sums, and the scale and
 * accumulate steps are one vector convert, multiply and fma per unit for 8
 * outputs: no horizontal sum anywhere, and a 1-row (decode) matmul streams
 * the weights at memory speed (docs/benchmarks/cpu-decode.md).
 *
 * What. Rows 8p .. 8p + 7 of a weight form panel p; the panels follow each
 * other in memory, each holding the same bytes as its 8 rows in the GGUF
 * layout, rearranged (a ragged last panel is padded with zero rows, whose
 * outputs are never written). So a repacked weight costs exactly its GGUF
 * size (plus at most 7 zero rows) in backend memory, and the file mapping
 * it came from is not read again by the matmuls. Every value is kept:
 * kern_cpu_rp_unpack() gives the GGUF bytes back (the tests check the round
 * trip), and the kernels compute matmul_q8.h's arithmetic bit for bit.
 *
 * Layouts, per 32-element block (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4) or 256-element
 * super-block (Q4_K, Q5_K, Q6_K) of the 8 rows, in this order. "Row r" is the
 * panel's row r; f16 fields are the GGUF's bits; a *nibble chunk* is 32
 * bytes whose byte 4r + j holds, in its low nibble, element 4c + j of row r
 * of one 32-element run (the "lo" run) and in its high nibble element 4c + j
 * of another (the "hi" run), c being the chunk's index in its run (0..7);
 * a *register* is the 32 bytes of one run of one chunk, one value a byte;
 * a *bit plane* is 32 bytes whose byte 4r + j holds in bit g the fifth bit
 * of byte 4r + j of register g of a list of 8 registers.
 *   Q4_0  d[8] f16; 4 nibble chunks c = 0..3: lo run = elements 0..15
 *         shifted (element 4c + j), hi run = elements 16.. (16 + 4c + j);
 *         i.e. chunk c byte 4r + j = qs[4c + j] of row r; register g
 *         (0..7) = chunk g % 4, lo for g < 4, holds elements 4g .. 4g + 3.
 *                                                               144 bytes
 *   Q4_1  d[8], m[8] f16; chunks as Q4_0.                       160 bytes
 *   Q5_0  d[8]; the bit plane of registers 0..7 (bit g of byte 4r + j =
 *         bit 4 of element 4g + j); then chunks as Q4_0.        176 bytes
 *   Q5_1  d[8], m[8]; bit plane; chunks.                        192 bytes
 *   MXFP4 e[8] (the E8M0 scale byte of row r); chunks as Q4_0 (qs at
 *         byte 1 of the block).                                 136 bytes
 *   Q8_0  d[8]; 16 pair chunks k = 0..15 of 16 bytes: byte 2r + j =
 *         qs[2k + j] of row r.                                  272 bytes
 *   Q4_K  d[8], dmin[8] f16; the 12 scale bytes as 12 planes of 8 (plane
 *         k, byte r = scale byte k of row r); then for each sub-block pair
 *         q = 0..3 the 8 nibble chunks c = 0..7 with lo run = sub-block 2q,
 *         hi run = sub-block 2q + 1 (chunk c byte 4r + j = qs[32q + 4c +
 *         j] of row r).                                        1152 bytes
 *   Q5_K  as Q4_K, the chunks of pair q preceded by two bit planes, of
 *         the lo registers of chunks 0..7 (sub-block 2q) and of the hi
 *         ones (2q + 1): bit c of byte 4r + j = bit 4 of element 4c + j
 *         of that sub-block.                                    1408 bytes
 *   Q6_K  d[8] f16; sc[16][8] int8 (unit u = 16 elements, row r); for each
 *         pair q = 0..3: 8 nibble chunks of the low 4 bits (lo run =
 *         sub-block 2q, hi = 2q + 1, element 4c + j), then 4 high-bit
 *         chunks of 32 bytes: byte 4r + j of high-bit chunk t holds in bits
 *         2i..2i+1 (i = 0..3) the top 2 bits of the element that byte
 *         4r + j of register i holds, registers 0..3 being chunks 2t lo,
 *         2t hi, 2t + 1 lo, 2t + 1 hi.                          1680 bytes
 * (Sub-block s of a K-quant is its elements 32s .. 32s + 31; the 6-bit
 * Q6_K values are the stored ones, before the -32.) */
#ifndef TRAM_KERN_CPU_REPACK_H
#define TRAM_KERN_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/simd.h"
#include "kernels/kern_types.h"

#define KERN_CPU_RP_ROWS 8 /* rows per panel */

/* 1 when weights of `type` and width `cols` can be repacked (the types
 * above, cols a whole number of blocks). */
int kern_cpu_rp_supported(kern_type_t type, int64_t cols);

/* Bytes of the repacked form of rows × cols (whole panels). */
size_t kern_cpu_rp_bytes(kern_type_t type, int64_t rows, int64_t cols);

/* Bytes of one panel (8 rows × cols). */
int64_t kern_cpu_rp_panel_bytes(kern_type_t type, int64_t cols);

/* Writes the repacked form of rows [p0·8, p1·8) (rows past `rows` are zero)
 * of the GGUF rows at src into dst + p0·panel_bytes. Portable C. */
void kern_cpu_rp_pack(kern_type_t type, const uint8_t *src, int64_t rows, int64_t cols, uint8_t *dst, int64_t p0,
                      int64_t p1);

/* The same bytes from the layout's definition, one bit at a time (slow;
 * the tests' reference for the packer above). */
void kern_cpu_rp_pack_ref(kern_type_t type, const uint8_t *src, int64_t rows, int64_t cols, uint8_t *dst, int64_t p0,
                          int64_t p1);

/* The GGUF bytes of row `row` back from a repacked weight (for the tests). */
void kern_cpu_rp_unpack_row(kern_type_t type, const uint8_t *packed, int64_t cols, int64_t row, uint8_t *out);

#endif
