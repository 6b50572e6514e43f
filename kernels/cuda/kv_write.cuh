/* kernels/cuda/kv_write.cuh — the KV cache write (kern.h kv_write): f32 rows
 * rounded to bf16 into their slots. */
#ifndef TRAM_KERN_CUDA_KV_WRITE_CUH
#define TRAM_KERN_CUDA_KV_WRITE_CUH

#include "kernels/cuda/cuda_common.cuh"

/* k_cache, v_cache [num_slots, kv_dim] bf16; k, v [n, kv_dim] f32; slots [n]
 * (-1 = skip). Row i goes to slot slots[i]. */
void kern_cuda__kv_write(kern_backend_t *be, void *k_cache, void *v_cache, const float *k,
                         const float *v, const int32_t *slots, int n, int kv_dim);

#endif
