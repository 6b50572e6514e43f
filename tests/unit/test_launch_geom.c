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

/* Shared memory: a block of the head_dim-128 kernels takes 102 KiB
 * (decode: 3 stages * K and V * 64 keys * 136 bf16 = 104,448 bytes;
 * prefill: 2 such stages + 4 warps * 16 * 4 * 32 f32 = 102,400), head_dim 64
 * 54 KiB (3 * 2 * 64 * 72 * 2 = 55,296). sm_86/89 allow 99 KiB (101,376),
 * sm_80 163 KiB (166,912), sm_90 227 KiB (232,448). */
static void shared_memory_per_gpu(void **state) {
  (void)state;
  char err[200];
  assert_int_equal(CUDA_GEOM_DECODE_SMEM(128), 104448);
  assert_int_equal(CUDA_GEOM_PREFILL_SMEM(128), 102400);
  assert_int_equal(cuda_geom_attn_smem(128), 104448);
  assert_int_equal(cuda_geom_attn_smem(64), 55296);
  const size_t sm86 = 99 * 1024, sm80 = 163 * 1024, sm90 = 227 * 1024;
  assert_int_equal(cuda_geom_attn_smem_fits(64, sm86, err, sizeof err), 0);
  err[0] = 0;
  assert_int_equal(cuda_geom_attn_smem_fits(128, sm86, err, sizeof err), -ENOTSUP);
  assert_non_null(strstr(err, "head_dim 128"));
  assert_non_null(strstr(err, "104448"));
  assert_non_null(strstr(err, "101376"));
  assert_int_equal(cuda_geom_attn_smem_fits(128, sm80, err, sizeof err), 0);
  assert_int_equal(cuda_geom_attn_smem_fits(128, sm90, err, sizeof err), 0);
  assert_int_equal(cuda_geom_attn_smem_fits(128, 104448, err, sizeof err), 0); /* exactly enough */
  assert_int_equal(cuda_geom_attn_smem_fits(128, 104447, err, sizeof err), -ENOTSUP);
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
  assert_int_equal(cuda_geom_decode_split_list(N, cs, 0, splits, cu), 64 * 16 + 64);
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
  assert_int_equal(cuda_geom_decode_split_list(6, pad, 0, 2, cp), 3);
  const int32_t want[7] = {0, 0, 2, 2, 2, 3, 3};
  assert_memory_equal(cp, want, sizeof want);
  assert_int_equal(cuda_geom_tile_seq(cp, 6, 0), 1);
  assert_int_equal(cuda_geom_tile_seq(cp, 6, 1), 1);
  assert_int_equal(cuda_geom_tile_seq(cp, 6, 2), 4);
  /* a window: splits 1.. of each */
  assert_int_equal(cuda_geom_decode_split_list(6, pad, 1, 1, cp), 1);

  /* the grid: the list's bound, capped by the machine */
  assert_int_equal(cuda_geom_decode_grid_x(N, splits, 8, 132), 132);
  assert_int_equal(cuda_geom_decode_grid_x(2, 3, 8, 132), 6);  /* a small batch: its bound */
  assert_int_equal(cuda_geom_decode_grid_x(1, 1, 100000, 132), 1);
  assert_int_equal(cuda_geom_decode_grid_x(N, splits, 3, 132), 352); /* ceil(1056 / 3) */
  assert_int_equal(cuda_geom_decode_grid_x(0, 5, 8, 132), 0);
  assert_int_equal(cuda_geom_decode_grid_x(5, 5, 2, 0), 4); /* unknown SM count: one SM, ceil(8 / 2) */
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
  assert_int_equal(cuda_geom_decode_split_list(N, cs, 0, splits, list), items);
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
      cmocka_unit_test(mixed_step_routes_one_row_sequences),
      cmocka_unit_test(metadata_image_is_compact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
