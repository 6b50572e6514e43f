/* kernels/cpu/ops.c — dense operations of the CPU backend (see ops_cpu.h). */
#include "kernels/cpu/ops_cpu.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/simd.h"

#ifdef KERN_CPU_AVX2
#include <immintrin.h>
#endif

/* Elements per pool work item: below two items a call runs inline. */
#define OPS_GRAIN_ELEMS 16384

/* Items of `per_item` elements each so that one chunk holds ~OPS_GRAIN_ELEMS. */
static int64_t grain_for(int64_t per_item) {
  int64_t g = OPS_GRAIN_ELEMS / (per_item > 0 ? per_item : 1);
  return g > 0 ? g : 1;
}

/* --- embed ----------------------------------------------------------------- */

typedef struct {
  float *y;
  const kern_weight_t *w;
  const int32_t *ids;
  int64_t row_bytes;
} embed_job_t;

static void embed_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const embed_job_t *j = ctx;
  for (int64_t i = begin; i < end; i++)
    kern_cpu_dequant_row(j->w->type, (const uint8_t *)j->w->impl + j->ids[i] * j->row_bytes,
                         j->y + i * j->w->cols, j->w->cols);
}

void kern_cpu_embed(kern_backend_t *be, float *y, const kern_weight_t *w, const int32_t *ids, int n) {
  embed_job_t j = {y, w, ids, kern_type_row_bytes(w->type, w->cols)};
  kern_pool_for(kern_cpu(be)->pool, n, grain_for(w->cols), embed_task, &j);
}

/* --- rmsnorm --------------------------------------------------------------- */

typedef struct {
  float *y;
  const float *x, *weight;
  int dim;
  float eps;
} rmsnorm_job_t;

static void rmsnorm_row(float *y, const float *x, const float *weight, int dim, float eps) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int k = 0;
  for (; k + 8 <= dim; k += 8)
    for (int l = 0; l < 8; l++) acc[l] = fmaf(x[k + l], x[k + l], acc[l]);
  for (int l = 0; k + l < dim; l++) acc[l] = fmaf(x[k + l], x[k + l], acc[l]);
  float ss = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  float s = (float)(1.0 / sqrt((double)ss / dim + (double)eps));
  for (int i = 0; i < dim; i++) y[i] = (x[i] * s) * weight[i];
}

static void rmsnorm_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const rmsnorm_job_t *j = ctx;
  for (int64_t i = begin; i < end; i++) rmsnorm_row(j->y + i * j->dim, j->x + i * j->dim, j->weight, j->dim, j->eps);
}

void kern_cpu_rmsnorm(kern_backend_t *be, float *y, const float *x, const float *weight, int n, int dim,
                      float eps) {
  rmsnorm_job_t j = {y, x, weight, dim, eps};
  kern_pool_for(kern_cpu(be)->pool, n, grain_for(dim), rmsnorm_task, &j);
}

/* --- rope ------------------------------------------------------------------ */

/* Pairs whose cos/sin one pass computes (the table lives on the stack). */
#define ROPE_CHUNK 64

typedef struct {
  float *x;
  const int32_t *pos;
  const float *inv_freq;
  int n_heads, head_dim, rot_dim, neox;
} rope_job_t;

static void rope_row(const rope_job_t *j, float *x, int32_t pos) {
  int half = j->rot_dim / 2;
  float cs[ROPE_CHUNK], sn[ROPE_CHUNK];
  for (int p0 = 0; p0 < half; p0 += ROPE_CHUNK) {
    int np = half - p0 < ROPE_CHUNK ? half - p0 : ROPE_CHUNK;
    for (int p = 0; p < np; p++) {
      double a = (double)pos * (double)j->inv_freq[p0 + p]; /* exact */
      cs[p] = (float)cos(a);
      sn[p] = (float)sin(a);
    }
    for (int h = 0; h < j->n_heads; h++) {
      float *v = x + (int64_t)h * j->head_dim;
      for (int p = 0; p < np; p++) {
        int i0 = j->neox ? p0 + p : 2 * (p0 + p);
        int i1 = j->neox ? p0 + p + half : 2 * (p0 + p) + 1;
        float a = v[i0], b = v[i1];
        v[i0] = fmaf(a, cs[p], -(b * sn[p]));
        v[i1] = fmaf(a, sn[p], b * cs[p]);
      }
    }
  }
}

static void rope_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const rope_job_t *j = ctx;
  for (int64_t i = begin; i < end; i++) rope_row(j, j->x + i * j->n_heads * j->head_dim, j->pos[i]);
}

void kern_cpu_rope(kern_backend_t *be, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
                   int rot_dim, const float *inv_freq, int neox) {
  rope_job_t j = {x, pos, inv_freq, n_heads, head_dim, rot_dim, neox};
  kern_pool_for(kern_cpu(be)->pool, n, grain_for((int64_t)n_heads * head_dim), rope_task, &j);
}

/* --- swiglu ---------------------------------------------------------------- */

/* exp: x = n·ln2 + r with |r| <= ln2/2 (Cody-Waite, two-part ln2), e^r by
 * Cephes' degree-7 polynomial, times 2^n built in the exponent bits. */
float kern_cpu_expf(float x) {
  x = x > -87.33654f ? x : -87.33654f;
  x = x < 88.0f ? x : 88.0f;
  float n = rintf(x * 1.44269504088896341f);
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r) + 1.0f;
  int32_t e = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

/* Elementwise jobs: item i covers elements [i·G, min((i + 1)·G, count)). */
typedef struct {
  float *y;
  const float *a, *b;
  int64_t count;
} elem_job_t;

static void elem_range(const elem_job_t *j, int64_t begin, int64_t end, int64_t *lo, int64_t *hi) {
  *lo = begin * OPS_GRAIN_ELEMS;
  *hi = end * OPS_GRAIN_ELEMS < j->count ? end * OPS_GRAIN_ELEMS : j->count;
}

static void elem_run(kern_backend_t *be, const elem_job_t *j, kern_pool_fn fn) {
  kern_pool_for(kern_cpu(be)->pool, (j->count + OPS_GRAIN_ELEMS - 1) / OPS_GRAIN_ELEMS, 1, fn, (void *)j);
}

void kern_cpu__swiglu_scalar(float *y, const float *gate, const float *up, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    float g = gate[i];
    y[i] = g / (1.0f + kern_cpu_expf(-g)) * up[i];
  }
}

#ifdef KERN_CPU_AVX2
/* kern_cpu_expf on 8 lanes, operation for operation (so the portable
 * fallback gives the same bits). attn_tile.c has its own exp8, for x <= 0
 * with -inf -> 0, which this clamp does not give. */
static inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static void swiglu_avx2(float *y, const float *gate, const float *up, int64_t count) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  for (; i + 8 <= count; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 e = exp8(_mm256_xor_ps(g, sign)); /* -g, exactly */
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  kern_cpu__swiglu_scalar(y + i, gate + i, up + i, count - i);
}
#endif

static void swiglu_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const elem_job_t *j = ctx;
  int64_t lo, hi;
  elem_range(j, begin, end, &lo, &hi);
#ifdef KERN_CPU_AVX2
  swiglu_avx2(j->y + lo, j->a + lo, j->b + lo, hi - lo);
#else
  kern_cpu__swiglu_scalar(j->y + lo, j->a + lo, j->b + lo, hi - lo);
#endif
}

void kern_cpu_swiglu(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count) {
  elem_job_t j = {y, gate, up, count};
  elem_run(be, &j, swiglu_task);
}

/* glu_joined: one pool item per row of x [n, 2 ff]; the same element
 * formulas as swiglu (whose AVX2 and scalar forms agree bit for bit) and
 * geglu. */
typedef struct {
  float *y;
  const float *x;
  int64_t ff;
  int gelu;
} glu_job_t;

static void glu_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const glu_job_t *j = ctx;
  for (int64_t t = begin; t < end; t++) {
    float *y = j->y + t * j->ff;
    const float *g = j->x + t * 2 * j->ff, *u = g + j->ff;
    if (j->gelu) {
      for (int64_t i = 0; i < j->ff; i++) y[i] = kern_cpu_gelu_tanh(g[i]) * u[i];
    } else {
#ifdef KERN_CPU_AVX2
      swiglu_avx2(y, g, u, j->ff);
#else
      kern_cpu__swiglu_scalar(y, g, u, j->ff);
#endif
    }
  }
}

void kern_cpu_glu_joined(kern_backend_t *be, float *y, const float *x, int n, int64_t ff, int gelu) {
  if (n <= 0 || ff <= 0) return;
  glu_job_t j = {y, x, ff, gelu};
  kern_pool_for(kern_cpu(be)->pool, n, grain_for(2 * ff), glu_task, &j);
}

/* --- add, add_bias, gather_rows --------------------------------------------- */

static void add_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const elem_job_t *j = ctx;
  int64_t i, hi;
  elem_range(j, begin, end, &i, &hi);
  for (; i + 8 <= hi; i += 8) {
    float a[8], b[8];
    memcpy(a, j->a + i, sizeof a);
    memcpy(b, j->b + i, sizeof b);
    for (int l = 0; l < 8; l++) a[l] += b[l];
    memcpy(j->y + i, a, sizeof a);
  }
  for (; i < hi; i++) j->y[i] = j->a[i] + j->b[i];
}

void kern_cpu_add(kern_backend_t *be, float *y, const float *a, const float *b, int64_t count) {
  elem_job_t j = {y, a, b, count};
  elem_run(be, &j, add_task);
}

typedef struct {
  float *y;
  const float *bias;
  int dim;
} bias_job_t;

static void bias_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const bias_job_t *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    float *row = j->y + i * j->dim;
    for (int k = 0; k < j->dim; k++) row[k] += j->bias[k];
  }
}

void kern_cpu_add_bias(kern_backend_t *be, float *y, const float *bias, int n, int dim) {
  bias_job_t j = {y, bias, dim};
  kern_pool_for(kern_cpu(be)->pool, n, grain_for(dim), bias_task, &j);
}

void kern_cpu_gather_rows(kern_backend_t *be, float *y, const float *x, const int32_t *idx, int n_idx, int dim) {
  (void)be;
  for (int i = 0; i < n_idx; i++)
    memmove(y + (int64_t)i * dim, x + (int64_t)idx[i] * dim, (size_t)dim * sizeof(float));
}

/* One thread: a few rows of k terms each, next to the expert matmuls. */
void kern_cpu_moe_combine(kern_backend_t *be, float *y, const float *src, const int32_t *slot, const float *w, int n,
                          int k, int dim) {
  (void)be;
  for (int t = 0; t < n; t++) {
    float *yt = y + (int64_t)t * dim;
    for (int i = 0; i < dim; i++) yt[i] = 0.0f;
    for (int j = 0; j < k; j++) {
      const float *s = src + (int64_t)slot[(int64_t)t * k + j] * dim, wj = w[(int64_t)t * k + j];
      for (int i = 0; i < dim; i++) yt[i] += wj * s[i];
    }
  }
}
