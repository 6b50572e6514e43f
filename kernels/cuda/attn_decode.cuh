/* kernels/cuda/attn_decode.cuh — paged decode attention (the spec's decode
 * path): one query row per sequence, the new K/V appended in place at
 * cache_seqlens[b], then each head attends over cache_seqlens[b] + 1 keys
 * read through the block table.
 *
 * Three launches: (1) append k_new/v_new (rounded to bf16) into their slots;
 * (2) split-K: one thread block per (split of ATTN_SPLIT keys, KV head, up to
 * 16 query heads of its GQA group, sequence), so long sequences spread over
 * many blocks; the group's heads are the rows of one MMA fragment, so they
 * share every K/V load; 4 warps share the K/V tiles (cp.async, 3 stages),
 * each computes the scores and owns a quarter of head_dim of the output; each
 * split writes its (m, l, acc) to the backend's attention workspace;
 * (3) combine: the splits merged in order. The arithmetic is attn_tile.cuh's,
 * so the bits equal attn_varlen_paged's for the same row. Sequences are
 * processed in chunks that fit the workspace, and a sequence whose splits
 * do not all fit in windows of splits with a carried merge
 * (cuda_geom_decode_plan: the same bits). head_dim 64 or 128. */
#ifndef TRAM_KERN_CUDA_ATTN_DECODE_CUH
#define TRAM_KERN_CUDA_ATTN_DECODE_CUH

#include "kernels/cuda/cuda_common.cuh"

/* kern.h attn_decode. */
void kern_cuda__attn_decode(kern_backend_t *be, const kern_attn_args_t *a);

/* Raises the kernels' dynamic shared-memory limit, for the head_dims whose
 * kernels fit smem_optin (cuda_geom_attn_smem_fits refuses the others at
 * model load); once, at creation. */
cudaError_t kern_cuda__attn_decode_init(size_t smem_optin);

#endif
