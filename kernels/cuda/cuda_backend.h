/* kernels/cuda/cuda_backend.h — the CUDA backend: one GPU, one stream, cuBLAS,
 * and the kernels of kernels/cuda/ behind the kern_backend_t table.
 *
 * Owns: the stream, the cuBLAS handle and its workspace, a scratch workspace
 * (activations converted to bf16 for the GEMMs, weight staging at load) and
 * the split-K workspace of decode attention, all taken with cudaMalloc when
 * the backend is created; nothing is allocated per step. Weights are
 * dequantized to bf16 in device memory at load. The KV cache holds bf16
 * (kv_type = KERN_BF16). Usable from C; compiled only when TRAM_CUDA is set. */
#ifndef TRAM_KERN_CUDA_BACKEND_H
#define TRAM_KERN_CUDA_BACKEND_H

#include "kernels/kern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates the CUDA backend on GPU `device` (0-based). Returns NULL after
 * logging why when there is no usable GPU (no driver, no device, a device
 * older than compute capability 8.0, out of memory). Nothing CUDA runs before
 * this is called. Destroy with kern_backend_destroy(). */
kern_backend_t *kern_cuda_create(int device);

#ifdef __cplusplus
}
#endif

#endif
