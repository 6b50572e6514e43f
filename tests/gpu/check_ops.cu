/* tests/gpu/check_ops.cu — the dense operations (RMSNorm, RoPE, SwiGLU, add,
 * bias add, row gather) and the KV cache write and gather against float64
 * references (f32 tolerance: rel L2 < 1e-4), plus determinism and row
 * independence where a kernel reduces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/gpu_test.cuh"

#define TOL_F32 1e-4

static void check_rmsnorm(gt_t *t, int n, int dim, int alias) {
  kern_backend_t *be = t->be;
  char name[96];
  snprintf(name, sizeof name, "rmsnorm n=%d dim=%d%s", n, dim, alias ? " in place" : "");
  const size_t nx = (size_t)n * dim;
  float *x = (float *)gt_malloc(nx * 4), *w = (float *)gt_malloc((size_t)dim * 4);
  float *got = (float *)gt_malloc(nx * 4), *got2 = (float *)gt_malloc(nx * 4);
  double *want = (double *)gt_malloc(nx * 8);
  gt_normal(t, x, nx, 2.0f);
  for (int i = 0; i < dim; i++) w[i] = 1.0f + 0.1f * (float)tu_normal(&t->rng);
  const float eps = 1e-5f;
  for (int r = 0; r < n; r++) {
    double ss = 0;
    for (int i = 0; i < dim; i++) ss += (double)x[(size_t)r * dim + i] * x[(size_t)r * dim + i];
    const double inv = 1.0 / sqrt(ss / dim + eps);
    for (int i = 0; i < dim; i++)
      want[(size_t)r * dim + i] = (double)x[(size_t)r * dim + i] * inv * w[i];
  }
  float *dx = (float *)gt_dev_from(t, x, nx * 4), *dw = (float *)gt_dev_from(t, w, (size_t)dim * 4);
  float *dy = alias ? dx : (float *)gt_dev(t, nx * 4);
  if (!alias) gt_poison(t, dy, nx);
  be->rmsnorm(be, dy, dx, dw, n, dim, eps);
  gt_get(t, got, dy, nx * 4);
  gt_check_close(t, name, got, want, nx, TOL_F32);
  if (!alias) {
    gt_poison(t, dy, nx);
    be->rmsnorm(be, dy, dx, dw, n, dim, eps);
    gt_get(t, got2, dy, nx * 4);
    snprintf(name, sizeof name, "rmsnorm n=%d dim=%d deterministic", n, dim);
    gt_check_same(t, name, got, got2, nx * 4);
    /* The last row alone gives the same bits as inside the batch. */
    gt_poison(t, dy, dim);
    be->rmsnorm(be, dy, dx + (size_t)(n - 1) * dim, dw, 1, dim, eps);
    gt_get(t, got2, dy, (size_t)dim * 4);
    snprintf(name, sizeof name, "rmsnorm n=%d dim=%d row alone = row in batch", n, dim);
    gt_check_same(t, name, got + (size_t)(n - 1) * dim, got2, (size_t)dim * 4);
    gt_free(t, dy);
  }
  gt_free(t, dx);
  gt_free(t, dw);
  free(x), free(w), free(got), free(got2), free(want);
}

static void check_rope(gt_t *t, int n, int n_heads, int head_dim, int rot_dim, int neox,
                       double base) {
  kern_backend_t *be = t->be;
  char name[128];
  snprintf(name, sizeof name, "rope n=%d heads=%d head_dim=%d rot=%d neox=%d", n, n_heads, head_dim,
           rot_dim, neox);
  const int half = rot_dim / 2;
  const size_t nx = (size_t)n * n_heads * head_dim;
  float *x = (float *)gt_malloc(nx * 4), *got = (float *)gt_malloc(nx * 4);
  float *inv = (float *)gt_malloc((size_t)half * 4);
  int32_t *pos = (int32_t *)gt_malloc((size_t)n * 4);
  double *want = (double *)gt_malloc(nx * 8);
  gt_normal(t, x, nx, 1.0f);
  for (int p = 0; p < half; p++) inv[p] = (float)pow(base, -2.0 * p / rot_dim);
  for (int i = 0; i < n; i++) pos[i] = i == 0 ? 0 : (int32_t)tu_below(&t->rng, 131072);
  for (int i = 0; i < n; i++)
    for (int h = 0; h < n_heads; h++) {
      const float *xh = x + ((size_t)i * n_heads + h) * head_dim;
      double *wh = want + ((size_t)i * n_heads + h) * head_dim;
      for (int d = 0; d < head_dim; d++) wh[d] = xh[d];
      for (int p = 0; p < half; p++) {
        const double a = (double)pos[i] * (double)inv[p], c = cos(a), s = sin(a);
        const int i0 = neox ? p : 2 * p, i1 = neox ? p + half : 2 * p + 1;
        wh[i0] = xh[i0] * c - xh[i1] * s;
        wh[i1] = xh[i0] * s + xh[i1] * c;
      }
    }
  float *dx = (float *)gt_dev_from(t, x, nx * 4);
  float *dinv = (float *)gt_dev_from(t, inv, (size_t)half * 4);
  int32_t *dpos = (int32_t *)gt_dev_from(t, pos, (size_t)n * 4);
  be->rope(be, dx, dpos, n, n_heads, head_dim, rot_dim, dinv, neox);
  gt_get(t, got, dx, nx * 4);
  gt_check_close(t, name, got, want, nx, TOL_F32);
  if (rot_dim < head_dim) { /* the tail is untouched, bit for bit */
    int same = 1;
    for (size_t r = 0; r < (size_t)n * n_heads; r++)
      if (memcmp(got + r * head_dim + rot_dim, x + r * head_dim + rot_dim,
                 (size_t)(head_dim - rot_dim) * 4))
        same = 0;
    snprintf(name, sizeof name, "rope head_dim=%d rot=%d leaves elements past rot_dim", head_dim,
             rot_dim);
    gt_result(t, name, same, same ? "unchanged" : "changed");
  }
  gt_free(t, dx), gt_free(t, dinv), gt_free(t, dpos);
  free(x), free(got), free(inv), free(pos), free(want);
}

/* swiglu and add on count elements, offset floats into the buffers (an
 * offset of 1 forces the scalar path); alias: y is the first input. */
static void check_elementwise(gt_t *t, int64_t count, int offset, int alias) {
  kern_backend_t *be = t->be;
  char name[96];
  const size_t n = (size_t)count + offset;
  float *a = (float *)gt_malloc(n * 4), *b = (float *)gt_malloc(n * 4), *got = (float *)gt_malloc(n * 4);
  double *want = (double *)gt_malloc(n * 8);
  gt_normal(t, a, n, 3.0f);
  gt_normal(t, b, n, 1.0f);
  float *da = (float *)gt_dev(t, n * 4), *db = (float *)gt_dev_from(t, b, n * 4);
  float *dy = alias ? da : (float *)gt_dev(t, n * 4);

  gt_put(t, da, a, n * 4);
  if (!alias) gt_poison(t, dy, n);
  be->swiglu(be, dy + offset, da + offset, db + offset, count);
  gt_get(t, got, dy, n * 4);
  for (int64_t i = 0; i < count; i++) {
    const double g = a[offset + i];
    want[i] = g / (1.0 + exp(-g)) * b[offset + i];
  }
  snprintf(name, sizeof name, "swiglu count=%lld offset=%d%s", (long long)count, offset,
           alias ? " in place" : "");
  gt_check_close(t, name, got + offset, want, (size_t)count, TOL_F32);

  gt_put(t, da, a, n * 4);
  if (!alias) gt_poison(t, dy, n);
  be->add(be, dy + offset, da + offset, db + offset, count);
  gt_get(t, got, dy, n * 4);
  for (int64_t i = 0; i < count; i++) want[i] = (double)a[offset + i] + b[offset + i];
  snprintf(name, sizeof name, "add count=%lld offset=%d%s", (long long)count, offset,
           alias ? " in place" : "");
  gt_check_close(t, name, got + offset, want, (size_t)count, TOL_F32);

  gt_free(t, da), gt_free(t, db);
  if (!alias) gt_free(t, dy);
  free(a), free(b), free(got), free(want);
}

static void check_add_bias_gather(gt_t *t, int n, int dim) {
  kern_backend_t *be = t->be;
  char name[96];
  const size_t nx = (size_t)n * dim;
  float *x = (float *)gt_malloc(nx * 4), *bias = (float *)gt_malloc((size_t)dim * 4);
  float *got = (float *)gt_malloc(nx * 4);
  double *want = (double *)gt_malloc(nx * 8);
  gt_normal(t, x, nx, 1.0f);
  gt_normal(t, bias, dim, 0.5f);
  float *dx = (float *)gt_dev_from(t, x, nx * 4), *db = (float *)gt_dev_from(t, bias, (size_t)dim * 4);
  be->add_bias(be, dx, db, n, dim);
  gt_get(t, got, dx, nx * 4);
  for (size_t i = 0; i < nx; i++) want[i] = (double)x[i] + bias[i % dim];
  snprintf(name, sizeof name, "add_bias n=%d dim=%d", n, dim);
  gt_check_close(t, name, got, want, nx, TOL_F32);

  /* gather_rows from the (biased) rows: indices with repeats, any order */
  const int n_idx = n + 3;
  int32_t *idx = (int32_t *)gt_malloc((size_t)n_idx * 4);
  for (int i = 0; i < n_idx; i++) idx[i] = (int32_t)tu_below(&t->rng, (uint64_t)n);
  int32_t *didx = (int32_t *)gt_dev_from(t, idx, (size_t)n_idx * 4);
  float *dy = (float *)gt_dev(t, (size_t)n_idx * dim * 4);
  gt_poison(t, dy, (size_t)n_idx * dim);
  be->gather_rows(be, dy, dx, didx, n_idx, dim);
  float *rows = (float *)gt_malloc((size_t)n_idx * dim * 4), *expect = (float *)gt_malloc((size_t)n_idx * dim * 4);
  gt_get(t, rows, dy, (size_t)n_idx * dim * 4);
  for (int i = 0; i < n_idx; i++) memcpy(expect + (size_t)i * dim, got + (size_t)idx[i] * dim, (size_t)dim * 4);
  snprintf(name, sizeof name, "gather_rows n_idx=%d dim=%d", n_idx, dim);
  gt_check_same(t, name, rows, expect, (size_t)n_idx * dim * 4);
  gt_free(t, dx), gt_free(t, db), gt_free(t, didx), gt_free(t, dy);
  free(x), free(bias), free(got), free(want), free(idx), free(rows), free(expect);
}

/* kv_write into a cache pre-filled with a random bf16 pattern: written slots
 * hold bf16(k), every other slot is unchanged, slot -1 rows are skipped. */
static void check_kv_write(gt_t *t, int num_slots, int n, int kv_dim) {
  kern_backend_t *be = t->be;
  char name[96];
  const size_t cache_n = (size_t)num_slots * kv_dim, rows_n = (size_t)n * kv_dim;
  uint16_t *kc = (uint16_t *)gt_malloc(cache_n * 2), *vc = (uint16_t *)gt_malloc(cache_n * 2);
  uint16_t *got = (uint16_t *)gt_malloc(cache_n * 2);
  for (size_t i = 0; i < cache_n; i++) kc[i] = (uint16_t)tu_next(&t->rng), vc[i] = (uint16_t)tu_next(&t->rng);
  float *k = (float *)gt_malloc(rows_n * 4), *v = (float *)gt_malloc(rows_n * 4);
  gt_normal(t, k, rows_n, 1.0f);
  gt_normal(t, v, rows_n, 1.0f);
  int32_t *perm = (int32_t *)gt_malloc((size_t)num_slots * 4), *slots = (int32_t *)gt_malloc((size_t)n * 4);
  for (int i = 0; i < num_slots; i++) perm[i] = i;
  tu_shuffle_i32(&t->rng, perm, (size_t)num_slots);
  for (int i = 0; i < n; i++) slots[i] = i % 7 == 3 ? -1 : perm[i];
  void *dk = gt_dev_from(t, kc, cache_n * 2), *dv = gt_dev_from(t, vc, cache_n * 2);
  float *dkr = (float *)gt_dev_from(t, k, rows_n * 4), *dvr = (float *)gt_dev_from(t, v, rows_n * 4);
  int32_t *ds = (int32_t *)gt_dev_from(t, slots, (size_t)n * 4);
  be->kv_write(be, dk, dv, dkr, dvr, ds, n, kv_dim);
  for (int i = 0; i < n; i++)
    if (slots[i] >= 0)
      for (int c = 0; c < kv_dim; c++) {
        kc[(size_t)slots[i] * kv_dim + c] = gt_bf16(k[(size_t)i * kv_dim + c]);
        vc[(size_t)slots[i] * kv_dim + c] = gt_bf16(v[(size_t)i * kv_dim + c]);
      }
  gt_get(t, got, dk, cache_n * 2);
  snprintf(name, sizeof name, "kv_write k n=%d kv_dim=%d", n, kv_dim);
  gt_check_same(t, name, got, kc, cache_n * 2);
  gt_get(t, got, dv, cache_n * 2);
  snprintf(name, sizeof name, "kv_write v n=%d kv_dim=%d", n, kv_dim);
  gt_check_same(t, name, got, vc, cache_n * 2);
  gt_free(t, dk), gt_free(t, dv), gt_free(t, dkr), gt_free(t, dvr), gt_free(t, ds);
  free(kc), free(vc), free(got), free(k), free(v), free(perm), free(slots);
}

/* kv_gather: each sequence's keys out of shuffled pages, packed. */
static void check_kv_gather(gt_t *t, int bs, int n_kv, int hd) {
  kern_backend_t *be = t->be;
  char name[96];
  const int lens[] = {0, 1, bs - 1, bs, bs + 1, 3 * bs + 5};
  const int n_seqs = (int)(sizeof lens / sizeof *lens), kv_dim = n_kv * hd;
  int mbps = 0, total_blocks = 0, total_k = 0;
  for (int b = 0; b < n_seqs; b++) {
    const int nb = (lens[b] + bs - 1) / bs;
    mbps = nb > mbps ? nb : mbps;
    total_blocks += nb;
    total_k += lens[b];
  }
  mbps += 1;
  const int num_blocks = total_blocks + 3;
  int32_t *perm = (int32_t *)gt_malloc((size_t)num_blocks * 4);
  for (int i = 0; i < num_blocks; i++) perm[i] = i;
  tu_shuffle_i32(&t->rng, perm, (size_t)num_blocks);
  int32_t *bt = (int32_t *)gt_malloc((size_t)n_seqs * mbps * 4), cu_k[16] = {0};
  int used = 0;
  for (int b = 0; b < n_seqs; b++) {
    for (int i = 0; i < mbps; i++)
      bt[b * mbps + i] = i < (lens[b] + bs - 1) / bs ? perm[used++] : -1;
    cu_k[b + 1] = cu_k[b] + lens[b];
  }
  const size_t cache_n = (size_t)num_blocks * bs * kv_dim;
  uint16_t *kc = (uint16_t *)gt_malloc(cache_n * 2), *vc = (uint16_t *)gt_malloc(cache_n * 2);
  for (size_t i = 0; i < cache_n; i++)
    kc[i] = gt_bf16((float)tu_normal(&t->rng)), vc[i] = gt_bf16((float)tu_normal(&t->rng));
  uint16_t *want_k = (uint16_t *)gt_malloc((size_t)total_k * kv_dim * 2 + 2);
  uint16_t *want_v = (uint16_t *)gt_malloc((size_t)total_k * kv_dim * 2 + 2);
  for (int b = 0; b < n_seqs; b++)
    for (int j = 0; j < lens[b]; j++) {
      const size_t slot = (size_t)bt[b * mbps + j / bs] * bs + j % bs;
      memcpy(want_k + (size_t)(cu_k[b] + j) * kv_dim, kc + slot * kv_dim, (size_t)kv_dim * 2);
      memcpy(want_v + (size_t)(cu_k[b] + j) * kv_dim, vc + slot * kv_dim, (size_t)kv_dim * 2);
    }
  void *dkc = gt_dev_from(t, kc, cache_n * 2), *dvc = gt_dev_from(t, vc, cache_n * 2);
  int32_t *dbt = (int32_t *)gt_dev_from(t, bt, (size_t)n_seqs * mbps * 4);
  int32_t *dcu = (int32_t *)gt_dev_from(t, cu_k, (size_t)(n_seqs + 1) * 4);
  const size_t out_bytes = (size_t)total_k * kv_dim * 2;
  void *dko = gt_dev(t, out_bytes), *dvo = gt_dev(t, out_bytes);
  gt_poison(t, (float *)dko, out_bytes / 4), gt_poison(t, (float *)dvo, out_bytes / 4);
  kern_attn_args_t a;
  memset(&a, 0, sizeof a);
  a.n_seqs = n_seqs, a.n_heads = n_kv, a.n_kv_heads = n_kv, a.head_dim = hd;
  a.cu_seq_lens_k = dcu, a.max_seqlen_k = 3 * bs + 5;
  a.k_cache = dkc, a.v_cache = dvc, a.block_size = bs, a.block_table = dbt, a.max_blocks_per_seq = mbps;
  be->kv_gather(be, dko, dvo, &a);
  uint16_t *got = (uint16_t *)gt_malloc(out_bytes);
  gt_get(t, got, dko, out_bytes);
  snprintf(name, sizeof name, "kv_gather k block_size=%d kv_dim=%d", bs, kv_dim);
  gt_check_same(t, name, got, want_k, out_bytes);
  gt_get(t, got, dvo, out_bytes);
  snprintf(name, sizeof name, "kv_gather v block_size=%d kv_dim=%d", bs, kv_dim);
  gt_check_same(t, name, got, want_v, out_bytes);
  gt_free(t, dkc), gt_free(t, dvc), gt_free(t, dbt), gt_free(t, dcu), gt_free(t, dko), gt_free(t, dvo);
  free(perm), free(bt), free(kc), free(vc), free(want_k), free(want_v), free(got);
}

void gt_check_ops(gt_t *t) {
  check_rmsnorm(t, 1, 576, 0);
  check_rmsnorm(t, 37, 4096, 0);
  check_rmsnorm(t, 37, 4096, 1);
  check_rmsnorm(t, 5, 1001, 0); /* scalar path */
  check_rope(t, 19, 5, 64, 64, 0, 10000.0);
  check_rope(t, 19, 5, 64, 64, 1, 10000.0);
  check_rope(t, 7, 3, 128, 64, 0, 500000.0);
  check_rope(t, 7, 3, 128, 64, 1, 1000000.0);
  check_rope(t, 3, 32, 128, 128, 0, 500000.0);
  check_elementwise(t, 4099, 0, 0);
  check_elementwise(t, 4099, 0, 1);
  check_elementwise(t, 1001, 1, 0); /* unaligned: scalar path */
  check_add_bias_gather(t, 13, 96);
  check_add_bias_gather(t, 9, 7); /* scalar path */
  check_kv_write(t, 300, 100, 256);
  check_kv_write(t, 50, 20, 6); /* scalar path */
  check_kv_gather(t, 16, 2, 64);
  check_kv_gather(t, 32, 8, 128);
}
