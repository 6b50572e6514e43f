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
  int first, last; /* the first window (no carry to read), the last (write out, not carry) */
  int block_size, mbps, n_heads, n_kv_heads, group, hgroups, max_splits;
  float scale_log2;
  int window; /* sliding window (kern_attn_args_t), 0: none */
  float scale, softcap; /* kern_attn_args_t's: the soft-capped score needs the plain scale */
  const float *sinks;   /* [n_heads] learned sinks (gpt-oss), or NULL: joined once, in the last combine */
} decode_params;

/* Writes k_new[b], v_new[b] ([n_kv_heads * D] f32) at position
 * cache_seqlens[b] of sequence b; nothing for a padding row (cache_seqlens
 * < 0, kern.h). grid = n_seqs. */
static __global__ void attn_append_kernel(__nv_bfloat16 *kc, __nv_bfloat16 *vc, const float *k_new,
                                          const float *v_new, const int32_t *cache_seqlens,
                                          const int32_t *block_table, int mbps, int bs,
                                          int kv_dim) {
  const int64_t b = blockIdx.x;
  const int pos = cache_seqlens[b];
  if (pos < 0) return; /* padding */
  const int64_t slot = (int64_t)block_table[b * mbps + pos / bs] * bs + pos % bs;
  for (int c = threadIdx.x; c < kv_dim; c += blockDim.x) {
    kc[slot * kv_dim + c] = kern_cuda__bf16(k_new[b * kv_dim + c]);
    vc[slot * kv_dim + c] = kern_cuda__bf16(v_new[b * kv_dim + c]);
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
 * cuda_geom_routed_splits; scan.cuh). One block of SCAN_THREADS. */
static __global__ void __launch_bounds__(SCAN_THREADS) split_list_kernel(int32_t *cu_splits, const decode_params p, int n) {
  kern_cuda__block_scan(cu_splits, n, [=](int i) {
    const int b = p.seq0 + i;
    return p.cu_q ? cuda_geom_routed_splits(p.cu_q[b + 1] - p.cu_q[b], p.cu_k[b + 1] - p.cu_k[b], p.s0, p.n_win)
                  : cuda_geom_seq_splits(p.cache_seqlens[b], p.s0, p.n_win);
  });
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
  const int kvh = blockIdx.y / p.hgroups, hg = blockIdx.y % p.hgroups;
  const int b = p.seq0 + bl;
  const int L = dec_keys(p, b); /* keys, the new one included; the list holds no padding */
  if (L <= 0 || s * ATTN_SPLIT >= L) return; /* (never: the list holds only splits with keys) */
  const int h0 = kvh * p.group + hg * DC_ROWS;
  const int nrows = min(DC_ROWS, p.group - hg * DC_ROWS);

  uint32_t qf[D / 16][4];
  {
    const int64_t row = dec_row(p, b);
    const float *q_lo = g < nrows ? p.q + (row * p.n_heads + h0 + g) * D : nullptr;
    const float *q_hi = g + 8 < nrows ? p.q + (row * p.n_heads + h0 + g + 8) * D : nullptr;
    attn_load_q<D>(qf, q_lo, q_hi, t);
  }
  float acc[NDT][4];
#pragma unroll
  for (int j = 0; j < NDT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int lim[2] = {L, L};
  const int lo[2] = {attn_window_lo(L, p.window), attn_window_lo(L, p.window)};
  const int dim0 = warp * (D / DC_WARPS);

  const int32_t *bt = p.block_table + (int64_t)b * p.mbps;
  const int bs = p.block_size;
  auto row_of = [=](int j) -> int64_t { return (int64_t)bt[j / bs] * bs + j % bs; };
  const int64_t row_stride = (int64_t)p.n_kv_heads * D, head_off = (int64_t)kvh * D;

  const int t_begin = s * ATTN_TILES_PER_SPLIT;
  const int t_end = min(t_begin + ATTN_TILES_PER_SPLIT, (L + ATTN_TILE - 1) / ATTN_TILE);
  const int n = t_end - t_begin; /* >= 1 */
#pragma unroll
  for (int st = 0; st < DC_STAGES - 1; st++) {
    if (st < n) {
      __nv_bfloat16 *ks = smem + st * 2 * G::TILE_ELEMS;
      attn_load_tile<D>(ks, ks + G::TILE_ELEMS, p.k_cache, p.v_cache, (t_begin + st) * ATTN_TILE,
                        L, row_of, row_stride, head_off, tid, DC_THREADS);
    }
    attn_cp_commit();
  }
  for (int it = 0; it < n; it++) {
    if (it + DC_STAGES - 1 < n) {
      __nv_bfloat16 *ks = smem + ((it + DC_STAGES - 1) % DC_STAGES) * 2 * G::TILE_ELEMS;
      attn_load_tile<D>(ks, ks + G::TILE_ELEMS, p.k_cache, p.v_cache,
                        (t_begin + it + DC_STAGES - 1) * ATTN_TILE, L, row_of, row_stride,
                        head_off, tid, DC_THREADS);
    }
    attn_cp_commit();
    attn_cp_wait<DC_STAGES - 1>();
    __syncthreads();
    const __nv_bfloat16 *ks = smem + (it % DC_STAGES) * 2 * G::TILE_ELEMS;
    float sc[ATTN_TILE / 8][4], corr[2];
    attn_qk<D>(sc, qf, ks, lane); /* every warp: the full scores (cheap) */
    attn_softmax(sc, m, l, corr, (t_begin + it) * ATTN_TILE + 2 * t, lo, lim, p.scale_log2, p.scale,
                 p.softcap);
    attn_pv<D, NDT>(acc, sc, corr, ks + G::TILE_ELEMS, dim0, lane);
    __syncthreads(); /* the stage is free for the next load into it */
  }

#pragma unroll
  for (int ri = 0; ri < 2; ri++) {
    const int r = g + 8 * ri;
    if (r >= nrows) continue;
    const int64_t idx = ((int64_t)bl * p.n_heads + h0 + r) * p.n_win + (s - p.s0);
    float *o = p.part_acc + idx * D + dim0 + 2 * t;
#pragma unroll
    for (int j = 0; j < NDT; j++) *(float2 *)(o + 8 * j) = make_float2(acc[j][2 * ri], acc[j][2 * ri + 1]);
    if (warp == 0 && t == 0) *(float2 *)(p.part_ml + 2 * idx) = make_float2(m[ri], l[ri]);
  }
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

/* Merges each head's splits of the window in order, after the carried
 * merge of the windows before (p.first: none); the last window writes out,
 * the others the carry. grid = (n_heads, sequences of the chunk), one
 * thread per output element of head_dim. */
template <int D>
static __global__ void __launch_bounds__(D) attn_combine_kernel(const decode_params p, float *out) {
  const int h = blockIdx.x, bl = blockIdx.y, b = p.seq0 + bl, d = threadIdx.x;
  if (!dec_takes(p, b)) return; /* a prefill sequence (the whole block) */
  const int L = max(dec_keys(p, b), 0); /* padding: no key, zeros (attn_finish) */
  const int ns = min((L + ATTN_SPLIT - 1) / ATTN_SPLIT, p.max_splits); /* equal: max_seqlen_k >= L (kern.h) */
  const int64_t base = ((int64_t)bl * p.n_heads + h) * p.n_win;
  float *carry = p.carry + ((int64_t)bl * p.n_heads + h) * (D + 2);
  float M = -INFINITY, Ls = 0.f, A = 0.f;
  if (!p.first) {
    M = carry[D], Ls = carry[D + 1], A = carry[d];
    __syncthreads(); /* every thread has read carry[D..D+1] before thread 0 rewrites them */
  }
  const int s_end = min(ns, p.s0 + p.n_win);
  for (int s = p.s0; s < s_end; s++) {
    const float2 ml = *(const float2 *)(p.part_ml + 2 * (base + s - p.s0));
    float Mn, wa, wb;
    attn_merge_weights(M, ml.x, &Mn, &wa, &wb);
    Ls = attn_merge(Ls, wa, ml.y, wb);
    A = attn_merge(A, wa, p.part_acc[(base + s - p.s0) * D + d], wb);
    M = Mn;
  }
  if (p.last) {
    out[(dec_row(p, b) * p.n_heads + h) * D + d] = attn_finish(A, attn_sink_sum(Ls, M, p.sinks, h));
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
static void decode_launch(kern_cuda_t *cu, decode_params p, const kern_attn_args_t *a) {
  /* Sequences and splits per launch pair, as the workspace holds them
   * (kernels/cuda_geom.h); model load refused the layouts without a plan
   * (cuda_geom_decode_fits), so a failure here is a programmer error. */
  cuda_geom_decode_plan_t plan;
  if (cuda_geom_decode_plan(a->n_heads, D, p.max_splits, cu->attn_ws_bytes, &plan) != 0) {
    log_error("attn_decode: %d heads of %d do not fit the attention workspace (%zu bytes)", a->n_heads, D,
              cu->attn_ws_bytes);
    abort();
  }
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
      split_list_kernel<<<1, SCAN_THREADS, 0, cu->stream>>>(cu->tiles, p, nc);
      CUDA_CHECK_LAUNCH();
      const int grid_y = p.n_kv_heads * p.hgroups;
      dim3 grid(cuda_geom_decode_grid_x(nc, p.n_win, grid_y, cu->n_sm), grid_y);
      attn_split_kernel<D><<<grid, DC_THREADS, split_smem<D>(), cu->stream>>>(p);
      CUDA_CHECK_LAUNCH();
      attn_combine_kernel<D><<<dim3(a->n_heads, nc), D, 0, cu->stream>>>(p, a->out);
      CUDA_CHECK_LAUNCH();
    }
  }
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
  const int kv_dim = a->n_kv_heads * a->head_dim;
  attn_append_kernel<<<a->n_seqs, 256, 0, cu->stream>>>(
      (__nv_bfloat16 *)a->k_cache, (__nv_bfloat16 *)a->v_cache, a->k_new, a->v_new,
      a->cache_seqlens, a->block_table, a->max_blocks_per_seq, a->block_size, kv_dim);
  CUDA_CHECK_LAUNCH();
  kern_cuda__decode_rows(cu, a, nullptr, nullptr);
}

void kern_cuda__decode_rows(kern_cuda_t *cu, const kern_attn_args_t *a, const int32_t *cu_q, const int32_t *cu_k) {
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
  if (a->head_dim == 64)
    decode_launch<64>(cu, p, a);
  else if (a->head_dim == 128)
    decode_launch<128>(cu, p, a);
  else
    decode_launch<256>(cu, p, a);
}

cudaError_t kern_cuda__attn_decode_init(size_t smem_optin) {
  cudaError_t err = cudaSuccess;
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
