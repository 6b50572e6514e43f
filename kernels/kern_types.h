/* kernels/kern_types.h — the tensor element types tram knows, with their
 * block geometry.
 *
 * The numeric values are GGML's type ids as stored in GGUF tensor infos, so a
 * GGUF type converts by a range check. Quantized types store a row of `cols`
 * elements as cols / block_elems blocks of block_bytes bytes each; the block
 * layouts are in kernels/quant_blocks.h. Usable from C and CUDA. */
#ifndef TRAM_KERN_TYPES_H
#define TRAM_KERN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kern_type {
  KERN_F32 = 0,
  KERN_F16 = 1,
  KERN_Q4_0 = 2,
  KERN_Q4_1 = 3,
  KERN_Q5_0 = 6,
  KERN_Q5_1 = 7,
  KERN_Q8_0 = 8,
  KERN_Q8_1 = 9, /* activations only (never a weight type here) */
  KERN_Q4_K = 12,
  KERN_Q5_K = 13,
  KERN_Q6_K = 14,
  KERN_Q8_K = 15, /* activations only */
  KERN_BF16 = 30,
  KERN_MXFP4 = 39, /* OCP microscaling FP4 (gpt-oss's expert weights) */
  KERN_TYPE_COUNT = 40,
} kern_type_t;

/* GGML's name of a type ("Q4_1"), or NULL for an id tram does not support
 * (including ids GGML knows but tram does not: IQ*, Q2_K, Q3_K, ...). */
const char *kern_type_name(uint32_t type);

/* 1 if `type` is a supported weight type (F32, F16, BF16, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4), else 0. */
int kern_type_is_weight(uint32_t type);

/* Elements per block (1 for F32/F16/BF16) and bytes per block, or 0 for an
 * unsupported id. */
int64_t kern_type_block_elems(uint32_t type);
int64_t kern_type_block_bytes(uint32_t type);

/* Bytes of one row of `cols` elements; -1 if cols is not a multiple of the
 * block size, or the type is unsupported, or the size overflows int64. */
int64_t kern_type_row_bytes(uint32_t type, int64_t cols);

#ifdef __cplusplus
}
#endif

#endif
