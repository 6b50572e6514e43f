/* kernels/cpu/ops_gdn.c — the Gated DeltaNet operations of the CPU backend
 * (contracts in kernels/kern.h, kern_gdn_args_t): the depthwise causal
 * convolution with its cached window, the gated delta rule in its
 * recurrent form, the sigmoid output gate and the column copy.
 *
 * Batch invariance: the convolution runs one (sequence, channel block) per
 * work item and the rule one (sequence, value head), each over the
 * sequence's rows in token order with loops of a fixed order, so a row's
 * bits depend on its own sequence alone — never on the other sequences,
 * the chunking of a prompt into steps, or the thread count. The prompt
 * chunk is run token by token (the recurrent form; the chunked "parallel"
 * form is not built): the same arithmetic as a decode step. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops_cpu.h"

#define CONV_BLOCK 64 /* channels per work item */
#define MAX_HEAD 512  /* head_k, head_v bound (model/ checks it) */

typedef struct {
  float *y;
  const float *x, *w;
  const kern_gdn_args_t *a;
  int n_blocks; /* channel blocks per sequence */
} conv_job_t;

static float silu(float v) { return v / (1.0f + kern_cpu_expf(-v)); }

static void conv_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_job_t *j = ctx;
  const kern_gdn_args_t *a = j->a;
  const int C = a->conv_dim, K = a->conv_kernel;
  for (int64_t item = begin; item < end; item++) {
    const int b = (int)(item / j->n_blocks);
    const int c0 = (int)(item % j->n_blocks) * CONV_BLOCK;
    const int c1 = c0 + CONV_BLOCK < C ? c0 + CONV_BLOCK : C;
    float *win = a->state + (size_t)a->slots[b] * a->slot_stride; /* [K - 1, C] oldest first */
    const int r0 = a->cu_rows[b], r1 = a->cu_rows[b + 1];
    for (int c = c0; c < c1; c++) {
      const float *w = j->w + (size_t)c * K;
      float hist[8]; /* the channel's last K - 1 inputs (K <= 9, model/ checks it) */
      for (int i = 0; i < K - 1; i++) hist[i] = win[(size_t)i * C + c];
      for (int r = r0; r < r1; r++) {
        const float xv = j->x[(size_t)r * C + c];
        float acc = 0.0f;
        for (int i = 0; i < K - 1; i++) acc += w[i] * hist[i];
        acc += w[K - 1] * xv;
        j->y[(size_t)r * C + c] = silu(acc);
        for (int i = 0; i + 1 < K - 1; i++) hist[i] = hist[i + 1];
        if (K > 1) hist[K - 2] = xv;
      }
      for (int i = 0; i < K - 1; i++) win[(size_t)i * C + c] = hist[i];
    }
  }
}

void kern_cpu_gdn_conv(kern_backend_t *be, float *y, const float *x, const float *w, const kern_gdn_args_t *a) {
  const int n_blocks = (a->conv_dim + CONV_BLOCK - 1) / CONV_BLOCK;
  conv_job_t j = {y, x, w, a, n_blocks};
  kern_pool_for(kern_cpu(be)->pool, (int64_t)a->n_seqs * n_blocks, 1, conv_task, &j);
}

typedef struct {
  float *out;
  const float *y, *alpha, *beta, *a_neg, *dt_bias;
  const kern_gdn_args_t *a;
} rule_job_t;

/* v / sqrt(Σ v² + eps) · extra, the sum in double (HF's l2norm in f32 sums
 * the same terms; the difference is far inside the tolerance). */
static void l2norm(float *dst, const float *v, int n, float eps, double extra) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
  const float s = (float)(extra / sqrt(ss + eps));
  for (int i = 0; i < n; i++) dst[i] = v[i] * s;
}

static void rule_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const rule_job_t *j = ctx;
  const kern_gdn_args_t *a = j->a;
  const int Hk = a->n_k_heads, Hv = a->n_v_heads, dk = a->head_k, dv = a->head_v;
  const int C = a->conv_dim, group = Hv / Hk;
  float q[MAX_HEAD], k[MAX_HEAD], kv[MAX_HEAD], o[MAX_HEAD];
  for (int64_t item = begin; item < end; item++) {
    const int b = (int)(item / Hv), h = (int)(item % Hv);
    const int kh = a->v_tiled ? h % Hk : h / group;
    float *S = a->state + (size_t)a->slots[b] * a->slot_stride + (size_t)(a->conv_kernel - 1) * C +
               (size_t)h * dk * dv; /* [dk, dv] */
    for (int r = a->cu_rows[b]; r < a->cu_rows[b + 1]; r++) {
      const float *row = j->y + (size_t)r * C;
      l2norm(q, row + (size_t)kh * dk, dk, a->qk_eps, 1.0 / sqrt((double)dk));
      l2norm(k, row + (size_t)(Hk + kh) * dk, dk, a->qk_eps, 1.0);
      const float *v = row + (size_t)2 * Hk * dk + (size_t)h * dv;
      const double x = (double)j->alpha[(size_t)r * Hv + h] + j->dt_bias[h];
      const double softplus = x > 20.0 ? x : log1p(exp(x)); /* torch's threshold 20 */
      const float decay = (float)exp((double)j->a_neg[h] * softplus);
      const float beta = (float)(1.0 / (1.0 + exp(-(double)j->beta[(size_t)r * Hv + h])));
      for (int c = 0; c < dv; c++) kv[c] = 0.0f;
      for (int i = 0; i < dk; i++) { /* S = decay · S; kv = Sᵀ k */
        float *s = S + (size_t)i * dv;
        const float ki = k[i];
        for (int c = 0; c < dv; c++) {
          s[c] *= decay;
          kv[c] += s[c] * ki;
        }
      }
      for (int c = 0; c < dv; c++) kv[c] = (v[c] - kv[c]) * beta; /* the delta */
      for (int c = 0; c < dv; c++) o[c] = 0.0f;
      for (int i = 0; i < dk; i++) { /* S += k ⊗ delta; o = Sᵀ q */
        float *s = S + (size_t)i * dv;
        const float ki = k[i], qi = q[i];
        for (int c = 0; c < dv; c++) {
          s[c] += ki * kv[c];
          o[c] += s[c] * qi;
        }
      }
      memcpy(j->out + ((size_t)r * Hv + h) * dv, o, (size_t)dv * sizeof *o);
    }
  }
}

void kern_cpu_gdn_rule(kern_backend_t *be, float *out, const float *y, const float *alpha, const float *beta,
                     const float *a_neg, const float *dt_bias, const kern_gdn_args_t *a) {
  rule_job_t j = {out, y, alpha, beta, a_neg, dt_bias, a};
  kern_pool_for(kern_cpu(be)->pool, (int64_t)a->n_seqs * a->n_v_heads, 1, rule_task, &j);
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
