/* tests/gpu/check_join.cu — joined projections (kern.h weight_join and
 * glu_joined; model/model_join.c), part of the weights group:
 *   - for every weight type (and a mixed Q4_K/Q4_K/Q6_K one, Q4_K_M's
 *     QKV): the joined bf16 matrix is the parts' matrices stacked, bit for
 *     bit; its matmul matches float64 over the stacked reference; the parts
 *     (views now) keep their bits; release in either order;
 *   - a joined matmul's column blocks against the parts' matmuls: the same
 *     bits are not promised (cuBLAS picks kernels per shape), so reported;
 *   - glu_joined = swiglu / geglu of the separated halves, bit for bit, and
 *     float64 within f32 rounding;
 *   - refusals leave the parts as they were;
 *   - rmsnorm_matmul (the norm writing the GEMM's bf16 input) = rmsnorm,
 *     then matmul, bit for bit, and float64 within bf16 rounding. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/gpu_test.cuh"

enum { COLS = 512, N_MAX = 64 };

/* The bf16 device matrix of a prepared weight, downloaded (rows × cols × 2 bytes). */
static uint16_t *download_bf16(gt_t *t, const kern_weight_t *w) {
  const size_t bytes = (size_t)(w->rows * w->cols) * 2;
  uint16_t *h = (uint16_t *)gt_malloc(bytes);
  gt_get(t, h, w->impl, bytes);
  return h;
}

static void check_join_types(gt_t *t, const kern_type_t types[3], const char *label, int release_out_first) {
  kern_backend_t *be = t->be;
  const int64_t rows[3] = {64, 16, 16}, total = 96;
  char name[160];
  kern_weight_t w[3], out;
  kern_weight_t *parts[3] = {&w[0], &w[1], &w[2]};
  double *ref = (double *)gt_malloc((size_t)(total * COLS) * 8);
  uint16_t *before[3];
  int ok = 1;
  for (int i = 0, at = 0; i < 3; at += (int)rows[i], i++) {
    size_t bytes;
    uint8_t *raw = gt_make_weight(t, types[i], rows[i], COLS, &bytes);
    const int64_t rb = kern_type_row_bytes(types[i], COLS);
    for (int64_t r = 0; r < rows[i]; r++) gt_ref_dequant_row(types[i], raw + r * rb, COLS, ref + (at + r) * COLS);
    ok &= be->weight_init(be, &w[i], types[i], rows[i], COLS, raw) == 0;
    free(raw);
    before[i] = ok ? download_bf16(t, &w[i]) : NULL;
  }
  snprintf(name, sizeof name, "weight_join %s: parts prepared", label);
  if (!ok) {
    gt_result(t, name, 0, "weight_init failed");
    free(ref);
    return;
  }
  /* the parts' matmuls before the join, for the views' bits after it */
  float *x = (float *)gt_malloc((size_t)N_MAX * COLS * 4);
  gt_normal(t, x, (size_t)N_MAX * COLS, 1.0f);
  float *dx = (float *)gt_dev_from(t, x, (size_t)N_MAX * COLS * 4);
  float *dy = (float *)gt_dev(t, (size_t)N_MAX * total * 4);
  float *part_y[3];
  for (int i = 0; i < 3; i++) {
    part_y[i] = (float *)gt_malloc((size_t)N_MAX * rows[i] * 4);
    be->matmul(be, dy, dx, &w[i], 7);
    gt_get(t, part_y[i], dy, (size_t)7 * rows[i] * 4);
  }
  const void *impl0 = w[0].impl;
  const int rc = be->weight_join(be, &out, parts, 3);
  snprintf(name, sizeof name, "weight_join %s", label);
  gt_result(t, name, rc == 0 && out.rows == total && out.cols == COLS, "returned %d, %lld x %lld", rc,
            (long long)out.rows, (long long)out.cols);
  if (rc != 0) {
    for (int i = 0; i < 3; i++) be->weight_release(be, &w[i]), free(before[i]), free(part_y[i]);
    gt_free(t, dx), gt_free(t, dy);
    free(ref), free(x);
    return;
  }
  const int views = w[0].impl == out.impl && (const uint16_t *)w[1].impl == (const uint16_t *)out.impl + 64 * COLS &&
                    (const uint16_t *)w[2].impl == (const uint16_t *)out.impl + 80 * COLS && w[0].impl != impl0;
  snprintf(name, sizeof name, "weight_join %s: the parts are views at rows 0, 64, 80", label);
  gt_result(t, name, views, "impl %p %p %p, joined %p", w[0].impl, w[1].impl, w[2].impl, out.impl);
  /* fused = unfused bits: the joined matrix is the parts' matrices stacked */
  uint16_t *joined = download_bf16(t, &out);
  int same = 1;
  for (int i = 0, at = 0; i < 3; at += (int)rows[i], i++)
    same &= memcmp(joined + (int64_t)at * COLS, before[i], (size_t)(rows[i] * COLS) * 2) == 0;
  snprintf(name, sizeof name, "weight_join %s: joined bf16 = the parts' bf16 stacked", label);
  gt_result(t, name, same, same ? "bit for bit" : "differs");
  /* the joined matmul against float64 over the stacked reference */
  float *got = (float *)gt_malloc((size_t)N_MAX * total * 4);
  double *want = (double *)gt_malloc((size_t)N_MAX * total * 8);
  gt_ref_matmul(x, ref, N_MAX, total, COLS, want);
  const int ns[] = {1, 7, 64};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    gt_poison(t, dy, (size_t)ns[k] * total);
    be->matmul(be, dy, dx, &out, ns[k]);
    gt_get(t, got, dy, (size_t)ns[k] * total * 4);
    snprintf(name, sizeof name, "matmul joined %s n=%d", label, ns[k]);
    gt_check_close(t, name, got, want, (size_t)ns[k] * total, 1e-2);
  }
  /* n = 7: the joined output's column blocks against the parts' outputs */
  gt_poison(t, dy, (size_t)7 * total);
  be->matmul(be, dy, dx, &out, 7);
  gt_get(t, got, dy, (size_t)7 * total * 4);
  int cols_same = 1;
  for (int i = 0, at = 0; i < 3; at += (int)rows[i], i++)
    for (int r = 0; r < 7; r++)
      cols_same &= memcmp(got + (int64_t)r * total + at, part_y[i] + (int64_t)r * rows[i], (size_t)rows[i] * 4) == 0;
  snprintf(name, sizeof name, "matmul joined %s: column blocks vs the parts' GEMMs", label);
  if (cols_same)
    gt_result(t, name, 1, "bit for bit");
  else
    gt_warn(t, name, "differ in the last bits (cuBLAS picks kernels per shape: not promised, model_join.c)");
  /* the views' matmuls keep their bits */
  int views_same = 1;
  for (int i = 0; i < 3; i++) {
    be->matmul(be, dy, dx, &w[i], 7);
    gt_get(t, got, dy, (size_t)7 * rows[i] * 4);
    views_same &= memcmp(got, part_y[i], (size_t)7 * rows[i] * 4) == 0;
  }
  snprintf(name, sizeof name, "matmul of the parts after weight_join %s", label);
  gt_result(t, name, views_same, views_same ? "same bits as before the join" : "differ");
  /* a view joins no more */
  kern_weight_t again;
  kern_weight_t *two[2] = {&w[1], &w[2]};
  const int rc2 = be->weight_join(be, &again, two, 2);
  snprintf(name, sizeof name, "weight_join of views %s refused", label);
  gt_result(t, name, rc2 == -EINVAL && w[1].impl == (const uint16_t *)out.impl + 64 * COLS, "returned %d", rc2);
  if (release_out_first) be->weight_release(be, &out);
  for (int i = 0; i < 3; i++) be->weight_release(be, &w[i]);
  if (!release_out_first) be->weight_release(be, &out);
  snprintf(name, sizeof name, "weight_release after weight_join %s (%s first)", label,
           release_out_first ? "joined" : "parts");
  gt_result(t, name, !out.impl && !w[0].impl && !w[1].impl && !w[2].impl, "impls cleared");
  for (int i = 0; i < 3; i++) free(before[i]), free(part_y[i]);
  gt_free(t, dx), gt_free(t, dy);
  free(ref), free(x), free(joined), free(got), free(want);
}

/* glu_joined against the separated halves through swiglu / geglu (bits)
 * and float64. ff odd: no vector path anywhere. */
static void check_glu_joined(gt_t *t, int n, int64_t ff) {
  kern_backend_t *be = t->be;
  char name[128];
  const size_t nx = (size_t)n * 2 * ff, ny = (size_t)n * ff;
  float *x = (float *)gt_malloc(nx * 4), *g = (float *)gt_malloc(ny * 4), *u = (float *)gt_malloc(ny * 4);
  float *got = (float *)gt_malloc(ny * 4), *sep = (float *)gt_malloc(ny * 4);
  double *want = (double *)gt_malloc(ny * 8);
  gt_normal(t, x, nx, 2.0f);
  for (int r = 0; r < n; r++)
    for (int64_t i = 0; i < ff; i++) g[r * ff + i] = x[r * 2 * ff + i], u[r * ff + i] = x[r * 2 * ff + ff + i];
  float *dx = (float *)gt_dev_from(t, x, nx * 4), *dg = (float *)gt_dev_from(t, g, ny * 4);
  float *du = (float *)gt_dev_from(t, u, ny * 4), *dy = (float *)gt_dev(t, ny * 4);
  for (int gelu = 0; gelu < 2; gelu++) {
    for (size_t i = 0; i < ny; i++) {
      const double a = g[i];
      want[i] = (gelu ? 0.5 * a * (1.0 + tanh(sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a))) : a / (1.0 + exp(-a))) * u[i];
    }
    gt_poison(t, dy, ny);
    be->glu_joined(be, dy, dx, n, ff, gelu);
    gt_get(t, got, dy, ny * 4);
    snprintf(name, sizeof name, "glu_joined %s n=%d ff=%lld", gelu ? "geglu" : "swiglu", n, (long long)ff);
    gt_check_close(t, name, got, want, ny, 1e-5);
    gt_poison(t, dy, ny);
    (gelu ? be->geglu : be->swiglu)(be, dy, dg, du, (int64_t)ny);
    gt_get(t, sep, dy, ny * 4);
    snprintf(name, sizeof name, "glu_joined %s = %s of the halves", gelu ? "geglu" : "swiglu", gelu ? "geglu" : "swiglu");
    gt_check_same(t, name, got, sep, ny * 4);
  }
  gt_free(t, dx), gt_free(t, dg), gt_free(t, du), gt_free(t, dy);
  free(x), free(g), free(u), free(got), free(sep), free(want);
}

/* rmsnorm_matmul = rmsnorm into f32, then matmul, bit for bit (the norm
 * writes the GEMM's bf16 input directly), and against float64. dim % 4 !=
 * 0 takes the scalar norm (an F16 weight: no block size). */
static void check_rmsnorm_matmul(gt_t *t, kern_type_t type, int64_t rows, int64_t dim, int n) {
  kern_backend_t *be = t->be;
  char name[160];
  size_t bytes;
  uint8_t *raw = gt_make_weight(t, type, rows, dim, &bytes);
  const int64_t rb = kern_type_row_bytes(type, dim);
  double *ref = (double *)gt_malloc((size_t)(rows * dim) * 8), *want = (double *)gt_malloc((size_t)n * rows * 8);
  for (int64_t r = 0; r < rows; r++) gt_ref_dequant_row(type, raw + r * rb, dim, ref + r * dim);
  kern_weight_t w;
  if (be->weight_init(be, &w, type, rows, dim, raw) != 0) {
    gt_result(t, "rmsnorm_matmul: weight_init", 0, "failed");
    free(raw), free(ref), free(want);
    return;
  }
  const float eps = 1e-5f;
  float *x = (float *)gt_malloc((size_t)n * dim * 4), *nw = (float *)gt_malloc((size_t)dim * 4);
  float *normed = (float *)gt_malloc((size_t)n * dim * 4);
  gt_normal(t, x, (size_t)n * dim, 3.0f);
  gt_normal(t, nw, (size_t)dim, 1.0f);
  for (int i = 0; i < n; i++) { /* the float64 norm, rounded to f32 as the GEMM's reference input */
    double ss = 0;
    for (int64_t c = 0; c < dim; c++) ss += (double)x[i * dim + c] * x[i * dim + c];
    const double inv = 1.0 / sqrt(ss / (double)dim + eps);
    for (int64_t c = 0; c < dim; c++) normed[i * dim + c] = (float)(x[i * dim + c] * inv * nw[c]);
  }
  gt_ref_matmul(normed, ref, n, rows, dim, want);
  float *dx = (float *)gt_dev_from(t, x, (size_t)n * dim * 4), *dw = (float *)gt_dev_from(t, nw, (size_t)dim * 4);
  float *dh = (float *)gt_dev(t, (size_t)n * dim * 4), *dy = (float *)gt_dev(t, (size_t)n * rows * 4);
  float *fused = (float *)gt_malloc((size_t)n * rows * 4), *apart = (float *)gt_malloc((size_t)n * rows * 4);
  gt_poison(t, dy, (size_t)n * rows);
  be->rmsnorm_matmul(be, dy, dx, dw, eps, &w, n);
  gt_get(t, fused, dy, (size_t)n * rows * 4);
  snprintf(name, sizeof name, "rmsnorm_matmul %s n=%d rows=%lld dim=%lld", kern_type_name(type), n, (long long)rows,
           (long long)dim);
  gt_check_close(t, name, fused, want, (size_t)n * rows, 1e-2);
  be->rmsnorm(be, dh, dx, dw, n, (int)dim, eps);
  gt_poison(t, dy, (size_t)n * rows);
  be->matmul(be, dy, dh, &w, n);
  gt_get(t, apart, dy, (size_t)n * rows * 4);
  snprintf(name, sizeof name, "rmsnorm_matmul dim=%lld n=%d = rmsnorm then matmul", (long long)dim, n);
  gt_check_same(t, name, fused, apart, (size_t)n * rows * 4);
  float *x_after = (float *)gt_malloc((size_t)n * dim * 4);
  gt_get(t, x_after, dx, (size_t)n * dim * 4);
  gt_check_same(t, "rmsnorm_matmul leaves x as it is", x_after, x, (size_t)n * dim * 4);
  be->weight_release(be, &w);
  gt_free(t, dx), gt_free(t, dw), gt_free(t, dh), gt_free(t, dy);
  free(raw), free(ref), free(want), free(x), free(nw), free(normed), free(fused), free(apart), free(x_after);
}

void gt_check_join(gt_t *t) {
  check_rmsnorm_matmul(t, KERN_Q8_0, 96, 576, 7);
  check_rmsnorm_matmul(t, KERN_F16, 40, 99, 5);
  if (!t->quick) check_rmsnorm_matmul(t, KERN_Q4_K, 2048, 4096, 64); /* Llama-3-8B width */
  for (size_t i = 0; i < sizeof gt_weight_types / sizeof *gt_weight_types; i++) {
    const kern_type_t same[3] = {gt_weight_types[i], gt_weight_types[i], gt_weight_types[i]};
    check_join_types(t, same, kern_type_name(gt_weight_types[i]), (int)(i & 1));
  }
  const kern_type_t mixed[3] = {KERN_Q4_K, KERN_Q4_K, KERN_Q6_K};
  check_join_types(t, mixed, "Q4_K+Q4_K+Q6_K", 0);
  /* different widths: refused, the parts untouched */
  kern_backend_t *be = t->be;
  size_t bytes;
  uint8_t *ra = gt_make_weight(t, KERN_Q8_0, 8, 256, &bytes), *rb = gt_make_weight(t, KERN_Q8_0, 8, 512, &bytes);
  kern_weight_t a, b, out;
  if (be->weight_init(be, &a, KERN_Q8_0, 8, 256, ra) == 0 && be->weight_init(be, &b, KERN_Q8_0, 8, 512, rb) == 0) {
    const void *ia = a.impl, *ib = b.impl;
    kern_weight_t *two[2] = {&a, &b};
    const int rc = be->weight_join(be, &out, two, 2);
    gt_result(t, "weight_join of 256- and 512-wide parts refused", rc == -EINVAL && a.impl == ia && b.impl == ib,
              "returned %d", rc);
    kern_weight_t *twice[2] = {&a, &a};
    const int rc2 = be->weight_join(be, &out, twice, 2);
    gt_result(t, "weight_join of one weight twice refused", rc2 == -EINVAL && a.impl == ia && !a.packed,
              "returned %d", rc2);
    be->weight_release(be, &a);
    be->weight_release(be, &b);
  } else {
    gt_result(t, "weight_join refusal: weight_init", 0, "failed");
  }
  free(ra), free(rb);
  check_glu_joined(t, 7, 1001);
  if (!t->quick) check_glu_joined(t, 64, 14336);
}
