/* kernels/cuda/attn_varlen.cuh — varlen (prefill) attention: the spec's
 * varlen path (cu_seq_lens_q/k, causal aligned bottom-right, GQA), reading
 * K/V either packed (attn_varlen, after kv_gather) or straight from the paged
 * bf16 cache through the block table (attn_varlen_paged, no gather copy).
 *
 * One thread block of 4 warps takes 64 query rows of one head of one
 * sequence (16 rows per warp); K/V tiles of 64 keys stream through shared
 * memory (cp.async, double-buffered) and every warp folds them into its rows
 * with the shared tile code of attn_tile.cuh, which makes the result of a
 * query row bitwise the same as attn_decode's for the same keys. A warp
 * applies the causal and window mask only to tiles that cross its rows'
 * bounds (the diagonal ones, a window's edges): the others' scores are
 * all kept, which is what the mask would have done, so the bits stay.
 * The grid holds one block per row tile of the batch and head
 * (kernels/cuda_geom.h), not max_seqlen_q's tiles for every sequence.
 * Supported head_dim: 64, 128 and 256 (model load refuses others). */
#ifndef TRAM_KERN_CUDA_ATTN_VARLEN_CUH
#define TRAM_KERN_CUDA_ATTN_VARLEN_CUH

#include "kernels/cuda/cuda_common.cuh"

/* kern.h attn_varlen: q, out, cu_seq_lens_q/k, max_seqlen_q, k, v. */
void kern_cuda__attn_varlen(kern_backend_t *be, const kern_attn_args_t *a);

/* kern.h attn_varlen_paged: as attn_varlen with k_cache, v_cache,
 * block_size, block_table, max_blocks_per_seq in place of k, v; the
 * sequences of one query row (a mixed step's decode rows) go to the decode
 * kernels (attn_decode.cuh kern_cuda__decode_rows: split-K, the same bits),
 * the others to the prefill kernel. */
void kern_cuda__attn_varlen_paged(kern_backend_t *be, const kern_attn_args_t *a);

/* Raises the kernels' dynamic shared-memory limit, for the head_dims whose
 * kernels fit smem_optin; once, at creation. */
cudaError_t kern_cuda__attn_varlen_init(size_t smem_optin);

/* Checks the head layout every attention kernel supports; aborts with a
 * message naming `what` otherwise (programmer error). */
void kern_cuda__attn_check(const kern_attn_args_t *a, const char *what);

#endif
