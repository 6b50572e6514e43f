/* kernels/cuda/attn_varlen.cu — varlen prefill attention over packed or
 * paged K/V (see attn_varlen.cuh and, for the computation, attn_tile.cuh). */
#include "kernels/cuda/attn_tile.cuh"
#include "kernels/cuda/attn_decode.cuh"
#include "kernels/cuda/attn_varlen.cuh"
#include "kernels/cuda/scan.cuh"

#define PF_WARPS 4
#define PF_THREADS (32 * PF_WARPS)
#define PF_ROWS (16 * PF_WARPS) /* query rows per thread block */
#define PF_STAGES 2
static_assert(PF_ROWS == CUDA_GEOM_PREFILL_ROWS, "kernels/cuda_geom.h sizes the grid by PF_ROWS");
static_assert(ATTN_SPLIT == CUDA_GEOM_SPLIT_KEYS, "kernels/cuda_geom.h counts splits of ATTN_SPLIT keys");

typedef struct prefill_params {
  const float *q; /* [total_q, n_heads, D] */
  float *out;     /* [total_q, n_heads, D] */
  const __nv_bfloat16 *k, *v; /* packed [total_k, n_kv_heads, D] or cache [slots, n_kv_heads, D] */
  const int32_t *cu_q, *cu_k; /* [n_seqs + 1] */
  const int32_t *block_table; /* paged: [n_seqs, mbps] */
  const int32_t *tiles;       /* [n_seqs + 1] first row tile of each sequence (tiles_kernel) */
  int n_seqs, block_size, mbps;
  int n_heads, n_kv_heads, group; /* group = n_heads / n_kv_heads */
  float scale_log2;               /* scale * log2(e) */
  int window;                     /* sliding window (kern_attn_args_t), 0: none */
  float scale, softcap;           /* kern_attn_args_t's: the soft-capped score needs the plain scale */
  const float *sinks;             /* [n_heads] learned sinks (gpt-oss), or NULL */
} prefill_params;

/* tiles[b] = sum of cuda_geom_prefill_tiles(q_len, route) over sequences
 * before b, for b in 0..n_seqs (scan.cuh). One block of SCAN_THREADS. */
static __global__ void __launch_bounds__(SCAN_THREADS)
    tiles_kernel(int32_t *tiles, const int32_t *cu_q, int n_seqs, int route) {
  kern_cuda__block_scan(tiles, n_seqs, [=](int i) { return cuda_geom_prefill_tiles(cu_q[i + 1] - cu_q[i], route); });
}

/* grid = (cuda_geom_varlen_grid: at least the batch's row tiles, n_heads).
 * Block x takes row tile x of the batch (tiles_kernel's map), within its
 * sequence last rows first: under the causal mask they have the most keys.
 * Blocks past the last tile exit at once. */
template <int D, bool PAGED>
static __global__ void __launch_bounds__(PF_THREADS, 2) attn_prefill_kernel(const prefill_params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16 *smem = (__nv_bfloat16 *)smem_raw;
  using G = attn_geom<D>;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int64_t tile = blockIdx.x;
  if (tile >= p.tiles[p.n_seqs]) return; /* the whole block: no barrier reached yet */
  const int b = cuda_geom_tile_seq(p.tiles, p.n_seqs, tile), h = blockIdx.y;
  const int q0 = p.cu_q[b], q_len = p.cu_q[b + 1] - q0;
  const int r0 = cuda_geom_tile_row0(p.tiles, b, tile); /* < q_len */
  const int k0 = p.cu_k[b], k_len = p.cu_k[b + 1] - k0;
  const int off = k_len - q_len; /* row i sees keys j < i + off + 1 */
  const int kvh = h / p.group;

  /* Keys this block needs: those its last row sees. */
  const int kmax = max(0, min(min(r0 + PF_ROWS, q_len) + off, k_len));
  const int wr0 = r0 + 16 * warp;
  const bool active = wr0 < q_len;
  const int warp_kmax = active ? max(0, min(min(wr0 + 16, q_len) + off, k_len)) : 0;
  const int row[2] = {wr0 + g, wr0 + g + 8};
  const int lim[2] = {min(row[0] + off + 1, k_len), min(row[1] + off + 1, k_len)};
  const int lo[2] = {attn_window_lo(lim[0], p.window), attn_window_lo(lim[1], p.window)};
  /* The warp's rows' bounds: its first row sees the fewest keys, its last
   * the latest window edge (rows past q_len only make this tighter); a
   * tile inside both needs no mask (attn_tile_unmasked): under the causal
   * mask every tile but the diagonal ones (and a window's edges). */
  const int lim_w = min(wr0 + off + 1, k_len);
  const int lo_w = attn_window_lo(min(wr0 + 16 + off, k_len), p.window);

  uint32_t qf[D / 16][4];
  {
    const float *q_lo =
        row[0] < q_len ? p.q + ((int64_t)(q0 + row[0]) * p.n_heads + h) * D : nullptr;
    const float *q_hi =
        row[1] < q_len ? p.q + ((int64_t)(q0 + row[1]) * p.n_heads + h) * D : nullptr;
    attn_load_q<D>(qf, q_lo, q_hi, t);
  }

  /* The split's state in registers; the merged state's accumulator (touched
   * once per split) in shared memory, each thread its own slots. */
  float acc[D / 8][4];
  float *ACC = (float *)(smem_raw + PF_STAGES * G::STAGE_BYTES) + warp * (D / 8) * 4 * 32 + lane;
#pragma unroll
  for (int j = 0; j < D / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      acc[j][e] = 0.f;
      ACC[(4 * j + e) * 32] = 0.f;
    }
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f};

  const int32_t *bt = PAGED ? p.block_table + (int64_t)b * p.mbps : nullptr;
  const int bs = p.block_size;
  auto row_of = [=](int j) -> int64_t {
    if (PAGED) return (int64_t)bt[j / bs] * bs + j % bs;
    return (int64_t)k0 + j;
  };
  const int64_t row_stride = (int64_t)p.n_kv_heads * D, head_off = (int64_t)kvh * D;

  const int n_tiles = (kmax + ATTN_TILE - 1) / ATTN_TILE;
  if (n_tiles > 0)
    attn_load_tile<D>(smem, smem + G::TILE_ELEMS, p.k, p.v, 0, kmax, row_of, row_stride, head_off,
                      tid, PF_THREADS);
  attn_cp_commit();
  for (int it = 0; it < n_tiles; it++) {
    if (it + 1 < n_tiles) {
      __nv_bfloat16 *ks = smem + ((it + 1) % PF_STAGES) * 2 * G::TILE_ELEMS;
      attn_load_tile<D>(ks, ks + G::TILE_ELEMS, p.k, p.v, (it + 1) * ATTN_TILE, kmax, row_of,
                        row_stride, head_off, tid, PF_THREADS);
    }
    attn_cp_commit();
    attn_cp_wait<1>(); /* this thread's copies of tile `it` have landed */
    __syncthreads();   /* ... and everyone else's */
    const __nv_bfloat16 *ks = smem + (it % PF_STAGES) * 2 * G::TILE_ELEMS;
    if (active && it * ATTN_TILE < warp_kmax) {
      float s[ATTN_TILE / 8][4], corr[2];
      attn_qk<D>(s, qf, ks, lane);
      if (D <= 128 && attn_tile_unmasked(it * ATTN_TILE, lo_w, lim_w)) /* 256: more spills (docs/benchmarks/cuda.md) */
        attn_softmax<false>(s, m, l, corr, it * ATTN_TILE + 2 * t, lo, lim, p.scale_log2, p.scale, p.softcap);
      else
        attn_softmax<true>(s, m, l, corr, it * ATTN_TILE + 2 * t, lo, lim, p.scale_log2, p.scale, p.softcap);
      attn_pv<D, D / 8>(acc, s, corr, ks + G::TILE_ELEMS, 0, lane);
    }
    if (active && ((it + 1) % ATTN_TILES_PER_SPLIT == 0 || it + 1 == n_tiles)) {
      /* End of a split: fold it into the running state, start the next. */
#pragma unroll
      for (int ri = 0; ri < 2; ri++) {
        float wa, wb;
        attn_fold(M[ri], L[ri], m[ri], l[ri], &wa, &wb);
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
#pragma unroll
          for (int e = 2 * ri; e < 2 * ri + 2; e++) {
            float *X = ACC + (4 * j + e) * 32;
            *X = attn_merge(*X, wa, acc[j][e], wb);
            acc[j][e] = 0.f;
          }
        }
        m[ri] = -INFINITY;
        l[ri] = 0.f;
      }
    }
    __syncthreads(); /* the stage is free for the load two tiles ahead */
  }

#pragma unroll
  for (int ri = 0; ri < 2; ri++) {
    if (row[ri] >= q_len) continue;
    float *o = p.out + ((int64_t)(q0 + row[ri]) * p.n_heads + h) * D + 2 * t;
    const float Ls = attn_sink_sum(L[ri], M[ri], p.sinks, h);
#pragma unroll
    for (int j = 0; j < D / 8; j++)
      *(float2 *)(o + 8 * j) = make_float2(attn_finish(ACC[(4 * j + 2 * ri) * 32], Ls),
                                           attn_finish(ACC[(4 * j + 2 * ri + 1) * 32], Ls));
  }
}

template <int D, bool PAGED>
static constexpr int prefill_smem() {
  /* K/V stages, then each warp's merged accumulator [D / 8][4][32 lanes] f32 */
  return PF_STAGES * attn_geom<D>::STAGE_BYTES + PF_WARPS * (D / 8) * 4 * 32 * (int)sizeof(float);
}

void kern_cuda__attn_check(const kern_attn_args_t *a, const char *what) {
  char why[160];
  if (cuda_geom_attn_supported(a->n_heads, a->n_kv_heads, a->head_dim, why, sizeof why) != 0 ||
      a->n_seqs > CUDA_GEOM_MAX_SEQS) {
    /* model load refuses such a layout (be->attn_supported): a programmer error here */
    log_error("%s: %d sequences, %d heads, %d KV heads of %d: %s", what, a->n_seqs, a->n_heads, a->n_kv_heads,
              a->head_dim, a->n_seqs > CUDA_GEOM_MAX_SEQS ? "too many sequences" : why);
    abort();
  }
}

template <int D, bool PAGED>
static void prefill_launch(kern_cuda_t *cu, const prefill_params &p, const kern_attn_args_t *a, int route) {
  const int64_t tiles = cuda_geom_varlen_grid(a->n_seqs, a->total_q, a->max_seqlen_q);
  if (tiles > INT32_MAX) {
    log_error("attn_varlen: %lld row tiles in one call", (long long)tiles);
    abort();
  }
  tiles_kernel<<<1, SCAN_THREADS, 0, cu->stream>>>(cu->tiles, a->cu_seq_lens_q, a->n_seqs, route);
  CUDA_CHECK_LAUNCH();
  dim3 grid((unsigned)tiles, a->n_heads);
  attn_prefill_kernel<D, PAGED><<<grid, PF_THREADS, prefill_smem<D, PAGED>(), cu->stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

static void varlen(kern_backend_t *be, const kern_attn_args_t *a, bool paged) {
  if (a->n_seqs <= 0 || a->max_seqlen_q <= 0) return;
  kern_cuda__attn_check(a, paged ? "attn_varlen_paged" : "attn_varlen");
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  prefill_params p;
  p.q = a->q;
  p.out = a->out;
  p.k = (const __nv_bfloat16 *)(paged ? a->k_cache : a->k);
  p.v = (const __nv_bfloat16 *)(paged ? a->v_cache : a->v);
  if (!kern_cuda__aligned16(p.k, p.v) || !kern_cuda__aligned16(p.q, p.out)) {
    log_error("attention: K/V, Q and out must be 16-byte aligned device buffers");
    abort();
  }
  p.cu_q = a->cu_seq_lens_q;
  p.cu_k = a->cu_seq_lens_k;
  p.block_table = paged ? a->block_table : nullptr;
  p.tiles = cu->tiles;
  p.n_seqs = a->n_seqs;
  p.block_size = paged ? a->block_size : 1;
  p.mbps = paged ? a->max_blocks_per_seq : 0;
  p.n_heads = a->n_heads;
  p.n_kv_heads = a->n_kv_heads;
  p.group = a->n_heads / a->n_kv_heads;
  p.scale_log2 = a->scale * ATTN_LOG2E;
  p.window = a->sliding_window;
  p.scale = a->scale;
  p.softcap = a->softcap;
  p.sinks = a->sinks;
  /* paged: the sequences of one row go to the decode kernels (the same
   * bits, kernels/cuda_geom.h cuda_geom_routed_to_decode); a batch of them
   * only (max_seqlen_q 1) starts no prefill block */
  if (!paged || a->max_seqlen_q > 1) {
    if (a->head_dim == 64)
      paged ? prefill_launch<64, true>(cu, p, a, 1) : prefill_launch<64, false>(cu, p, a, 0);
    else if (a->head_dim == 128)
      paged ? prefill_launch<128, true>(cu, p, a, 1) : prefill_launch<128, false>(cu, p, a, 0);
    else
      paged ? prefill_launch<256, true>(cu, p, a, 1) : prefill_launch<256, false>(cu, p, a, 0);
  }
  if (paged) kern_cuda__decode_rows(cu, a, a->cu_seq_lens_q, a->cu_seq_lens_k);
}

void kern_cuda__attn_varlen(kern_backend_t *be, const kern_attn_args_t *a) { varlen(be, a, false); }

void kern_cuda__attn_varlen_paged(kern_backend_t *be, const kern_attn_args_t *a) {
  varlen(be, a, true);
}

static_assert(prefill_smem<64, true>() == CUDA_GEOM_PREFILL_SMEM(64) &&
                  prefill_smem<128, true>() == CUDA_GEOM_PREFILL_SMEM(128) &&
                  prefill_smem<256, true>() == CUDA_GEOM_PREFILL_SMEM(256),
              "kernels/cuda_geom.h sizes the prefill kernel's shared memory");

/* Raises the limit of one variant when it fits the GPU (*err: the first failure). */
template <int D, bool PAGED>
static void raise_smem_limit(size_t smem_optin, cudaError_t *err) {
  if (*err != cudaSuccess || (size_t)prefill_smem<D, PAGED>() > smem_optin) return;
  *err = cudaFuncSetAttribute(attn_prefill_kernel<D, PAGED>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              prefill_smem<D, PAGED>());
}

cudaError_t kern_cuda__attn_varlen_init(size_t smem_optin) {
  cudaError_t err = cudaSuccess;
  raise_smem_limit<64, false>(smem_optin, &err);
  raise_smem_limit<64, true>(smem_optin, &err);
  raise_smem_limit<128, false>(smem_optin, &err);
  raise_smem_limit<128, true>(smem_optin, &err);
  raise_smem_limit<256, false>(smem_optin, &err);
  raise_smem_limit<256, true>(smem_optin, &err);
  return err;
}
