/* kernels/cuda/attn_decode.cuh — paged decode attention (the spec's decode
 * path): one query row per sequence, the new K/V appended in place at
 * cache_seqlens[b], then each head attends over cache_seqlens[b] + 1 keys
 * read through the block table.
 *
 * Launches: (1) the work list: the splits of ATTN_SPLIT keys each sequence
 * has, in items of one split (split kernel) or runs of up to 4 (run
 * kernel), listed sequence by sequence (kernels/cuda_geom.h, scan.cuh); the
 * first list launch of a call also appends k_new/v_new (rounded to bf16)
 * into their slots, one block a row (the append fused); (2) split-K:
 * thread blocks, one per (KV head, up to 16 query heads of its GQA group)
 * along grid.y, walk the list's items along grid.x, so long sequences
 * spread over many blocks and short ones start none for splits they do not
 * have; the group's heads are the rows of one MMA fragment, so they share
 * every K/V load; 4 warps share the K/V tiles and each owns a quarter of
 * head_dim of the output. The run kernel (head_dim 64 and 128, <= 64 KiB
 * of shared memory: cuda_geom_decode_kernel) streams K and V tiles through
 * a ring of 3 one-tile slots, splits Q·K across its warps (the raw scores
 * meet in shared memory; every warp then runs the same softmax), merges a
 * run from split 0 in registers and writes it as one partial — or as the
 * output, when it is the whole sequence (at most 1,024 keys: the combine
 * fused away) — and a later run's splits one by one; the split kernel (the
 * fallback, head_dim 256) takes 3 stages of K and V and every warp computes
 * all scores. Each partial (m, l, acc) goes to the backend's attention
 * workspace; (3) combine: the partials merged in order. The arithmetic is
 * attn_tile.cuh's and the merges are the same left fold, so the bits equal
 * attn_varlen_paged's for the same row with either kernel. Sequences are
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
