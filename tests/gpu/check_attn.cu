/* tests/gpu/check_attn.cu — the three attention kernels against a float64
 * reference (bf16 tolerance: rel L2 < 1e-2), and the bit-for-bit promises of
 * kern.h: decode = varlen_paged = varlen for the same rows, a sequence alone
 * = the same sequence inside a batch, two runs = the same bits.
 *
 * Cases: the spec's two worked examples; head_dim 64, 128 and 256; GQA ratios 1,
 * 4, 8 (and 24: two head groups in decode); pages of 16 and 32; lengths 0, 1,
 * page - 1, page, page + 1, split boundaries (256, 257), 4096+; rows with
 * q_len > k_len; sliding windows around tiles, pages and splits (one with
 * soft-capped scores); learned sinks (gpt-oss). Pages are shuffled, and every cache slot no sequence owns
 * holds NaN, so a wrong address shows up as a NaN. The reference uses the
 * f32 inputs before bf16 rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "tests/gpu/gpu_test.cuh"

#define TOL_BF16 1e-2
#define BF16_NAN 0x7fc0

typedef struct attn_cfg {
  int D, H, HKV, BS;
  int W; /* sliding window (kern_attn_args_t.sliding_window), 0: none */
  float CAP; /* score soft-cap (kern_attn_args_t.softcap), 0: none */
  int SINK;  /* 1: a learned sink logit per head (kern_attn_args_t.sinks, gpt-oss) */
} attn_cfg_t;

/* One batch: host inputs, the paged cache and its packed copy. */
typedef struct acase {
  attn_cfg_t c;
  int n_seqs, mbps, num_blocks, total_q, total_k, max_q, max_k;
  std::vector<int> ql, kl;
  std::vector<int32_t> cu_q, cu_k, bt;
  std::vector<float> q, k, v;    /* q [total_q][H][D]; k, v [total_k][HKV][D] (f32 originals) */
  std::vector<uint16_t> kc, vc;  /* cache bf16 [num_blocks * BS][HKV][D], NaN where unowned */
  std::vector<uint16_t> kp, vp;  /* packed bf16 [total_k][HKV][D] */
  std::vector<float> sinks;      /* [H] when c.SINK */
} acase_t;

/* Builds a batch. bt_given (or NULL: shuffled pages) is [n_seqs][mbps].
 * hold[b] keys of sequence b go into the cache (the rest stay NaN: decode
 * appends them). */
static void build(gt_t *t, acase_t &a, attn_cfg_t c, const std::vector<int> &ql,
                  const std::vector<int> &kl, const int32_t *bt_given, int mbps_given,
                  int num_blocks_given, const std::vector<int> *hold) {
  a.c = c;
  a.n_seqs = (int)ql.size();
  a.ql = ql, a.kl = kl;
  a.cu_q.assign(a.n_seqs + 1, 0), a.cu_k.assign(a.n_seqs + 1, 0);
  a.max_q = a.max_k = 0;
  int blocks = 0, mb = 0;
  for (int b = 0; b < a.n_seqs; b++) {
    a.cu_q[b + 1] = a.cu_q[b] + ql[b];
    a.cu_k[b + 1] = a.cu_k[b] + kl[b];
    a.max_q = ql[b] > a.max_q ? ql[b] : a.max_q;
    a.max_k = kl[b] > a.max_k ? kl[b] : a.max_k;
    const int nb = (kl[b] + c.BS - 1) / c.BS;
    blocks += nb;
    mb = nb > mb ? nb : mb;
  }
  a.total_q = a.cu_q[a.n_seqs], a.total_k = a.cu_k[a.n_seqs];
  if (bt_given) {
    a.mbps = mbps_given, a.num_blocks = num_blocks_given;
    a.bt.assign(bt_given, bt_given + (size_t)a.n_seqs * a.mbps);
  } else {
    a.mbps = mb + 1; /* one unused (-1) entry per row at least */
    a.num_blocks = blocks + 5;
    std::vector<int32_t> perm(a.num_blocks);
    for (int i = 0; i < a.num_blocks; i++) perm[i] = i;
    tu_shuffle_i32(&t->rng, perm.data(), perm.size());
    a.bt.assign((size_t)a.n_seqs * a.mbps, -1);
    int used = 0;
    for (int b = 0; b < a.n_seqs; b++)
      for (int i = 0; i < (kl[b] + c.BS - 1) / c.BS; i++) a.bt[(size_t)b * a.mbps + i] = perm[used++];
  }
  const size_t row = (size_t)c.HKV * c.D;
  a.q.resize((size_t)a.total_q * c.H * c.D + 1);
  a.k.resize((size_t)a.total_k * row + 1), a.v.resize((size_t)a.total_k * row + 1);
  gt_normal(t, a.q.data(), a.q.size(), 1.0f);
  gt_normal(t, a.k.data(), a.k.size(), 1.0f);
  gt_normal(t, a.v.data(), a.v.size(), 1.0f);
  a.sinks.assign(c.SINK ? (size_t)c.H : 0, 0.0f);
  gt_normal(t, a.sinks.data(), a.sinks.size(), 2.0f); /* scores are ~N(0, 1): the sink weighs in */
  if (c.SINK) a.sinks[0] = 6.0f;                   /* and one head it dominates */
  a.kc.assign((size_t)a.num_blocks * c.BS * row, BF16_NAN);
  a.vc.assign(a.kc.size(), BF16_NAN);
  a.kp.resize((size_t)a.total_k * row + 1), a.vp.resize((size_t)a.total_k * row + 1);
  for (int b = 0; b < a.n_seqs; b++)
    for (int j = 0; j < kl[b]; j++) {
      const size_t src = (size_t)(a.cu_k[b] + j) * row;
      for (size_t e = 0; e < row; e++) a.kp[src + e] = gt_bf16(a.k[src + e]), a.vp[src + e] = gt_bf16(a.v[src + e]);
      if (hold && j >= (*hold)[b]) continue;
      const size_t slot = (size_t)a.bt[(size_t)b * a.mbps + j / c.BS] * c.BS + j % c.BS;
      memcpy(&a.kc[slot * row], &a.kp[src], row * 2);
      memcpy(&a.vc[slot * row], &a.vp[src], row * 2);
    }
}

/* Rows checked against the reference: all, or a sample for big cases. */
static int sampled(const acase_t &a, int b, int i, int sample) {
  return !sample || i % 13 == 0 || i < 16 || i >= a.ql[b] - 16;
}

/* Float64 reference; rows not sampled are left 0. */
static void reference(const acase_t &a, std::vector<double> &out, int sample) {
  const int D = a.c.D, H = a.c.H, HKV = a.c.HKV, grp = H / HKV;
  const double scale = 1.0 / sqrt((double)D);
  out.assign((size_t)a.total_q * H * D, 0.0);
  std::vector<double> p((size_t)a.max_k + 1);
  for (int b = 0; b < a.n_seqs; b++)
    for (int i = 0; i < a.ql[b]; i++) {
      if (!sampled(a, b, i, sample)) continue;
      int lim = i + a.kl[b] - a.ql[b] + 1;
      lim = lim < a.kl[b] ? lim : a.kl[b];
      if (lim <= 0) continue;
      /* flash-attn window_size = (W - 1, 0): keys lim - 1 - (W - 1) .. lim - 1 */
      const int lo = a.c.W > 0 && lim - 1 - (a.c.W - 1) > 0 ? lim - 1 - (a.c.W - 1) : 0;
      for (int h = 0; h < H; h++) {
        const float *qr = &a.q[((size_t)(a.cu_q[b] + i) * H + h) * D];
        const int kvh = h / grp;
        double mx = -INFINITY, sum = 0;
        for (int j = lo; j < lim; j++) {
          const float *kr = &a.k[((size_t)(a.cu_k[b] + j) * HKV + kvh) * D];
          double s = 0;
          for (int d = 0; d < D; d++) s += (double)qr[d] * kr[d];
          p[j] = a.c.CAP > 0 ? a.c.CAP * tanh(s * scale / a.c.CAP) : s * scale;
          mx = p[j] > mx ? p[j] : mx;
        }
        for (int j = lo; j < lim; j++) sum += (p[j] = exp(p[j] - mx));
        if (a.c.SINK) sum += exp((double)a.sinks[h] - mx); /* in the denominator only */
        double *o = &out[((size_t)(a.cu_q[b] + i) * H + h) * D];
        for (int j = lo; j < lim; j++) {
          const float *vr = &a.v[((size_t)(a.cu_k[b] + j) * HKV + kvh) * D];
          const double w = p[j] / sum;
          for (int d = 0; d < D; d++) o[d] += w * vr[d];
        }
      }
    }
}

/* got vs reference: every element finite, rows that see no key exactly 0,
 * rel L2 over the sampled rows. */
static int compare(gt_t *t, const char *name, const acase_t &a, const std::vector<float> &got,
                   const std::vector<double> &want, int sample) {
  const size_t rowlen = (size_t)a.c.H * a.c.D;
  std::vector<float> g;
  std::vector<double> w;
  for (int b = 0; b < a.n_seqs; b++)
    for (int i = 0; i < a.ql[b]; i++) {
      const size_t r = (size_t)(a.cu_q[b] + i) * rowlen;
      if (!gt_all_finite(&got[r], rowlen)) {
        gt_result(t, name, 0, "sequence %d row %d not written or not finite", b, i);
        return 0;
      }
      if (i + a.kl[b] - a.ql[b] + 1 <= 0 || a.kl[b] == 0) {
        for (size_t e = 0; e < rowlen; e++)
          if (got[r + e] != 0.0f) {
            gt_result(t, name, 0, "sequence %d row %d sees no key but is not zero", b, i);
            return 0;
          }
      }
      if (sampled(a, b, i, sample)) {
        g.insert(g.end(), got.begin() + r, got.begin() + r + rowlen);
        w.insert(w.end(), want.begin() + r, want.begin() + r + rowlen);
      }
    }
  if (g.empty()) {
    gt_result(t, name, 1, "no query rows");
    return 1;
  }
  return gt_check_close(t, name, g.data(), w.data(), g.size(), TOL_BF16);
}

/* Device copies of a case. */
typedef struct dcase {
  int32_t *cu_q, *cu_k, *bt, *seqlens;
  void *kc, *vc, *kp, *vp;
  float *q, *out, *k_new, *v_new, *sinks;
} dcase_t;

static void upload(gt_t *t, const acase_t &a, dcase_t &d) {
  memset(&d, 0, sizeof d);
  d.cu_q = (int32_t *)gt_dev_from(t, a.cu_q.data(), a.cu_q.size() * 4);
  d.cu_k = (int32_t *)gt_dev_from(t, a.cu_k.data(), a.cu_k.size() * 4);
  d.bt = (int32_t *)gt_dev_from(t, a.bt.data(), a.bt.size() * 4);
  d.kc = gt_dev_from(t, a.kc.data(), a.kc.size() * 2);
  d.vc = gt_dev_from(t, a.vc.data(), a.vc.size() * 2);
  d.kp = gt_dev_from(t, a.kp.data(), a.kp.size() * 2);
  d.vp = gt_dev_from(t, a.vp.data(), a.vp.size() * 2);
  d.q = (float *)gt_dev_from(t, a.q.data(), a.q.size() * 4);
  d.out = (float *)gt_dev(t, ((size_t)a.total_q * a.c.H * a.c.D + 1) * 4);
  if (a.c.SINK) d.sinks = (float *)gt_dev_from(t, a.sinks.data(), a.sinks.size() * 4);
}

static void release(gt_t *t, dcase_t &d) {
  void *all[] = {d.cu_q, d.cu_k, d.bt, d.seqlens, d.kc, d.vc, d.kp, d.vp, d.q, d.out, d.k_new, d.v_new, d.sinks};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gt_free(t, all[i]);
}

/* A decode case's new keys and values (key cs[b] of sequence b, the one
 * the kernel appends) into k_new, v_new and onto the device with cs. */
static void upload_new(gt_t *t, const acase_t &a, const std::vector<int> &cs, dcase_t &d, std::vector<float> &k_new,
                       std::vector<float> &v_new) {
  const size_t n = cs.size(), row = (size_t)a.c.HKV * a.c.D;
  k_new.assign(n * row, 0.0f), v_new.assign(n * row, 0.0f);
  for (size_t b = 0; b < n; b++) {
    memcpy(&k_new[b * row], &a.k[(size_t)(a.cu_k[b] + cs[b]) * row], row * 4);
    memcpy(&v_new[b * row], &a.v[(size_t)(a.cu_k[b] + cs[b]) * row], row * 4);
  }
  d.k_new = (float *)gt_dev_from(t, k_new.data(), k_new.size() * 4);
  d.v_new = (float *)gt_dev_from(t, v_new.data(), v_new.size() * 4);
  d.seqlens = (int32_t *)gt_dev_from(t, cs.data(), n * 4);
}

static kern_attn_args_t args_of(const acase_t &a, const dcase_t &d) {
  kern_attn_args_t x;
  memset(&x, 0, sizeof x);
  x.n_seqs = a.n_seqs, x.n_heads = a.c.H, x.n_kv_heads = a.c.HKV, x.head_dim = a.c.D;
  x.scale = 1.0f / sqrtf((float)a.c.D);
  x.q = d.q, x.out = d.out;
  x.cu_seq_lens_q = d.cu_q, x.cu_seq_lens_k = d.cu_k, x.max_seqlen_q = a.max_q, x.max_seqlen_k = a.max_k;
  x.total_q = a.total_q;
  x.k = d.kp, x.v = d.vp;
  x.k_cache = d.kc, x.v_cache = d.vc, x.block_size = a.c.BS, x.block_table = d.bt,
  x.max_blocks_per_seq = a.mbps;
  x.cache_seqlens = d.seqlens, x.k_new = d.k_new, x.v_new = d.v_new;
  x.sliding_window = a.c.W;
  x.softcap = a.c.CAP;
  x.sinks = d.sinks;
  return x;
}

typedef void (*attn_fn)(kern_backend_t *, const kern_attn_args_t *);

/* Runs fn into a poisoned out and downloads it. */
static std::vector<float> run(gt_t *t, attn_fn fn, const kern_attn_args_t &x, size_t n_out) {
  std::vector<float> got(n_out);
  gt_poison(t, x.out, n_out);
  fn(t->be, &x);
  gt_get(t, got.data(), x.out, n_out * 4);
  return got;
}

/* Runs fn and checks its output has the bits of `want` (name: printf). */
static void run_same(gt_t *t, attn_fn fn, const kern_attn_args_t &x, size_t n_out,
                     const std::vector<float> &want, const char *fmt, const char *what,
                     const char *cn) {
  char name[192];
  snprintf(name, sizeof name, fmt, what, cn);
  std::vector<float> got = run(t, fn, x, n_out);
  gt_check_same(t, name, got.data(), want.data(), n_out * 4);
}

static const char *cfg_name(const attn_cfg_t &c, char *buf, size_t n) {
  snprintf(buf, n, "D=%d H=%d HKV=%d page=%d window=%d softcap=%g%s", c.D, c.H, c.HKV, c.BS, c.W, c.CAP,
           c.SINK ? " sinks" : "");
  return buf;
}

/* A varlen batch through attn_varlen (packed) and attn_varlen_paged. */
static void check_varlen(gt_t *t, const char *what, attn_cfg_t c, const std::vector<int> &ql,
                         const std::vector<int> &kl, int sample) {
  char cn[80], name[192];
  cfg_name(c, cn, sizeof cn);
  acase_t a;
  build(t, a, c, ql, kl, NULL, 0, 0, NULL);
  std::vector<double> want;
  reference(a, want, sample);
  dcase_t d;
  upload(t, a, d);
  kern_attn_args_t x = args_of(a, d);
  const size_t n_out = (size_t)a.total_q * c.H * c.D;
  std::vector<float> packed = run(t, t->be->attn_varlen, x, n_out);
  snprintf(name, sizeof name, "attn_varlen %s %s", what, cn);
  compare(t, name, a, packed, want, sample);
  std::vector<float> paged = run(t, t->be->attn_varlen_paged, x, n_out);
  snprintf(name, sizeof name, "attn_varlen_paged %s %s", what, cn);
  compare(t, name, a, paged, want, sample);
  snprintf(name, sizeof name, "attn_varlen_paged = attn_varlen bits %s %s", what, cn);
  gt_check_same(t, name, paged.data(), packed.data(), n_out * 4);
  run_same(t, t->be->attn_varlen_paged, x, n_out, paged, "attn_varlen_paged deterministic %s %s",
           what, cn);

  /* The longest sequence alone gives the bits it has inside the batch. */
  int b = 0;
  for (int i = 1; i < a.n_seqs; i++) b = (int64_t)a.ql[i] * a.kl[i] > (int64_t)a.ql[b] * a.kl[b] ? i : b;
  if (a.ql[b] > 0) {
    const int32_t cuq1[2] = {0, a.ql[b]}, cuk1[2] = {0, a.kl[b]};
    int32_t *dq1 = (int32_t *)gt_dev_from(t, cuq1, 8), *dk1 = (int32_t *)gt_dev_from(t, cuk1, 8);
    kern_attn_args_t y = x;
    y.n_seqs = 1, y.cu_seq_lens_q = dq1, y.cu_seq_lens_k = dk1;
    y.max_seqlen_q = a.ql[b], y.max_seqlen_k = a.kl[b], y.total_q = a.ql[b];
    y.q = d.q + (size_t)a.cu_q[b] * c.H * c.D;
    y.block_table = d.bt + (size_t)b * a.mbps;
    const size_t n1 = (size_t)a.ql[b] * c.H * c.D;
    std::vector<float> alone = run(t, t->be->attn_varlen_paged, y, n1);
    snprintf(name, sizeof name, "attn_varlen_paged sequence alone = in batch %s %s", what, cn);
    gt_check_same(t, name, alone.data(), &paged[(size_t)a.cu_q[b] * c.H * c.D], n1 * 4);
    gt_free(t, dq1), gt_free(t, dk1);
  }
  release(t, d);
}

/* A decode batch: cache_seqlens cs; sequence b attends over cs[b] + 1 keys,
 * the last one appended by the kernel. */
static void check_decode(gt_t *t, const char *what, attn_cfg_t c, const std::vector<int> &cs,
                         const int32_t *bt_given, int mbps, int num_blocks) {
  char cn[80], name[192];
  cfg_name(c, cn, sizeof cn);
  const int n = (int)cs.size();
  std::vector<int> ql(n, 1), kl(n);
  for (int b = 0; b < n; b++) kl[b] = cs[b] + 1;
  acase_t a;
  build(t, a, c, ql, kl, bt_given, mbps, num_blocks, &cs);
  std::vector<double> want;
  reference(a, want, 0);
  dcase_t d;
  upload(t, a, d);
  const size_t row = (size_t)c.HKV * c.D;
  std::vector<float> k_new, v_new;
  upload_new(t, a, cs, d, k_new, v_new);
  kern_attn_args_t x = args_of(a, d);
  const size_t n_out = (size_t)n * c.H * c.D;
  std::vector<float> dec = run(t, t->be->attn_decode, x, n_out);
  snprintf(name, sizeof name, "attn_decode %s %s", what, cn);
  compare(t, name, a, dec, want, 0);

  /* The cache: the appended slots hold bf16(k_new), nothing else moved. */
  std::vector<uint16_t> expect_k = a.kc, expect_v = a.vc, got(a.kc.size());
  for (int b = 0; b < n; b++) {
    const size_t slot = (size_t)a.bt[(size_t)b * a.mbps + cs[b] / c.BS] * c.BS + cs[b] % c.BS;
    memcpy(&expect_k[slot * row], &a.kp[(size_t)(a.cu_k[b] + cs[b]) * row], row * 2);
    memcpy(&expect_v[slot * row], &a.vp[(size_t)(a.cu_k[b] + cs[b]) * row], row * 2);
  }
  gt_get(t, got.data(), d.kc, got.size() * 2);
  snprintf(name, sizeof name, "attn_decode appends K in place %s %s", what, cn);
  gt_check_same(t, name, got.data(), expect_k.data(), got.size() * 2);
  gt_get(t, got.data(), d.vc, got.size() * 2);
  snprintf(name, sizeof name, "attn_decode appends V in place %s %s", what, cn);
  gt_check_same(t, name, got.data(), expect_v.data(), got.size() * 2);

  /* Same rows through the two varlen kernels: the same bits. */
  run_same(t, t->be->attn_varlen_paged, x, n_out, dec, "attn_varlen_paged = attn_decode bits %s %s",
           what, cn);
  run_same(t, t->be->attn_varlen, x, n_out, dec, "attn_varlen = attn_decode bits %s %s", what, cn);
  run_same(t, t->be->attn_decode, x, n_out, dec, "attn_decode deterministic %s %s", what, cn);

  /* Where the run kernel serves (kernels/cuda_geom.h cuda_geom_decode_kernel:
   * runs of 4 splits, a prefix merged in registers, Q·K split across warps),
   * the split kernel it replaced gives the same bits, alone and for the
   * routed rows of attn_varlen_paged. */
  kern_cuda_t *cu = kern_cuda(t->be);
  const int runs = cuda_geom_decode_kernel(c.D, cu->smem_optin) == CUDA_GEOM_DECODE_RUNS;
  if (runs) {
    cu->decode_splits_only = 1;
    run_same(t, t->be->attn_decode, x, n_out, dec, "attn_decode split kernel = run kernel bits %s %s", what, cn);
    run_same(t, t->be->attn_varlen_paged, x, n_out, dec, "attn_varlen_paged via split kernel = bits %s %s", what,
             cn);
    cu->decode_splits_only = 0;
  }

  /* A workspace too small for one sequence's splits: windows of 2 (inside
   * a run) and 5 splits (across runs) with a carried merge
   * (kernels/cuda_geom.h cuda_geom_decode_plan), the same bits, with the
   * run kernel and the split kernel. */
  for (int w : {2, 5}) {
    /* (w + 1 splits would fit whole: one sequence, no carry) */
    if (cuda_geom_decode_splits(a.max_k) < w + 2) continue;
    for (int only = 0; only <= runs; only++) {
      const size_t ws = cu->attn_ws_bytes;
      cu->attn_ws_bytes = (size_t)c.H * (c.D + 2) * sizeof(float) * (w + 1);
      cu->decode_splits_only = only;
      cuda_geom_decode_plan_t plan;
      cuda_geom_decode_plan(c.H, c.D, cuda_geom_decode_splits(a.max_k), cu->attn_ws_bytes, &plan);
      snprintf(name, sizeof name, "attn_decode%s in windows of %d splits (carried merge) = whole bits %s %s",
               only ? " (split kernel)" : "", plan.window, what, cn);
      std::vector<float> win = run(t, t->be->attn_decode, x, n_out);
      cu->attn_ws_bytes = ws;
      cu->decode_splits_only = 0;
      char rn[96];
      snprintf(rn, sizeof rn, "attn_decode small workspace: windows of %d splits, carried", w);
      gt_result(t, rn, plan.carry == 1 && plan.window == w, "plan: window %d, carry %d", plan.window, plan.carry);
      gt_check_same(t, name, win.data(), dec.data(), n_out * 4);
    }
  }

  /* The longest sequence alone. */
  int b = 0;
  for (int i = 1; i < n; i++) b = cs[i] > cs[b] ? i : b;
  kern_attn_args_t y = x;
  y.n_seqs = 1;
  y.q = d.q + (size_t)b * c.H * c.D;
  y.block_table = d.bt + (size_t)b * a.mbps;
  y.cache_seqlens = d.seqlens + b;
  y.k_new = d.k_new + (size_t)b * row, y.v_new = d.v_new + (size_t)b * row;
  std::vector<float> alone = run(t, t->be->attn_decode, y, (size_t)c.H * c.D);
  snprintf(name, sizeof name, "attn_decode sequence alone = in batch %s %s", what, cn);
  gt_check_same(t, name, alone.data(), &dec[(size_t)b * c.H * c.D], (size_t)c.H * c.D * 4);
  release(t, d);
}

/* Padding rows (cache_seqlens -1, kern.h: a captured step's rows past the
 * live ones) between and after live rows: their output is exactly zero,
 * they write nothing into the cache, their block-table rows (here out of
 * range, so a read would fault under memcheck) are never read, and the live
 * rows keep the bits they have in a batch without padding. */
static void check_decode_padded(gt_t *t, attn_cfg_t c) {
  char cn[80], name[192];
  cfg_name(c, cn, sizeof cn);
  const std::vector<int> cs = {5, 300, c.BS - 1};
  const int live[] = {0, 2, 5}, np = 7; /* padded batch: live rows at 0, 2, 5; rows 1, 3, 4, 6 pad */
  const int n = (int)cs.size();
  std::vector<int> ql(n, 1), kl(n);
  for (int b = 0; b < n; b++) kl[b] = cs[b] + 1;
  acase_t a;
  build(t, a, c, ql, kl, NULL, 0, 0, &cs);
  dcase_t d;
  upload(t, a, d);
  const size_t row = (size_t)c.HKV * c.D, qrow = (size_t)c.H * c.D;
  std::vector<float> k_new, v_new;
  upload_new(t, a, cs, d, k_new, v_new);
  kern_attn_args_t x = args_of(a, d);
  const std::vector<float> dec = run(t, t->be->attn_decode, x, (size_t)n * qrow);
  std::vector<uint16_t> kc_live(a.kc.size()), vc_live(a.vc.size()), got_c(a.kc.size());
  gt_get(t, kc_live.data(), d.kc, kc_live.size() * 2);
  gt_get(t, vc_live.data(), d.vc, vc_live.size() * 2);

  /* the padded batch: pad rows get random q, k_new, v_new and a block-table
   * row of huge page numbers */
  std::vector<float> pq((size_t)np * qrow), pk((size_t)np * row), pv((size_t)np * row);
  gt_normal(t, pq.data(), pq.size(), 1.0f);
  gt_normal(t, pk.data(), pk.size(), 1.0f);
  gt_normal(t, pv.data(), pv.size(), 1.0f);
  std::vector<int32_t> pcs(np, -1), pbt((size_t)np * a.mbps, 0x3fffffff);
  for (int i = 0; i < n; i++) {
    const int r = live[i];
    pcs[r] = cs[i];
    memcpy(&pq[(size_t)r * qrow], &a.q[(size_t)i * qrow], qrow * 4);
    memcpy(&pk[(size_t)r * row], &k_new[(size_t)i * row], row * 4);
    memcpy(&pv[(size_t)r * row], &v_new[(size_t)i * row], row * 4);
    memcpy(&pbt[(size_t)r * a.mbps], &a.bt[(size_t)i * a.mbps], (size_t)a.mbps * 4);
  }
  float *dq = (float *)gt_dev_from(t, pq.data(), pq.size() * 4), *dout = (float *)gt_dev(t, pq.size() * 4);
  float *dk = (float *)gt_dev_from(t, pk.data(), pk.size() * 4), *dv = (float *)gt_dev_from(t, pv.data(), pv.size() * 4);
  int32_t *dcs = (int32_t *)gt_dev_from(t, pcs.data(), pcs.size() * 4);
  int32_t *dbt = (int32_t *)gt_dev_from(t, pbt.data(), pbt.size() * 4);
  kern_attn_args_t y = x;
  y.n_seqs = np, y.q = dq, y.out = dout, y.k_new = dk, y.v_new = dv, y.cache_seqlens = dcs, y.block_table = dbt;
  y.total_q = np;
  const std::vector<float> got = run(t, t->be->attn_decode, y, pq.size());
  int zeros = 1;
  for (int r = 0; r < np; r++) {
    if (pcs[r] >= 0) continue;
    for (size_t e = 0; e < qrow; e++) zeros &= got[(size_t)r * qrow + e] == 0.0f;
  }
  snprintf(name, sizeof name, "attn_decode padding rows give zeros %s", cn);
  gt_result(t, name, zeros, "%d of %d rows are padding", np - n, np);
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "attn_decode live row %d between padding = unpadded bits %s", live[i], cn);
    gt_check_same(t, name, &got[(size_t)live[i] * qrow], &dec[(size_t)i * qrow], qrow * 4);
  }
  gt_get(t, got_c.data(), d.kc, got_c.size() * 2);
  snprintf(name, sizeof name, "attn_decode padding rows write no K %s", cn);
  gt_check_same(t, name, got_c.data(), kc_live.data(), got_c.size() * 2);
  gt_get(t, got_c.data(), d.vc, got_c.size() * 2);
  snprintf(name, sizeof name, "attn_decode padding rows write no V %s", cn);
  gt_check_same(t, name, got_c.data(), vc_live.data(), got_c.size() * 2);
  void *all[] = {dq, dout, dk, dv, dcs, dbt};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gt_free(t, all[i]);
  release(t, d);
}

void gt_check_attn(gt_t *t) {
  std::vector<attn_cfg_t> cfgs;
  const int Ds[] = {64, 128}, BSs[] = {16, 32};
  const int HH[][2] = {{2, 2}, {8, 2}, {8, 1}}; /* GQA ratios 1, 4, 8 */
  for (int di = 0; di < 2; di++)
    for (int hi = 0; hi < 3; hi++)
      for (int bi = 0; bi < 2; bi++) {
        if (t->quick && (hi == 1 || bi == 1)) continue;
        cfgs.push_back({Ds[di], HH[hi][0], HH[hi][1], BSs[bi], 0, 0, 0});
      }
  cfgs.push_back({128, 24, 1, 16, 0, 0, 0}); /* ratio 24: two head groups in decode */
  /* head_dim 256 (Gemma 2/3, Qwen3.5's gated attention), where the GPU's
   * blocks may take its 198 KiB of shared memory (sm_90; kernels/cuda_geom.h) */
  char why[200];
  const int d256 = cuda_geom_attn_smem_fits(256, kern_cuda(t->be)->smem_optin, why, sizeof why) == 0;
  if (d256) {
    cfgs.push_back({256, 8, 2, 16, 0, 0, 0});
    if (!t->quick) cfgs.push_back({256, 4, 1, 32, 0, 0, 0});
  } else {
    gt_warn(t, "attn head_dim 256", "not run: %s", why);
  }

  /* The spec's examples. */
  const int32_t spec_bt[] = {2, -1, -1, -1, 0, 1, -1, -1, 3, 5, 6, -1};
  for (const attn_cfg_t &c : cfgs) {
    check_varlen(t, "spec example q[10,3,1] k[0,1,7]", c, {10, 3, 1}, {0, 1, 7}, 0);
    if (c.BS == 32) check_decode(t, "spec example cache_seqlens[30,32,70]", c, {30, 32, 70}, spec_bt, 4, 7);
  }
  /* Lengths around pages and splits, 4096+, q_len > k_len, empty sequences. */
  for (const attn_cfg_t &c : cfgs) {
    const int p = c.BS;
    check_decode(t, "cache_seqlens [0,1,p-1,p,p+1,255,256,257,4100]", c,
                 {0, 1, p - 1, p, p + 1, 255, 256, 257, 4100}, NULL, 0, 0);
    /* the run kernel's edges: 4 splits (1,024 keys) a run, at most 4
     * finished by their run alone, later runs split by split */
    if (!t->quick || &c == &cfgs[0])
      check_decode(t, "run edges: cache_seqlens [767,1022,1023,1024,1279,2047,2048,5000]", c,
                   {767, 1022, 1023, 1024, 1279, 2047, 2048, 5000}, NULL, 0, 0);
    check_varlen(t, "lengths sweep", c,
                 {1, p - 1, p, p + 1, 9, 5, 0, 37, 130, 64, t->quick ? 40 : 300},
                 {1, p - 1, p, p + 1, 4, 0, 5, 300, 130, 4100, t->quick ? 90 : 600}, 0);
  }
  /* Sliding windows smaller than, equal to and larger than the sequences,
   * on tile (64), page and split (256) edges. */
  const int windows[] = {1, 16, 17, 64, 65, 256, 257, 5000};
  for (int w : windows) {
    const attn_cfg_t c = {w % 2 ? 64 : 128, 8, 2, 16, w, w == 64 ? 1.5f : 0.0f, 0}; /* and Gemma 2's soft-cap */
    check_decode(t, "window: cache_seqlens [0,1,15,16,17,255,256,257,600]", c,
                 {0, 1, 15, 16, 17, 255, 256, 257, 600}, NULL, 0, 0);
    check_varlen(t, "window: lengths", c, {1, 17, 300, 9, 64}, {1, 17, 300, 700, 64}, 0);
  }
  if (d256) { /* Gemma 3's sliding layers: a window of 512 keys */
    const attn_cfg_t c = {256, 8, 1, 16, 512, 0.0f, 0};
    check_decode(t, "window: cache_seqlens [0,300,511,512,513,1300]", c, {0, 300, 511, 512, 513, 1300}, NULL, 0, 0);
    check_varlen(t, "window: lengths", c, {1, 600, 9}, {1, 600, 1300}, 0);
  }
  /* Learned sinks (gpt-oss: 64 query / 8 KV heads of 64, sliding layers of
   * 128 keys beside full ones): joined once after the merge, so decode,
   * varlen_paged and varlen keep their common bits, windows of splits too. */
  for (int w : {0, 128}) {
    const attn_cfg_t c = {64, 8, 1, 16, w, 0.0f, 1};
    check_decode(t, "sinks: cache_seqlens [0,1,15,255,256,257,600,1100]", c, {0, 1, 15, 255, 256, 257, 600, 1100},
                 NULL, 0, 0);
    check_varlen(t, "sinks: lengths", c, {1, 17, 300, 9, 0, 64}, {1, 17, 300, 700, 3, 64}, 0);
  }
  check_decode(t, "sinks: cache_seqlens [5,300]", {128, 24, 1, 16, 0, 0.0f, 1}, {5, 300}, NULL, 0, 0);

  /* Padding rows (captured decode steps). */
  check_decode_padded(t, {64, 8, 2, 16, 0, 0, 0});
  check_decode_padded(t, {128, 24, 1, 32, 0, 0, 0});
  if (!t->quick) /* a long causal prefill: many row blocks and splits */
    check_varlen(t, "long prefill q=k=4100", {128, 8, 2, 16, 0, 0, 0}, {4100}, {4100}, 1);
}
