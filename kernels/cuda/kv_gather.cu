/* kernels/cuda/kv_gather.cu — a sequence's K/V out of the paged cache into
 * packed buffers (see kv_gather.cuh). */
#include "kernels/cuda/kv_gather.cuh"

#define GATHER_ROWS_PER_BLOCK 8 /* one warp per key row */

/* grid = (key-row groups over max_seqlen_k, n_seqs); T is the copy unit
 * (uint4 = 8 bf16 when kv_dim % 8 == 0, else one bf16). */
template <typename T>
static __global__ void kv_gather_kernel(T *k_out, T *v_out, const T *k_cache, const T *v_cache,
                                        const int32_t *cu_k, const int32_t *block_table, int mbps,
                                        int block_size, int width) {
  const int b = blockIdx.y;
  const int k0 = cu_k[b], k_len = cu_k[b + 1] - k0;
  const int j = blockIdx.x * GATHER_ROWS_PER_BLOCK + threadIdx.x / 32;
  if (j >= k_len) return;
  const int64_t slot =
      (int64_t)block_table[(int64_t)b * mbps + j / block_size] * block_size + j % block_size;
  const T *ks = k_cache + slot * width, *vs = v_cache + slot * width;
  T *kd = k_out + (int64_t)(k0 + j) * width, *vd = v_out + (int64_t)(k0 + j) * width;
  for (int c = threadIdx.x % 32; c < width; c += 32) {
    kd[c] = ks[c];
    vd[c] = vs[c];
  }
}

void kern_cuda__kv_gather(kern_backend_t *be, void *k_out, void *v_out, const kern_attn_args_t *a) {
  if (a->n_seqs <= 0 || a->max_seqlen_k <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  const int kv_dim = a->n_kv_heads * a->head_dim;
  dim3 grid((a->max_seqlen_k + GATHER_ROWS_PER_BLOCK - 1) / GATHER_ROWS_PER_BLOCK, a->n_seqs);
  if (grid.y > 65535) {
    log_error("kv_gather: %d sequences in one call (at most 65535)", a->n_seqs);
    abort();
  }
  const int threads = 32 * GATHER_ROWS_PER_BLOCK;
  if (kv_dim % 8 == 0 && kern_cuda__aligned16(k_out, v_out) &&
      kern_cuda__aligned16(a->k_cache, a->v_cache))
    kv_gather_kernel<uint4><<<grid, threads, 0, cu->stream>>>(
        (uint4 *)k_out, (uint4 *)v_out, (const uint4 *)a->k_cache, (const uint4 *)a->v_cache,
        a->cu_seq_lens_k, a->block_table, a->max_blocks_per_seq, a->block_size, kv_dim / 8);
  else
    kv_gather_kernel<__nv_bfloat16><<<grid, threads, 0, cu->stream>>>(
        (__nv_bfloat16 *)k_out, (__nv_bfloat16 *)v_out, (const __nv_bfloat16 *)a->k_cache,
        (const __nv_bfloat16 *)a->v_cache, a->cu_seq_lens_k, a->block_table,
        a->max_blocks_per_seq, a->block_size, kv_dim);
  CUDA_CHECK_LAUNCH();
}
