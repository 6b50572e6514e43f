/* kernels/cuda/sample_top_p.cuh — top-p over the whole vocabulary in the
 * sampling kernel's thread block (kernels/kern_sample.h: thresholds found by
 * binary searches over a weight's bits, every total a chunk-then-tree sum),
 * the device side of kern_sample.c's sample_top_p_all, step for step. Every
 * thread of the block calls these (barriers inside); a search's branch is
 * taken alike by all, as each reads the same shared total. Included by
 * sample.cu after block_minmax and chunk_sums, which it uses. */
#ifndef TRAM_KERN_CUDA_SAMPLE_TOP_P_CUH
#define TRAM_KERN_CUDA_SAMPLE_TOP_P_CUH

enum { TP_ALL, TP_ABOVE, TP_A, TP_B_GE, TP_B_GT, TP_B_EQ };

typedef struct tp_dev {
  const float *x;
  int32_t n;
  float m, inv_t, min_p;
  float wstar;      /* the cut: kept = w > wstar, or w == wstar and id <= tie_last */
  int32_t tie_last;
  int edge;         /* kern_sample_bucket(wstar) */
} tp_dev_t;

static __device__ float tp_w(const tp_dev_t &t, int32_t i) { return kern_sample_weight(t.x[i], t.m, t.inv_t, 0.0f); }

static __device__ bool tp_in(const tp_dev_t &t, int what, float w, int32_t i, float v) {
  if (!(w > 0)) return false;
  if (what == TP_ALL) return true;
  if (what == TP_ABOVE) return w > v;
  const bool kept = (w > t.wstar || (w == t.wstar && i <= t.tie_last)) && (t.min_p <= 0 || w >= t.min_p);
  if (!kept) return false;
  const int b = kern_sample_bucket(w);
  if (what == TP_A) return b < t.edge;
  if (b != t.edge) return false;
  return what == TP_B_GE ? w >= v : what == TP_B_GT ? w > v : w == v;
}

/* The total of the weights of kind `what` at v: each thread its chunk in
 * id order, then the tree (tree: [SB_THREADS] shared doubles). */
static __device__ double tp_total(const tp_dev_t &t, int what, float v, double *tree) {
  const int tid = threadIdx.x;
  const int32_t len = kern_sample_chunk_len(t.n), i0 = tid * len, i1 = min(i0 + len, t.n);
  double s = 0;
  for (int32_t i = i0; i < i1; i++) {
    const float w = tp_w(t, i);
    if (tp_in(t, what, w, i, v)) s += w;
  }
  tree[tid] = s;
  __syncthreads();
  for (int h = SB_THREADS / 2; h > 0; h >>= 1) {
    if (tid < h) tree[tid] += tree[tid + h];
    __syncthreads();
  }
  const double r = tree[0];
  __syncthreads();
  return r;
}

/* The ids of kind `what` at v (TP_ABOVE: w == v here) in id order: how many
 * (k < 0), or the id of the k-th (0-based). shi: [SB_THREADS] shared ints. */
static __device__ int64_t tp_ties(const tp_dev_t &t, int what, float v, int64_t k, int *shi) {
  __shared__ int total, found;
  const int tid = threadIdx.x;
  const int32_t len = kern_sample_chunk_len(t.n), i0 = tid * len, i1 = min(i0 + len, t.n);
  int mine = 0;
  for (int32_t i = i0; i < i1; i++) {
    const float w = tp_w(t, i);
    mine += what == TP_ABOVE ? w == v && w > 0 : tp_in(t, what, w, i, v);
  }
  shi[tid] = mine;
  __syncthreads();
  if (tid == 0) {
    int acc = 0;
    for (int c = 0; c < SB_THREADS; c++) {
      const int n = shi[c];
      shi[c] = acc;
      acc += n;
    }
    total = acc;
    found = -1;
  }
  __syncthreads();
  if (k >= 0 && shi[tid] <= k && k < shi[tid] + mine) {
    int64_t seen = shi[tid];
    for (int32_t i = i0; i < i1; i++) {
      const float w = tp_w(t, i);
      if (!(what == TP_ABOVE ? w == v && w > 0 : tp_in(t, what, w, i, v))) continue;
      if (seen++ == k) {
        found = i;
        break;
      }
    }
  }
  __syncthreads();
  const int64_t r = k < 0 ? total : found;
  __syncthreads();
  return r;
}

/* The token of a top-p draw over the whole row (max m finite, T > 0). */
static __device__ int32_t top_p_all(const float *x, const kern_sample_row_t &r, int32_t n, float m, double *off,
                                    int *shi) {
  __shared__ double tree[SB_THREADS];
  const int tid = threadIdx.x;
  tp_dev_t t = {x, n, m, 1.0f / r.temperature, r.min_p, 0.0f, 0, 0};
  const double need = __dmul_rn((double)r.top_p, tp_total(t, TP_ALL, 0.0f, tree));
  uint32_t lo = 0, hi = 0x3f800000u; /* M(> lo) >= need, M(> hi) < need */
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (tp_total(t, TP_ABOVE, kern_sample_from_bits(mid), tree) < need)
      hi = mid;
    else
      lo = mid;
  }
  t.wstar = kern_sample_from_bits(hi);
  const double above = tp_total(t, TP_ABOVE, t.wstar, tree);
  const int64_t keep = kern_sample_tie_keep(above, t.wstar, need, tp_ties(t, TP_ABOVE, t.wstar, -1, shi));
  t.tie_last = (int32_t)tp_ties(t, TP_ABOVE, t.wstar, keep - 1, shi);
  t.edge = kern_sample_bucket(t.wstar);

  /* A: each thread's chunk summed in id order, the sums scanned in order
   * (adding the zeros of the other ids changes no bit) */
  const double mass_a = chunk_sums(n, off, [&](int32_t i) {
    const float w = tp_w(t, i);
    return tp_in(t, TP_A, w, i, 0.0f) ? (double)w : 0.0;
  });
  const int32_t len = kern_sample_chunk_len(n), i0 = tid * len, i1 = min(i0 + len, n);
  const double target = __dmul_rn(kern_sample_uniform(r.seed, r.draw), mass_a + tp_total(t, TP_B_GT, 0.0f, tree));
  if (target < mass_a) {
    double cum = off[tid];
    int found = n;
    for (int32_t i = i0; i < i1; i++) {
      const float w = tp_w(t, i);
      if (!tp_in(t, TP_A, w, i, 0.0f)) continue;
      cum += w;
      if (target < cum) {
        found = i;
        break;
      }
    }
    found = block_minmax(found, shi, true);
    if (found < n) return found;
  }
  /* B: the level, then its ties */
  lo = 0, hi = 0x3f800001u; /* mass_a + M_B(>= lo) > target (lo = 0: taken as true), not at hi */
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (mass_a + tp_total(t, TP_B_GE, kern_sample_from_bits(mid), tree) > target)
      lo = mid;
    else
      hi = mid;
  }
  if (lo == 0) { /* rounding: B's lightest weight (positive floats order as their bits), its last tie */
    int lightest = 0x40000000; /* 2.0f */
    for (int32_t i = i0; i < i1; i++) {
      const float w = tp_w(t, i);
      int bits;
      memcpy(&bits, &w, sizeof bits);
      if (tp_in(t, TP_B_GT, w, i, 0.0f) && bits < lightest) lightest = bits;
    }
    const float level = kern_sample_from_bits((uint32_t)block_minmax(lightest, shi, true));
    return (int32_t)tp_ties(t, TP_B_EQ, level, tp_ties(t, TP_B_EQ, level, -1, shi) - 1, shi);
  }
  const float level = kern_sample_from_bits(lo);
  const int64_t j = kern_sample_tie_pick(mass_a + tp_total(t, TP_B_GT, level, tree), level, target,
                                         tp_ties(t, TP_B_EQ, level, -1, shi));
  return (int32_t)tp_ties(t, TP_B_EQ, level, j, shi);
}

#endif
