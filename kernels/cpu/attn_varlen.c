/* kernels/cpu/attn_varlen.c — the three CPU attention kernels (attn_varlen,
 * attn_varlen_paged, attn_decode): one driver that differs only in where it
 * finds a sequence's keys (packed, or through the block table).
 *
 * Work. A *unit* is up to `rows` query rows of one sequence, all heads; it
 * walks the keys tile by tile (all KV heads per tile, so a tile's K/V is read
 * from memory once and serves every query head of its group and every row of
 * the unit from cache). A unit that is a large share of the call's work
 * (long contexts, few sequences) is split along keys into *pieces* at segment
 * boundaries; its segment states go to scratch and a second pass folds them.
 * Pieces run on the persistent pool, largest first. Which thread runs what
 * changes no bit of the result (see attn_cpu.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/attn_cpu.h"
#include "base/alloc.h"
#include "kernels/cpu/cpu_backend.h"

#define MAX_ROWS 16              /* query rows per unit */
#define STATE_BYTES (128 * 1024) /* at most this much softmax state per unit (unless one row needs more) */

typedef struct unit {
  int seq;           /* sequence index b */
  int r0, n_rows;    /* rows [r0, r0 + n_rows) of the sequence */
  int t_first;       /* the first tile the unit's first row sees (> 0 only under a sliding window) */
  int n_tiles;       /* tiles the unit's last row sees: [t_first, n_tiles) are walked */
  int s_first;       /* t_first's segment: segments [s_first, n_segs) hold keys */
  int n_segs;        /* segments those tiles span */
  int64_t cost;      /* rows x tiles, for ordering and splitting */
  float *scratch;    /* split units: [n_segs, n_rows, n_heads] states; NULL when whole */
} unit_t;

typedef struct piece {
  int unit;
  int s0, s1; /* segments [s0, s1) */
  int64_t cost;
} piece_t;

typedef struct job {
  const kern_attn_args_t *a;
  int decode;           /* keys from cache_seqlens + 1, one query row per sequence */
  int paged;            /* keys through the block table, else packed a->k / a->v */
  int kv_dim, group;    /* n_kv_heads * head_dim; n_heads / n_kv_heads */
  int part;             /* floats per state: KERN_ATTN_PART(head_dim) */
  unit_t *units;
  piece_t *pieces;      /* pass 1 */
  int *split;           /* pass 2: the split units */
  float *ws;            /* per-thread workspace, ws_floats each */
  size_t ws_floats;
} job_t;

static int seq_q0(const job_t *j, int b) { return j->decode ? b : j->a->cu_seq_lens_q[b]; }
static int seq_q_len(const job_t *j, int b) {
  return j->decode ? 1 : j->a->cu_seq_lens_q[b + 1] - j->a->cu_seq_lens_q[b];
}
static int seq_k_len(const job_t *j, int b) {
  return j->decode ? j->a->cache_seqlens[b] + 1 : j->a->cu_seq_lens_k[b + 1] - j->a->cu_seq_lens_k[b];
}

/* Keys row r of sequence b sees: r + k_len - q_len + 1, clamped to [0, k_len]. */
static int visible(int r, int q_len, int k_len) {
  int n = r + k_len - q_len + 1;
  return n < 0 ? 0 : n > k_len ? k_len : n;
}

/* The first key row r sees: 0, or under a sliding window W the key W - 1
 * before its own position vis - 1 (vis: visible(r, ...)). */
static int window_first(const job_t *j, int vis) {
  const int w = j->a->sliding_window;
  return w > 0 && vis > w ? vis - w : 0;
}

/* Points krows/vrows at the keys of tile t of sequence b up to max_vis
 * (padded to a multiple of 8 with the last one) and describes them in keys.
 * Paged keys are walked a block at a time (one table lookup per run). */
static void load_tile(const job_t *j, int b, int t, int max_vis, const float **krows, const float **vrows,
                      kern_cpu__attn_keys_t *keys) {
  const kern_attn_args_t *a = j->a;
  const int64_t kv_dim = j->kv_dim;
  const int base = t * KERN_ATTN_TILE;
  const int nk = max_vis - base < KERN_ATTN_TILE ? max_vis - base : KERN_ATTN_TILE;
  for (int i = 0; i < nk;) {
    const int pos = base + i;
    int run = nk - i;
    int64_t row; /* index of key pos's row in its K/V tensor */
    if (j->paged) {
      const int bs = a->block_size, off = pos % bs;
      row = (int64_t)a->block_table[(int64_t)b * a->max_blocks_per_seq + pos / bs] * bs + off;
      if (run > bs - off) run = bs - off;
    } else {
      row = (int64_t)a->cu_seq_lens_k[b] + pos;
    }
    const float *k = (const float *)(j->paged ? a->k_cache : a->k) + row * kv_dim;
    const float *v = (const float *)(j->paged ? a->v_cache : a->v) + row * kv_dim;
    for (int r = 0; r < run; r++, i++) {
      krows[i] = k + r * kv_dim;
      vrows[i] = v + r * kv_dim;
    }
  }
  for (int i = nk; i < ((nk + 7) & ~7); i++) {
    krows[i] = krows[nk - 1];
    vrows[i] = vrows[nk - 1];
  }
  *keys = (kern_cpu__attn_keys_t){krows, vrows, nk, 0};
}

/* Runs segments [s0, s1) of unit u: folds tiles into segment states, then
 * either folds those into row states and writes the output (a whole unit) or
 * stores them in the unit's scratch (a split unit). */
static void run_piece(const job_t *j, const piece_t *pc, float *ws) {
  const kern_attn_args_t *a = j->a;
  const unit_t *u = &j->units[pc->unit];
  const int H = a->n_heads, hd = a->head_dim, P = j->part, b = u->seq;
  const int q_len = seq_q_len(j, b), k_len = seq_k_len(j, b), q0 = seq_q0(j, b) + u->r0;
  const int nq = u->n_rows * H;
  float *row_st = ws, *seg_st = ws + (size_t)nq * P, *part = ws + (size_t)2 * nq * P;
  const float *krows[KERN_ATTN_TILE], *vrows[KERN_ATTN_TILE];
  int vis[MAX_ROWS], lo[MAX_ROWS]; /* each row of the unit sees keys [lo, vis) */

  for (int r = 0; r < u->n_rows; r++) {
    vis[r] = visible(u->r0 + r, q_len, k_len);
    lo[r] = window_first(j, vis[r]);
  }
  for (int i = 0; i < nq; i++) {
    kern_cpu__attn_empty(row_st + (size_t)i * P, hd);
    kern_cpu__attn_empty(seg_st + (size_t)i * P, hd);
  }
  const int max_vis = vis[u->n_rows - 1];
  for (int s = pc->s0; s < pc->s1; s++) {
    const int t_end = (s + 1) * KERN_ATTN_SEG_TILES < u->n_tiles ? (s + 1) * KERN_ATTN_SEG_TILES : u->n_tiles;
    const int t_begin = s * KERN_ATTN_SEG_TILES > u->t_first ? s * KERN_ATTN_SEG_TILES : u->t_first;
    for (int t = t_begin; t < t_end; t++) {
      const int base = t * KERN_ATTN_TILE;
      kern_cpu__attn_keys_t tile;
      load_tile(j, b, t, max_vis, krows, vrows, &tile);
      for (int r = 0; r < u->n_rows; r++) {
        kern_cpu__attn_keys_t k = tile;
        k.n = vis[r] - base < KERN_ATTN_TILE ? vis[r] - base : KERN_ATTN_TILE;
        k.first = lo[r] > base ? lo[r] - base : 0;
        if (k.n <= k.first) continue;
        kern_cpu__attn_tile(a->q + (int64_t)(q0 + r) * H * hd, H, j->group, hd, a->scale, a->softcap, &k, part);
        for (int h = 0; h < H; h++)
          kern_cpu__attn_merge(seg_st + (size_t)(r * H + h) * P, part + (size_t)h * P, hd);
      }
    }
    /* end of segment s */
    for (int i = 0; i < nq; i++) {
      float *st = seg_st + (size_t)i * P;
      if (u->scratch)
        memcpy(u->scratch + ((size_t)s * nq + i) * P, st, (size_t)P * sizeof *st);
      else
        kern_cpu__attn_merge(row_st + (size_t)i * P, st, hd);
      kern_cpu__attn_empty(st, hd);
    }
  }
  if (u->scratch) return;
  for (int i = 0; i < nq; i++)
    kern_cpu__attn_finish(a->out + ((int64_t)q0 * H + i) * hd, row_st + (size_t)i * P, hd,
                          a->sinks ? a->sinks[i % H] : -INFINITY);
}

static void pieces_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  const job_t *j = ctx;
  for (int64_t i = begin; i < end; i++) run_piece(j, &j->pieces[i], j->ws + (size_t)tid * j->ws_floats);
}

/* Folds a split unit's segment states in order and writes its output. */
static void combine_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  const job_t *j = ctx;
  const kern_attn_args_t *a = j->a;
  const int hd = a->head_dim, P = j->part;
  float *st = j->ws + (size_t)tid * j->ws_floats;
  for (int64_t p = begin; p < end; p++) {
    const unit_t *u = &j->units[j->split[p]];
    const int nq = u->n_rows * a->n_heads, q0 = seq_q0(j, u->seq) + u->r0;
    for (int i = 0; i < nq; i++) {
      kern_cpu__attn_empty(st, hd);
      for (int s = u->s_first; s < u->n_segs; s++)
        kern_cpu__attn_merge(st, u->scratch + ((size_t)s * nq + i) * P, hd);
      kern_cpu__attn_finish(a->out + ((int64_t)q0 * a->n_heads + i) * hd, st, hd,
                            a->sinks ? a->sinks[i % a->n_heads] : -INFINITY);
    }
  }
}

static int by_cost_desc(const void *x, const void *y) {
  const piece_t *p = x, *q = y;
  if (p->cost != q->cost) return p->cost > q->cost ? -1 : 1;
  return p->unit != q->unit ? p->unit - q->unit : p->s0 - q->s0;
}

/* How many pieces unit u is cut into: one, unless it is more than its share
 * of the call's work and spans several segments. */
static int64_t n_pieces_of(const unit_t *u, int64_t target, int threads) {
  const int segs = u->n_segs - u->s_first;
  int64_t k = threads > 1 ? (u->cost + target - 1) / target : 1;
  return k > segs ? (segs > 1 ? segs : 1) : k;
}

static void run(kern_backend_t *be, const kern_attn_args_t *a, int decode, int paged) {
  kern_cpu_t *cpu = kern_cpu(be);
  const int threads = cpu->n_threads;
  job_t j = {.a = a, .decode = decode, .paged = paged};
  j.kv_dim = a->n_kv_heads * a->head_dim;
  j.group = a->n_heads / a->n_kv_heads;
  j.part = KERN_ATTN_PART(a->head_dim);

  /* rows per unit: as many as keep the unit's states (row and segment,
   * STATE_BYTES in all) in L2, so each tile read serves many rows; never
   * more than the longest query */
  int rows = (int)(STATE_BYTES / ((size_t)2 * a->n_heads * j.part * sizeof(float))), max_q = 0;
  for (int b = 0; b < a->n_seqs; b++) max_q = seq_q_len(&j, b) > max_q ? seq_q_len(&j, b) : max_q;
  rows = rows < 1 ? 1 : rows > MAX_ROWS ? MAX_ROWS : rows;
  rows = rows > max_q ? max_q : rows;
  if (rows == 0) return; /* no query rows */

  int64_t n_units = 0, total = 0;
  for (int b = 0; b < a->n_seqs; b++) n_units += (seq_q_len(&j, b) + rows - 1) / rows;
  j.units = xmalloc((size_t)n_units * sizeof *j.units);
  unit_t *u = j.units;
  for (int b = 0; b < a->n_seqs; b++) {
    const int q_len = seq_q_len(&j, b), k_len = seq_k_len(&j, b);
    for (int r0 = 0; r0 < q_len; r0 += rows, u++) {
      u->seq = b;
      u->r0 = r0;
      u->n_rows = q_len - r0 < rows ? q_len - r0 : rows;
      u->n_tiles = (visible(r0 + u->n_rows - 1, q_len, k_len) + KERN_ATTN_TILE - 1) / KERN_ATTN_TILE;
      u->t_first = window_first(&j, visible(r0, q_len, k_len)) / KERN_ATTN_TILE;
      if (u->t_first > u->n_tiles) u->t_first = u->n_tiles;
      u->n_segs = (u->n_tiles + KERN_ATTN_SEG_TILES - 1) / KERN_ATTN_SEG_TILES;
      u->s_first = u->t_first / KERN_ATTN_SEG_TILES;
      u->cost = (int64_t)u->n_rows * (u->n_tiles - u->t_first + 1);
      u->scratch = NULL;
      total += u->cost;
    }
  }

  /* pieces, and scratch for the units that are split */
  const int64_t target = total / (4 * (int64_t)threads) > 0 ? total / (4 * (int64_t)threads) : 1;
  int64_t n_pieces = 0, n_split = 0;
  size_t scratch_floats = 0;
  for (int64_t i = 0; i < n_units; i++) {
    int64_t k = n_pieces_of(&j.units[i], target, threads);
    n_pieces += k;
    if (k > 1) {
      n_split++;
      scratch_floats += (size_t)j.units[i].n_segs * j.units[i].n_rows * a->n_heads * j.part;
    }
  }
  j.pieces = xmalloc((size_t)n_pieces * sizeof *j.pieces);
  j.split = xmalloc((size_t)n_split * sizeof *j.split);
  float *scratch = n_split ? xmalloc(scratch_floats * sizeof(float)) : NULL;
  int64_t np = 0, ns = 0;
  size_t off = 0;
  for (int64_t i = 0; i < n_units; i++) {
    u = &j.units[i];
    const int64_t k = n_pieces_of(u, target, threads);
    if (k > 1) {
      u->scratch = scratch + off;
      off += (size_t)u->n_segs * u->n_rows * a->n_heads * j.part;
      j.split[ns++] = (int)i;
    }
    const int segs = u->n_segs - u->s_first;
    for (int64_t p = 0; p < k; p++) {
      const int s0 = u->s_first + (int)(p * segs / k), s1 = u->s_first + (int)((p + 1) * segs / k);
      const int64_t cost = segs ? u->cost * (s1 - s0) / segs : u->cost;
      j.pieces[np++] = (piece_t){.unit = (int)i, .s0 = s0, .s1 = s1, .cost = cost};
    }
  }
  qsort(j.pieces, (size_t)np, sizeof *j.pieces, by_cost_desc);

  j.ws_floats = (size_t)(2 * rows + 1) * a->n_heads * j.part;
  j.ws = xmalloc((size_t)threads * j.ws_floats * sizeof(float));
  kern_pool_for(cpu->pool, np, 1, pieces_fn, &j);
  if (ns) kern_pool_for(cpu->pool, ns, 1, combine_fn, &j);
  free(j.ws);
  free(scratch);
  free(j.split);
  free(j.pieces);
  free(j.units);
}

void kern_cpu_attn_varlen(kern_backend_t *be, const kern_attn_args_t *a) { run(be, a, 0, 0); }

void kern_cpu_attn_varlen_paged(kern_backend_t *be, const kern_attn_args_t *a) { run(be, a, 0, 1); }

void kern_cpu_attn_decode(kern_backend_t *be, const kern_attn_args_t *a) {
  /* append the new token of every sequence at its position, then attend
   * (a padding row, cache_seqlens < 0: nothing appended, no key, zeros) */
  const int kv_dim = a->n_kv_heads * a->head_dim;
  for (int b = 0; b < a->n_seqs; b++) {
    const int pos = a->cache_seqlens[b];
    if (pos < 0) continue;
    const int32_t blk = a->block_table[(int64_t)b * a->max_blocks_per_seq + pos / a->block_size];
    const int64_t slot = (int64_t)blk * a->block_size + pos % a->block_size;
    memcpy((float *)a->k_cache + slot * kv_dim, a->k_new + (int64_t)b * kv_dim, (size_t)kv_dim * sizeof(float));
    memcpy((float *)a->v_cache + slot * kv_dim, a->v_new + (int64_t)b * kv_dim, (size_t)kv_dim * sizeof(float));
  }
  run(be, a, 1, 1);
}
