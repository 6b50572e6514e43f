/* kernels/quant_blocks.h — byte layouts of GGML's quantized blocks.
 *
 * These are the on-disk layouts of GGUF tensor data (read from the GGUF/GGML
 * format, not from any implementation). Half-precision fields are IEEE f16
 * bit patterns in uint16_t. Each block holds block_elems consecutive elements
 * of one row. Plain structs, usable from C and CUDA.
 *
 *   type  elems bytes layout
 *   Q4_0   32    18   d; qs[16]: x = d * (q - 8), q in 0..15 (low nibbles
 *                     hold elements 0..15, high nibbles 16..31)
 *   Q4_1   32    20   d, m; qs[16]: x = d * q + m
 *   Q5_0   32    22   d; qh[4] (bit j = 5th bit of element j); qs[16]:
 *                     x = d * (q - 16)
 *   Q5_1   32    24   d, m; qh[4]; qs[16]: x = d * q + m
 *   Q8_0   32    34   d; qs[32] int8: x = d * q
 *   Q8_1   32    36   d, s (= d * sum(q)); qs[32] int8
 *   Q4_K  256   144   d, dmin; scales[12] (8 6-bit scales + 8 6-bit mins);
 *                     qs[128]: x = d * sc * q - dmin * m per 32 elements
 *   Q5_K  256   176   as Q4_K with qh[32] holding each element's 5th bit
 *   Q6_K  256   210   ql[128] low 4 bits, qh[64] high 2 bits, scales[16]
 *                     int8 per 16 elements, d: x = d * sc * (q - 32)
 *   Q8_K  256   292   f32 d; qs[256] int8; bsums[16] (sums of 16 qs)
 *   MXFP4  32    17   e (E8M0 scale byte); qs[16] 4-bit E2M1 codes, low
 *                     nibbles elements 0..15, high 16..31 (as Q4_0):
 *                     x = 2^(e - 128) * v[q] with v = the E2M1 values
 *                     doubled, {0, 1, 2, 3, 4, 6, 8, 12} for q = 0..7 and
 *                     their negatives for q = 8..15 (bit 3 is the sign; 8
 *                     is -0, read as 0). GGML's scale: e = 0 and 1 give
 *                     2^-128 and 2^-127 (f32 subnormals), and e = 255 is a
 *                     number (2^127), not the OCP MX spec's NaN.
 */
#ifndef TRAM_QUANT_BLOCKS_H
#define TRAM_QUANT_BLOCKS_H

#include <stdint.h>

#ifdef __cplusplus
#define QB_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define QB_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define QK_MXFP4 32
#define K_SCALE_SIZE 12

typedef struct {
  uint16_t d;
  uint8_t qs[QK4_0 / 2];
} block_q4_0;

typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
} block_q5_1;

typedef struct {
  uint16_t d;
  int8_t qs[QK8_0];
} block_q8_0;

typedef struct {
  uint16_t d;
  uint16_t s;
  int8_t qs[QK8_1];
} block_q8_1;

typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;
} block_q6_K;

typedef struct {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
} block_q8_K;

typedef struct {
  uint8_t e;
  uint8_t qs[QK_MXFP4 / 2];
} block_mxfp4;

QB_STATIC_ASSERT(sizeof(block_mxfp4) == 17, "block_mxfp4 size");
QB_STATIC_ASSERT(sizeof(block_q4_0) == 18, "block_q4_0 size");
QB_STATIC_ASSERT(sizeof(block_q4_1) == 20, "block_q4_1 size");
QB_STATIC_ASSERT(sizeof(block_q5_0) == 22, "block_q5_0 size");
QB_STATIC_ASSERT(sizeof(block_q5_1) == 24, "block_q5_1 size");
QB_STATIC_ASSERT(sizeof(block_q8_0) == 34, "block_q8_0 size");
QB_STATIC_ASSERT(sizeof(block_q8_1) == 36, "block_q8_1 size");
QB_STATIC_ASSERT(sizeof(block_q4_K) == 144, "block_q4_K size");
QB_STATIC_ASSERT(sizeof(block_q5_K) == 176, "block_q5_K size");
QB_STATIC_ASSERT(sizeof(block_q6_K) == 210, "block_q6_K size");
QB_STATIC_ASSERT(sizeof(block_q8_K) == 292, "block_q8_K size");

#endif
