/* kernels/cuda/sample.cu — one thread block per logit row picks its token
 * (see sample.cuh): the row's penalty ops, the max and its first id, then, at a temperature, each
 * thread's chunk of consecutive ids summed in id order, the chunk sums
 * scanned in order by one thread, and each thread's walk of its own chunk
 * for the first id past u * mass: kern_sample_ref's arithmetic and order,
 * so the host emulation gives these bits. */
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

static __global__ void __launch_bounds__(SB_THREADS) sample_kernel(int32_t *tokens, float *logits,
                                                                   const kern_sample_row_t *rows,
                                                                   const kern_sample_op_t *ops, int32_t n_vocab) {
  __shared__ float shf[SB_THREADS];
  __shared__ int shi[SB_THREADS];
  __shared__ double off[SB_THREADS + 1];
  const kern_sample_row_t r = rows[blockIdx.x];
  if (!r.on_device) return; /* the whole block: no barrier reached */
  float *x = logits + (size_t)blockIdx.x * (size_t)n_vocab;
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
    if (tid == 0) tokens[blockIdx.x] = m == -INFINITY ? KERN_SAMPLE_NO_TOKEN : first;
    return;
  }

  const float inv_t = 1.0f / r.temperature;
  const int32_t len = kern_sample_chunk_len(n_vocab);
  const int32_t i0 = tid * len, i1 = min(i0 + len, n_vocab);
  double s = 0;
  for (int32_t i = i0; i < i1; i++) s += kern_sample_weight(x[i], m, inv_t, r.min_p);
  off[tid + 1] = s;
  __syncthreads();
  if (tid == 0) {
    off[0] = 0;
    for (int c = 0; c < SB_THREADS; c++) off[c + 1] = off[c] + off[c + 1];
  }
  __syncthreads();
  const double target = kern_sample_uniform(r.seed, r.draw) * off[SB_THREADS];
  double cum = off[tid];
  int found = n_vocab, last = -1;
  for (int32_t i = i0; i < i1; i++) {
    const float w = kern_sample_weight(x[i], m, inv_t, r.min_p);
    if (w <= 0) continue;
    cum += w;
    last = i;
    if (target < cum) {
      found = i;
      break;
    }
  }
  found = block_minmax(found, shi, true);
  last = block_minmax(last, shi, false);
  if (tid == 0) tokens[blockIdx.x] = found < n_vocab ? found : last >= 0 ? last : first;
}

void kern_cuda__sample(kern_backend_t *be, int32_t *tokens, float *logits, const kern_sample_row_t *rows,
                       const kern_sample_op_t *ops, int n_rows, int32_t n_vocab) {
  if (n_rows <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  sample_kernel<<<n_rows, SB_THREADS, 0, cu->stream>>>(tokens, logits, rows, ops, n_vocab);
  CUDA_CHECK_LAUNCH();
}
