/* kernels/cuda_geom.c — launch geometry of the CUDA attention kernels (see
 * cuda_geom.h). Plain C: built into the CPU library and the CUDA one. */
#include "kernels/cuda_geom.h"

#include <errno.h>
#include <stdio.h>

int cuda_geom_attn_supported(int n_heads, int n_kv_heads, int head_dim, char *err, size_t err_len) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    /* 512 (Gemma 4's full layers) too: a warp's Q fragments and accumulator
     * of a 512-wide row would not fit its registers */
    snprintf(err, err_len, "head_dim %d: the CUDA attention kernels support head_dim 64, 128 and 256", head_dim);
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

int cuda_geom_decode_kernel(int head_dim, size_t smem_optin) {
  if (head_dim <= 128 && (size_t)CUDA_GEOM_DECODE_RUN_SMEM(head_dim) <= smem_optin) return CUDA_GEOM_DECODE_RUNS;
  if ((size_t)CUDA_GEOM_DECODE_SMEM(head_dim) <= smem_optin) return CUDA_GEOM_DECODE_SPLITS;
  return -1;
}

int cuda_geom_attn_smem(int head_dim) {
  const int dec = head_dim <= 128 ? CUDA_GEOM_DECODE_RUN_SMEM(head_dim) : CUDA_GEOM_DECODE_SMEM(head_dim);
  const int pre = CUDA_GEOM_PREFILL_SMEM(head_dim);
  return dec > pre ? dec : pre;
}

int cuda_geom_attn_smem_fits(int head_dim, size_t smem_optin, char *err, size_t err_len) {
  const int need = cuda_geom_attn_smem(head_dim);
  if ((size_t)need <= smem_optin) return 0;
  snprintf(err, err_len, "head_dim %d: the CUDA attention kernels need %d bytes (%.1f KiB) of shared memory a "
           "thread block; this GPU allows %zu (%.1f KiB)", head_dim, need, need / 1024.0, smem_optin,
           smem_optin / 1024.0);
  return -ENOTSUP;
}

/* floats of the carried merge state of one head: acc[head_dim], max, sum */
static int64_t carry_floats(int head_dim) { return (int64_t)head_dim + 2; }

int cuda_geom_decode_plan(int n_heads, int head_dim, int splits, size_t ws_bytes, cuda_geom_decode_plan_t *p) {
  p->seq_chunk = p->window = p->carry = 0;
  if (n_heads < 1 || head_dim < 1 || splits < 1) return -E2BIG;
  const int chunk = cuda_geom_decode_chunk(n_heads, head_dim, splits, ws_bytes);
  if (chunk >= 1) {
    p->seq_chunk = chunk;
    p->window = splits;
    return 0;
  }
  /* one sequence: n_heads * (window * (head_dim + 2) + carry) floats */
  const int64_t per_split = (int64_t)n_heads * (head_dim + 2) * (int64_t)sizeof(float);
  const int64_t carry = (int64_t)n_heads * carry_floats(head_dim) * (int64_t)sizeof(float);
  const int64_t window = ((int64_t)ws_bytes - carry) / per_split;
  if ((int64_t)ws_bytes < carry || window < 1) return -E2BIG;
  p->seq_chunk = 1;
  p->window = (int)(window < splits ? window : splits);
  p->carry = 1;
  return 0;
}

int cuda_geom_decode_fits(int n_heads, int head_dim, size_t ws_bytes, char *err, size_t err_len) {
  cuda_geom_decode_plan_t p;
  if (cuda_geom_decode_plan(n_heads, head_dim, 1 << 30, ws_bytes, &p) == 0) return 0;
  snprintf(err, err_len, "%d heads of %d: one decode split and its merge state need %lld bytes a sequence; the "
           "CUDA attention workspace holds %zu", n_heads, head_dim,
           (long long)n_heads * (2 * (head_dim + 2)) * (long long)sizeof(float), ws_bytes);
  return -E2BIG;
}

int64_t cuda_geom_decode_split_list(int n_seqs, const int32_t *cache_seqlens, int s0, int n_win, int run,
                                    int32_t *cu_splits) {
  int64_t total = 0;
  cu_splits[0] = 0;
  for (int b = 0; b < n_seqs; b++) {
    total += cuda_geom_seq_items(cuda_geom_seq_splits(cache_seqlens[b], s0, n_win), run);
    cu_splits[b + 1] = (int32_t)total;
  }
  return total;
}

int cuda_geom_decode_grid_x(int n_seqs, int n_win, int grid_y, int n_sm) {
  if (n_seqs < 1 || n_win < 1 || grid_y < 1) return 0;
  const int64_t bound = (int64_t)n_seqs * n_win;
  const int64_t resident = (int64_t)(n_sm > 0 ? n_sm : 1) * CUDA_GEOM_DECODE_BLOCKS_PER_SM * CUDA_GEOM_DECODE_WAVES;
  int64_t cap = (resident + grid_y - 1) / grid_y;
  if (cap < 1) cap = 1;
  const int64_t x = bound < cap ? bound : cap;
  return (int)(x < INT32_MAX ? x : INT32_MAX);
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

int64_t cuda_geom_varlen_tiles(int n_seqs, const int32_t *cu_seq_lens_q, int route, int32_t *cu_tiles) {
  int64_t total = 0;
  cu_tiles[0] = 0;
  for (int b = 0; b < n_seqs; b++) {
    total += cuda_geom_prefill_tiles(cu_seq_lens_q[b + 1] - cu_seq_lens_q[b], route);
    cu_tiles[b + 1] = (int32_t)total;
  }
  return total;
}

_Static_assert(CUDA_GEOM_DECODE_RUN_SMEM(128) <= CUDA_GEOM_DECODE_RUN_SMEM_MAX,
               "the run decode kernel keeps to 64 KiB of shared memory at head_dim 128");
