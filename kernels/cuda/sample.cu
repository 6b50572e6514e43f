/* kernels/cuda/sample.cu — one thread block per logit row picks its token
 * (see sample.cuh): the row's penalty ops, the max and its first id, then, at a temperature, each
 * thread's chunk of consecutive ids summed in id order, the chunk sums
 * scanned in order by one thread, and each thread's walk of its own chunk
 * for the first id past u * mass: kern_sample_ref's arithmetic and order,
 * so the host emulation gives these bits. Top-p over the whole vocabulary:
 * sample_top_p.cuh. */
#include "kernels/cuda/sample.cuh"

#define SB_THREADS KERN_SAMPLE_CHUNKS

/* The block's max of v (NaN never wins: v > m is false), every thread gets it. */
static __device__ float block_max(float v, float *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = SB_THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s && sh[threadIdx.x + s] > sh[threadIdx.x]) sh[threadIdx.x] = sh[threadIdx.x + s];
    __syncthreads();
  }
  const float m = sh[0];
  __syncthreads();
  return m;
}

/* The block's min (want_min) or max of v, every thread gets it. */
static __device__ int block_minmax(int v, int *sh, bool want_min) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = SB_THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const int o = sh[threadIdx.x + s];
      if (want_min ? o < sh[threadIdx.x] : o > sh[threadIdx.x]) sh[threadIdx.x] = o;
    }
    __syncthreads();
  }
  const int r = sh[0];
  __syncthreads();
  return r;
}

/* The k best ids of x (k <= KERN_SAMPLE_MAX_TOP_K < n_vocab) by (value,
 * then lower id), best first, into rank[0..k) (rank entries: key << 32 |
 * ~id): the k-th largest rank key K by four 8-bit radix passes (shared
 * histograms), the keys above K and the lowest ids of those equal to it
 * (each thread's chunk of consecutive ids, counted and scanned in order),
 * then a bitonic sort. shi: the block's int scratch. Every thread calls it. */
static __device__ void select_top(const float *x, int k, int32_t n_vocab, unsigned long long *rank, int *shi) {
  __shared__ unsigned hist[256];
  __shared__ uint32_t pass_prefix;
  __shared__ int pass_remain, n_gt;
  const int tid = threadIdx.x;
  uint32_t prefix = 0, mask = 0;
  int remain = k; /* keys still to find at or below the prefix */
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (tid < 256) hist[tid] = 0;
    __syncthreads();
    for (int32_t i = tid; i < n_vocab; i += SB_THREADS) {
      const uint32_t key = kern_sample_key(x[i]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      int cum = 0, d = 255;
      while (d > 0 && cum + (int)hist[d] < remain) cum += (int)hist[d--];
      pass_prefix = prefix | (uint32_t)d << shift;
      pass_remain = remain - cum;
    }
    __syncthreads();
    prefix = pass_prefix;
    remain = pass_remain;
    mask |= 255u << shift;
  }
  /* prefix is K; take every key above it and the `remain` lowest ids at it */
  if (tid == 0) n_gt = 0;
  const int32_t len = kern_sample_chunk_len(n_vocab), i0 = tid * len, i1 = min(i0 + len, n_vocab);
  int ties = 0;
  for (int32_t i = i0; i < i1; i++) ties += kern_sample_key(x[i]) == prefix;
  shi[tid] = ties;
  __syncthreads();
  if (tid == 0)
    for (int c = 0, acc = 0; c < SB_THREADS; c++) {
      const int t = shi[c];
      shi[c] = acc;
      acc += t;
    }
  __syncthreads();
  int tie_rank = shi[tid];
  for (int32_t i = i0; i < i1; i++) {
    const uint32_t key = kern_sample_key(x[i]);
    const unsigned long long e = (unsigned long long)key << 32 | (0xffffffffu - (uint32_t)i);
    if (key > prefix)
      rank[atomicAdd(&n_gt, 1)] = e;
    else if (key == prefix && tie_rank++ < remain)
      rank[k - remain + tie_rank - 1] = e;
  }
  int pow2 = 1;
  while (pow2 < k) pow2 <<= 1;
  for (int i = k + tid; i < pow2; i += SB_THREADS) rank[i] = 0; /* below every key */
  __syncthreads();
  for (int size = 2; size <= pow2; size <<= 1) /* bitonic sort, descending */
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int i = tid; i < pow2; i += SB_THREADS) {
        const int j = i ^ stride;
        if (j > i) {
          const unsigned long long a = rank[i], b = rank[j];
          if ((i & size) == 0 ? a < b : a > b) rank[i] = b, rank[j] = a;
        }
      }
      __syncthreads();
    }
}

static __device__ int32_t rank_id(unsigned long long e) { return (int32_t)(0xffffffffu - (uint32_t)e); }

/* x[id], NaN as -inf (how the host sampler ranks and reports it). */
static __device__ float value_of(const float *x, int32_t id) { return x[id] != x[id] ? -INFINITY : x[id]; }

/* The sum of f(i) over the row in the chunks' order: each thread its chunk
 * of consecutive ids in id order, then the chunk sums scanned in order by
 * one thread into off[0..SB_THREADS] (off[SB_THREADS]: the total). */
template <typename F>
static __device__ double chunk_sums(int32_t n_vocab, double *off, F f) {
  const int tid = threadIdx.x;
  const int32_t len = kern_sample_chunk_len(n_vocab), i0 = tid * len, i1 = min(i0 + len, n_vocab);
  double s = 0;
  for (int32_t i = i0; i < i1; i++) s += f(i);
  off[tid + 1] = s;
  __syncthreads();
  if (tid == 0) {
    off[0] = 0;
    for (int c = 0; c < SB_THREADS; c++) off[c + 1] = off[c] + off[c + 1];
  }
  __syncthreads();
  return off[SB_THREADS];
}

#include "kernels/cuda/sample_top_p.cuh"

static __global__ void __launch_bounds__(SB_THREADS) sample_kernel(kern_sample_out_t *outs, float *logits,
                                                                   const kern_sample_row_t *rows,
                                                                   const kern_sample_op_t *ops, int32_t n_vocab) {
  __shared__ float shf[SB_THREADS];
  __shared__ int shi[SB_THREADS];
  __shared__ double off[SB_THREADS + 1];
  __shared__ unsigned long long rank[KERN_SAMPLE_MAX_TOP_K];
  __shared__ float v[KERN_SAMPLE_MAX_TOP_K], w[KERN_SAMPLE_MAX_TOP_K];
  __shared__ int token;
  const kern_sample_row_t r = rows[blockIdx.x];
  if (!r.on_device) return; /* the whole block: no barrier reached */
  float *x = logits + (size_t)blockIdx.x * (size_t)n_vocab;
  kern_sample_out_t *o = &outs[blockIdx.x];
  const int tid = threadIdx.x;

  /* the penalties: bias ops one after the other (a token may repeat), then
   * the count ops, one token each, at once */
  if (r.n_bias + r.n_count > 0) {
    if (tid == 0)
      for (int32_t j = r.op_begin; j < r.op_begin + r.n_bias; j++)
        x[ops[j].token] = kern_sample_apply(x[ops[j].token], &ops[j]);
    __syncthreads();
    for (int32_t j = r.op_begin + r.n_bias + tid; j < r.op_begin + r.n_bias + r.n_count; j += SB_THREADS)
      x[ops[j].token] = kern_sample_apply(x[ops[j].token], &ops[j]);
    __syncthreads();
  }

  float m = -INFINITY;
  for (int32_t i = tid; i < n_vocab; i += SB_THREADS) m = x[i] > m ? x[i] : m;
  m = block_max(m, shf);
  int first = n_vocab;
  for (int32_t i = tid; i < n_vocab; i += SB_THREADS)
    if (x[i] == m) {
      first = i;
      break;
    }
  first = block_minmax(first, shi, true);

  if (m == -INFINITY || r.temperature <= 0 || m == INFINITY) { /* no finite logit, or greedy */
    if (tid == 0) token = m == -INFINITY ? KERN_SAMPLE_NO_TOKEN : first;
  } else if (r.top_k > 0) { /* the k best, then one thread's walk */
    select_top(x, r.top_k, n_vocab, rank, shi);
    if (tid == 0) {
      for (int i = 0; i < r.top_k; i++) v[i] = value_of(x, rank_id(rank[i]));
      token = rank_id(rank[kern_sample_top_k_pick(v, w, r.top_k, 1.0f / r.temperature, r.top_p, r.min_p,
                                                  kern_sample_uniform(r.seed, r.draw))]);
    }
  } else if (r.top_p < 1.0f) { /* top-p over the whole vocabulary: threshold searches */
    const int32_t tok = top_p_all(x, r, n_vocab, m, off, shi);
    if (tid == 0) token = tok;
  } else { /* the whole vocabulary: each thread walks its own chunk */
    const float inv_t = 1.0f / r.temperature;
    const double mass = chunk_sums(n_vocab, off, [&](int32_t i) { return (double)kern_sample_weight(x[i], m, inv_t, r.min_p); });
    const double target = kern_sample_uniform(r.seed, r.draw) * mass;
    const int32_t len = kern_sample_chunk_len(n_vocab), i0 = tid * len, i1 = min(i0 + len, n_vocab);
    double cum = off[tid];
    int found = n_vocab, last = -1;
    for (int32_t i = i0; i < i1; i++) {
      const float wi = kern_sample_weight(x[i], m, inv_t, r.min_p);
      if (wi <= 0) continue;
      cum += wi;
      last = i;
      if (target < cum) {
        found = i;
        break;
      }
    }
    found = block_minmax(found, shi, true);
    last = block_minmax(last, shi, false);
    if (tid == 0) token = found < n_vocab ? found : last >= 0 ? last : first;
  }
  __syncthreads();
  if (tid == 0) o->token = token;

  /* the raw log-probabilities (the row has no ops: x is raw) */
  if (r.logprobs && token >= 0) {
    const double total = chunk_sums(n_vocab, off, [&](int32_t i) { return (double)kern_sample_weight(x[i], m, 1.0f, 0.0f); });
    const double lse = (double)m + log(isfinite(m) ? total : 0.0);
    if (tid == 0) o->logprob = (float)((double)value_of(x, token) - lse);
    if (r.n_top > 0) {
      select_top(x, r.n_top, n_vocab, rank, shi);
      if (tid < r.n_top) {
        o->top_id[tid] = rank_id(rank[tid]);
        o->top_logprob[tid] = (float)((double)value_of(x, rank_id(rank[tid])) - lse);
      }
    }
  }
}

void kern_cuda__sample(kern_backend_t *be, kern_sample_out_t *outs, float *logits, const kern_sample_row_t *rows,
                       const kern_sample_op_t *ops, int n_rows, int32_t n_vocab) {
  if (n_rows <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  sample_kernel<<<n_rows, SB_THREADS, 0, cu->stream>>>(outs, logits, rows, ops, n_vocab);
  CUDA_CHECK_LAUNCH();
}
