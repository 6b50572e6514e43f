/* kernels/cuda_geom.h — every launch-geometry decision of the CUDA attention
 * kernels, as plain C: how many split-K partials a decode launch provides,
 * how many sequences one launch's workspace holds, how many thread blocks a
 * varlen (prefill) launch starts and which sequence and row tile each one
 * takes, and which head layouts the kernels support.
 *
 * Why here and not in kernels/cuda/: these numbers decide what a step costs
 * on the GPU (a grid sized by the wrong bound launches hundreds of thousands
 * of blocks that exit at once), and a CPU machine must be able to test them.
 * This file is compiled into the CPU build (unit tests in
 * tests/unit/test_cuda_geom.c, at the shapes of issue 23 and the default
 * model's) and included by the .cu files, which call the same functions. The
 * inline functions also run on the device (CUDA_GEOM_HD): the tile map is
 * tested here and used there.
 *
 * Fixed by the kernels (kernels/cuda/attn_tile.cuh, attn_varlen.cu), which
 * static_assert that they agree: a split is CUDA_GEOM_SPLIT_KEYS keys at
 * fixed absolute positions (so the split count changes no bits), a prefill
 * thread block takes CUDA_GEOM_PREFILL_ROWS query rows of one head. */
#ifndef TRAM_KERN_CUDA_GEOM_H
#define TRAM_KERN_CUDA_GEOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define CUDA_GEOM_HD __host__ __device__
#else
#define CUDA_GEOM_HD
#endif

#define CUDA_GEOM_SPLIT_KEYS 256  /* keys per decode split (ATTN_SPLIT) */
#define CUDA_GEOM_PREFILL_ROWS 64 /* query rows per prefill thread block (PF_ROWS) */
#define CUDA_GEOM_GRID_YZ_MAX 65535
#define CUDA_GEOM_MAX_SEQS 65535  /* sequences one attention call may hold */

#ifdef __cplusplus
extern "C" {
#endif

/* 0 when the CUDA attention kernels support this head layout (head_dim 64,
 * 128 or 256 — not 512, nor any other —, n_heads a positive multiple of n_kv_heads, both within a grid
 * dimension); otherwise -EINVAL with the reason in err (model load refuses
 * the model with it, before serving). */
int cuda_geom_attn_supported(int n_heads, int n_kv_heads, int head_dim, char *err, size_t err_len);

/* Shared memory a thread block of each attention kernel takes (bytes), as
 * the kernels size it (attn_decode.cu, attn_varlen.cu static_assert that
 * they agree): the split decode kernel, 3 stages of a 64-key K and V tile of
 * rows of head_dim + 8 bf16; the run decode kernel, a ring of 3 slots of one
 * such K or V tile and the 16 × 64 raw scores its warps exchange (rows of
 * 72 f32); prefill, 2 K and V stages and 4 warps' f32 accumulators. */
#define CUDA_GEOM_DECODE_SMEM(d) (3 * 2 * 64 * ((d) + 8) * 2)
#define CUDA_GEOM_DECODE_RUN_SMEM(d) (3 * 64 * ((d) + 8) * 2 + 16 * 72 * 4)
#define CUDA_GEOM_PREFILL_SMEM(d) (2 * 2 * 64 * ((d) + 8) * 2 + 4 * ((d) / 8) * 4 * 32 * 4)

/* The two decode kernels (kernels/cuda/attn_decode.cu). RUNS, where it
 * fits: a work item is a run of up to CUDA_GEOM_DECODE_RUN consecutive
 * splits of one sequence, Q·K split across the 4 warps, at most 64 KiB of
 * shared memory (CUDA_GEOM_DECODE_RUN_SMEM; head_dim 64 and 128). SPLITS,
 * the fallback (head_dim 256, and what tests/gpu compares the run kernel
 * with): a work item is one split, every warp computes all of a tile's
 * scores, 102 KiB a block at head_dim 128. */
#define CUDA_GEOM_DECODE_SPLITS 0
#define CUDA_GEOM_DECODE_RUNS 1
#define CUDA_GEOM_DECODE_RUN 4                /* splits a run item takes (1,024 keys) */
#define CUDA_GEOM_DECODE_RUN_SMEM_MAX (64 << 10) /* the run kernel's design bound */

/* The decode kernel for head_dim on a GPU whose blocks may take smem_optin
 * bytes: RUNS for head_dim <= 128 when CUDA_GEOM_DECODE_RUN_SMEM fits, else
 * SPLITS when CUDA_GEOM_DECODE_SMEM fits, else -1. */
int cuda_geom_decode_kernel(int head_dim, size_t smem_optin);

/* The most shared memory a block of the attention kernels for head_dim
 * takes: the prefill kernel's or the decode kernel's that
 * cuda_geom_decode_kernel picks where it fits, the larger. */
int cuda_geom_attn_smem(int head_dim);

/* 0 when a GPU whose blocks may take smem_optin bytes of shared memory
 * (cudaDeviceProp.sharedMemPerBlockOptin) runs the attention kernels of
 * head_dim; otherwise -ENOTSUP with the reason in err. sm_86/sm_89 (A10,
 * L4, L40S: 99 KiB) run head_dim 64 but not 128 (the prefill kernel's 100 KiB); sm_80 (A100,
 * 163 KiB) 64 and 128 but not 256 (198 KiB); sm_90 (H100, H200: 227 KiB)
 * all three. */
int cuda_geom_attn_smem_fits(int head_dim, size_t smem_optin, char *err, size_t err_len);

/* Splits per sequence a decode launch provides: enough for the batch's
 * longest context max_seqlen_k (keys, the new one included), i.e.
 * ceil(max_seqlen_k / CUDA_GEOM_SPLIT_KEYS); 0 when max_seqlen_k <= 0. */
int cuda_geom_decode_splits(int max_seqlen_k);

/* Sequences whose split partials ((head_dim + 2) floats per head and split)
 * fit a workspace of ws_bytes, at most CUDA_GEOM_GRID_YZ_MAX (grid.z); 0 when
 * not even one does. */
int cuda_geom_decode_chunk(int n_heads, int head_dim, int splits, size_t ws_bytes);

/* Launches (split + combine pairs) a decode call of n_seqs makes with that
 * chunk; 0 for chunk < 1. */
int cuda_geom_decode_launches(int n_seqs, int chunk);

/* How a decode call walks its sequences and splits through the workspace.
 * When every split of at least one sequence fits (cuda_geom_decode_chunk),
 * seq_chunk sequences at a time with all their splits (window == splits).
 * Otherwise one sequence at a time, its splits in windows of `window`: each
 * window's partials are merged into a carried (max, sum, acc) per head,
 * which the next window's merge starts from, so the merges happen in the
 * same order on the same values and the bits do not change. */
typedef struct cuda_geom_decode_plan {
  int seq_chunk; /* sequences per launch pair */
  int window;    /* splits per launch pair (<= splits) */
  int carry;     /* 1: windows carry a running merge ((head_dim + 2) floats a head) */
} cuda_geom_decode_plan_t;

/* Fills *p for n_heads heads of head_dim, `splits` splits a sequence and a
 * workspace of ws_bytes; returns 0, or -E2BIG when not even one window of
 * one split and its carry fit (cuda_geom_decode_fits refuses that layout
 * at model load). */
int cuda_geom_decode_plan(int n_heads, int head_dim, int splits, size_t ws_bytes, cuda_geom_decode_plan_t *p);

/* 0 when every decode call of this head layout has a plan in ws_bytes
 * (whatever its contexts); otherwise -E2BIG with the reason in err. */
int cuda_geom_decode_fits(int n_heads, int head_dim, size_t ws_bytes, char *err, size_t err_len);

/* The decode split list: work item w of a launch pair is one split of one
 * sequence, listed sequence by sequence (cu_splits[b] the first item of
 * sequence b of the chunk, as the prefill tile map), so a batch of one long
 * and many short contexts starts blocks for the splits that exist, not
 * sequences * the longest's splits. A block walks items w = blockIdx.x,
 * + gridDim.x, ... (cuda_geom_decode_grid_x). */

/* Items sequence of cache_seqlen cs has in the window of splits s0 ..
 * s0 + n_win - 1: its splits (ceil((cs + 1) / CUDA_GEOM_SPLIT_KEYS); none
 * for padding, cs < 0) from s0 on, at most n_win. */
static inline CUDA_GEOM_HD int cuda_geom_seq_splits(int cs, int s0, int n_win) {
  if (cs < 0) return 0;
  const int all = (int)(((int64_t)cs + CUDA_GEOM_SPLIT_KEYS) / CUDA_GEOM_SPLIT_KEYS); /* keys cs + 1 */
  const int n = all - s0;
  return n < 0 ? 0 : (n < n_win ? n : n_win);
}

/* Work items of a sequence with n splits in the window when an item takes
 * runs of `run` consecutive splits (1: the split kernel; CUDA_GEOM_DECODE_RUN:
 * the run kernel): ceil(n / run), the last run the shorter. */
static inline CUDA_GEOM_HD int cuda_geom_seq_items(int n, int run) {
  return n > 0 ? (n + run - 1) / run : 0;
}

/* Run item k of a window starting at split s0 takes splits s0 + k * run ..
 * (at most run of them). A run that starts at split 0 is a prefix of the
 * sequence: the run kernel merges its splits in registers, in order from
 * the empty state — exactly the combine's first merges, so the bits stay —
 * and writes one partial (or, when it holds every split of the sequence,
 * the output). A run that starts later cannot be merged without changing
 * the bits (the merge is not associative in floating point: merge(merge(M,
 * a), b) is not merge(M, merge(a, b))), so it writes each split's partial
 * for the combine to merge in order. cuda_geom_decode_fused: the sequence
 * of n_splits splits (all its splits; window0 the first window's size) is
 * finished by its one run item, and the combine skips it. */
static inline CUDA_GEOM_HD int cuda_geom_decode_fused(int n_splits, int run, int window0) {
  return run > 1 && n_splits >= 1 && n_splits <= run && n_splits <= window0;
}

/* Host reference of the device scan: cu_splits[b] (n_seqs + 1 entries) is
 * the first item of sequence b, from cache_seqlens, items of `run` splits
 * (cuda_geom_seq_items). Returns the total. */
int64_t cuda_geom_decode_split_list(int n_seqs, const int32_t *cache_seqlens, int s0, int n_win, int run,
                                    int32_t *cu_splits);

/* grid.x of a decode split launch of n_seqs sequences, n_win items each at
 * most (splits, or runs: cuda_geom_seq_items(n_win, run)), grid_y blocks an item (KV heads * head groups), on n_sm
 * multiprocessors: the list's bound n_seqs * n_win, capped at
 * CUDA_GEOM_DECODE_WAVES waves of CUDA_GEOM_DECODE_BLOCKS_PER_SM resident
 * blocks over all of grid.y (at least 1): more blocks than that only queue. */
#define CUDA_GEOM_DECODE_BLOCKS_PER_SM 2 /* the split kernel's 102 KiB a block; the run kernel's registers (181 at head_dim 128) */
#define CUDA_GEOM_DECODE_WAVES 4
int cuda_geom_decode_grid_x(int n_seqs, int n_win, int grid_y, int n_sm);

/* Row tiles of one sequence of q_len query rows. */
static inline CUDA_GEOM_HD int cuda_geom_row_tiles(int q_len) {
  return q_len > 0 ? (q_len + CUDA_GEOM_PREFILL_ROWS - 1) / CUDA_GEOM_PREFILL_ROWS : 0;
}

/* A varlen batch on the paged cache (attn_varlen_paged) routes each
 * sequence of one query row to the decode kernels (split-K over its keys,
 * the GQA group's heads sharing each K/V tile; the same bits, as decode's
 * arithmetic is the prefill kernel's) and the others to the prefill kernel,
 * where a one-row sequence would take a 64-row tile of which one warp of
 * four works. */
static inline CUDA_GEOM_HD int cuda_geom_routed_to_decode(int q_len) { return q_len == 1; }

/* Row tiles the prefill kernel takes for a sequence of q_len rows: all
 * (route 0), or none for one routed to decode (route 1). */
static inline CUDA_GEOM_HD int cuda_geom_prefill_tiles(int q_len, int route) {
  return route && cuda_geom_routed_to_decode(q_len) ? 0 : cuda_geom_row_tiles(q_len);
}

/* Decode split-list items (cuda_geom_seq_splits) of a varlen batch's
 * sequence of q_len rows and k_len keys: its splits when routed to decode,
 * else none. */
static inline CUDA_GEOM_HD int cuda_geom_routed_splits(int q_len, int k_len, int s0, int n_win) {
  return cuda_geom_routed_to_decode(q_len) ? cuda_geom_seq_splits(k_len - 1, s0, n_win) : 0;
}

/* grid.x of a varlen launch: an upper bound of the batch's row tiles (the
 * sum of cuda_geom_row_tiles over its sequences) from what the host knows:
 * n_seqs, total_q (sum of q_len; <= 0: unknown) and max_seqlen_q. It is
 * min(n_seqs * tiles(max_q), (total_q + n_seqs * (ROWS - 1)) / ROWS), as
 * ceil(q / R) = floor((q + R - 1) / R) and a sum of floors is at most the
 * floor of the sum. Blocks past the exact count exit at once. */
int64_t cuda_geom_varlen_grid(int n_seqs, int64_t total_q, int max_seqlen_q);

/* Host reference of the device scan: cu_tiles[b] (n_seqs + 1 entries) is the
 * first row tile of sequence b, from cu_seq_lens_q (cuda_geom_prefill_tiles
 * with `route`). Returns the total. */
int64_t cuda_geom_varlen_tiles(int n_seqs, const int32_t *cu_seq_lens_q, int route, int32_t *cu_tiles);

/* The sequence that row tile t (0 <= t < cu_tiles[n_seqs]) belongs to (or
 * decode split-list item t, cu_tiles the list cu_splits): the
 * last b with cu_tiles[b] <= t (sequences without rows own no tile). */
static inline CUDA_GEOM_HD int cuda_geom_tile_seq(const int32_t *cu_tiles, int n_seqs, int64_t t) {
  int lo = 0, hi = n_seqs; /* cu_tiles[lo] <= t < cu_tiles[hi] */
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (cu_tiles[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* The first query row of row tile t, which belongs to sequence b: within a
 * sequence the tiles are taken last rows first (under the causal mask they
 * have the most keys), so the sequence's first tile takes its last rows. */
static inline CUDA_GEOM_HD int cuda_geom_tile_row0(const int32_t *cu_tiles, int b, int64_t t) {
  return (int)(cu_tiles[b + 1] - 1 - t) * CUDA_GEOM_PREFILL_ROWS;
}

#ifdef __cplusplus
}
#endif

#endif
