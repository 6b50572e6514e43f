/* tests/gpu/check_weights.cu — weight_init of every supported GGUF type
 * (random blocks; dequantized values read back through embed) and matmul,
 * both against float64 references. The reference dequantizer below works
 * block by block from the format (kernels/quant_blocks.h), independently of
 * the per-element kernel. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant_blocks.h"
#include "tests/gpu/gpu_test.cuh"

static double hf(uint16_t h) { return (double)gt_f16_f(h); }

/* The 6-bit scale and min of sub-block j of a K-quant's scales[12]. */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63, *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* One row of `cols` elements of `type` at src → y (float64). */
void gt_ref_dequant_row(kern_type_t type, const uint8_t *src, int64_t cols, double *y) {
  switch (type) {
    case KERN_F32:
      for (int64_t i = 0; i < cols; i++) y[i] = ((const float *)src)[i];
      return;
    case KERN_F16:
      for (int64_t i = 0; i < cols; i++) y[i] = hf(((const uint16_t *)src)[i]);
      return;
    case KERN_BF16:
      for (int64_t i = 0; i < cols; i++) y[i] = gt_bf16_f(((const uint16_t *)src)[i]);
      return;
    default:
      break;
  }
  const int64_t be = kern_type_block_elems(type), bb = kern_type_block_bytes(type);
  for (int64_t blk = 0; blk < cols / be; blk++, src += bb, y += be) {
    if (type == KERN_Q4_0 || type == KERN_Q4_1) {
      const uint8_t *qs = src + (type == KERN_Q4_0 ? 2 : 4);
      const double d = hf(*(const uint16_t *)src), m = type == KERN_Q4_1 ? hf(((const uint16_t *)src)[1]) : 0;
      for (int j = 0; j < 16; j++) {
        const int lo = qs[j] & 15, hi = qs[j] >> 4;
        y[j] = type == KERN_Q4_0 ? d * (lo - 8) : d * lo + m;
        y[j + 16] = type == KERN_Q4_0 ? d * (hi - 8) : d * hi + m;
      }
    } else if (type == KERN_Q5_0 || type == KERN_Q5_1) {
      const int o = type == KERN_Q5_0 ? 2 : 4;
      const uint8_t *qh = src + o, *qs = src + o + 4;
      const double d = hf(*(const uint16_t *)src), m = type == KERN_Q5_1 ? hf(((const uint16_t *)src)[1]) : 0;
      const uint32_t h = qh[0] | qh[1] << 8 | qh[2] << 16 | (uint32_t)qh[3] << 24;
      for (int j = 0; j < 16; j++) {
        const int lo = (qs[j] & 15) | ((h >> j) & 1) << 4, hi = (qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4;
        y[j] = type == KERN_Q5_0 ? d * (lo - 16) : d * lo + m;
        y[j + 16] = type == KERN_Q5_0 ? d * (hi - 16) : d * hi + m;
      }
    } else if (type == KERN_Q8_0) {
      const double d = hf(*(const uint16_t *)src);
      for (int j = 0; j < 32; j++) y[j] = d * (int8_t)src[2 + j];
    } else if (type == KERN_Q4_K || type == KERN_Q5_K) {
      const double d = hf(((const uint16_t *)src)[0]), dmin = hf(((const uint16_t *)src)[1]);
      const uint8_t *scales = src + 4;
      const uint8_t *qh = type == KERN_Q5_K ? src + 16 : NULL;
      const uint8_t *qs = src + (type == KERN_Q5_K ? 48 : 16);
      for (int c = 0; c < 4; c++) { /* 64 elements: sub-blocks 2c (low nibbles), 2c + 1 (high) */
        int sc0, m0, sc1, m1;
        k_scale_min(scales, 2 * c, &sc0, &m0);
        k_scale_min(scales, 2 * c + 1, &sc1, &m1);
        for (int l = 0; l < 32; l++) {
          int q0 = qs[32 * c + l] & 15, q1 = qs[32 * c + l] >> 4;
          if (qh) {
            q0 += (qh[l] >> (2 * c)) & 1 ? 16 : 0;
            q1 += (qh[l] >> (2 * c + 1)) & 1 ? 16 : 0;
          }
          y[64 * c + l] = d * sc0 * q0 - dmin * m0;
          y[64 * c + 32 + l] = d * sc1 * q1 - dmin * m1;
        }
      }
    } else if (type == KERN_Q6_K) {
      const uint8_t *ql = src, *qh = src + 128;
      const int8_t *sc = (const int8_t *)(src + 192);
      const double d = hf(*(const uint16_t *)(src + 208));
      for (int n = 0; n < 2; n++) { /* 128 elements from ql[64], qh[32], sc[8] */
        for (int l = 0; l < 32; l++) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
          const int q2 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
          const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
          const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
          y[128 * n + l] = d * sc[is] * q1;
          y[128 * n + l + 32] = d * sc[is + 2] * q2;
          y[128 * n + l + 64] = d * sc[is + 4] * q3;
          y[128 * n + l + 96] = d * sc[is + 6] * q4;
        }
        ql += 64, qh += 32, sc += 8;
      }
    } else if (type == KERN_MXFP4) { /* OCP MX: 2^(e - 127) · E2M1 (sign, 2 exponent bits with bias 1, 1 mantissa bit) */
      for (int j = 0; j < 32; j++) {
        const int code = j < 16 ? src[1 + j] & 15 : src[1 + j - 16] >> 4, ex = (code >> 1) & 3, man = code & 1;
        const double fp4 = ex == 0 ? 0.5 * man : ldexp(1.0 + 0.5 * man, ex - 1);
        y[j] = (code & 8 ? -fp4 : fp4) * ldexp(1.0, src[0] - 127);
      }
    }
  }
}

/* Offsets of the f16 scale fields in a block (-1 ends the list). */
static const int *f16_fields(kern_type_t type) {
  static const int q0[] = {0, -1}, q1[] = {0, 2, -1}, q6[] = {208, -1}, none[] = {-1};
  switch (type) {
    case KERN_Q4_0: case KERN_Q5_0: case KERN_Q8_0: return q0;
    case KERN_Q4_1: case KERN_Q5_1: case KERN_Q4_K: case KERN_Q5_K: return q1;
    case KERN_Q6_K: return q6;
    default: return none;
  }
}

/* Random data of `type`: random bytes for quants, finite f16 scales. */
uint8_t *gt_make_weight(gt_t *t, kern_type_t type, int64_t rows, int64_t cols, size_t *bytes) {
  const int64_t rb = kern_type_row_bytes(type, cols);
  *bytes = (size_t)(rows * rb);
  uint8_t *w = (uint8_t *)gt_malloc(*bytes);
  const int64_t n = rows * cols;
  if (type == KERN_F32) {
    gt_normal(t, (float *)w, (size_t)n, 0.05f);
  } else if (type == KERN_F16 || type == KERN_BF16) {
    for (int64_t i = 0; i < n; i++) {
      const float v = (float)tu_normal(&t->rng) * 0.05f;
      ((uint16_t *)w)[i] = type == KERN_F16 ? gt_f16(v) : gt_bf16(v);
    }
  } else {
    for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)tu_next(&t->rng);
    const int64_t bb = kern_type_block_bytes(type), nb = (int64_t)*bytes / bb;
    const int k = kern_type_block_elems(type) == QK_K;
    if (type == KERN_MXFP4) /* scales 2^-9 .. 2^-6: elements up to 0.09 */
      for (int64_t b = 0; b < nb; b++) w[b * bb] = (uint8_t)(118 + tu_below(&t->rng, 4));
    for (int64_t b = 0; b < nb; b++)
      for (const int *f = f16_fields(type); *f >= 0; f++) {
        const double mag = k ? tu_uniform(&t->rng, 2e-4, 2e-3) : tu_uniform(&t->rng, 2e-3, 2e-2);
        const float v = (float)(tu_below(&t->rng, 2) ? mag : -mag);
        const uint16_t h = gt_f16(v);
        memcpy(w + b * bb + *f, &h, 2);
      }
  }
  return w;
}

const kern_type_t gt_weight_types[12] = {KERN_F32,  KERN_F16,  KERN_BF16, KERN_Q4_0,
                                           KERN_Q4_1, KERN_Q5_0, KERN_Q5_1, KERN_Q8_0,
                                           KERN_Q4_K, KERN_Q5_K, KERN_Q6_K, KERN_MXFP4};

/* y [n, rows] = x [n, cols] · Wᵀ in float64. */
void gt_ref_matmul(const float *x, const double *w, int n, int64_t rows, int64_t cols, double *y) {
  for (int i = 0; i < n; i++)
    for (int64_t r = 0; r < rows; r++) {
      double s = 0;
      for (int64_t c = 0; c < cols; c++) s += (double)x[(int64_t)i * cols + c] * w[r * cols + c];
      y[(int64_t)i * rows + r] = s;
    }
}

/* Runs matmul for n rows of x into a poisoned y and downloads it. */
static void run_matmul(gt_t *t, const kern_weight_t *w, const float *dx, int n, float *dy, float *got) {
  gt_poison(t, dy, (size_t)n * w->rows);
  t->be->matmul(t->be, dy, dx, w, n);
  gt_get(t, got, dy, (size_t)n * w->rows * 4);
}

static void check_type(gt_t *t, kern_type_t type, int64_t rows, int64_t cols) {
  kern_backend_t *be = t->be;
  const char *tn = kern_type_name(type);
  char name[128];
  size_t bytes;
  uint8_t *raw = gt_make_weight(t, type, rows, cols, &bytes);
  const int64_t rb = kern_type_row_bytes(type, cols), n_el = rows * cols;
  double *ref = (double *)gt_malloc((size_t)n_el * 8);
  for (int64_t r = 0; r < rows; r++) gt_ref_dequant_row(type, raw + r * rb, cols, ref + r * cols);

  kern_weight_t w;
  int rc = be->weight_init(be, &w, type, rows, cols, raw);
  snprintf(name, sizeof name, "weight_init %s %lldx%lld", tn, (long long)rows, (long long)cols);
  gt_result(t, name, rc == 0, "returned %d", rc);
  if (rc) {
    free(raw), free(ref);
    return;
  }
  /* Dequantized values, through embed of every row. */
  int32_t *ids = (int32_t *)gt_malloc((size_t)rows * 4);
  for (int64_t r = 0; r < rows; r++) ids[r] = (int32_t)(rows - 1 - r);
  int32_t *dids = (int32_t *)gt_dev_from(t, ids, (size_t)rows * 4);
  float *dy = (float *)gt_dev(t, (size_t)n_el * 4), *got = (float *)gt_malloc((size_t)n_el * 4);
  gt_poison(t, dy, (size_t)n_el);
  be->embed(be, dy, &w, dids, (int)rows);
  gt_get(t, got, dy, (size_t)n_el * 4);
  double worst = 0;
  int64_t bad = -1;
  for (int64_t r = 0; r < rows && bad < 0; r++) {
    const double *want = ref + (int64_t)ids[r] * cols;
    double row_max = 0;
    for (int64_t c = 0; c < cols; c++) row_max = fmax(row_max, fabs(want[c]));
    for (int64_t c = 0; c < cols; c++) {
      const double g = got[r * cols + c], err = fabs(g - want[c]);
      /* bf16 rounding (2^-9 relative, with margin) + f32 arithmetic */
      const double tol = ldexp(fabs(want[c]), -8) + ldexp(row_max, -20);
      if (!isfinite(g) || err > tol) {
        bad = r * cols + c;
        break;
      }
      worst = fmax(worst, err / (fabs(want[c]) + 1e-30));
    }
  }
  snprintf(name, sizeof name, "dequant %s to bf16 (via embed)", tn);
  if (bad >= 0)
    gt_result(t, name, 0, "element %lld: got %.9g want %.9g", (long long)bad, (double)got[bad],
              ref[(int64_t)ids[bad / cols] * cols + bad % cols]);
  else
    gt_result(t, name, 1, "every element within bf16 rounding (worst rel %.2g)", worst);
  if (type == KERN_BF16) { /* exact */
    int same = 1;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++)
        if (got[r * cols + c] != (float)ref[(int64_t)ids[r] * cols + c]) same = 0;
    gt_result(t, "embed of a BF16 weight is exact", same, same ? "exact" : "differs");
  }

  /* matmul vs float64 for a few batch sizes */
  const int ns[] = {1, 7, 64};
  const int nmax = 64;
  float *x = (float *)gt_malloc((size_t)nmax * cols * 4), *ym = (float *)gt_malloc((size_t)nmax * rows * 4);
  double *want = (double *)gt_malloc((size_t)nmax * rows * 8);
  gt_normal(t, x, (size_t)nmax * cols, 1.0f);
  float *dx = (float *)gt_dev_from(t, x, (size_t)nmax * cols * 4);
  float *dym = (float *)gt_dev(t, (size_t)nmax * rows * 4);
  gt_ref_matmul(x, ref, nmax, rows, cols, want);
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    run_matmul(t, &w, dx, ns[k], dym, ym);
    snprintf(name, sizeof name, "matmul %s n=%d rows=%lld cols=%lld", tn, ns[k], (long long)rows,
             (long long)cols);
    gt_check_close(t, name, ym, want, (size_t)ns[k] * rows, 1e-2);
  }
  be->weight_release(be, &w);
  gt_result(t, "weight_release clears impl", w.impl == NULL, "impl %p", w.impl);
  gt_free(t, dids), gt_free(t, dy), gt_free(t, dx), gt_free(t, dym);
  free(raw), free(ref), free(ids), free(got), free(x), free(ym), free(want);
}

/* A larger GEMM: accuracy, determinism, and whether rows keep their bits
 * across batch sizes (cuBLAS does not promise it: reported, not failed). */
static void check_matmul_large(gt_t *t, int n, int64_t rows, int64_t cols) {
  kern_backend_t *be = t->be;
  char name[128];
  size_t bytes;
  uint8_t *raw = gt_make_weight(t, KERN_Q4_K, rows, cols, &bytes);
  const int64_t rb = kern_type_row_bytes(KERN_Q4_K, cols);
  double *ref = (double *)gt_malloc((size_t)(rows * cols) * 8);
  for (int64_t r = 0; r < rows; r++) gt_ref_dequant_row(KERN_Q4_K, raw + r * rb, cols, ref + r * cols);
  kern_weight_t w;
  if (be->weight_init(be, &w, KERN_Q4_K, rows, cols, raw) != 0) {
    gt_result(t, "matmul large: weight_init", 0, "failed");
    free(raw), free(ref);
    return;
  }
  float *x = (float *)gt_malloc((size_t)n * cols * 4);
  float *y1 = (float *)gt_malloc((size_t)n * rows * 4), *y2 = (float *)gt_malloc((size_t)n * rows * 4);
  double *want = (double *)gt_malloc((size_t)n * rows * 8);
  gt_normal(t, x, (size_t)n * cols, 1.0f);
  gt_ref_matmul(x, ref, n, rows, cols, want);
  float *dx = (float *)gt_dev_from(t, x, (size_t)n * cols * 4);
  float *dy = (float *)gt_dev(t, (size_t)n * rows * 4);
  run_matmul(t, &w, dx, n, dy, y1);
  snprintf(name, sizeof name, "matmul Q4_K n=%d rows=%lld cols=%lld", n, (long long)rows, (long long)cols);
  gt_check_close(t, name, y1, want, (size_t)n * rows, 1e-2);
  run_matmul(t, &w, dx, n, dy, y2);
  snprintf(name, sizeof name, "matmul n=%d deterministic", n);
  gt_check_same(t, name, y1, y2, (size_t)n * rows * 4);
  const int subs[] = {1, 7, 64};
  for (size_t k = 0; k < sizeof subs / sizeof *subs; k++) {
    run_matmul(t, &w, dx, subs[k], dy, y2);
    snprintf(name, sizeof name, "matmul batch invariance n=%d vs n=%d", subs[k], n);
    if (memcmp(y1, y2, (size_t)subs[k] * rows * 4) == 0)
      gt_result(t, name, 1, "rows bitwise identical");
    else
      gt_warn(t, name, "rows differ in the last bits (cuBLAS picks kernels per shape; documented)");
  }
  be->weight_release(be, &w);
  gt_free(t, dx), gt_free(t, dy);
  free(raw), free(ref), free(x), free(y1), free(y2), free(want);
}

void gt_check_weights(gt_t *t) {
  for (size_t i = 0; i < sizeof gt_weight_types / sizeof *gt_weight_types; i++)
    check_type(t, gt_weight_types[i], 48, 512);
  check_type(t, KERN_Q8_0, 3, 96); /* a row narrower than a K block, odd rows */
  kern_weight_t w;
  uint8_t dummy[64] = {0};
  const int rc = t->be->weight_init(t->be, &w, KERN_Q8_1, 1, 32, dummy);
  gt_result(t, "weight_init rejects Q8_1 (not a weight type)", rc == -EINVAL, "returned %d", rc);
  if (!t->quick) check_matmul_large(t, 300, 1024, 2048);
  gt_check_join(t); /* joined projections (check_join.cu) */
}
