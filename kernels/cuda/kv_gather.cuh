/* kernels/cuda/kv_gather.cuh — the gather of the reference varlen path
 * (kern.h kv_gather): each sequence's keys and values copied out of the
 * paged bf16 cache into packed [total_k, n_kv_heads, head_dim] buffers. */
#ifndef TRAM_KERN_CUDA_KV_GATHER_CUH
#define TRAM_KERN_CUDA_KV_GATHER_CUH

#include "kernels/cuda/cuda_common.cuh"

/* Reads a->k_cache, a->v_cache through a->block_table for each sequence's
 * cu_seq_lens_k length; writes k_out, v_out packed along a->cu_seq_lens_k. */
void kern_cuda__kv_gather(kern_backend_t *be, void *k_out, void *v_out, const kern_attn_args_t *a);

#endif
