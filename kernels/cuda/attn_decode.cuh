/* kernels/cuda/attn_decode.cuh — paged decode attention (the spec's decode
 * path): one query row per sequence, the new K/V appended in place at
 * cache_seqlens[b], then each head attends over cache_seqlens[b] + 1 keys
 * read through the block table.
 *
 * Launches: (1) append k_new/v_new (rounded to bf16) into their slots;
 * (2) the split list: the splits of ATTN_SPLIT keys each sequence has,
 * listed sequence by sequence (kernels/cuda_geom.h, scan.cuh); (3) split-K:
 * thread blocks, one per (KV head, up to 16 query heads of its GQA group)
 * along grid.y, walk the list's (sequence, split) items along grid.x, so
 * long sequences spread over many blocks and short ones start none for
 * splits they do not have; the group's heads are the rows of one MMA fragment, so they
 * share every K/V load; 4 warps share the K/V tiles (cp.async, 3 stages),
 * each computes the scores and owns a quarter of head_dim of the output; each
 * split writes its (m, l, acc) to the backend's attention workspace;
 * (4) combine: the splits merged in order. The arithmetic is attn_tile.cuh's,
 * so the bits equal attn_varlen_paged's for the same row. Sequences are
 * processed in chunks that fit the workspace, and a sequence whose splits
 * do not all fit in windows of splits with a carried merge
 * (cuda_geom_decode_plan: the same bits). head_dim 64, 128 or 256
 * (kernels/cuda_geom.h: 256 on GPUs of 227 KiB of shared memory a block). */
#ifndef TRAM_KERN_CUDA_ATTN_DECODE_CUH
#define TRAM_KERN_CUDA_ATTN_DECODE_CUH

#include "kernels/cuda/cuda_common.cuh"

/* kern.h attn_decode. */
void kern_cuda__attn_decode(kern_backend_t *be, const kern_attn_args_t *a);

/* Launches (2)-(4) over the paged cache: with cu_q and cu_k NULL, a decode
 * batch's rows (after the append); otherwise a varlen batch's sequences of
 * one query row (cuda_geom_routed_to_decode; their keys already in the
 * cache), cu_q and cu_k its device arrays, the others left alone. */
void kern_cuda__decode_rows(kern_cuda_t *cu, const kern_attn_args_t *a, const int32_t *cu_q, const int32_t *cu_k);

/* Raises the kernels' dynamic shared-memory limit, for the head_dims whose
 * kernels fit smem_optin (cuda_geom_attn_smem_fits refuses the others at
 * model load); once, at creation. */
cudaError_t kern_cuda__attn_decode_init(size_t smem_optin);

#endif
