/* kernels/kern_quant.h — quantizing F32/F16/BF16 weight rows into GGML's
 * block types at load (`--quantize`), so a Hugging Face checkpoint or an
 * unquantized GGUF file runs on the quantized matmuls.
 *
 * The arithmetic is GGML's reference quantizers (quantize_row_*_ref, as the
 * `gguf` Python package's gguf.quants reproduces them), bit for bit: per
 * block of 32, in f32 without fused multiply-adds,
 *   Q8_0  d = amax / 127, q = roundf(x / d) (half away from zero)
 *   Q4_0  d = m / -8 (m: the element of largest magnitude, the first if
 *         several), q = min(15, trunc(x / d + 8.5))
 *   Q4_1  d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5))
 * where "/ d" is "* (1 / d)" (0 when d is 0), and d and m are stored as f16
 * rounded to nearest even. NaN elements quantize as if they were 0 (GGML
 * leaves them undefined). Plain C, no backend: the result is host memory in
 * the GGUF layout that be->weight_init takes. */
#ifndef TRAM_KERN_QUANT_H
#define TRAM_KERN_QUANT_H

#include <stdint.h>

#include "kernels/kern_types.h"

/* 1 if `type` is a type kern_quantize_rows writes (Q8_0, Q4_0, Q4_1). */
int kern_quant_is_target(kern_type_t type);

/* Quantizes rows × cols elements of src (F32, F16 or BF16, rows of cols
 * elements, contiguous) into dst (rows × kern_type_row_bytes(to, cols)
 * bytes). cols must be a multiple of 32. Returns 0, or -EINVAL (nothing
 * written) for an unsupported pair of types or a cols that is not a whole
 * number of blocks. */
int kern_quantize_rows(kern_type_t to, void *dst, kern_type_t from, const void *src, int64_t rows, int64_t cols);

#endif
