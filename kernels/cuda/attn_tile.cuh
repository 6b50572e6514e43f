/* kernels/cuda/attn_tile.cuh — the device code the three attention kernels
 * share, so that they give the same bits for the same query row (kern.h).
 *
 * The one computation. A query row's keys [0, lim) are cut into splits of
 * ATTN_SPLIT keys and each split into tiles of ATTN_TILE keys, counted from
 * the sequence's first key. Inside a split, tiles are folded in order with an
 * online softmax: (m, l, acc) start at (-inf, 0, 0); each tile's scores come
 * from bf16 tensor-core MMAs (m16n8k16, f32 accumulation, head_dim in
 * ascending 16-wide steps), are scaled into the log2 domain, masked, and
 * update m, l (a fixed-order row sum) and acc (P in bf16 times V, keys in
 * ascending 16-wide steps). Splits are then merged in order into (M, L, ACC)
 * by attn_merge, and the row's output is ACC / L (0 when L = 0: a row that
 * sees no key). Decode's run kernel runs up to 4 consecutive splits in a
 * thread block, merging them in registers only when they start at split 0
 * (a prefix of the fold; kernels/cuda_geom.h cuda_geom_decode_fused), its
 * split kernel one split a block, and both merge the rest in order in a
 * combine kernel; prefill runs the splits of a row one after the other in
 * one warp and merges as it goes; all use these functions, with explicit
 * round-to-nearest intrinsics wherever the compiler could otherwise fuse or
 * reorder. A tile or split that is entirely masked for a row leaves that
 * row's state bit-for-bit unchanged, so work a kernel does beyond a row's
 * keys (because other rows of its MMA need it) cannot change that row.
 *
 * MMA rows are independent: row r of the 16-row fragment is a query row of
 * one head (prefill) or one head of a GQA group (decode); its result does not
 * depend on the other rows.
 *
 * Fragment layout (PTX mma.m16n8k16, lane = 4 * g + t): A holds rows g and
 * g + 8, columns 2t, 2t + 1 (+ 8); B holds column g, rows 2t, 2t + 1 (+ 8);
 * C holds rows g and g + 8, columns 2t, 2t + 1. */
#ifndef TRAM_KERN_CUDA_ATTN_TILE_CUH
#define TRAM_KERN_CUDA_ATTN_TILE_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#define ATTN_TILE 64   /* keys per K/V tile */
#define ATTN_SPLIT 256 /* keys per split; a multiple of ATTN_TILE */
#define ATTN_TILES_PER_SPLIT (ATTN_SPLIT / ATTN_TILE)
#define ATTN_PAD 8 /* bf16 of padding per shared-memory row: rows 16 bytes apart in banks */
#define ATTN_LOG2E 1.4426950408889634f

static_assert(ATTN_SPLIT % ATTN_TILE == 0, "a split is whole tiles");

/* Shared-memory geometry of one K or V tile for head_dim D. */
template <int D>
struct attn_geom {
  static constexpr int ROW = D + ATTN_PAD;              /* row stride, bf16 */
  static constexpr int TILE_ELEMS = ATTN_TILE * ROW;    /* one K or V tile */
  static constexpr int STAGE_BYTES = 2 * TILE_ELEMS * 2; /* K and V */
  static constexpr int CHUNKS = D / 8;                   /* 16-byte chunks per key row */
  static constexpr int KC = D / 16;                      /* k-steps of Q·Kᵀ */
  static_assert(D % 32 == 0, "head_dim must be a multiple of 32");
};

/* --- PTX wrappers ---------------------------------------------------------- */

static __device__ __forceinline__ uint32_t attn_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global → shared; src_bytes = 0 writes zeros and reads nothing. */
static __device__ __forceinline__ void attn_cp_async16(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(attn_smem_addr(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
static __device__ __forceinline__ void attn_cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void attn_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

static __device__ __forceinline__ void attn_ldmatrix_x4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(attn_smem_addr(p)));
}
static __device__ __forceinline__ void attn_ldmatrix_x4_trans(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(attn_smem_addr(p)));
}

/* c += a · b for one m16n8k16 bf16 MMA with f32 accumulators. */
static __device__ __forceinline__ void attn_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two f32 → packed bf16x2 (lo in the low half), round to nearest even. */
static __device__ __forceinline__ uint32_t attn_pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* --- the computation -------------------------------------------------------- */

/* Q rows g and g + 8 (f32 in global memory, NULL = a padding row of zeros)
 * as bf16 A fragments for every k-step. */
template <int D>
static __device__ __forceinline__ void attn_load_q(uint32_t (&qf)[D / 16][4], const float *q_lo,
                                                   const float *q_hi, int t) {
#pragma unroll
  for (int kc = 0; kc < D / 16; kc++) {
    const int c0 = 16 * kc + 2 * t, c1 = c0 + 8;
    float2 a = q_lo ? *(const float2 *)(q_lo + c0) : make_float2(0.f, 0.f);
    float2 b = q_hi ? *(const float2 *)(q_hi + c0) : make_float2(0.f, 0.f);
    float2 c = q_lo ? *(const float2 *)(q_lo + c1) : make_float2(0.f, 0.f);
    float2 d = q_hi ? *(const float2 *)(q_hi + c1) : make_float2(0.f, 0.f);
    qf[kc][0] = attn_pack(a.x, a.y);
    qf[kc][1] = attn_pack(b.x, b.y);
    qf[kc][2] = attn_pack(c.x, c.y);
    qf[kc][3] = attn_pack(d.x, d.y);
  }
}

/* s [NT n-tiles of 8 keys][4] = Q · Kᵀ for keys 8 nt0 .. 8 (nt0 + NT) - 1
 * of the tile in shared memory ks ([ATTN_TILE][ROW] bf16), raw (unscaled)
 * scores. Each n-tile's score is the same chain of MMAs whichever warp
 * computes it and with whatever nt0, so splitting a tile's n-tiles across
 * warps (the run decode kernel) gives attn_qk's bits. */
template <int D, int NT>
static __device__ __forceinline__ void attn_qk_tiles(float (&s)[NT][4], const uint32_t (&qf)[D / 16][4],
                                                     const __nv_bfloat16 *ks, int nt0, int lane) {
#pragma unroll
  for (int i = 0; i < NT; i++) {
    const int nt = nt0 + i;
    s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kp = 0; kp < D / 32; kp++) {
      /* matrices: keys 8nt..+7 × dims 32kp + {0, 8, 16, 24}..+7 → b0, b1 of
       * k-step 2kp, then b0, b1 of k-step 2kp + 1 */
      uint32_t b[4];
      attn_ldmatrix_x4(b, ks + (8 * nt + (lane & 7)) * attn_geom<D>::ROW + 32 * kp + 8 * (lane >> 3));
      attn_mma(s[i], qf[2 * kp], b[0], b[1]);
      attn_mma(s[i], qf[2 * kp + 1], b[2], b[3]);
    }
  }
}

/* All of the tile's scores: s [8 n-tiles of 8 keys][4]. */
template <int D>
static __device__ __forceinline__ void attn_qk(float (&s)[ATTN_TILE / 8][4],
                                               const uint32_t (&qf)[D / 16][4],
                                               const __nv_bfloat16 *ks, int lane) {
  attn_qk_tiles<D, ATTN_TILE / 8>(s, qf, ks, 0, lane);
}

/* Online-softmax step for one tile. s holds the raw scores of rows g (ri = 0)
 * and g + 8 (ri = 1) for keys key0 + 8nt + e (key0 = tile start + 2t); keys
 * before lo[ri] (a sliding window's edge, see attn_window_lo) or at or past
 * lim[ri] are masked. A score is s·scale_log2, or with softcap > 0 (Gemma 2)
 * softcap·tanh(s·scale / softcap)·log2(e). On return s holds
 * p = 2^(score - m) and corr[ri] the factor to apply to acc.
 * MASK false: the caller knows every key of the tile is in [lo, lim) for
 * both rows (attn_tile_unmasked), so the comparisons are left out; the
 * bits are those of MASK true, which would keep every score. */
template <bool MASK = true>
static __device__ __forceinline__ void attn_softmax(float (&s)[ATTN_TILE / 8][4], float (&m)[2],
                                                    float (&l)[2], float (&corr)[2], int key0,
                                                    const int (&lo)[2], const int (&lim)[2],
                                                    float scale_log2, float scale, float softcap) {
#pragma unroll
  for (int ri = 0; ri < 2; ri++) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < ATTN_TILE / 8; nt++) {
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int key = key0 + 8 * nt + e;
        const float x = s[nt][2 * ri + e];
        const float sc = softcap > 0.f
                             ? __fmul_rn(__fmul_rn(softcap, tanhf(__fdiv_rn(__fmul_rn(x, scale), softcap))), ATTN_LOG2E)
                             : __fmul_rn(x, scale_log2);
        const float v = !MASK || (key >= lo[ri] && key < lim[ri]) ? sc : -INFINITY;
        s[nt][2 * ri + e] = v;
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[ri], mx);
    const float mu = m_new == -INFINITY ? 0.f : m_new;
    corr[ri] = m_new == m[ri] ? 1.f : exp2f(__fsub_rn(m[ri], mu));
    float rs = 0.f;
#pragma unroll
    for (int nt = 0; nt < ATTN_TILE / 8; nt++) {
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float p = exp2f(__fsub_rn(s[nt][2 * ri + e], mu));
        s[nt][2 * ri + e] = p;
        rs = __fadd_rn(rs, p);
      }
    }
    /* The quad's four partial sums; every lane of the quad ends with the
     * same bits (each step adds the same two values). */
    rs = __fadd_rn(rs, __shfl_xor_sync(0xffffffffu, rs, 1));
    rs = __fadd_rn(rs, __shfl_xor_sync(0xffffffffu, rs, 2));
    l[ri] = __fadd_rn(__fmul_rn(l[ri], corr[ri]), rs);
    m[ri] = m_new;
  }
}

/* 1 when every key of the tile starting at j0 is in [lo, lim) of every row
 * whose keys are [lo_row, lim_row) with lo_row <= lo_max and lim_row >=
 * lim_min: off the diagonal (and off a window's edge) the causal mask
 * drops nothing, and attn_softmax<false> skips it. */
static __device__ __forceinline__ bool attn_tile_unmasked(int j0, int lo_max, int lim_min) {
  return j0 >= lo_max && j0 + ATTN_TILE <= lim_min;
}

/* The first key a row sees whose keys end at lim (its own key is lim - 1):
 * under a sliding window W > 0 (kern_attn_args_t.sliding_window,
 * flash-attn's window_size = (W - 1, 0)) lim - W when positive, else 0. */
static __device__ __forceinline__ int attn_window_lo(int lim, int window) {
  return window > 0 && lim > window ? lim - window : 0;
}

/* acc = acc · corr + P · V over this warp's NDT dim-tiles of 8, starting at
 * dim0; vs is the V tile in shared memory. NDT is even. */
template <int D, int NDT>
static __device__ __forceinline__ void attn_pv(float (&acc)[NDT][4], const float (&p)[ATTN_TILE / 8][4],
                                               const float (&corr)[2], const __nv_bfloat16 *vs,
                                               int dim0, int lane) {
#pragma unroll
  for (int j = 0; j < NDT; j++) {
    acc[j][0] = __fmul_rn(acc[j][0], corr[0]);
    acc[j][1] = __fmul_rn(acc[j][1], corr[0]);
    acc[j][2] = __fmul_rn(acc[j][2], corr[1]);
    acc[j][3] = __fmul_rn(acc[j][3], corr[1]);
  }
#pragma unroll
  for (int kk = 0; kk < ATTN_TILE / 16; kk++) {
    uint32_t a[4];
    a[0] = attn_pack(p[2 * kk][0], p[2 * kk][1]);
    a[1] = attn_pack(p[2 * kk][2], p[2 * kk][3]);
    a[2] = attn_pack(p[2 * kk + 1][0], p[2 * kk + 1][1]);
    a[3] = attn_pack(p[2 * kk + 1][2], p[2 * kk + 1][3]);
#pragma unroll
    for (int jp = 0; jp < NDT / 2; jp++) {
      /* matrices (transposed): keys 16kk + {0, 8}..+7 × dims dim0 + 16jp + {0, 8}..+7
       * → b0, b1 of dim-tile 2jp, then of 2jp + 1 */
      uint32_t b[4];
      attn_ldmatrix_x4_trans(b, vs + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * attn_geom<D>::ROW +
                                    dim0 + 16 * jp + 8 * (lane >> 4));
      attn_mma(acc[2 * jp], a, b[0], b[1]);
      attn_mma(acc[2 * jp + 1], a, b[2], b[3]);
    }
  }
}

/* Merge weights of a split (m, l) into the running (M, L): new M' and the
 * factors a (for the old state) and b (for the split). */
static __device__ __forceinline__ void attn_merge_weights(float M, float m, float *M_new, float *a,
                                                          float *b) {
  const float mx = fmaxf(M, m);
  const float mu = mx == -INFINITY ? 0.f : mx;
  *a = mx == M ? 1.f : exp2f(__fsub_rn(M, mu));
  *b = mx == m ? 1.f : exp2f(__fsub_rn(m, mu));
  *M_new = mx;
}

/* X · a + x · b, rounded as written (used for L and every ACC element). */
static __device__ __forceinline__ float attn_merge(float X, float a, float x, float b) {
  return __fadd_rn(__fmul_rn(X, a), __fmul_rn(x, b));
}

/* Folds a split's (m, l) into the running (M, L) and gives the weights
 * with which the caller merges the accumulators: ACC = attn_merge(ACC, *a,
 * acc, *b), element by element (every merge of the kernels goes so). */
static __device__ __forceinline__ void attn_fold(float &M, float &L, float m, float l, float *a, float *b) {
  float Mn;
  attn_merge_weights(M, m, &Mn, a, b);
  L = attn_merge(L, *a, l, *b);
  M = Mn;
}

/* The final output element. */
static __device__ __forceinline__ float attn_finish(float acc, float L) {
  return L > 0.f ? __fdiv_rn(acc, L) : 0.f;
}

/* The row's sum with head h's learned sink (gpt-oss, kern_attn_args_t.sinks
 * [n_heads], NULL: none), taken once after every split is merged, as the
 * CPU's attn_finish: exp(sink - max) joins L (M in the log2 domain), so
 * every path and split count gives the same bits; L = 0 (no key) stays 0
 * (a zero row); an overflow makes L inf and the row 0, the limit. */
static __device__ __forceinline__ float attn_sink_sum(float L, float M, const float *sinks, int h) {
  if (!sinks || !(L > 0.f)) return L;
  return __fadd_rn(L, exp2f(__fsub_rn(__fmul_rn(sinks[h], ATTN_LOG2E), M)));
}

/* Chunk c (16 bytes) of a tile of keys j0 .. j0 + ATTN_TILE - 1: its
 * offset in the shared-memory tile (bf16), and in *off its element offset
 * in global memory with *bytes to read: key j < kmax comes from row
 * row_of(j) (offset row * row_stride + head_off); keys past kmax read
 * nothing (cp.async zero-fills them). */
template <int D, typename RowOf>
static __device__ __forceinline__ int attn_chunk(int c, int j0, int kmax, RowOf row_of, int64_t row_stride,
                                                 int64_t head_off, int64_t *off, int *bytes) {
  constexpr int CH = attn_geom<D>::CHUNKS;
  const int r = c / CH, ch = c % CH, j = j0 + r;
  const bool ok = j < kmax;
  *off = ok ? row_of(j) * row_stride + head_off + ch * 8 : 0;
  *bytes = ok ? 16 : 0;
  return r * attn_geom<D>::ROW + ch * 8;
}

/* Loads one tile of x (K or V) into shared memory xs with cp.async
 * (attn_chunk), all `nthreads` threads of the block cooperating. */
template <int D, typename RowOf>
static __device__ __forceinline__ void attn_load_rows(__nv_bfloat16 *xs, const __nv_bfloat16 *x, int j0, int kmax,
                                                      RowOf row_of, int64_t row_stride, int64_t head_off, int tid,
                                                      int nthreads) {
  for (int c = tid; c < ATTN_TILE * attn_geom<D>::CHUNKS; c += nthreads) {
    int64_t off;
    int bytes;
    const int so = attn_chunk<D>(c, j0, kmax, row_of, row_stride, head_off, &off, &bytes);
    attn_cp_async16(xs + so, x + off, bytes);
  }
}

/* One K and one V tile, chunk by chunk (one loop: at head_dim 256 the
 * prefill kernel spills more with two). */
template <int D, typename RowOf>
static __device__ __forceinline__ void attn_load_tile(__nv_bfloat16 *ks, __nv_bfloat16 *vs,
                                                      const __nv_bfloat16 *k,
                                                      const __nv_bfloat16 *v, int j0, int kmax,
                                                      RowOf row_of, int64_t row_stride,
                                                      int64_t head_off, int tid, int nthreads) {
  for (int c = tid; c < ATTN_TILE * attn_geom<D>::CHUNKS; c += nthreads) {
    int64_t off;
    int bytes;
    const int so = attn_chunk<D>(c, j0, kmax, row_of, row_stride, head_off, &off, &bytes);
    attn_cp_async16(ks + so, k + off, bytes);
    attn_cp_async16(vs + so, v + off, bytes);
  }
}

#endif
