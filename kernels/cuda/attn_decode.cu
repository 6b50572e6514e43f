/* kernels/cuda/attn_decode.cu — paged decode attention with split-K (see
 * attn_decode.cuh and, for the computation, attn_tile.cuh). */
#include "kernels/cuda/attn_decode.cuh"
#include "kernels/cuda/attn_tile.cuh"
#include "kernels/cuda/attn_varlen.cuh"
#include "kernels/cuda/scan.cuh"

#define DC_WARPS 4
#define DC_THREADS (32 * DC_WARPS)
#define DC_STAGES 3
#define DC_ROWS 16 /* query heads per block: one MMA fragment */
#define DR_SLOTS 3  /* the run kernel's ring: K or V tiles in flight */
#define DR_SROW 72  /* f32 per row of its exchanged scores (64 keys + 8 of padding) */
static_assert(DC_WARPS * 2 * 8 == ATTN_TILE, "the run kernel's warps take two n-tiles of a tile's scores each");
static_assert(CUDA_GEOM_DECODE_RUN * ATTN_SPLIT == 1024, "docs: a run is 1,024 keys");

typedef struct decode_params {
  const float *q;                       /* [n_seqs, n_heads, D] */
  const __nv_bfloat16 *k_cache, *v_cache; /* [slots, n_kv_heads, D] */
  const int32_t *cache_seqlens;         /* [n_seqs] (attn_decode) */
  const int32_t *cu_q, *cu_k;           /* [n_seqs + 1] (attn_varlen_paged's one-row sequences), or NULL */
  const int32_t *block_table;           /* [n_seqs, mbps] */
  float *part_acc; /* [chunk, n_heads, n_win, D] unnormalised split outputs */
  float *part_ml;  /* [chunk, n_heads, n_win, 2] split max (log2 domain) and sum */
  float *carry;    /* [chunk, n_heads, D + 2] running merge between windows (acc, max, sum) */
  int seq0;        /* first sequence of this chunk */
  int s0, n_win;   /* this launch pair's splits: s0 .. s0 + n_win - 1 (cuda_geom_decode_plan) */
  const int32_t *cu_splits; /* [n_chunk + 1] the chunk's split list (split_list_kernel) */
  int n_chunk;              /* sequences of this chunk */
  int run;                  /* splits a work item takes: 1 (split kernel) or CUDA_GEOM_DECODE_RUN (run kernel) */
  int window0;              /* the first window's splits (cuda_geom_decode_fused) */
  const float *k_new, *v_new; /* the first split list launch appends them (attn_decode), else NULL */
  __nv_bfloat16 *k_app, *v_app; /* the cache it appends into */
  int first, last; /* the first window (no carry to read), the last (write out, not carry) */
  int block_size, mbps, n_heads, n_kv_heads, group, hgroups, max_splits;
  float scale_log2;
  int window; /* sliding window (kern_attn_args_t), 0: none */
  float scale, softcap; /* kern_attn_args_t's: the soft-capped score needs the plain scale */
  const float *sinks;   /* [n_heads] learned sinks (gpt-oss), or NULL: joined once, in the last combine */
  float *out;           /* [rows, n_heads, D] */
} decode_params;

/* Writes k_new[b], v_new[b] ([n_kv_heads * D] f32) at position
 * cache_seqlens[b] of sequence b; nothing for a padding row (cache_seqlens
 * < 0, kern.h). A block of split_list_kernel's launch does it. */
static __device__ void append_row(const decode_params &p, int64_t b, int kv_dim) {
  const int pos = p.cache_seqlens[b];
  if (pos < 0) return; /* padding */
  const int bs = p.block_size;
  const int64_t slot = (int64_t)p.block_table[b * p.mbps + pos / bs] * bs + pos % bs;
  for (int c = threadIdx.x; c < kv_dim; c += blockDim.x) {
    p.k_app[slot * kv_dim + c] = kern_cuda__bf16(p.k_new[b * kv_dim + c]);
    p.v_app[slot * kv_dim + c] = kern_cuda__bf16(p.v_new[b * kv_dim + c]);
  }
}

/* Sequence b's keys (the new one included; <= 0: none) and query row: a
 * decode batch's, or a varlen batch's whose sequences of one row were
 * routed here (the others have no split and are left alone). */
static __device__ __forceinline__ int dec_keys(const decode_params &p, int b) {
  return p.cu_k ? p.cu_k[b + 1] - p.cu_k[b] : p.cache_seqlens[b] + 1;
}
static __device__ __forceinline__ int64_t dec_row(const decode_params &p, int b) { return p.cu_q ? p.cu_q[b] : b; }
static __device__ __forceinline__ bool dec_takes(const decode_params &p, int b) {
  return !p.cu_q || cuda_geom_routed_to_decode(p.cu_q[b + 1] - p.cu_q[b]);
}

/* cu_splits[b]: the first item of chunk sequence b in the split list of
 * the window (kernels/cuda_geom.h cuda_geom_seq_splits,
 * cuda_geom_routed_splits, cuda_geom_seq_items; scan.cuh), block 0 of
 * SCAN_THREADS. The append is fused into the first such launch of a
 * decode call (p.k_new set): blocks 1 .. n_seqs append a row each, before
 * any split kernel of the call reads the cache (stream order). */
static __global__ void __launch_bounds__(SCAN_THREADS) split_list_kernel(int32_t *cu_splits, const decode_params p, int n,
                                                                        int kv_dim) {
  if (blockIdx.x > 0) {
    append_row(p, blockIdx.x - 1, kv_dim);
    return;
  }
  kern_cuda__block_scan(cu_splits, n, [=](int i) {
    const int b = p.seq0 + i;
    const int ns = p.cu_q ? cuda_geom_routed_splits(p.cu_q[b + 1] - p.cu_q[b], p.cu_k[b + 1] - p.cu_k[b], p.s0, p.n_win)
                          : cuda_geom_seq_splits(p.cache_seqlens[b], p.s0, p.n_win);
    return cuda_geom_seq_items(ns, p.run);
  });
}

/* Writes a split's (or a prefix run's merged) state for rows g and g + 8 of
 * the block's heads h0 .. h0 + nrows - 1 into workspace slot `slot` of the
 * window: acc over this warp's dims from dim0, (m, l) by warp 0. */
template <int D, int NDT>
static __device__ __forceinline__ void write_partial(const decode_params &p, int bl, int h0, int nrows, int slot,
                                                     const float (&acc)[NDT][4], const float (&m)[2],
                                                     const float (&l)[2], int warp, int dim0, int g, int t) {
#pragma unroll
  for (int ri = 0; ri < 2; ri++) {
    const int r = g + 8 * ri;
    if (r >= nrows) continue;
    const int64_t idx = ((int64_t)bl * p.n_heads + h0 + r) * p.n_win + slot;
    float *o = p.part_acc + idx * D + dim0 + 2 * t;
#pragma unroll
    for (int j = 0; j < NDT; j++) *(float2 *)(o + 8 * j) = make_float2(acc[j][2 * ri], acc[j][2 * ri + 1]);
    if (warp == 0 && t == 0) *(float2 *)(p.part_ml + 2 * idx) = make_float2(m[ri], l[ri]);
  }
}

/* What a work item of chunk sequence bl needs, for the KV head and head
 * group of blockIdx.y (both kernels); also the row_of of attn_load_rows:
 * key j's cache row through the block table. */
struct dec_item {
  int b, L, h0, nrows, dim0;
  int lo[2], lim[2]; /* every row (head) of the item sees keys [lo, L) */
  const int32_t *bt;
  int bs;
  int64_t row_stride, head_off;
  __device__ __forceinline__ int64_t operator()(int j) const { return (int64_t)bt[j / bs] * bs + j % bs; }
};

/* Fills it and the Q fragments of rows g and g + 8 (heads h0 + g, h0 + g + 8). */
template <int D>
static __device__ __forceinline__ dec_item dec_begin(const decode_params &p, int bl, uint32_t (&qf)[D / 16][4],
                                                     int warp, int g, int t) {
  dec_item it;
  const int kvh = blockIdx.y / p.hgroups, hg = blockIdx.y % p.hgroups;
  it.b = p.seq0 + bl;
  it.L = dec_keys(p, it.b); /* keys, the new one included; the list holds no padding */
  it.h0 = kvh * p.group + hg * DC_ROWS;
  it.nrows = min(DC_ROWS, p.group - hg * DC_ROWS);
  it.dim0 = warp * (D / DC_WARPS);
  it.lim[0] = it.lim[1] = it.L;
  it.lo[0] = it.lo[1] = attn_window_lo(it.L, p.window);
  it.bt = p.block_table + (int64_t)it.b * p.mbps;
  it.bs = p.block_size;
  it.row_stride = (int64_t)p.n_kv_heads * D;
  it.head_off = (int64_t)kvh * D;
  const int64_t row = dec_row(p, it.b);
  const float *q_lo = g < it.nrows ? p.q + (row * p.n_heads + it.h0 + g) * D : nullptr;
  const float *q_hi = g + 8 < it.nrows ? p.q + (row * p.n_heads + it.h0 + g + 8) * D : nullptr;
  attn_load_q<D>(qf, q_lo, q_hi, t);
  return it;
}

/* Split s of chunk sequence bl, for the KV head and head group of
 * blockIdx.y; the block's threads all take it (the barriers inside). */
template <int D>
static __device__ __forceinline__ void split_item(const decode_params &p, int bl, int s) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16 *smem = (__nv_bfloat16 *)smem_raw;
  using G = attn_geom<D>;
  constexpr int NDT = D / 8 / DC_WARPS; /* dim-tiles of 8 per warp */
  static_assert(NDT % 2 == 0, "each warp owns an even number of dim-tiles");
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  uint32_t qf[D / 16][4];
  const dec_item it = dec_begin<D>(p, bl, qf, warp, g, t);
  const int L = it.L, dim0 = it.dim0;
  if (L <= 0 || s * ATTN_SPLIT >= L) return; /* (never: the list holds only splits with keys) */
  float acc[NDT][4];
#pragma unroll
  for (int j = 0; j < NDT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  const int t_begin = s * ATTN_TILES_PER_SPLIT;
  const int t_end = min(t_begin + ATTN_TILES_PER_SPLIT, (L + ATTN_TILE - 1) / ATTN_TILE);
  const int n = t_end - t_begin; /* >= 1 */
#pragma unroll
  for (int st = 0; st < DC_STAGES - 1; st++) {
    if (st < n) {
      __nv_bfloat16 *ks = smem + st * 2 * G::TILE_ELEMS;
      attn_load_tile<D>(ks, ks + G::TILE_ELEMS, p.k_cache, p.v_cache, (t_begin + st) * ATTN_TILE,
                        L, it, it.row_stride, it.head_off, tid, DC_THREADS);
    }
    attn_cp_commit();
  }
  for (int i = 0; i < n; i++) {
    if (i + DC_STAGES - 1 < n) {
      __nv_bfloat16 *ks = smem + ((i + DC_STAGES - 1) % DC_STAGES) * 2 * G::TILE_ELEMS;
      attn_load_tile<D>(ks, ks + G::TILE_ELEMS, p.k_cache, p.v_cache,
                        (t_begin + i + DC_STAGES - 1) * ATTN_TILE, L, it, it.row_stride,
                        it.head_off, tid, DC_THREADS);
    }
    attn_cp_commit();
    attn_cp_wait<DC_STAGES - 1>();
    __syncthreads();
    const __nv_bfloat16 *ks = smem + (i % DC_STAGES) * 2 * G::TILE_ELEMS;
    float sc[ATTN_TILE / 8][4], corr[2];
    attn_qk<D>(sc, qf, ks, lane); /* every warp: the full scores (cheap) */
    attn_softmax(sc, m, l, corr, (t_begin + i) * ATTN_TILE + 2 * t, it.lo, it.lim, p.scale_log2, p.scale,
                 p.softcap);
    attn_pv<D, NDT>(acc, sc, corr, ks + G::TILE_ELEMS, dim0, lane);
    __syncthreads(); /* the stage is free for the next load into it */
  }

  write_partial<D, NDT>(p, bl, it.h0, it.nrows, s - p.s0, acc, m, l, warp, dim0, g, t);
}

/* grid = (cuda_geom_decode_grid_x, n_kv_heads * hgroups): block x walks
 * the chunk's split list from item x in steps of gridDim.x (a stage is
 * free again after an item: its last tile ends with a barrier). */
template <int D>
static __global__ void __launch_bounds__(DC_THREADS) attn_split_kernel(const decode_params p) {
  const int total = p.cu_splits[p.n_chunk];
  for (int w = blockIdx.x; w < total; w += gridDim.x) {
    const int bl = cuda_geom_tile_seq(p.cu_splits, p.n_chunk, w);
    split_item<D>(p, bl, p.s0 + (w - p.cu_splits[bl]));
  }
}

/* Run item k of the window of chunk sequence bl (cuda_geom_seq_items:
 * splits p.s0 + k * run .. at most run of them), for the KV head and head
 * group of blockIdx.y. Its K and V tiles stream through a ring of DR_SLOTS
 * slots of one tile each (K0, V0, K1, V1, ...: 2 loads in flight); each
 * warp computes two n-tiles of a K tile's scores (attn_qk_tiles: Q·K split
 * across the warps), the raw scores meet in shared memory, and every warp
 * reads all of them back and runs the same attn_softmax — so every warp
 * holds the tile's P, and its quarter of head_dim of P·V, as the split
 * kernel's warps do, with the same bits. A run that starts at split 0
 * merges its splits in registers (attn_merge, in order, from the empty
 * state: the combine's first merges) and writes one partial, or the output
 * when it is the whole sequence (cuda_geom_decode_fused); a later run
 * writes each split's partial (cuda_geom.h says why). */
template <int D>
static __device__ __forceinline__ void run_item(const decode_params &p, int bl, int k) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using G = attn_geom<D>;
  __nv_bfloat16 *ring = (__nv_bfloat16 *)smem_raw;
  float *sbuf = (float *)(smem_raw + DR_SLOTS * G::TILE_ELEMS * 2); /* [16][DR_SROW] raw scores */
  constexpr int NDT = D / 8 / DC_WARPS;
  static_assert(NDT % 2 == 0, "each warp owns an even number of dim-tiles");
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  uint32_t qf[D / 16][4];
  const dec_item it = dec_begin<D>(p, bl, qf, warp, g, t);
  const int L = it.L, dim0 = it.dim0, h0 = it.h0, nrows = it.nrows;
  const int ns_all = (L + ATTN_SPLIT - 1) / ATTN_SPLIT; /* the list holds no item of a row without keys */
  const int ns_win = min(ns_all - p.s0, p.n_win);
  const int sa = p.s0 + k * p.run, sb = min(sa + p.run, p.s0 + ns_win);
  if (sa >= sb) return; /* (never: the list holds only runs with splits) */
  const bool prefix = sa == 0;
  float acc[NDT][4], ACC[NDT][4];
#pragma unroll
  for (int j = 0; j < NDT; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[j][e] = ACC[j][e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float M[2] = {-INFINITY, -INFINITY}, Ls[2] = {0.f, 0.f};

  const int t_begin = sa * ATTN_TILES_PER_SPLIT;
  const int t_end = min(sb * ATTN_TILES_PER_SPLIT, (L + ATTN_TILE - 1) / ATTN_TILE);
  const int nu = 2 * (t_end - t_begin); /* load units: K then V of each tile */
  auto issue = [&](int u) {
    attn_load_rows<D>(ring + (u % DR_SLOTS) * G::TILE_ELEMS, u & 1 ? p.v_cache : p.k_cache,
                      (t_begin + u / 2) * ATTN_TILE, L, it, it.row_stride, it.head_off, tid, DC_THREADS);
  };
#pragma unroll
  for (int u = 0; u < DR_SLOTS - 1; u++) {
    if (u < nu) issue(u);
    attn_cp_commit();
  }
  float sc[ATTN_TILE / 8][4], corr[2];
  for (int u = 0; u < nu; u++) {
    if (u + DR_SLOTS - 1 < nu) issue(u + DR_SLOTS - 1);
    attn_cp_commit();
    attn_cp_wait<DR_SLOTS - 1>(); /* this thread's copies of unit u have landed */
    __syncthreads();              /* ... and everyone else's */
    const __nv_bfloat16 *xs = ring + (u % DR_SLOTS) * G::TILE_ELEMS;
    const int ti = t_begin + u / 2;
    if (!(u & 1)) { /* a K tile: this warp's two n-tiles, then all eight from everyone */
      float sp[2][4];
      attn_qk_tiles<D, 2>(sp, qf, xs, 2 * warp, lane);
#pragma unroll
      for (int i = 0; i < 2; i++) {
        float *r0 = sbuf + g * DR_SROW + 8 * (2 * warp + i) + 2 * t;
        *(float2 *)r0 = make_float2(sp[i][0], sp[i][1]);
        *(float2 *)(r0 + 8 * DR_SROW) = make_float2(sp[i][2], sp[i][3]);
      }
      __syncthreads();
#pragma unroll
      for (int nt = 0; nt < ATTN_TILE / 8; nt++) {
        const float *r0 = sbuf + g * DR_SROW + 8 * nt + 2 * t;
        const float2 a = *(const float2 *)r0, c = *(const float2 *)(r0 + 8 * DR_SROW);
        sc[nt][0] = a.x, sc[nt][1] = a.y, sc[nt][2] = c.x, sc[nt][3] = c.y;
      }
      const int key0 = ti * ATTN_TILE + 2 * t;
      if (attn_tile_unmasked(ti * ATTN_TILE, it.lo[0], L))
        attn_softmax<false>(sc, m, l, corr, key0, it.lo, it.lim, p.scale_log2, p.scale, p.softcap);
      else
        attn_softmax<true>(sc, m, l, corr, key0, it.lo, it.lim, p.scale_log2, p.scale, p.softcap);
    } else { /* its V tile */
      attn_pv<D, NDT>(acc, sc, corr, xs, dim0, lane);
      if ((ti + 1) % ATTN_TILES_PER_SPLIT == 0 || ti + 1 == t_end) { /* the end of split ti / 4 */
        if (prefix) {
#pragma unroll
          for (int ri = 0; ri < 2; ri++) {
            float wa, wb;
            attn_fold(M[ri], Ls[ri], m[ri], l[ri], &wa, &wb);
#pragma unroll
            for (int j = 0; j < NDT; j++)
#pragma unroll
              for (int e = 2 * ri; e < 2 * ri + 2; e++) ACC[j][e] = attn_merge(ACC[j][e], wa, acc[j][e], wb);
          }
        } else {
          write_partial<D, NDT>(p, bl, h0, nrows, ti / ATTN_TILES_PER_SPLIT - p.s0, acc, m, l, warp, dim0, g, t);
        }
#pragma unroll
        for (int j = 0; j < NDT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.f;
      }
    }
    __syncthreads(); /* slot u % DR_SLOTS is free for unit u + DR_SLOTS */
  }
  if (!prefix) return;
  if (cuda_geom_decode_fused(ns_all, p.run, p.window0)) { /* the whole row: the combine's output */
#pragma unroll
    for (int ri = 0; ri < 2; ri++) {
      const int r = g + 8 * ri;
      if (r >= nrows) continue;
      const float Lf = attn_sink_sum(Ls[ri], M[ri], p.sinks, h0 + r);
      float *o = p.out + (dec_row(p, it.b) * p.n_heads + h0 + r) * D + dim0 + 2 * t;
#pragma unroll
      for (int j = 0; j < NDT; j++)
        *(float2 *)(o + 8 * j) = make_float2(attn_finish(ACC[j][2 * ri], Lf), attn_finish(ACC[j][2 * ri + 1], Lf));
    }
  } else {
    write_partial<D, NDT>(p, bl, h0, nrows, 0, ACC, M, Ls, warp, dim0, g, t);
  }
}

/* grid = (cuda_geom_decode_grid_x, n_kv_heads * hgroups): block x walks
 * the chunk's list of run items from item x in steps of gridDim.x. */
template <int D>
static __global__ void __launch_bounds__(DC_THREADS) attn_run_kernel(const decode_params p) {
  const int total = p.cu_splits[p.n_chunk];
  for (int w = blockIdx.x; w < total; w += gridDim.x) {
    const int bl = cuda_geom_tile_seq(p.cu_splits, p.n_chunk, w);
    run_item<D>(p, bl, w - p.cu_splits[bl]);
  }
}

/* Merges each head's splits of the window in order, after the carried
 * merge of the windows before (p.first: none); the last window writes out,
 * the others the carry. Under the run kernel (p.run > 1) slot 0 of the
 * first window holds splits 0 .. min(run, splits) - 1 already merged from
 * the empty state (run_item), which is taken as the state as it is, and a
 * sequence its run item finished (cuda_geom_decode_fused) is skipped.
 * grid = (n_heads, sequences of the chunk), one thread per output element
 * of head_dim. */
template <int D>
static __global__ void __launch_bounds__(D) attn_combine_kernel(const decode_params p) {
  const int h = blockIdx.x, bl = blockIdx.y, b = p.seq0 + bl, d = threadIdx.x;
  if (!dec_takes(p, b)) return; /* a prefill sequence (the whole block) */
  const int L = max(dec_keys(p, b), 0); /* padding: no key, zeros (attn_finish) */
  const int ns = min((L + ATTN_SPLIT - 1) / ATTN_SPLIT, p.max_splits); /* equal: max_seqlen_k >= L (kern.h) */
  if (cuda_geom_decode_fused(ns, p.run, p.window0)) return; /* run_item wrote the output */
  const int64_t base = ((int64_t)bl * p.n_heads + h) * p.n_win;
  float *carry = p.carry + ((int64_t)bl * p.n_heads + h) * (D + 2);
  float M = -INFINITY, Ls = 0.f, A = 0.f;
  if (!p.first) {
    M = carry[D], Ls = carry[D + 1], A = carry[d];
    __syncthreads(); /* every thread has read carry[D..D+1] before thread 0 rewrites them */
  }
  const int s_end = min(ns, p.s0 + p.n_win);
  int s = p.s0;
  if (p.run > 1 && p.s0 == 0 && s_end > 0) { /* the merged prefix (p.first: nothing carried) */
    const float2 ml = *(const float2 *)(p.part_ml + 2 * base);
    M = ml.x, Ls = ml.y, A = p.part_acc[base * D + d];
    s = min(p.run, s_end);
  }
  for (; s < s_end; s++) {
    const float2 ml = *(const float2 *)(p.part_ml + 2 * (base + s - p.s0));
    float wa, wb;
    attn_fold(M, Ls, ml.x, ml.y, &wa, &wb);
    A = attn_merge(A, wa, p.part_acc[(base + s - p.s0) * D + d], wb);
  }
  if (p.last) {
    p.out[(dec_row(p, b) * p.n_heads + h) * D + d] = attn_finish(A, attn_sink_sum(Ls, M, p.sinks, h));
  } else {
    carry[d] = A;
    if (d == 0) carry[D] = M, carry[D + 1] = Ls;
  }
}

template <int D>
static constexpr int split_smem() {
  return DC_STAGES * attn_geom<D>::STAGE_BYTES;
}
static_assert(split_smem<64>() == CUDA_GEOM_DECODE_SMEM(64) && split_smem<128>() == CUDA_GEOM_DECODE_SMEM(128) &&
                  split_smem<256>() == CUDA_GEOM_DECODE_SMEM(256),
              "kernels/cuda_geom.h sizes the decode kernel's shared memory");

template <int D>
static constexpr int run_smem() {
  return DR_SLOTS * attn_geom<D>::TILE_ELEMS * 2 + DC_ROWS * DR_SROW * (int)sizeof(float);
}
static_assert(run_smem<64>() == CUDA_GEOM_DECODE_RUN_SMEM(64) && run_smem<128>() == CUDA_GEOM_DECODE_RUN_SMEM(128),
              "kernels/cuda_geom.h sizes the run decode kernel's shared memory");
static_assert(run_smem<128>() <= CUDA_GEOM_DECODE_RUN_SMEM_MAX, "the run kernel keeps to 64 KiB");

/* One decode call: for each chunk of sequences and window of splits, the
 * split list (with the append fused into the first), the run or split
 * kernel (cuda_geom_decode_kernel; RUNS is only instantiated for head_dim
 * <= 128) and the combine. */
template <int D>
static void decode_launch(kern_cuda_t *cu, decode_params p, const kern_attn_args_t *a, int kind) {
  /* Sequences and splits per launch pair, as the workspace holds them
   * (kernels/cuda_geom.h); model load refused the layouts without a plan
   * (cuda_geom_decode_fits), so a failure here is a programmer error. */
  cuda_geom_decode_plan_t plan;
  if (cuda_geom_decode_plan(a->n_heads, D, p.max_splits, cu->attn_ws_bytes, &plan) != 0) {
    log_error("attn_decode: %d heads of %d do not fit the attention workspace (%zu bytes)", a->n_heads, D,
              cu->attn_ws_bytes);
    abort();
  }
  p.window0 = p.max_splits < plan.window ? p.max_splits : plan.window;
  for (int seq0 = 0; seq0 < a->n_seqs; seq0 += plan.seq_chunk) {
    const int nc = (int)(a->n_seqs - seq0 < plan.seq_chunk ? a->n_seqs - seq0 : plan.seq_chunk);
    p.seq0 = seq0;
    for (int s0 = 0; s0 < p.max_splits; s0 += plan.window) {
      p.s0 = s0;
      p.n_win = p.max_splits - s0 < plan.window ? p.max_splits - s0 : plan.window;
      p.first = s0 == 0;
      p.last = s0 + p.n_win >= p.max_splits;
      p.part_acc = cu->attn_ws;
      p.part_ml = cu->attn_ws + (int64_t)nc * a->n_heads * p.n_win * D;
      p.carry = p.part_ml + (int64_t)nc * a->n_heads * p.n_win * 2;
      p.cu_splits = cu->tiles; /* stream-ordered: the varlen tile map's buffer */
      p.n_chunk = nc;
      const int appends = p.k_new && seq0 == 0 && s0 == 0 ? (int)a->n_seqs : 0;
      split_list_kernel<<<1 + appends, SCAN_THREADS, 0, cu->stream>>>(cu->tiles, p, nc,
                                                                       a->n_kv_heads * a->head_dim);
      CUDA_CHECK_LAUNCH();
      const int grid_y = p.n_kv_heads * p.hgroups;
      dim3 grid(cuda_geom_decode_grid_x(nc, cuda_geom_seq_items(p.n_win, p.run), grid_y, cu->n_sm), grid_y);
      if constexpr (D <= 128) {
        if (kind == CUDA_GEOM_DECODE_RUNS) {
          attn_run_kernel<D><<<grid, DC_THREADS, run_smem<D>(), cu->stream>>>(p);
        } else {
          attn_split_kernel<D><<<grid, DC_THREADS, split_smem<D>(), cu->stream>>>(p);
        }
      } else {
        attn_split_kernel<D><<<grid, DC_THREADS, split_smem<D>(), cu->stream>>>(p);
      }
      CUDA_CHECK_LAUNCH();
      attn_combine_kernel<D><<<dim3(a->n_heads, nc), D, 0, cu->stream>>>(p);
      CUDA_CHECK_LAUNCH();
    }
  }
}

/* Launches (2)-(4) (attn_decode.cuh), the append fused into the first
 * split list when `append`. */
static void decode_rows(kern_cuda_t *cu, const kern_attn_args_t *a, const int32_t *cu_q, const int32_t *cu_k,
                        bool append) {
  decode_params p;
  p.cu_q = cu_q;
  p.cu_k = cu_k;
  p.q = a->q;
  p.k_cache = (const __nv_bfloat16 *)a->k_cache;
  p.v_cache = (const __nv_bfloat16 *)a->v_cache;
  p.cache_seqlens = a->cache_seqlens;
  p.block_table = a->block_table;
  p.part_acc = p.part_ml = nullptr;
  p.seq0 = 0;
  p.block_size = a->block_size;
  p.mbps = a->max_blocks_per_seq;
  p.n_heads = a->n_heads;
  p.n_kv_heads = a->n_kv_heads;
  p.group = a->n_heads / a->n_kv_heads;
  p.hgroups = (p.group + DC_ROWS - 1) / DC_ROWS;
  /* Enough splits for the batch's longest context (not the table's width). */
  p.max_splits = cuda_geom_decode_splits(a->max_seqlen_k);
  if (p.max_splits < 1 && cu_q) p.max_splits = 1; /* routed rows without keys: zeros */
  if (p.max_splits < 1) {
    log_error("attn_decode: max_seqlen_k is %d (want the longest cache_seqlens + 1)", a->max_seqlen_k);
    abort();
  }
  p.scale_log2 = a->scale * ATTN_LOG2E;
  p.window = a->sliding_window;
  p.scale = a->scale;
  p.softcap = a->softcap;
  p.sinks = a->sinks;
  if ((int64_t)p.n_kv_heads * p.hgroups > 65535) {
    log_error("attn_decode: too many KV heads (%d)", p.n_kv_heads);
    abort();
  }
  p.k_new = append ? a->k_new : nullptr;
  p.v_new = append ? a->v_new : nullptr;
  p.k_app = (__nv_bfloat16 *)a->k_cache;
  p.v_app = (__nv_bfloat16 *)a->v_cache;
  p.out = a->out;
  int kind = cuda_geom_decode_kernel(a->head_dim, cu->smem_optin);
  if (cu->decode_splits_only) kind = CUDA_GEOM_DECODE_SPLITS; /* tests/gpu: the fallback, for its bits */
  p.run = kind == CUDA_GEOM_DECODE_RUNS ? CUDA_GEOM_DECODE_RUN : 1;
  if (a->head_dim == 64)
    decode_launch<64>(cu, p, a, kind);
  else if (a->head_dim == 128)
    decode_launch<128>(cu, p, a, kind);
  else
    decode_launch<256>(cu, p, a, kind);
}

void kern_cuda__attn_decode(kern_backend_t *be, const kern_attn_args_t *a) {
  if (a->n_seqs <= 0) return;
  kern_cuda__attn_check(a, "attn_decode");
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  if (!kern_cuda__aligned16(a->k_cache, a->v_cache) || !kern_cuda__aligned16(a->q, a->out)) {
    log_error("attn_decode: K/V cache, Q and out must be 16-byte aligned device buffers");
    abort();
  }
  decode_rows(cu, a, nullptr, nullptr, true);
}

void kern_cuda__decode_rows(kern_cuda_t *cu, const kern_attn_args_t *a, const int32_t *cu_q, const int32_t *cu_k) {
  decode_rows(cu, a, cu_q, cu_k, false);
}

cudaError_t kern_cuda__attn_decode_init(size_t smem_optin) {
  cudaError_t err = cudaSuccess;
  if ((size_t)run_smem<64>() <= smem_optin)
    err = cudaFuncSetAttribute(attn_run_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, run_smem<64>());
  if (err == cudaSuccess && (size_t)run_smem<128>() <= smem_optin)
    err = cudaFuncSetAttribute(attn_run_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, run_smem<128>());
  if (err != cudaSuccess) return err;
  if ((size_t)split_smem<64>() <= smem_optin)
    err = cudaFuncSetAttribute(attn_split_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, split_smem<64>());
  if (err == cudaSuccess && (size_t)split_smem<128>() <= smem_optin)
    err = cudaFuncSetAttribute(attn_split_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               split_smem<128>());
  if (err == cudaSuccess && (size_t)split_smem<256>() <= smem_optin)
    err = cudaFuncSetAttribute(attn_split_kernel<256>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               split_smem<256>());
  return err;
}
