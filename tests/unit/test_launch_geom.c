/* tests/unit/test_launch_geom.c — the host-side launch decisions of the GPU
 * attention, checked on the CPU: the CUDA kernels' geometry
 * (kernels/cuda_geom.h: decode splits, workspace chunks, the varlen grid and
 * its tile map, the supported head layouts) and the step's metadata image
 * (attention/attn_meta.h: live rows at the live block-table width), at the
 * shapes of issue 23 (a 131,072-token context, 256 requests, a 3,800-token
 * chunk beside 255 decode rows; Llama-3-8B heads: 32 / 8 of 128) and at the
 * default model's (SmolLM2-135M: 9 / 3 heads of 64, context 8,192).
 *
 * The expected numbers are worked out here from the definitions (keys per
 * split, rows per tile, bytes per partial), not read back from the code. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attention/attn_meta.h"
#include "kernels/cuda_geom.h"
#include "tests/unit/testutil.h"

#define WS_BYTES ((size_t)64 << 20) /* the CUDA backend's attention workspace */

/* Decode: the splits follow the batch's longest context, not the table. */
static void decode_splits_follow_the_context(void **state) {
  (void)state;
  assert_int_equal(cuda_geom_decode_splits(0), 0);
  assert_int_equal(cuda_geom_decode_splits(1), 1);
  assert_int_equal(cuda_geom_decode_splits(256), 1);
  assert_int_equal(cuda_geom_decode_splits(257), 2);
  assert_int_equal(cuda_geom_decode_splits(131072), 512);
  assert_int_equal(cuda_geom_decode_splits(INT32_MAX), (int)(((int64_t)INT32_MAX + 255) / 256));

  /* 256 requests of 2,048 cached tokens (+1 new) in a cache whose rows could
   * hold 131,072: 9 splits each (the table's width gave 512), so the
   * partials of all 256 fit the workspace and one launch pair serves the
   * step (32 heads of 128: 32 * 9 * 130 floats = 146 KiB a sequence; 64 MiB
   * hold 448). */
  const int s = cuda_geom_decode_splits(2048 + 1);
  assert_int_equal(s, 9);
  const int chunk = cuda_geom_decode_chunk(32, 128, s, WS_BYTES);
  assert_int_equal(chunk, (int)(WS_BYTES / ((size_t)32 * 9 * 130 * 4)));
  assert_true(chunk >= 256);
  assert_int_equal(cuda_geom_decode_launches(256, chunk), 1);
  /* the old sizing, by the table's capacity: 512 splits, 7 a launch, 37 launches */
  const int old_chunk = cuda_geom_decode_chunk(32, 128, 512, WS_BYTES);
  assert_int_equal(old_chunk, 7);
  assert_int_equal(cuda_geom_decode_launches(256, old_chunk), 37);
  /* a batch that really holds 131,072-token contexts needs those 37 */
  assert_int_equal(cuda_geom_decode_launches(256, cuda_geom_decode_chunk(32, 128, 512, WS_BYTES)), 37);

  /* the default model at its full context: 32 splits, 9 heads of 64 */
  const int sd = cuda_geom_decode_splits(8192);
  assert_int_equal(sd, 32);
  assert_int_equal(cuda_geom_decode_chunk(9, 64, sd, WS_BYTES), (int)(WS_BYTES / ((size_t)9 * 32 * 66 * 4)));
  assert_int_equal(cuda_geom_decode_launches(256, cuda_geom_decode_chunk(9, 64, sd, WS_BYTES)), 1);

  /* limits: nothing fits; grid.z */
  assert_int_equal(cuda_geom_decode_chunk(32, 128, 1 << 20, WS_BYTES), 0);
  assert_int_equal(cuda_geom_decode_launches(5, 0), 0);
  assert_int_equal(cuda_geom_decode_chunk(1, 64, 1, WS_BYTES), CUDA_GEOM_GRID_YZ_MAX);
  assert_int_equal(cuda_geom_decode_chunk(0, 64, 1, WS_BYTES), 0);
}

/* Varlen: one block per row tile of the batch (and head), not
 * max_seqlen_q's tiles for every sequence. */
static void varlen_grid_is_the_batch_tiles(void **state) {
  (void)state;
  /* a 3,800-token chunk beside 255 decode rows: 60 + 255 tiles; the old grid
   * was 60 x 256 per head (491,520 blocks at 32 heads) */
  enum { N = 256 };
  int32_t cu[N + 1], tiles[N + 1];
  cu[0] = 0;
  cu[1] = 3800;
  for (int b = 1; b < N; b++) cu[b + 1] = cu[b] + 1;
  const int64_t exact = cuda_geom_varlen_tiles(N, cu, 0, tiles);
  assert_int_equal(exact, 60 + 255);
  const int64_t grid = cuda_geom_varlen_grid(N, cu[N], 3800);
  assert_int_equal(grid, exact); /* the bound is exact here */
  assert_int_equal((int64_t)N * cuda_geom_row_tiles(3800) * 32, 491520);
  assert_int_equal(grid * 32, 10080);
  /* without total_q the grid falls back to the old bound */
  assert_int_equal(cuda_geom_varlen_grid(N, 0, 3800), (int64_t)N * 60);
  /* one long prompt of the default model's full context */
  assert_int_equal(cuda_geom_varlen_grid(1, 8192, 8192), 128);
  assert_int_equal(cuda_geom_varlen_grid(0, 5, 5), 0);
  assert_int_equal(cuda_geom_varlen_grid(3, 0, 0), 0);
}

/* The tile map: every tile of the grid lands in its own sequence, each
 * sequence's rows are covered once, the bound never undercounts; random
 * batches with empty sequences (decode rows of a sequence with q_len 0 do
 * not exist, but the kernels' contract allows them). */
static void tile_map_covers_every_row_once(void **state) {
  (void)state;
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  for (int trial = 0; trial < 300; trial++) {
    const int n = 1 + (int)tu_below(&rng, 300);
    int32_t *cu = malloc(((size_t)n + 1) * sizeof *cu), *tiles = malloc(((size_t)n + 1) * sizeof *tiles);
    int max_q = 0;
    cu[0] = 0;
    for (int b = 0; b < n; b++) {
      const uint64_t kind = tu_below(&rng, 4);
      const int q = kind == 0 ? 0 : kind == 1 ? 1 : (int)tu_below(&rng, kind == 2 ? 130 : 5000);
      cu[b + 1] = cu[b] + q;
      if (q > max_q) max_q = q;
    }
    /* route 1 (attn_varlen_paged): the one-row sequences go to decode */
    for (int route = 0; route < 2; route++) {
      const int64_t total = cuda_geom_varlen_tiles(n, cu, route, tiles);
      const int64_t grid = cuda_geom_varlen_grid(n, cu[n], max_q);
      assert_true(grid >= total);
      assert_true(grid <= (int64_t)n * cuda_geom_row_tiles(max_q));
      int64_t covered = 0, want = 0;
      for (int b = 0; b < n; b++) want += route && cu[b + 1] - cu[b] == 1 ? 0 : cu[b + 1] - cu[b];
      for (int64_t t = 0; t < total; t++) {
        const int b = cuda_geom_tile_seq(tiles, n, t);
        assert_true(b >= 0 && b < n);
        assert_true(tiles[b] <= t && t < tiles[b + 1]);
        /* the kernel's row block: last rows first within the sequence */
        const int q_len = cu[b + 1] - cu[b];
        assert_true(!route || q_len != 1);
        const int r0 = cuda_geom_tile_row0(tiles, b, t);
        assert_true(r0 >= 0 && r0 < q_len);
        covered += (q_len - r0 < CUDA_GEOM_PREFILL_ROWS ? q_len - r0 : CUDA_GEOM_PREFILL_ROWS);
      }
      assert_int_equal(covered, want);
    }
    free(cu);
    free(tiles);
  }
}

/* Head layouts: the kernels' D in {64, 128} and whole GQA groups. */
static void head_layouts(void **state) {
  (void)state;
  char err[160];
  assert_int_equal(cuda_geom_attn_supported(32, 8, 128, err, sizeof err), 0); /* Llama-3-8B */
  assert_int_equal(cuda_geom_attn_supported(9, 3, 64, err, sizeof err), 0);   /* the default model */
  assert_int_equal(cuda_geom_attn_supported(8, 1, 256, err, sizeof err), 0);  /* Gemma 3, Qwen3.5 */
  const int bad_d[] = {8, 32, 80, 96, 112, 192, 512}; /* 512: Gemma 4's full layers */
  for (size_t i = 0; i < sizeof bad_d / sizeof *bad_d; i++) {
    err[0] = 0;
    assert_int_equal(cuda_geom_attn_supported(8, 8, bad_d[i], err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "head_dim 64, 128 and 256"));
  }
  assert_int_equal(cuda_geom_attn_supported(9, 2, 64, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "multiple"));
  assert_int_equal(cuda_geom_attn_supported(8, 0, 64, err, sizeof err), -EINVAL);
  assert_int_equal(cuda_geom_attn_supported(70000, 1, 64, err, sizeof err), -EINVAL);
}

/* Shared memory: a block of the head_dim-128 kernels takes 100 KiB (the
 * split decode kernel, the fallback: 3 stages * K and V * 64 keys * 136
 * bf16 = 104,448 bytes; the run decode kernel that replaces it: 3 slots * 64
 * * 136 * 2 + 16 * 72 f32 of scores = 56,832; prefill: 2 K and V stages + 4
 * warps * 16 * 4 * 32 f32 = 102,400, now the larger), head_dim 64 52 KiB
 * (prefill: 2 * 2 * 64 * 72 * 2 + 4 * 8 * 4 * 32 * 4 = 53,248; run decode
 * 3 * 64 * 72 * 2 + 4,608 = 32,256). sm_86/89 allow 99 KiB (101,376), sm_80
 * 163 KiB (166,912), sm_90 227 KiB (232,448). */
static void shared_memory_per_gpu(void **state) {
  (void)state;
  char err[200];
  assert_int_equal(CUDA_GEOM_DECODE_SMEM(128), 104448);
  assert_int_equal(CUDA_GEOM_DECODE_RUN_SMEM(128), 56832);
  assert_int_equal(CUDA_GEOM_DECODE_RUN_SMEM(64), 32256);
  assert_true(CUDA_GEOM_DECODE_RUN_SMEM(128) <= 64 * 1024); /* item 9's bound */
  assert_int_equal(CUDA_GEOM_PREFILL_SMEM(128), 102400);
  assert_int_equal(CUDA_GEOM_PREFILL_SMEM(64), 53248);
  assert_int_equal(cuda_geom_attn_smem(128), 102400);
  assert_int_equal(cuda_geom_attn_smem(64), 53248);
  const size_t sm86 = 99 * 1024, sm80 = 163 * 1024, sm90 = 227 * 1024;
  assert_int_equal(cuda_geom_attn_smem_fits(64, sm86, err, sizeof err), 0);
  err[0] = 0;
  assert_int_equal(cuda_geom_attn_smem_fits(128, sm86, err, sizeof err), -ENOTSUP);
  assert_non_null(strstr(err, "head_dim 128"));
  assert_non_null(strstr(err, "102400")); /* the prefill kernel's, 1 KiB over */
  assert_non_null(strstr(err, "101376"));
  assert_int_equal(cuda_geom_attn_smem_fits(128, sm80, err, sizeof err), 0);
  assert_int_equal(cuda_geom_attn_smem_fits(128, sm90, err, sizeof err), 0);
  assert_int_equal(cuda_geom_attn_smem_fits(128, 102400, err, sizeof err), 0); /* exactly enough */
  assert_int_equal(cuda_geom_attn_smem_fits(128, 102399, err, sizeof err), -ENOTSUP);
  assert_int_equal(cuda_geom_attn_smem_fits(64, 48 * 1024, err, sizeof err), -ENOTSUP); /* no opt-in at all */
  /* head_dim 256: decode's 3 stages of 64 keys × 264 bf16 × (K, V) =
   * 202,752 bytes (prefill: 2 stages + 4 warps × 32 × 4 × 32 f32 = 200,704):
   * H100/H200 only; an A100 refuses it by name */
  assert_int_equal(cuda_geom_attn_smem(256), 202752);
  assert_int_equal(CUDA_GEOM_PREFILL_SMEM(256), 200704);
  assert_int_equal(cuda_geom_attn_smem_fits(256, sm90, err, sizeof err), 0);
  assert_int_equal(cuda_geom_attn_smem_fits(256, sm80, err, sizeof err), -ENOTSUP);
  assert_non_null(strstr(err, "head_dim 256"));
  assert_int_equal(cuda_geom_attn_smem_fits(256, sm86, err, sizeof err), -ENOTSUP);
}

/* Walks a plan as attn_decode.cu does: every split of every sequence once,
 * in order, and no launch pair's partials and carry past the workspace. */
static void walk_plan(int n_seqs, int n_heads, int d, int splits, size_t ws, const cuda_geom_decode_plan_t *p) {
  assert_true(p->seq_chunk >= 1 && p->window >= 1 && p->window <= splits);
  int64_t covered = 0;
  for (int seq0 = 0; seq0 < n_seqs; seq0 += p->seq_chunk) {
    const int nc = n_seqs - seq0 < p->seq_chunk ? n_seqs - seq0 : p->seq_chunk;
    int next = 0;
    for (int s0 = 0; s0 < splits; s0 += p->window) {
      assert_int_equal(s0, next);
      const int nw = splits - s0 < p->window ? splits - s0 : p->window;
      next = s0 + nw;
      const int64_t floats = (int64_t)nc * n_heads * nw * (d + 2) + (p->carry ? (int64_t)nc * n_heads * (d + 2) : 0);
      assert_true(floats * 4 <= (int64_t)ws);
      if (!p->carry) assert_int_equal(nw, splits); /* one window: nothing carried */
      covered += (int64_t)nc * nw;
    }
    assert_int_equal(next, splits);
  }
  assert_int_equal(covered, (int64_t)n_seqs * splits);
}

/* The decode plan never gives up mid-serving: where a sequence's partials
 * do not fit (32 heads of 128: 32 * 130 * 4 = 16,640 bytes a split, 4,032
 * splits in 64 MiB, i.e. 1,032,192 keys), it walks windows of splits with
 * a carried merge; only a layout of which not even one split and its carry
 * fit is refused, at model load. */
static void decode_plan_fits_the_workspace(void **state) {
  (void)state;
  cuda_geom_decode_plan_t p;
  /* issue 23's shape: all splits, 448 sequences a pair, nothing carried */
  const int s = cuda_geom_decode_splits(2048 + 1);
  assert_int_equal(cuda_geom_decode_plan(32, 128, s, WS_BYTES, &p), 0);
  assert_int_equal(p.seq_chunk, cuda_geom_decode_chunk(32, 128, s, WS_BYTES));
  assert_int_equal(p.window, s);
  assert_int_equal(p.carry, 0);
  walk_plan(1000, 32, 128, s, WS_BYTES, &p);
  /* 4,032 splits still fit whole; 4,033 (1,032,193+ keys) take windows */
  assert_int_equal(cuda_geom_decode_plan(32, 128, 4032, WS_BYTES, &p), 0);
  assert_int_equal(p.seq_chunk, 1);
  assert_int_equal(p.carry, 0);
  assert_int_equal(cuda_geom_decode_plan(32, 128, 4033, WS_BYTES, &p), 0);
  assert_int_equal(p.seq_chunk, 1);
  assert_int_equal(p.carry, 1);
  assert_int_equal(p.window, 4031); /* (64 MiB - 16,640 of carry) / 16,640 */
  walk_plan(3, 32, 128, 4033, WS_BYTES, &p);
  /* a 16M-key context of 128 heads */
  const int big = cuda_geom_decode_splits(16 << 20);
  assert_int_equal(cuda_geom_decode_plan(128, 128, big, WS_BYTES, &p), 0);
  assert_int_equal(p.carry, 1);
  assert_int_equal(p.window, (int)((WS_BYTES - 128 * 130 * 4) / (128 * 130 * 4)));
  walk_plan(2, 128, 128, big, WS_BYTES, &p);
  /* a tiny workspace: one split and its carry exactly; one byte less */
  const size_t tiny = 8 * 66 * 4 * 2;
  assert_int_equal(cuda_geom_decode_plan(8, 64, 5, tiny, &p), 0);
  assert_int_equal(p.window, 1);
  walk_plan(4, 8, 64, 5, tiny, &p);
  assert_int_equal(cuda_geom_decode_plan(8, 64, 5, tiny - 1, &p), -E2BIG);
  assert_int_equal(cuda_geom_decode_plan(8, 64, 0, WS_BYTES, &p), -E2BIG);
  /* the refusal at model load */
  char err[200];
  assert_int_equal(cuda_geom_decode_fits(32, 128, WS_BYTES, err, sizeof err), 0);
  assert_int_equal(cuda_geom_decode_fits(9, 64, WS_BYTES, err, sizeof err), 0);
  assert_int_equal(cuda_geom_decode_fits(64000, 128, WS_BYTES, err, sizeof err), 0); /* 66,560,000 bytes */
  err[0] = 0;
  assert_int_equal(cuda_geom_decode_fits(65535, 128, WS_BYTES, err, sizeof err), -E2BIG); /* 68,156,400 */
  assert_non_null(strstr(err, "68156400"));
  assert_int_equal(cuda_geom_decode_fits(8, 64, tiny, err, sizeof err), 0);
  assert_int_equal(cuda_geom_decode_fits(8, 64, tiny - 1, err, sizeof err), -E2BIG);
}

/* The decode split list: one item per split a sequence has, none for
 * padding (cache_seqlens -1); the grid walks it, capped at a few waves of
 * resident blocks. Issue 34's skewed step: 64 rows of 4,095 cached tokens
 * (16 splits each) and one of 16,383 (64 splits), 8 KV heads: the dense
 * grid started 65 * 64 * 8 = 33,280 blocks of which 64 * 16 * 8 + 64 * 8 =
 * 8,704 had keys; the list has 1,088 items a head, and 132 SMs start
 * ceil(132 * 2 * 4 / 8) = 132 blocks a head that walk them. */
static void decode_split_list(void **state) {
  (void)state;
  /* items per sequence, from the definition ceil((cs + 1) / 256) */
  assert_int_equal(cuda_geom_seq_splits(-1, 0, 100), 0);
  assert_int_equal(cuda_geom_seq_splits(0, 0, 100), 1);
  assert_int_equal(cuda_geom_seq_splits(254, 0, 100), 1);
  assert_int_equal(cuda_geom_seq_splits(255, 0, 100), 1);  /* 256 keys */
  assert_int_equal(cuda_geom_seq_splits(256, 0, 100), 2);  /* 257 keys */
  assert_int_equal(cuda_geom_seq_splits(4095, 0, 100), 16);
  assert_int_equal(cuda_geom_seq_splits(4095, 0, 10), 10); /* the window caps */
  assert_int_equal(cuda_geom_seq_splits(4095, 10, 10), 6); /* splits 10..15 */
  assert_int_equal(cuda_geom_seq_splits(4095, 16, 10), 0); /* past its end */
  assert_int_equal(cuda_geom_seq_splits(INT32_MAX - 1, 0, INT32_MAX), (int)(((int64_t)INT32_MAX + 255) / 256));

  enum { N = 65 };
  int32_t cs[N], cu[N + 1];
  for (int b = 0; b < N; b++) cs[b] = 4095;
  cs[17] = 16383;
  const int splits = cuda_geom_decode_splits(16383 + 1);
  assert_int_equal(splits, 64);
  assert_int_equal(cuda_geom_decode_split_list(N, cs, 0, splits, 1, cu), 64 * 16 + 64);
  assert_int_equal(cu[17], 17 * 16);
  assert_int_equal(cu[18], 17 * 16 + 64);
  /* every item maps back to its sequence and a split it has, each once */
  int seen[N][64];
  memset(seen, 0, sizeof seen);
  for (int64_t w = 0; w < cu[N]; w++) {
    const int b = cuda_geom_tile_seq(cu, N, w);
    const int s = (int)(w - cu[b]);
    assert_true(s >= 0 && s < cuda_geom_seq_splits(cs[b], 0, splits));
    seen[b][s]++;
  }
  for (int b = 0; b < N; b++)
    for (int s = 0; s < 64; s++) assert_int_equal(seen[b][s], s < cuda_geom_seq_splits(cs[b], 0, splits) ? 1 : 0);

  /* padding rows own no item and are never mapped to */
  const int32_t pad[6] = {-1, 300, -1, -1, 0, -1};
  int32_t cp[7];
  assert_int_equal(cuda_geom_decode_split_list(6, pad, 0, 2, 1, cp), 3);
  const int32_t want[7] = {0, 0, 2, 2, 2, 3, 3};
  assert_memory_equal(cp, want, sizeof want);
  assert_int_equal(cuda_geom_tile_seq(cp, 6, 0), 1);
  assert_int_equal(cuda_geom_tile_seq(cp, 6, 1), 1);
  assert_int_equal(cuda_geom_tile_seq(cp, 6, 2), 4);
  /* a window: splits 1.. of each */
  assert_int_equal(cuda_geom_decode_split_list(6, pad, 1, 1, 1, cp), 1);

  /* the grid: the list's bound, capped by the machine */
  assert_int_equal(cuda_geom_decode_grid_x(N, splits, 8, 132), 132);
  assert_int_equal(cuda_geom_decode_grid_x(2, 3, 8, 132), 6);  /* a small batch: its bound */
  assert_int_equal(cuda_geom_decode_grid_x(1, 1, 100000, 132), 1);
  assert_int_equal(cuda_geom_decode_grid_x(N, splits, 3, 132), 352); /* ceil(1056 / 3) */
  assert_int_equal(cuda_geom_decode_grid_x(0, 5, 8, 132), 0);
  assert_int_equal(cuda_geom_decode_grid_x(5, 5, 2, 0), 4); /* unknown SM count: one SM, ceil(8 / 2) */
}

/* Which decode kernel a GPU gets: the run kernel (<= 64 KiB a block) for
 * head_dim 64 and 128 wherever a block may take its 56 KiB or 32 KiB, the
 * split kernel for 256 (its 198 KiB: sm_90 only), neither below that. */
static void decode_kernel_per_gpu(void **state) {
  (void)state;
  const size_t sm86 = 99 * 1024, sm80 = 163 * 1024, sm90 = 227 * 1024;
  const size_t gpus[] = {sm86, sm80, sm90};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cuda_geom_decode_kernel(64, gpus[i]), CUDA_GEOM_DECODE_RUNS);
    assert_int_equal(cuda_geom_decode_kernel(128, gpus[i]), CUDA_GEOM_DECODE_RUNS);
  }
  assert_int_equal(cuda_geom_decode_kernel(256, sm90), CUDA_GEOM_DECODE_SPLITS);
  assert_int_equal(cuda_geom_decode_kernel(256, sm80), -1);
  assert_int_equal(cuda_geom_decode_kernel(128, 56832), CUDA_GEOM_DECODE_RUNS); /* exactly enough */
  assert_int_equal(cuda_geom_decode_kernel(128, 56831), -1);  /* and the split kernel takes more */
  assert_int_equal(cuda_geom_decode_kernel(64, 48 * 1024), CUDA_GEOM_DECODE_RUNS); /* no opt-in needed */
}

/* The combine's merges of one sequence, as attn_decode.cu makes them: for
 * each window of the plan (s0, n_win), its run items (cuda_geom_seq_items
 * of the list) and what each writes — a run from split 0 one merged
 * partial of its splits (or the output when cuda_geom_decode_fused), a
 * later run one partial per split — then the combine's reads of the
 * window's slots (slot 0 of the first window taken as a state when the
 * runs merge, the others merged one by one). Checks that the operations
 * are the left fold over splits 0 .. ns - 1, in order, each split once:
 * a prefix first (splits 0 .. r - 1 merged from the empty state), then one
 * split at a time; returns r. */
static int fold_of(int cs, int max_splits, int window, int run) {
  const int ns = cuda_geom_seq_splits(cs, 0, 1 << 30);
  int next = 0, prefix = 0, fused = 0;
  for (int s0 = 0; s0 < max_splits; s0 += window) {
    const int n_win = max_splits - s0 < window ? max_splits - s0 : window;
    const int in_win = cuda_geom_seq_splits(cs, s0, n_win);
    const int items = cuda_geom_seq_items(in_win, run);
    int written[1024] = {0}; /* slots of the window: 1 a split's partial, 2 a merged prefix */
    for (int k = 0; k < items; k++) {
      const int sa = s0 + k * run, sb = sa + run < s0 + in_win ? sa + run : s0 + in_win;
      assert_true(sa < sb);
      if (run > 1 && sa == 0) {
        if (cuda_geom_decode_fused(ns, run, max_splits < window ? max_splits : window)) {
          assert_int_equal(sb, ns); /* the whole row */
          fused = 1;
        } else {
          written[0] = 2;
        }
        prefix = sb;
      } else {
        for (int s = sa; s < sb; s++) written[s - s0] = 1;
      }
    }
    if (fused) continue; /* the combine skips the sequence */
    const int s_end = ns < s0 + n_win ? ns : s0 + n_win;
    int s = s0;
    if (run > 1 && s0 == 0 && s_end > 0) {
      assert_int_equal(written[0], 2);
      assert_int_equal(next, 0);
      next = prefix;
      s = prefix < s_end ? prefix : s_end;
    }
    for (; s < s_end; s++) {
      assert_int_equal(written[s - s0], 1);
      assert_int_equal(s, next); /* in order, once */
      next++;
    }
  }
  if (fused) return prefix;
  assert_int_equal(next, ns);
  return run > 1 ? prefix : (ns > 0 ? 1 : 0);
}

/* Item 9's run kernel: runs of 4 splits (1,024 keys) a work item. A run
 * from split 0 is merged in registers and writes one partial (or the
 * output: a sequence of at most 4 splits needs no combine); the bits stay
 * those of the split-by-split left fold, because only a prefix is merged
 * before the combine (fold_of). The skewed step of issue 34 (64 × 4,095 +
 * 1 × 16,383 cached): 64 * 4 + 16 = 272 items a head where the split
 * kernel had 1,088, each 4 times the keys. */
static void decode_runs_keep_the_fold(void **state) {
  (void)state;
  const int R = CUDA_GEOM_DECODE_RUN;
  assert_int_equal(R, 4);
  assert_int_equal(cuda_geom_seq_items(0, R), 0);
  assert_int_equal(cuda_geom_seq_items(1, R), 1);
  assert_int_equal(cuda_geom_seq_items(4, R), 1);
  assert_int_equal(cuda_geom_seq_items(5, R), 2);
  assert_int_equal(cuda_geom_seq_items(16, R), 4);
  assert_int_equal(cuda_geom_seq_items(7, 1), 7);
  /* fused: the sequence's splits all in its one run of the first window */
  assert_false(cuda_geom_decode_fused(0, R, 64)); /* padding: the combine writes its zeros */
  assert_true(cuda_geom_decode_fused(1, R, 64));
  assert_true(cuda_geom_decode_fused(4, R, 64));
  assert_false(cuda_geom_decode_fused(5, R, 64));
  assert_false(cuda_geom_decode_fused(3, R, 2)); /* a window of 2 splits cuts the run */
  assert_true(cuda_geom_decode_fused(2, R, 2));
  assert_false(cuda_geom_decode_fused(1, 1, 64)); /* the split kernel never */

  enum { N = 65 };
  int32_t cs[N], cu[N + 1];
  for (int b = 0; b < N; b++) cs[b] = 4095;
  cs[17] = 16383;
  assert_int_equal(cuda_geom_decode_split_list(N, cs, 0, 64, R, cu), 64 * 4 + 16);
  assert_int_equal(cu[18] - cu[17], 16);
  const int32_t pad[6] = {-1, 300, -1, -1, 0, -1};
  int32_t cp[7];
  assert_int_equal(cuda_geom_decode_split_list(6, pad, 0, 2, R, cp), 2); /* 2 splits: one run; 1 split: one */
  assert_int_equal(cuda_geom_decode_grid_x(N, cuda_geom_seq_items(64, R), 8, 132), 132);
  assert_int_equal(cuda_geom_decode_grid_x(2, cuda_geom_seq_items(3, R), 8, 132), 2);

  /* the fold, over lengths at split and run edges, whole and in windows
   * (the workspace's carried windows: 2 and 3 splits, and 5 > R) */
  const int lens[] = {-1, 0, 255, 256, 767, 1022, 1023, 1024, 1279, 2047, 2048, 4095, 4100, 16383};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
    const int cs1 = lens[i], ns = cuda_geom_seq_splits(cs1, 0, 1 << 30);
    const int max_splits = ns > 0 ? ns + 2 : 1; /* the batch's longest has more */
    const int r = fold_of(cs1, max_splits, max_splits, R);
    assert_int_equal(r, ns < R ? ns : R);
    assert_int_equal(fold_of(cs1, max_splits, max_splits, 1), ns > 0 ? 1 : 0);
    for (int w = 2; w <= 5; w++) {
      const int rw = fold_of(cs1, max_splits, w, R);
      const int cap = ns < R ? ns : R;
      assert_int_equal(rw, cap < w ? cap : w);
    }
  }
}

/* A mixed step on the paged path (issue 23's: a 3,800-token chunk beside
 * 255 decode rows of 2,048 cached tokens): the prefill kernel takes the
 * chunk's 60 tiles, not 60 + 255 (255 tiles of one busy row in 64); the
 * decode kernels take the 255 rows, 9 splits each (2,049 keys). */
static void mixed_step_routes_one_row_sequences(void **state) {
  (void)state;
  enum { N = 256 };
  int32_t cu_q[N + 1], cu_k[N + 1], tiles[N + 1], cs[N], list[N + 1];
  cu_q[0] = cu_k[0] = 0;
  for (int b = 0; b < N; b++) {
    const int q = b == 0 ? 3800 : 1, k = b == 0 ? 3800 : 2049;
    cu_q[b + 1] = cu_q[b] + q;
    cu_k[b + 1] = cu_k[b] + k;
  }
  assert_int_equal(cuda_geom_varlen_tiles(N, cu_q, 0, tiles), 60 + 255);
  assert_int_equal(cuda_geom_varlen_tiles(N, cu_q, 1, tiles), 60);
  assert_int_equal(tiles[1], 60);
  assert_int_equal(tiles[N], 60);
  assert_true(cuda_geom_routed_to_decode(1));
  assert_false(cuda_geom_routed_to_decode(0));
  assert_false(cuda_geom_routed_to_decode(2));
  const int splits = cuda_geom_decode_splits(3800);
  assert_int_equal(splits, 15);
  int64_t items = 0;
  for (int b = 0; b < N; b++) {
    const int n = cuda_geom_routed_splits(cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b], 0, splits);
    assert_int_equal(n, b == 0 ? 0 : 9);
    items += n;
    cs[b] = b == 0 ? -1 : cu_k[b + 1] - cu_k[b] - 1; /* the same list as a decode batch's */
  }
  assert_int_equal(items, 255 * 9);
  assert_int_equal(cuda_geom_decode_split_list(N, cs, 0, splits, 1, list), items);
  assert_int_equal(list[1], 0);
  /* a one-row sequence without keys: routed, no item (its output: zeros) */
  assert_int_equal(cuda_geom_routed_splits(1, 0, 0, splits), 0);
  assert_int_equal(cuda_geom_routed_splits(1, 1, 0, splits), 1);
  assert_int_equal(cuda_geom_routed_splits(1, 257, 1, splits), 1);
}

/* The metadata image: live rows at the live width, one buffer. At 256
 * requests of 2,048 tokens (+1), blocks of 16, in a cache whose rows could
 * hold 131,072 tokens (8,192 entries): 129 entries a row, 129 KiB of table
 * (133 KiB in all), where padding every row to the capacity uploaded 8 MiB. */
static void metadata_image_is_compact(void **state) {
  (void)state;
  assert_int_equal(attn_meta_live_width(0, 16), 0);
  assert_int_equal(attn_meta_live_width(1, 16), 1);
  assert_int_equal(attn_meta_live_width(2048 + 1, 16), 129);
  attn_meta_image_t img;
  attn_meta_image_layout(256, 256, 129, &img);
  assert_int_equal(img.width, 129);
  assert_int_equal(img.block_table % 4, 0); /* 16-byte aligned */
  assert_int_equal(img.n - img.block_table, 256 * 129);
  assert_int_equal(img.block_table, 1028); /* 257 + 257 + 256 + 256 int32, rounded up to 4 */
  assert_int_equal(img.n, 1028 + 256 * 129);

  /* packing: each row's first `width` entries, from a host table of a wider stride */
  enum { NS = 3, NT = 5, STRIDE = 6, W = 2 };
  const int32_t cu_q[NS + 1] = {0, 3, 4, 5}, cu_k[NS + 1] = {0, 3, 22, 31}, seqlens[NS] = {0, 18, 8};
  const int32_t table[NS * STRIDE] = {7, -1, -1, -1, -1, -1, 4, 9, -1, -1, -1, -1, 2, 3, -1, -1, -1, -1};
  const int32_t slots[NT] = {112, 113, 114, 153, 56};
  const attn_batch_t bt = {.n_seqs = NS, .n_tokens = NT, .cu_seq_lens_q = cu_q, .cu_seq_lens_k = cu_k,
                           .max_seqlen_q = 3, .max_seqlen_k = 19, .block_table = table,
                           .max_blocks_per_seq = STRIDE, .cache_seqlens = seqlens, .slots = slots};
  attn_meta_image_layout(NS, NT, W, &img);
  int32_t *dst = malloc((size_t)img.n * sizeof *dst);
  memset(dst, 0x5a, (size_t)img.n * sizeof *dst);
  attn_meta_image_pack(&bt, slots, &img, dst);
  assert_memory_equal(dst + img.cu_q, cu_q, sizeof cu_q);
  assert_memory_equal(dst + img.cu_k, cu_k, sizeof cu_k);
  assert_memory_equal(dst + img.cache_seqlens, seqlens, sizeof seqlens);
  assert_memory_equal(dst + img.slots, slots, sizeof slots);
  const int32_t want[NS * W] = {7, -1, 4, 9, 2, 3};
  assert_memory_equal(dst + img.block_table, want, sizeof want);
  for (int64_t i = img.slots + NT; i < img.block_table; i++) assert_int_equal(dst[i], 0);
  assert_int_equal(img.n, img.block_table + NS * W);
  free(dst);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decode_splits_follow_the_context),
      cmocka_unit_test(varlen_grid_is_the_batch_tiles),
      cmocka_unit_test(tile_map_covers_every_row_once),
      cmocka_unit_test(head_layouts),
      cmocka_unit_test(shared_memory_per_gpu),
      cmocka_unit_test(decode_plan_fits_the_workspace),
      cmocka_unit_test(decode_split_list),
      cmocka_unit_test(decode_kernel_per_gpu),
      cmocka_unit_test(decode_runs_keep_the_fold),
      cmocka_unit_test(mixed_step_routes_one_row_sequences),
      cmocka_unit_test(metadata_image_is_compact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
