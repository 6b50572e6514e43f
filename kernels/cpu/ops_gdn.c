/* kernels/cpu/ops_gdn.c — the Gated DeltaNet operations of the CPU backend
 * (contracts in kernels/kern.h, kern_gdn_args_t): the depthwise causal
 * convolution with its cached window, the gated delta rule, the sigmoid
 * output gate and the column copy.
 *
 * The rule runs a sequence's rows of the step in chunks of KERN_GDN_CHUNK
 * (64) from its first row: each whole chunk in the chunked form, the rest
 * (a decode, a step's shorter tail) token by token in the recurrent form
 * (kernels/cpu/gdn_head.c); the two agree within rounding. The arithmetic
 * is the vector primitives' (kernels/cpu/gdn_vec.c: AVX2 or portable, the
 * same bits).
 *
 * Threads and batch invariance: the convolution runs one (sequence,
 * channel block) per work item and the rule one (sequence, value head),
 * each over the sequence's rows in token order with loops of a fixed
 * order, so a row's bits depend only on its own sequence's rows in the
 * step and the state it starts from: never on the other sequences or the
 * thread count. (How the scheduler cuts a prompt into steps decides which
 * rows form whole chunks, so cutting it differently changes the bits
 * within the rounding: tests/reference/test_qwen35.py bounds it.)
 *
 * A verified sequence (kern_gdn_args_t.keep) runs row by row and leaves the
 * state after each row in its kept slots: the convolution copies the window
 * each row would have left, the rule its matrix after each row. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gdn_cpu.h"
#include "kernels/cpu/ops_cpu.h"

#define CONV_BLOCK 64 /* channels per work item */
#define MAX_TAPS 9    /* conv_kernel bound (model/ checks it) */

static const kern_gdn_vec_t *vec_of(kern_backend_t *be) {
  return kern_cpu(be)->gdn_portable ? &kern_cpu__gdn_portable : kern_cpu__gdn_vec();
}

typedef struct {
  float *y;
  const float *x, *wt; /* wt: the weights transposed, [K, conv_dim] */
  const kern_gdn_args_t *a;
  const kern_gdn_vec_t *vec;
  int n_blocks; /* channel blocks per sequence */
} conv_job_t;

static float silu(float v) { return v / (1.0f + kern_cpu_expf(-v)); }

/* Channels c0.. of the convolution's input at step row src of the sequence
 * whose rows start at r0: the window's row K - 1 + src when src < 0. */
static const float *conv_input(const conv_job_t *j, const float *win, int r0, int src, int c0) {
  const int C = j->a->conv_dim, K = j->a->conv_kernel;
  return src < 0 ? win + (size_t)(K - 1 + src) * C : j->x + (size_t)(r0 + src) * C + c0;
}

static void conv_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_job_t *j = ctx;
  const kern_gdn_args_t *a = j->a;
  const int C = a->conv_dim, K = a->conv_kernel;
  for (int64_t item = begin; item < end; item++) {
    const int b = (int)(item / j->n_blocks);
    const int c0 = (int)(item % j->n_blocks) * CONV_BLOCK;
    const int n = c0 + CONV_BLOCK < C ? CONV_BLOCK : C - c0;
    float *win = a->state + (size_t)a->slots[b] * a->slot_stride + c0; /* [K - 1, C] oldest first */
    const int r0 = a->cu_rows[b], rows = a->cu_rows[b + 1] - r0;
    const float *in[MAX_TAPS];
    for (int t = 0; t < rows; t++) { /* input k of row t is step row t - (K - 1) + k, or the window's */
      for (int k = 0; k < K; k++) in[k] = conv_input(j, win, r0, t - (K - 1) + k, c0);
      float *y = j->y + (size_t)(r0 + t) * C + c0;
      j->vec->conv_row(y, in, j->wt + c0, C, K, n);
      for (int c = 0; c < n; c++) y[c] = silu(y[c]);
    }
    const int32_t kept = a->keep ? a->keep[b] : -1;
    for (int t = 0; kept >= 0 && t + 1 < rows; t++) { /* the window after row t: inputs t - (K - 2) .. t */
      float *kw = a->state + (size_t)(kept + t) * a->slot_stride + c0;
      for (int i = 0; i < K - 1; i++)
        memcpy(kw + (size_t)i * C, conv_input(j, win, r0, t - (K - 2) + i, c0), (size_t)n * sizeof *kw);
    }
    for (int i = 0; i < K - 1; i++) /* the window: the last K - 1 inputs (reads a later row than it writes) */
      memmove(win + (size_t)i * C, conv_input(j, win, r0, rows - (K - 1) + i, c0), (size_t)n * sizeof *win);
  }
}

void kern_cpu_gdn_conv(kern_backend_t *be, float *y, const float *x, const float *w, const kern_gdn_args_t *a) {
  const int C = a->conv_dim, K = a->conv_kernel;
  float *wt = kern_cpu_scratch(kern_cpu(be), (size_t)K * C * sizeof *wt);
  for (int c = 0; c < C; c++)
    for (int k = 0; k < K; k++) wt[(size_t)k * C + c] = w[(size_t)c * K + k];
  const int n_blocks = (C + CONV_BLOCK - 1) / CONV_BLOCK;
  conv_job_t j = {y, x, wt, a, vec_of(be), n_blocks};
  kern_pool_for(kern_cpu(be)->pool, (int64_t)a->n_seqs * n_blocks, 1, conv_task, &j);
}

typedef struct {
  float *out;
  const float *y, *alpha, *beta, *a_neg, *dt_bias;
  const kern_gdn_args_t *a;
  const kern_gdn_vec_t *vec;
  float *scratch; /* per thread: thread_floats */
  size_t thread_floats;
  int chunked; /* 0: every row recurrent */
} rule_job_t;

/* v / sqrt(Σ v² + eps) · extra, the sum in double (HF's l2norm in f32 sums
 * the same terms; the difference is far inside the tolerance). */
static void l2norm(float *dst, const float *v, int n, float eps, double extra) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
  const float s = (float)(extra / sqrt(ss + eps));
  for (int i = 0; i < n; i++) dst[i] = v[i] * s;
}

/* Row r's q and k of value head h (normed; q scaled), its log decay and β. */
static void prep_row(const rule_job_t *j, int r, int h, int kh, float *q, float *k, double *g, float *beta) {
  const kern_gdn_args_t *a = j->a;
  const int Hv = a->n_v_heads, dk = a->head_k;
  const float *row = j->y + (size_t)r * a->conv_dim;
  l2norm(q, row + (size_t)kh * dk, dk, a->qk_eps, 1.0 / sqrt((double)dk));
  l2norm(k, row + (size_t)(a->n_k_heads + kh) * dk, dk, a->qk_eps, 1.0);
  const double x = (double)j->alpha[(size_t)r * Hv + h] + j->dt_bias[h];
  const double softplus = x > 20.0 ? x : log1p(exp(x)); /* torch's threshold 20 */
  *g = (double)j->a_neg[h] * softplus;
  *beta = (float)(1.0 / (1.0 + exp(-(double)j->beta[(size_t)r * Hv + h])));
}

static void rule_task(void *ctx, int64_t begin, int64_t end, int tid) {
  const rule_job_t *j = ctx;
  const kern_gdn_args_t *a = j->a;
  const int Hk = a->n_k_heads, Hv = a->n_v_heads, dk = a->head_k, dv = a->head_v;
  const int group = Hv / Hk;
  float *Q = j->scratch + (size_t)tid * j->thread_floats; /* [CHUNK, dk] */
  float *K = Q + (size_t)KERN_GDN_CHUNK * dk;             /* [CHUNK, dk] */
  float *V = K + (size_t)KERN_GDN_CHUNK * dk;             /* [CHUNK, dv] */
  float *work = V + (size_t)KERN_GDN_CHUNK * dv;
  double g[KERN_GDN_CHUNK];
  float beta[KERN_GDN_CHUNK];
  for (int64_t item = begin; item < end; item++) {
    const int b = (int)(item / Hv), h = (int)(item % Hv);
    const int kh = a->v_tiled ? h % Hk : h / group;
    const size_t at = (size_t)(a->conv_kernel - 1) * a->conv_dim + (size_t)h * dk * dv; /* S within a slot */
    float *S = a->state + (size_t)a->slots[b] * a->slot_stride + at; /* [dk, dv] */
    const int r0 = a->cu_rows[b], r1 = a->cu_rows[b + 1];
    const int32_t kept = a->keep ? a->keep[b] : -1; /* verification: the state after each row, row by row */
    for (int r = r0; r < r1;) {
      const int L = j->chunked && kept < 0 && r1 - r >= KERN_GDN_CHUNK ? KERN_GDN_CHUNK : 1;
      for (int i = 0; i < L; i++) {
        const float *v = j->y + (size_t)(r + i) * a->conv_dim + (size_t)2 * Hk * dk + (size_t)h * dv;
        prep_row(j, r + i, h, kh, Q + (size_t)i * dk, K + (size_t)i * dk, &g[i], &beta[i]);
        memcpy(V + (size_t)i * dv, v, (size_t)dv * sizeof *V);
      }
      float *o = j->out + ((size_t)r * Hv + h) * dv;
      if (L == 1)
        kern_cpu__gdn_step(j->vec, S, dk, dv, Q, K, V, g[0], beta[0], o, work);
      else
        kern_cpu__gdn_chunk(j->vec, S, dk, dv, L, Q, K, V, g, beta, o, (size_t)Hv * dv, work);
      if (kept >= 0 && r + 1 < r1)
        memcpy(a->state + (size_t)(kept + r - r0) * a->slot_stride + at, S, (size_t)dk * dv * sizeof *S);
      r += L;
    }
  }
}

void kern_cpu_gdn_rule(kern_backend_t *be, float *out, const float *y, const float *alpha, const float *beta,
                       const float *a_neg, const float *dt_bias, const kern_gdn_args_t *a) {
  kern_cpu_t *cpu = kern_cpu(be);
  const size_t per = (size_t)KERN_GDN_CHUNK * (2 * (size_t)a->head_k + a->head_v) +
                     kern_cpu__gdn_chunk_floats(a->head_k, a->head_v);
  float *scratch = kern_cpu_scratch(cpu, per * kern_pool_size(cpu->pool) * sizeof *scratch);
  rule_job_t j = {out, y, alpha, beta, a_neg, dt_bias, a, vec_of(be), scratch, per, cpu->gdn_chunked};
  kern_pool_for(cpu->pool, (int64_t)a->n_seqs * a->n_v_heads, 1, rule_task, &j);
}

typedef struct {
  float *y;
  const float *x, *g;
  int64_t count;
} gate_job_t;

#define GATE_GRAIN 4096

static void gate_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const gate_job_t *j = ctx;
  const int64_t hi = end * GATE_GRAIN < j->count ? end * GATE_GRAIN : j->count;
  for (int64_t i = begin * GATE_GRAIN; i < hi; i++) j->y[i] = j->x[i] / (1.0f + kern_cpu_expf(-j->g[i]));
}

void kern_cpu_sigmoid_mul(kern_backend_t *be, float *y, const float *x, const float *g, int64_t count) {
  gate_job_t j = {y, x, g, count};
  kern_pool_for(kern_cpu(be)->pool, (count + GATE_GRAIN - 1) / GATE_GRAIN, 1, gate_task, &j);
}

void kern_cpu_copy_cols(kern_backend_t *be, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                      int64_t cols) {
  (void)be;
  for (int64_t r = 0; r < rows; r++) memcpy(y + r * ldy, x + r * ldx, (size_t)cols * sizeof *y);
}
