/* kernels/cuda_geom.c — launch geometry of the CUDA attention kernels (see
 * cuda_geom.h). Plain C: built into the CPU library and the CUDA one. */
#include "kernels/cuda_geom.h"

#include <errno.h>
#include <stdio.h>

int cuda_geom_attn_supported(int n_heads, int n_kv_heads, int head_dim, char *err, size_t err_len) {
  if (head_dim != 64 && head_dim != 128) {
    snprintf(err, err_len, "head_dim %d: the CUDA attention kernels support head_dim 64 and 128", head_dim);
    return -EINVAL;
  }
  if (n_kv_heads < 1 || n_heads < n_kv_heads || n_heads % n_kv_heads != 0 || n_heads > CUDA_GEOM_GRID_YZ_MAX) {
    snprintf(err, err_len, "%d query heads over %d KV heads: the CUDA attention kernels need a positive multiple, "
             "at most %d", n_heads, n_kv_heads, CUDA_GEOM_GRID_YZ_MAX);
    return -EINVAL;
  }
  return 0;
}

int cuda_geom_decode_splits(int max_seqlen_k) {
  return max_seqlen_k > 0 ? (int)(((int64_t)max_seqlen_k + CUDA_GEOM_SPLIT_KEYS - 1) / CUDA_GEOM_SPLIT_KEYS) : 0;
}

int cuda_geom_decode_chunk(int n_heads, int head_dim, int splits, size_t ws_bytes) {
  if (n_heads < 1 || head_dim < 1 || splits < 1) return 0;
  const int64_t per_seq = (int64_t)n_heads * splits * (head_dim + 2) * (int64_t)sizeof(float);
  const int64_t chunk = (int64_t)ws_bytes / per_seq;
  return (int)(chunk < CUDA_GEOM_GRID_YZ_MAX ? chunk : CUDA_GEOM_GRID_YZ_MAX);
}

int cuda_geom_decode_launches(int n_seqs, int chunk) {
  return chunk < 1 ? 0 : (int)(((int64_t)n_seqs + chunk - 1) / chunk);
}

int64_t cuda_geom_varlen_grid(int n_seqs, int64_t total_q, int max_seqlen_q) {
  if (n_seqs < 1 || max_seqlen_q < 1) return 0;
  const int64_t by_max = (int64_t)n_seqs * cuda_geom_row_tiles(max_seqlen_q);
  if (total_q <= 0) return by_max;
  const int64_t by_total = (total_q + (int64_t)n_seqs * (CUDA_GEOM_PREFILL_ROWS - 1)) / CUDA_GEOM_PREFILL_ROWS;
  return by_total < by_max ? by_total : by_max;
}

int64_t cuda_geom_varlen_tiles(int n_seqs, const int32_t *cu_seq_lens_q, int32_t *cu_tiles) {
  int64_t total = 0;
  cu_tiles[0] = 0;
  for (int b = 0; b < n_seqs; b++) {
    total += cuda_geom_row_tiles(cu_seq_lens_q[b + 1] - cu_seq_lens_q[b]);
    cu_tiles[b + 1] = (int32_t)total;
  }
  return total;
}
