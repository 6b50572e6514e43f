/* tests/gpu/check_families.cu — the operations of the newer model families
 * against float64 references (f32 tolerance: rel L2 < 1e-4):
 *   Gated DeltaNet (Qwen3.5): gdn_conv and gdn_rule over several sequences
 *   (and the states a verification step keeps after each row, a.keep)
 *   with their states (window and S matrix) read and written back, a
 *   sequence alone = in the batch, a chunk = its rows one decode step at a
 *   time (the recurrent form's promise, kern.h), the value-head order of
 *   both conventions; sigmoid_mul and copy_cols;
 *   mixtures of experts: moe_combine (the experts' GEMMs are matmul, checked
 *   in `weights`) and gpt-oss's clamped SwiGLU.
 * gpt-oss's learned attention sinks are in check_attn.cu (the attention
 * kernels' bits). Group `families` of gpu_check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "tests/gpu/gpu_test.cuh"

#define TOL_F32 1e-4

/* ---- Gated DeltaNet -------------------------------------------------------- */

typedef struct gdn_case {
  int Hk, Hv, dk, dv, K, v_tiled;
  std::vector<int> len; /* rows of each sequence */
} gdn_case_t;

/* Host copies of one batch: rows, the initial states (slot b + 1 for
 * sequence b, slot 0 unused), the per-row gates and the per-head constants. */
typedef struct gdn_host {
  int C, T, n;
  size_t stride, win;            /* floats a slot, floats of its conv window */
  std::vector<int32_t> cu, slots;
  std::vector<float> x, w, state, alpha, beta, a_neg, dt_bias;
} gdn_host_t;

static void gdn_build(gt_t *t, const gdn_case_t &c, gdn_host_t &h) {
  h.n = (int)c.len.size();
  h.C = 2 * c.Hk * c.dk + c.Hv * c.dv;
  h.cu.assign(h.n + 1, 0);
  for (int b = 0; b < h.n; b++) h.cu[b + 1] = h.cu[b] + c.len[b];
  h.T = h.cu[h.n];
  h.slots.resize(h.n);
  for (int b = 0; b < h.n; b++) h.slots[b] = h.n - b; /* not the identity */
  h.win = (size_t)(c.K - 1) * h.C;
  h.stride = h.win + (size_t)c.Hv * c.dk * c.dv + 3; /* an odd stride */
  h.x.resize((size_t)h.T * h.C + 1), h.w.resize((size_t)h.C * c.K);
  h.state.resize((size_t)(h.n + 1) * h.stride);
  h.alpha.resize((size_t)h.T * c.Hv + 1), h.beta.resize((size_t)h.T * c.Hv + 1);
  h.a_neg.resize(c.Hv), h.dt_bias.resize(c.Hv);
  gt_normal(t, h.x.data(), h.x.size(), 1.0f);
  gt_normal(t, h.w.data(), h.w.size(), 0.5f);
  gt_normal(t, h.state.data(), h.state.size(), 0.3f);
  gt_normal(t, h.alpha.data(), h.alpha.size(), 1.0f);
  gt_normal(t, h.beta.data(), h.beta.size(), 1.0f);
  gt_normal(t, h.dt_bias.data(), h.dt_bias.size(), 0.5f);
  for (int i = 0; i < c.Hv; i++) h.a_neg[i] = -expf(0.5f * (float)tu_normal(&t->rng)); /* -exp(A_log) */
  h.alpha[0] = 30.0f; /* softplus's linear branch (x > 20) */
}

/* The convolution in float64: y [T, C]; state's windows advanced. */
static void gdn_conv_ref(const gdn_case_t &c, const gdn_host_t &h, std::vector<double> &y, std::vector<float> &st) {
  y.assign((size_t)h.T * h.C, 0.0);
  for (int b = 0; b < h.n; b++)
    for (int ch = 0; ch < h.C; ch++) {
      float *win = &st[(size_t)h.slots[b] * h.stride];
      std::vector<float> hist(c.K);
      for (int i = 0; i < c.K - 1; i++) hist[i] = win[(size_t)i * h.C + ch];
      for (int r = h.cu[b]; r < h.cu[b + 1]; r++) {
        hist[c.K - 1] = h.x[(size_t)r * h.C + ch];
        double acc = 0;
        for (int i = 0; i < c.K; i++) acc += (double)h.w[(size_t)ch * c.K + i] * hist[i];
        y[(size_t)r * h.C + ch] = acc / (1.0 + exp(-acc));
        for (int i = 0; i < c.K - 1; i++) hist[i] = hist[i + 1];
      }
      for (int i = 0; i < c.K - 1; i++) win[(size_t)i * h.C + ch] = hist[i];
    }
}

/* The delta rule in float64 over rows y (the convolution's output, taken
 * as given: h.x): out [T, Hv, dv]; S_out the final S of every slot. */
static void gdn_rule_ref(const gdn_case_t &c, const gdn_host_t &h, std::vector<double> &out,
                         std::vector<double> &S_out) {
  const int dk = c.dk, dv = c.dv;
  out.assign((size_t)h.T * c.Hv * dv, 0.0);
  S_out.assign((size_t)(h.n + 1) * c.Hv * dk * dv, 0.0);
  std::vector<double> q(dk), k(dk), kv(dv);
  for (int b = 0; b < h.n; b++)
    for (int hv = 0; hv < c.Hv; hv++) {
      const int kh = c.v_tiled ? hv % c.Hk : hv / (c.Hv / c.Hk);
      double *S = &S_out[((size_t)h.slots[b] * c.Hv + hv) * dk * dv];
      const float *S0 = &h.state[(size_t)h.slots[b] * h.stride + h.win + (size_t)hv * dk * dv];
      for (size_t i = 0; i < (size_t)dk * dv; i++) S[i] = S0[i];
      for (int r = h.cu[b]; r < h.cu[b + 1]; r++) {
        const float *row = &h.x[(size_t)r * h.C];
        double sq = 0, sk = 0;
        for (int i = 0; i < dk; i++) {
          q[i] = row[(size_t)kh * dk + i], k[i] = row[(size_t)(c.Hk + kh) * dk + i];
          sq += q[i] * q[i], sk += k[i] * k[i];
        }
        for (int i = 0; i < dk; i++) q[i] /= sqrt(sq + 1e-6) * sqrt((double)dk), k[i] /= sqrt(sk + 1e-6);
        const double xa = (double)h.alpha[(size_t)r * c.Hv + hv] + h.dt_bias[hv];
        const double decay = exp((double)h.a_neg[hv] * (xa > 20 ? xa : log1p(exp(xa))));
        const double beta = 1.0 / (1.0 + exp(-(double)h.beta[(size_t)r * c.Hv + hv]));
        const float *v = row + (size_t)2 * c.Hk * dk + (size_t)hv * dv;
        for (int j = 0; j < dv; j++) kv[j] = 0;
        for (int i = 0; i < dk; i++)
          for (int j = 0; j < dv; j++) kv[j] += (S[(size_t)i * dv + j] *= decay) * k[i];
        for (int j = 0; j < dv; j++) kv[j] = (v[j] - kv[j]) * beta;
        double *o = &out[((size_t)r * c.Hv + hv) * dv];
        for (int i = 0; i < dk; i++)
          for (int j = 0; j < dv; j++) o[j] += (S[(size_t)i * dv + j] += k[i] * kv[j]) * q[i];
      }
    }
}

static kern_gdn_args_t gdn_args(const gdn_case_t &c, const gdn_host_t &h, const int32_t *cu, const int32_t *slots,
                                float *state, int n_seqs) {
  kern_gdn_args_t a;
  memset(&a, 0, sizeof a);
  a.n_seqs = n_seqs, a.cu_rows = cu, a.slots = slots, a.state = state, a.slot_stride = h.stride;
  a.conv_dim = h.C, a.conv_kernel = c.K, a.n_k_heads = c.Hk, a.n_v_heads = c.Hv, a.head_k = c.dk,
  a.head_v = c.dv, a.v_tiled = c.v_tiled, a.qk_eps = 1e-6f;
  return a;
}

/* fn over the batch, then over sequence `one` alone, row by row, from the
 * initial state: the same bits for its rows and its state (conv: the
 * window; rule: S). */
static void check_gdn(gt_t *t, const gdn_case_t &c) {
  kern_backend_t *be = t->be;
  char cn[96], name[192];
  snprintf(cn, sizeof cn, "Hk=%d Hv=%d dk=%d dv=%d K=%d v_tiled=%d seqs=%zu", c.Hk, c.Hv, c.dk, c.dv, c.K, c.v_tiled,
           c.len.size());
  gdn_host_t h;
  gdn_build(t, c, h);
  const size_t nst = h.state.size(), ny = (size_t)h.T * h.C, no = (size_t)h.T * c.Hv * c.dv;
  int32_t *dcu = (int32_t *)gt_dev_from(t, h.cu.data(), h.cu.size() * 4);
  int32_t *dsl = (int32_t *)gt_dev_from(t, h.slots.data(), h.slots.size() * 4);
  float *dst = (float *)gt_dev_from(t, h.state.data(), nst * 4);
  float *dx = (float *)gt_dev_from(t, h.x.data(), h.x.size() * 4);
  float *dw = (float *)gt_dev_from(t, h.w.data(), h.w.size() * 4);
  float *dal = (float *)gt_dev_from(t, h.alpha.data(), h.alpha.size() * 4);
  float *dbe = (float *)gt_dev_from(t, h.beta.data(), h.beta.size() * 4);
  float *dan = (float *)gt_dev_from(t, h.a_neg.data(), h.a_neg.size() * 4);
  float *ddt = (float *)gt_dev_from(t, h.dt_bias.data(), h.dt_bias.size() * 4);
  float *dy = (float *)gt_dev(t, (ny + 1) * 4), *dout = (float *)gt_dev(t, (no + 1) * 4);
  std::vector<float> got(ny > no ? ny : no), st(nst), st2(nst), alone(ny > no ? ny : no);
  const kern_gdn_args_t a = gdn_args(c, h, dcu, dsl, dst, h.n);

  /* the convolution */
  std::vector<double> want;
  std::vector<float> want_st = h.state;
  gdn_conv_ref(c, h, want, want_st);
  gt_poison(t, dy, ny);
  be->gdn_conv(be, dy, dx, dw, &a);
  gt_get(t, got.data(), dy, ny * 4);
  gt_get(t, st.data(), dst, nst * 4);
  snprintf(name, sizeof name, "gdn_conv %s", cn);
  gt_check_close(t, name, got.data(), want.data(), ny, TOL_F32);
  /* the windows hold the last K - 1 inputs exactly; S untouched */
  snprintf(name, sizeof name, "gdn_conv leaves the window (last K-1 inputs) and nothing else %s", cn);
  gt_check_same(t, name, st.data(), want_st.data(), nst * 4);

  /* the rule (rows: h.x as the convolution's output), from the initial state */
  std::vector<double> want_o, want_S;
  gdn_rule_ref(c, h, want_o, want_S);
  gt_put(t, dst, h.state.data(), nst * 4);
  gt_poison(t, dout, no);
  be->gdn_rule(be, dout, dx, dal, dbe, dan, ddt, &a);
  std::vector<float> out(no);
  gt_get(t, out.data(), dout, no * 4);
  gt_get(t, st.data(), dst, nst * 4);
  snprintf(name, sizeof name, "gdn_rule %s", cn);
  gt_check_close(t, name, out.data(), want_o.data(), no, TOL_F32);
  {
    std::vector<float> S_got;
    std::vector<double> S_want;
    for (int b = 0; b < h.n; b++) {
      const size_t base = (size_t)h.slots[b] * h.stride + h.win, n = (size_t)c.Hv * c.dk * c.dv;
      S_got.insert(S_got.end(), st.begin() + base, st.begin() + base + n);
      const size_t wb = (size_t)h.slots[b] * n;
      S_want.insert(S_want.end(), want_S.begin() + wb, want_S.begin() + wb + n);
    }
    snprintf(name, sizeof name, "gdn_rule state S after %s", cn);
    gt_check_close(t, name, S_got.data(), S_want.data(), S_got.size(), TOL_F32);
  }

  /* the longest sequence alone, one row per call (decode steps): the same bits */
  int one = 0;
  for (int b = 1; b < h.n; b++) one = c.len[b] > c.len[one] ? b : one;
  const int32_t cu1[2] = {0, 1};
  int32_t *dcu1 = (int32_t *)gt_dev_from(t, cu1, 8);
  gt_put(t, dst, h.state.data(), nst * 4);
  for (int r = h.cu[one]; r < h.cu[one + 1]; r++) {
    const kern_gdn_args_t a1 = gdn_args(c, h, dcu1, dsl + one, dst, 1);
    be->gdn_rule(be, dout + (size_t)r * c.Hv * c.dv, dx + (size_t)r * h.C, dal + (size_t)r * c.Hv,
                 dbe + (size_t)r * c.Hv, dan, ddt, &a1);
  }
  gt_get(t, alone.data(), dout, no * 4);
  gt_get(t, st2.data(), dst, nst * 4);
  const size_t o0 = (size_t)h.cu[one] * c.Hv * c.dv, on = (size_t)c.len[one] * c.Hv * c.dv;
  snprintf(name, sizeof name, "gdn_rule sequence alone, row by row = chunk in batch %s", cn);
  gt_check_same(t, name, alone.data() + o0, out.data() + o0, on * 4);
  const size_t s0 = (size_t)h.slots[one] * h.stride;
  snprintf(name, sizeof name, "gdn_rule state row by row = chunk %s", cn);
  gt_check_same(t, name, st2.data() + s0, st.data() + s0, h.stride * 4);

  gt_put(t, dst, h.state.data(), nst * 4);
  for (int r = h.cu[one]; r < h.cu[one + 1]; r++) {
    const kern_gdn_args_t a1 = gdn_args(c, h, dcu1, dsl + one, dst, 1);
    be->gdn_conv(be, dy + (size_t)r * h.C, dx + (size_t)r * h.C, dw, &a1);
  }
  gt_get(t, alone.data(), dy, ny * 4);
  snprintf(name, sizeof name, "gdn_conv sequence alone, row by row = chunk in batch %s", cn);
  gt_check_same(t, name, alone.data() + (size_t)h.cu[one] * h.C, got.data() + (size_t)h.cu[one] * h.C,
                (size_t)c.len[one] * h.C * 4);

  /* speculative verification (a.keep): the batch again, sequence `one` keeping its states after each row but
   * the last in extra slots n + 1 ..: each the bits of the row-by-row state after that row (window and S) */
  if (c.len[one] > 1) {
    const size_t nk = (size_t)c.len[one] - 1, used = h.win + (size_t)c.Hv * c.dk * c.dv;
    std::vector<float> pool((size_t)(h.n + 1 + nk) * h.stride, 0.0f), kept(pool.size()), step(nst);
    std::copy(h.state.begin(), h.state.end(), pool.begin());
    std::vector<int32_t> keep(h.n, -1);
    keep[one] = h.n + 1;
    float *dpool = (float *)gt_dev_from(t, pool.data(), pool.size() * 4);
    int32_t *dkeep = (int32_t *)gt_dev_from(t, keep.data(), keep.size() * 4);
    kern_gdn_args_t ak = gdn_args(c, h, dcu, dsl, dpool, h.n);
    ak.keep = dkeep;
    be->gdn_conv(be, dy, dx, dw, &ak);
    be->gdn_rule(be, dout, dy, dal, dbe, dan, ddt, &ak);
    gt_get(t, kept.data(), dpool, pool.size() * 4);
    gt_put(t, dst, h.state.data(), nst * 4);
    int same = 1;
    for (int r = h.cu[one]; r < h.cu[one + 1]; r++) {
      const kern_gdn_args_t a1 = gdn_args(c, h, dcu1, dsl + one, dst, 1);
      be->gdn_conv(be, dy + (size_t)r * h.C, dx + (size_t)r * h.C, dw, &a1);
      be->gdn_rule(be, dout + (size_t)r * c.Hv * c.dv, dy + (size_t)r * h.C, dal + (size_t)r * c.Hv,
                   dbe + (size_t)r * c.Hv, dan, ddt, &a1);
      gt_get(t, step.data(), dst, nst * 4);
      const size_t j = (size_t)(r - h.cu[one]);
      const float *want_k = step.data() + s0, *got_k = kept.data() + (size_t)(r + 1 < h.cu[one + 1] ? h.n + 1 + j
                                                                                               : h.slots[one]) * h.stride;
      same &= memcmp(want_k, got_k, used * 4) == 0;
    }
    snprintf(name, sizeof name, "gdn keep: the state kept after each verified row = row by row %s", cn);
    gt_result(t, name, same, "%s", same ? "the same bits" : "bits differ");
    gt_free(t, dpool), gt_free(t, dkeep);
  }

  void *all[] = {dcu, dsl, dst, dx, dw, dal, dbe, dan, ddt, dy, dout, dcu1};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gt_free(t, all[i]);
}

/* sigmoid_mul (also in place) and copy_cols (a column slice of interleaved
 * [q, gate] heads, the way model_runner.c takes it). */
static void check_gate_and_cols(gt_t *t, int64_t count) {
  kern_backend_t *be = t->be;
  char name[96];
  std::vector<float> x(count), g(count), got(count);
  std::vector<double> want(count);
  gt_normal(t, x.data(), count, 2.0f);
  gt_normal(t, g.data(), count, 3.0f);
  for (int64_t i = 0; i < count; i++) want[i] = x[i] / (1.0 + exp(-(double)g[i]));
  float *dx = (float *)gt_dev_from(t, x.data(), count * 4), *dg = (float *)gt_dev_from(t, g.data(), count * 4);
  float *dy = (float *)gt_dev(t, count * 4);
  gt_poison(t, dy, count);
  be->sigmoid_mul(be, dy, dx, dg, count);
  gt_get(t, got.data(), dy, count * 4);
  snprintf(name, sizeof name, "sigmoid_mul n=%lld", (long long)count);
  gt_check_close(t, name, got.data(), want.data(), count, TOL_F32);
  be->sigmoid_mul(be, dx, dx, dg, count);
  std::vector<float> in_place(count);
  gt_get(t, in_place.data(), dx, count * 4);
  snprintf(name, sizeof name, "sigmoid_mul n=%lld in place = out of place", (long long)count);
  gt_check_same(t, name, in_place.data(), got.data(), count * 4);

  /* rows of [q (hd), gate (hd)] → q [rows, hd] */
  const int hd = 96, rows = 37;
  std::vector<float> src((size_t)rows * 2 * hd), dst((size_t)rows * hd), want_c((size_t)rows * hd);
  gt_normal(t, src.data(), src.size(), 1.0f);
  for (int r = 0; r < rows; r++) memcpy(&want_c[(size_t)r * hd], &src[(size_t)r * 2 * hd + hd], hd * 4);
  float *ds = (float *)gt_dev_from(t, src.data(), src.size() * 4), *dd = (float *)gt_dev(t, dst.size() * 4);
  gt_poison(t, dd, dst.size());
  be->copy_cols(be, dd, hd, ds + hd, 2 * hd, rows, hd);
  gt_get(t, dst.data(), dd, dst.size() * 4);
  gt_check_same(t, "copy_cols the gate half of 37 rows of [q, gate]", dst.data(), want_c.data(), dst.size() * 4);
  gt_free(t, dx), gt_free(t, dg), gt_free(t, dy), gt_free(t, ds), gt_free(t, dd);
}

/* ---- mixtures of experts ---------------------------------------------------- */

/* moe_combine: n rows of k terms over a src of n·k rows (slots permuted, as
 * the grouping by expert leaves them), weights summing to 1. */
static void check_moe_combine(gt_t *t, int n, int k, int dim) {
  kern_backend_t *be = t->be;
  char name[96];
  snprintf(name, sizeof name, "moe_combine n=%d k=%d dim=%d", n, k, dim);
  const size_t ns = (size_t)n * k;
  std::vector<float> src(ns * dim), w(ns), got((size_t)n * dim), alone(dim);
  std::vector<int32_t> slot(ns);
  std::vector<double> want((size_t)n * dim, 0.0);
  gt_normal(t, src.data(), src.size(), 1.0f);
  for (size_t i = 0; i < ns; i++) slot[i] = (int32_t)i;
  tu_shuffle_i32(&t->rng, slot.data(), ns);
  for (int r = 0; r < n; r++) {
    double sum = 0;
    for (int j = 0; j < k; j++) sum += (w[(size_t)r * k + j] = (float)(0.1 + tu_below(&t->rng, 1000) / 1000.0));
    for (int j = 0; j < k; j++) w[(size_t)r * k + j] = (float)(w[(size_t)r * k + j] / sum);
    for (int j = 0; j < k; j++)
      for (int d = 0; d < dim; d++)
        want[(size_t)r * dim + d] += (double)w[(size_t)r * k + j] * src[(size_t)slot[(size_t)r * k + j] * dim + d];
  }
  float *ds = (float *)gt_dev_from(t, src.data(), src.size() * 4), *dw = (float *)gt_dev_from(t, w.data(), ns * 4);
  int32_t *dsl = (int32_t *)gt_dev_from(t, slot.data(), ns * 4);
  float *dy = (float *)gt_dev(t, got.size() * 4);
  gt_poison(t, dy, got.size());
  be->moe_combine(be, dy, ds, dsl, dw, n, k, dim);
  gt_get(t, got.data(), dy, got.size() * 4);
  gt_check_close(t, name, got.data(), want.data(), got.size(), TOL_F32);
  /* the last row alone: its own terms only decide its bits */
  gt_poison(t, dy, dim);
  be->moe_combine(be, dy, ds, dsl + (size_t)(n - 1) * k, dw + (size_t)(n - 1) * k, 1, k, dim);
  gt_get(t, alone.data(), dy, (size_t)dim * 4);
  snprintf(name, sizeof name, "moe_combine n=%d k=%d dim=%d row alone = row in batch", n, k, dim);
  gt_check_same(t, name, alone.data(), got.data() + (size_t)(n - 1) * dim, (size_t)dim * 4);
  gt_free(t, ds), gt_free(t, dw), gt_free(t, dsl), gt_free(t, dy);
}

/* gpt-oss's clamped SwiGLU (alpha 1.702, limit 7), inputs wide enough to
 * hit both clamps; also in place over gate. */
static void check_swiglu_oai(gt_t *t, int64_t count) {
  kern_backend_t *be = t->be;
  char name[96];
  const float alpha = 1.702f, limit = 7.0f;
  std::vector<float> g(count), u(count), got(count), in_place(count);
  std::vector<double> want(count);
  gt_normal(t, g.data(), count, 6.0f);
  gt_normal(t, u.data(), count, 6.0f);
  for (int64_t i = 0; i < count; i++) {
    const double gc = g[i] < limit ? g[i] : limit, uc = u[i] > limit ? limit : (u[i] < -limit ? -limit : u[i]);
    want[i] = gc / (1.0 + exp(-(double)alpha * gc)) * (uc + 1.0);
  }
  float *dg = (float *)gt_dev_from(t, g.data(), count * 4), *du = (float *)gt_dev_from(t, u.data(), count * 4);
  float *dy = (float *)gt_dev(t, count * 4);
  gt_poison(t, dy, count);
  be->swiglu_oai(be, dy, dg, du, count, alpha, limit);
  gt_get(t, got.data(), dy, count * 4);
  snprintf(name, sizeof name, "swiglu_oai n=%lld", (long long)count);
  gt_check_close(t, name, got.data(), want.data(), count, TOL_F32);
  be->swiglu_oai(be, dg, dg, du, count, alpha, limit);
  gt_get(t, in_place.data(), dg, count * 4);
  snprintf(name, sizeof name, "swiglu_oai n=%lld in place = out of place", (long long)count);
  gt_check_same(t, name, in_place.data(), got.data(), count * 4);
  gt_free(t, dg), gt_free(t, du), gt_free(t, dy);
}

void gt_check_families(gt_t *t) {
  /* Qwen3.5's shapes (16 key heads, 32 value heads of 128, 4 taps) scaled
   * down in heads; dv 160 makes a thread own two columns; 0-row sequences */
  check_gdn(t, {2, 4, 128, 128, 4, 0, {5, 1, 0, 17}});
  check_gdn(t, {2, 4, 128, 128, 4, 1, {3, 9}});
  check_gdn(t, {1, 3, 64, 160, 4, 0, {t->quick ? 4 : 40, 2}});
  check_gdn(t, {3, 3, 32, 32, 2, 0, {1, 1, 1}});
  {
    /* max_seqs' 65536 and one more: past grid.y's 65535, so two launches; the
     * longest (checked alone too) is the last, in the second launch */
    std::vector<int> many(65537, 1);
    many.back() = 3;
    check_gdn(t, {1, 2, 4, 4, 2, 0, many});
  }
  check_gate_and_cols(t, 10001);
  check_moe_combine(t, 7, 4, 1000);  /* gpt-oss: k 4 */
  check_moe_combine(t, 33, 9, 256);  /* qwen2moe: 8 + the shared expert */
  check_swiglu_oai(t, 100003);
}
