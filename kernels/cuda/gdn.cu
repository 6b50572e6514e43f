/* kernels/cuda/gdn.cu — Gated DeltaNet: causal convolution, the gated delta
 * rule's recurrent form, the output gate and the column copy (see gdn.cuh). */
#include "kernels/cuda/gdn.cuh"

#define GDN_CONV_THREADS 128
#define GDN_RULE_THREADS 128
#define GDN_MAX_HEAD 512 /* head_k, head_v bound (kernels/cpu/ops_gdn.c's, model/ checks it) */
#define GDN_MAX_TAPS 9   /* conv_kernel bound (model/ checks it) */

static __device__ __forceinline__ float gdn_silu(float v) { return v / (1.0f + expf(-v)); }

/* grid = (channel blocks, sequences b0 ...): thread c of sequence b walks
 * the rows of b in order with the channel's last K - 1 inputs in registers,
 * then writes them back as the state's window (oldest first); a verified
 * sequence's (a.keep) window after each row but the last goes to its kept
 * slots. */
static __global__ void __launch_bounds__(GDN_CONV_THREADS)
    gdn_conv_kernel(float *y, const float *x, const float *w, const kern_gdn_args_t a, int b0) {
  const int C = a.conv_dim, K = a.conv_kernel, b = b0 + (int)blockIdx.y;
  const int c = blockIdx.x * GDN_CONV_THREADS + threadIdx.x;
  if (c >= C) return;
  float *win = a.state + (size_t)a.slots[b] * a.slot_stride; /* [K - 1, C] */
  float hist[GDN_MAX_TAPS - 1], wc[GDN_MAX_TAPS];
#pragma unroll
  for (int i = 0; i < GDN_MAX_TAPS; i++) wc[i] = i < K ? w[(size_t)c * K + i] : 0.0f;
#pragma unroll
  for (int i = 0; i < GDN_MAX_TAPS - 1; i++) hist[i] = i < K - 1 ? win[(size_t)i * C + c] : 0.0f;
  const int r0 = a.cu_rows[b], r1 = a.cu_rows[b + 1];
  const int kept = a.keep ? a.keep[b] : -1; /* verification: the window after each row but the last */
  for (int r = r0; r < r1; r++) {
    const float xv = x[(size_t)r * C + c];
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < GDN_MAX_TAPS - 1; i++)
      if (i < K - 1) acc = __fadd_rn(acc, __fmul_rn(wc[i], hist[i]));
    acc = __fadd_rn(acc, __fmul_rn(wc[K - 1], xv));
    y[(size_t)r * C + c] = gdn_silu(acc);
#pragma unroll
    for (int i = 0; i < GDN_MAX_TAPS - 2; i++)
      if (i + 1 < K - 1) hist[i] = hist[i + 1];
    if (K > 1) {
#pragma unroll
      for (int i = 0; i < GDN_MAX_TAPS - 1; i++)
        if (i == K - 2) hist[i] = xv;
    }
    if (kept >= 0 && r + 1 < r1) {
      float *kw = a.state + (size_t)(kept + r - r0) * a.slot_stride;
#pragma unroll
      for (int i = 0; i < GDN_MAX_TAPS - 1; i++)
        if (i < K - 1) kw[(size_t)i * C + c] = hist[i];
    }
  }
#pragma unroll
  for (int i = 0; i < GDN_MAX_TAPS - 1; i++)
    if (i < K - 1) win[(size_t)i * C + c] = hist[i];
}

void kern_cuda__gdn_conv(kern_backend_t *be, float *y, const float *x, const float *w, const kern_gdn_args_t *a) {
  if (a->n_seqs <= 0 || a->conv_dim <= 0) return;
  if (a->conv_kernel < 1 || a->conv_kernel > GDN_MAX_TAPS) {
    log_error("gdn_conv: %d taps (at most %d; model load checks them)", a->conv_kernel, GDN_MAX_TAPS);
    abort();
  }
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  /* the sequences in launches of at most grid.y's limit (max_seqs allows 65536): each is independent */
  for (int b0 = 0; b0 < a->n_seqs; b0 += CUDA_GEOM_GRID_YZ_MAX) {
    const int nb = a->n_seqs - b0 < CUDA_GEOM_GRID_YZ_MAX ? a->n_seqs - b0 : CUDA_GEOM_GRID_YZ_MAX;
    dim3 grid((a->conv_dim + GDN_CONV_THREADS - 1) / GDN_CONV_THREADS, nb);
    gdn_conv_kernel<<<grid, GDN_CONV_THREADS, 0, cu->stream>>>(y, x, w, *a, b0);
    CUDA_CHECK_LAUNCH();
  }
}

/* Sum of v[i]² over n elements, in double (the CPU's l2norm sums in
 * double too), by every thread of the block; red [GDN_RULE_THREADS / 32]. */
static __device__ double gdn_sumsq(const float *v, int n, double *red) {
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += GDN_RULE_THREADS) s += (double)v[i] * v[i];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  __syncthreads(); /* red is free (its last readers are done) */
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  double t = 0.0;
  for (int w = 0; w < GDN_RULE_THREADS / 32; w++) t += red[w]; /* fixed order: every thread the same */
  return t;
}

/* grid = (n_v_heads, sequences b0 ...). Per row: q, k L2-normed into shared memory;
 * thread c owns columns c, c + GDN_RULE_THREADS, ... of S [head_k, head_v]
 * (rows of S are contiguous: the threads' reads coalesce): pass 1 forms
 * kv = (e^g S)ᵀ k, pass 2 writes S = e^g S + k ⊗ β (v − kv) and forms
 * o = Sᵀ q, each over i ascending. */
static __global__ void __launch_bounds__(GDN_RULE_THREADS)
    gdn_rule_kernel(float *out, const float *y, const float *alpha, const float *beta, const float *a_neg,
                    const float *dt_bias, const kern_gdn_args_t a, int b0) {
  __shared__ float qs[GDN_MAX_HEAD], ks[GDN_MAX_HEAD];
  __shared__ double red[GDN_RULE_THREADS / 32];
  const int h = blockIdx.x, b = b0 + (int)blockIdx.y;
  const int Hk = a.n_k_heads, Hv = a.n_v_heads, dk = a.head_k, dv = a.head_v, C = a.conv_dim;
  const int kh = a.v_tiled ? h % Hk : h / (Hv / Hk);
  const size_t at = (size_t)(a.conv_kernel - 1) * C + (size_t)h * dk * dv; /* S within a slot */
  float *S = a.state + (size_t)a.slots[b] * a.slot_stride + at;
  const int r0 = a.cu_rows[b], r1 = a.cu_rows[b + 1];
  const int kept = a.keep ? a.keep[b] : -1; /* verification: S after each row but the last */
  for (int r = r0; r < r1; r++) {
    float *Sk = kept >= 0 && r + 1 < r1 ? a.state + (size_t)(kept + r - r0) * a.slot_stride + at : NULL;
    const float *row = y + (size_t)r * C;
    const float *qr = row + (size_t)kh * dk, *kr = row + (size_t)(Hk + kh) * dk;
    const float *v = row + (size_t)2 * Hk * dk + (size_t)h * dv;
    const float sq = (float)(1.0 / sqrt((double)dk) / sqrt(gdn_sumsq(qr, dk, red) + a.qk_eps));
    const float sk = (float)(1.0 / sqrt(gdn_sumsq(kr, dk, red) + a.qk_eps));
    for (int i = threadIdx.x; i < dk; i += GDN_RULE_THREADS) qs[i] = qr[i] * sq, ks[i] = kr[i] * sk;
    const double xa = (double)alpha[(size_t)r * Hv + h] + dt_bias[h];
    const double softplus = xa > 20.0 ? xa : log1p(exp(xa)); /* torch's threshold 20 */
    const float decay = (float)exp((double)a_neg[h] * softplus);
    const float bt = (float)(1.0 / (1.0 + exp(-(double)beta[(size_t)r * Hv + h])));
    __syncthreads(); /* qs, ks written */
    for (int c = threadIdx.x; c < dv; c += GDN_RULE_THREADS) {
      float kv = 0.0f;
      for (int i = 0; i < dk; i++) kv = __fadd_rn(kv, __fmul_rn(__fmul_rn(S[(size_t)i * dv + c], decay), ks[i]));
      const float delta = __fmul_rn(__fsub_rn(v[c], kv), bt);
      float o = 0.0f;
      for (int i = 0; i < dk; i++) {
        float *s = S + (size_t)i * dv + c;
        const float sn = __fadd_rn(__fmul_rn(*s, decay), __fmul_rn(ks[i], delta));
        *s = sn;
        if (Sk) Sk[(size_t)i * dv + c] = sn;
        o = __fadd_rn(o, __fmul_rn(sn, qs[i]));
      }
      out[((size_t)r * Hv + h) * dv + c] = o;
    }
    __syncthreads(); /* qs, ks read before the next row rewrites them */
  }
}

void kern_cuda__gdn_rule(kern_backend_t *be, float *out, const float *y, const float *alpha, const float *beta,
                         const float *a_neg, const float *dt_bias, const kern_gdn_args_t *a) {
  if (a->n_seqs <= 0 || a->n_v_heads <= 0) return;
  if (a->head_k < 1 || a->head_k > GDN_MAX_HEAD || a->head_v < 1 || a->head_v > GDN_MAX_HEAD ||
      a->n_k_heads < 1 || a->n_v_heads % a->n_k_heads != 0) {
    log_error("gdn_rule: heads %d/%d of %d/%d, %d sequences (model load checks the layout)", a->n_k_heads,
              a->n_v_heads, a->head_k, a->head_v, a->n_seqs);
    abort();
  }
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  for (int b0 = 0; b0 < a->n_seqs; b0 += CUDA_GEOM_GRID_YZ_MAX) { /* as gdn_conv: grid.y's limit */
    const int nb = a->n_seqs - b0 < CUDA_GEOM_GRID_YZ_MAX ? a->n_seqs - b0 : CUDA_GEOM_GRID_YZ_MAX;
    gdn_rule_kernel<<<dim3(a->n_v_heads, nb), GDN_RULE_THREADS, 0, cu->stream>>>(out, y, alpha, beta, a_neg, dt_bias,
                                                                               *a, b0);
    CUDA_CHECK_LAUNCH();
  }
}

static __global__ void sigmoid_mul_kernel(float *y, const float *x, const float *g, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] / (1.0f + expf(-g[i]));
}

void kern_cuda__sigmoid_mul(kern_backend_t *be, float *y, const float *x, const float *g, int64_t count) {
  if (count <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  sigmoid_mul_kernel<<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(y, x, g, count);
  CUDA_CHECK_LAUNCH();
}

void kern_cuda__copy_cols(kern_backend_t *be, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                          int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  /* an operation (kern.h), so a graph may capture it: a memcpy node */
  CUDA_CHECK(cudaMemcpy2DAsync(y, (size_t)ldy * sizeof(float), x, (size_t)ldx * sizeof(float),
                               (size_t)cols * sizeof(float), (size_t)rows, cudaMemcpyDeviceToDevice, cu->stream));
}
