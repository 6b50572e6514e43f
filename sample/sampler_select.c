/* sample/sampler_select.c — the truncation steps of the sampler (temperature,
 * top-k, top-p, min-p), the raw log-probabilities, and the workspace they
 * use. No step sorts the vocabulary:
 *
 *   top-k    a bounded min-heap (k <= 256) or a quickselect, then a sort of
 *            the k survivors;
 *   top-p    one pass buckets the weights w = exp((x - max) / T) (eight
 *            buckets per power of two) with their mass; every token of the
 *            buckets above the one where the mass reaches top_p is kept,
 *            and only that one bucket is sorted to find the exact cut;
 *   min-p    a threshold: keep w >= min_p (w is p / p_max);
 *   neither  one pass of exp (AVX2 when the build has it), the candidates
 *            stay in id order.
 *
 * Ties are broken by the lower token id everywhere, so a row's result never
 * depends on anything but the row. See sampler.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SAMP_AVX2 1
#endif

#include "sample/sampler.h"
#include "base/alloc.h"
#include "kernels/kern_sample.h"
#include "sample/sampler_internal.h"

typedef struct cand {
  float v; /* a logit, then a weight */
  int32_t id;
} cand_t;

struct samp_ws {
  int32_t n_vocab;
  float *row;    /* [n_vocab] the caller's copy of the logits */
  float *w;      /* [n_vocab] weights of the whole vocabulary */
  cand_t *c;     /* [n_vocab] candidates */
  int32_t *ids;  /* [n_vocab] the result */
  float *probs;  /* [n_vocab] the result */
  uint16_t *bucket; /* [n_vocab] top-p's weight buckets */
};

samp_ws_t *samp_ws_create(int32_t n_vocab) {
  if (n_vocab <= 0) n_vocab = 1;
  samp_ws_t *w = xmalloc(sizeof *w);
  size_t n = (size_t)n_vocab;
  w->n_vocab = n_vocab;
  w->row = xmalloc(n * sizeof *w->row);
  w->w = xmalloc(n * sizeof *w->w);
  w->c = xmalloc(n * sizeof *w->c);
  w->ids = xmalloc(n * sizeof *w->ids);
  w->probs = xmalloc(n * sizeof *w->probs);
  w->bucket = xmalloc(n * sizeof *w->bucket);
  return w;
}

void samp_ws_destroy(samp_ws_t *w) {
  if (!w) return;
  free(w->row);
  free(w->w);
  free(w->c);
  free(w->ids);
  free(w->probs);
  free(w->bucket);
  free(w);
}

float *samp__ws_row(samp_ws_t *w) { return w->row; }
int32_t samp__ws_n_vocab(const samp_ws_t *w) { return w->n_vocab; }

/* ---- the passes over the vocabulary --------------------------------------------- */

/* max of x[n], ignoring NaN (-inf when there is nothing else). */
static float max_of(const float *x, int32_t n) {
  float m = -INFINITY;
  int32_t i = 0;
#ifdef SAMP_AVX2
  __m256 acc = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(x + i), acc); /* NaN keeps acc */
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  for (int j = 0; j < 8; j++) m = lanes[j] > m ? lanes[j] : m;
#endif
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

#ifdef SAMP_AVX2
/* exp(v) for 8 lanes with v <= 0: exp(r * ln2 + f) = 2^r * e^f, r = round(v /
 * ln2), f by Cody-Waite in [-ln2/2, ln2/2], e^f by its degree-6 Taylor
 * series (error < 2e-7 relative); 0 below -87 and for NaN. */
static __m256 exp8(__m256 v) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  __m256 keep = _mm256_and_ps(_mm256_cmp_ps(v, lo, _CMP_GE_OQ), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
  v = _mm256_max_ps(v, lo);
  __m256 r = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_fmadd_ps(r, _mm256_set1_ps(-0.693145751953125f), v);
  f = _mm256_fmadd_ps(r, _mm256_set1_ps(-1.428606765330187045e-06f), f);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}
#endif

/* w[i] = exp((x[i] - m) * inv_t), 0 for NaN or underflow (w may be NULL:
 * the sum only); returns their sum (in double). The vocabulary-sized pass
 * every sampled token pays. */
static double exp_weights(const float *x, int32_t n, float m, float inv_t, float *w) {
  double sum = 0;
  int32_t i = 0;
#ifdef SAMP_AVX2
  __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(inv_t);
  __m256d acc = _mm256_setzero_pd();
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vs));
    if (w) _mm256_storeu_ps(w + i, e);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, acc);
  sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
  for (; i < n; i++) {
    float e = expf((x[i] - m) * inv_t);
    if (!(e > 0)) e = 0;
    if (w) w[i] = e;
    sum += e;
  }
  return sum;
}

/* ---- ordering and selection ------------------------------------------------------ */

/* a ranks before b: larger value, then lower id. NaN ranks last. */
static inline int better(cand_t a, cand_t b) {
  if (a.v > b.v) return 1;
  if (a.v < b.v) return 0;
  if (a.v == b.v) return a.id < b.id;
  return isnan(b.v) && !isnan(a.v);
}

static int cmp_desc(const void *pa, const void *pb) {
  cand_t a = *(const cand_t *)pa, b = *(const cand_t *)pb;
  return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void sift_down(cand_t *h, int32_t n, int32_t i) { /* min-heap: the worst at the root */
  for (;;) {
    int32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && better(h[m], h[l])) m = l;
    if (r < n && better(h[m], h[r])) m = r;
    if (m == i) return;
    cand_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* The k best of x[n] into out[k] (unordered), k <= n, with a min-heap. */
static void heap_top(const float *x, int32_t n, int32_t k, cand_t *out) {
  for (int32_t i = 0; i < k; i++) out[i] = (cand_t){isnan(x[i]) ? -INFINITY : x[i], i};
  for (int32_t i = k / 2; i-- > 0;) sift_down(out, k, i);
  for (int32_t i = k; i < n; i++) {
    cand_t c = {isnan(x[i]) ? -INFINITY : x[i], i};
    if (better(c, out[0])) {
      out[0] = c;
      sift_down(out, k, 0);
    }
  }
}

/* Reorders c[n] so that c[0..k) are its k best (unordered). */
static void quickselect(cand_t *c, int32_t n, int32_t k) {
  int32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    /* median of three as the pivot, moved to hi */
    if (better(c[mid], c[lo])) { cand_t t = c[mid]; c[mid] = c[lo]; c[lo] = t; }
    if (better(c[hi], c[lo])) { cand_t t = c[hi]; c[hi] = c[lo]; c[lo] = t; }
    if (better(c[mid], c[hi])) { cand_t t = c[mid]; c[mid] = c[hi]; c[hi] = t; }
    cand_t pivot = c[hi];
    int32_t store = lo;
    for (int32_t i = lo; i < hi; i++) {
      if (better(c[i], pivot)) {
        cand_t t = c[i];
        c[i] = c[store];
        c[store] = t;
        store++;
      }
    }
    c[hi] = c[store];
    c[store] = pivot;
    if (store == k - 1 || store == k) return;
    if (store < k) lo = store + 1;
    else hi = store - 1;
  }
}

int32_t samp__pick(const samp__cands_t *c, double u) {
  double target = u * c->total, cum = 0;
  int32_t last = -1;
  for (int32_t i = 0; i < c->n; i++) {
    float wi = c->w[i];
    if (wi <= 0) continue;
    cum += wi;
    last = i;
    if (target < cum) break;
  }
  if (last < 0) last = 0; /* unreachable: the maximum has weight 1 */
  return c->ids ? c->ids[last] : last;
}

/* ---- candidates ------------------------------------------------------------------ */

/* Weight buckets for top-p, eight per power of two: bucket b holds weights
 * in [2^-(b+1)/8, 2^-b/8) roughly (kern_sample_bucket: from the float's
 * exponent and top three mantissa bits), so a larger weight never has a
 * larger bucket; the last bucket also holds everything smaller. The device
 * sampler's top-p draws in the same bucket order (kernels/kern_sample.h). */
enum { N_BUCKETS = KERN_SAMPLE_BUCKETS };

static int bucket_of(float w) { return kern_sample_bucket(w); }

static int greedy(const float *x, int32_t n, samp_ws_t *w, samp__cands_t *out) {
  float m = max_of(x, n);
  if (m == -INFINITY) return -EDOM;
  int32_t best = 0;
  while (!(x[best] == m)) best++; /* the first maximum: lowest id on ties */
  w->ids[0] = best;
  w->probs[0] = 1.0f;
  *out = (samp__cands_t){.ids = w->ids, .w = w->probs, .n = 1, .total = 1.0};
  return 0;
}

/* Top-p over the whole vocabulary from weights wt[V] (total z): one pass
 * buckets them, the bucket where the mass reaches top_p * z is the only one
 * sorted; every token of the buckets above it is kept as it is. Tokens below
 * min_thr are left out (min-p keeps a prefix too). Writes the kept tokens to
 * c and returns their number. */
static int32_t top_p_all(const float *wt, int32_t V, double z, float top_p, float min_thr, uint16_t *bk,
                         cand_t *c) {
  double mass[N_BUCKETS] = {0};
  for (int32_t i = 0; i < V; i++) {
    int b = wt[i] > 0 ? bucket_of(wt[i]) : N_BUCKETS - 1;
    bk[i] = (uint16_t)b;
    mass[b] += wt[i];
  }
  double need = (double)top_p * z, above = 0;
  int edge = 0;
  while (edge < N_BUCKETS - 1 && (mass[edge] == 0 || above + mass[edge] < need)) above += mass[edge++];
  /* the tokens of the buckets above the edge, then the edge's, sorted */
  int32_t n = 0, n_edge;
  for (int32_t i = 0; i < V; i++)
    if (bk[i] < edge && wt[i] >= min_thr) c[n++] = (cand_t){wt[i], i};
  n_edge = n;
  for (int32_t i = 0; i < V; i++)
    if (bk[i] == edge && wt[i] > 0 && wt[i] >= min_thr) c[n++] = (cand_t){wt[i], i};
  qsort(c + n_edge, (size_t)(n - n_edge), sizeof *c, cmp_desc);
  /* keep an edge token while the mass before it is < top_p (at least one in all) */
  int32_t keep = n_edge;
  double cum = above;
  while (keep < n && (keep == 0 || cum < need)) cum += c[keep++].v;
  return keep;
}

int samp__candidates(const samp_params_t *p, samp_ws_t *w, const float *x, samp__cands_t *out) {
  int32_t V = w->n_vocab, n;
  cand_t *c = w->c;
  if (p->temperature <= 0) return greedy(x, V, w, out);
  float inv_t = 1.0f / p->temperature;
  if (p->top_k > 0 && p->top_k < V) {
    n = p->top_k;
    if (n <= 256) {
      heap_top(x, V, n, c);
    } else {
      for (int32_t i = 0; i < V; i++) c[i] = (cand_t){isnan(x[i]) ? -INFINITY : x[i], i};
      quickselect(c, V, n);
    }
    qsort(c, (size_t)n, sizeof *c, cmp_desc);
    float m = c[0].v;
    if (!isfinite(m)) return m > 0 ? greedy(x, V, w, out) : -EDOM;
    double z = 0;
    for (int32_t i = 0; i < n; i++) {
      c[i].v = expf((c[i].v - m) * inv_t);
      z += c[i].v;
    }
    if (p->top_p < 1.0f) { /* keep i while the mass before it is < top_p */
      double need = (double)p->top_p * z, cum = 0;
      int32_t keep = 0;
      while (keep < n && (keep == 0 || cum < need)) cum += c[keep++].v;
      n = keep;
    }
  } else {
    float m = max_of(x, V);
    if (!isfinite(m)) return m > 0 ? greedy(x, V, w, out) : -EDOM;
    float *wt = w->w;
    double z = exp_weights(x, V, m, inv_t, wt);
    if (p->top_p < 1.0f) {
      n = top_p_all(wt, V, z, p->top_p, p->min_p, w->bucket, c);
    } else if (p->min_p > 0) {
      n = 0;
      for (int32_t i = 0; i < V; i++)
        if (wt[i] >= p->min_p) c[n++] = (cand_t){wt[i], i};
    } else { /* no truncation: the whole vocabulary in id order */
      *out = (samp__cands_t){.ids = NULL, .w = wt, .n = V, .total = z};
      return 0;
    }
  }
  if (p->min_p > 0) { /* w = p / p_max */
    int32_t keep = 0;
    for (int32_t i = 0; i < n; i++)
      if (c[i].v >= p->min_p) c[keep++] = c[i];
    n = keep;
  }
  double kept = 0;
  for (int32_t i = 0; i < n; i++) {
    w->ids[i] = c[i].id;
    w->probs[i] = c[i].v;
    kept += c[i].v;
  }
  *out = (samp__cands_t){.ids = w->ids, .w = w->probs, .n = n, .total = kept};
  return 0;
}

int samp_candidates(const samp_params_t *p, samp_ws_t *w, const float *x, const int32_t **ids_out,
                    const float **probs_out) {
  samp__cands_t c;
  int rc = samp__candidates(p, w, x, &c);
  if (rc < 0) return rc;
  float inv = (float)(1.0 / c.total);
  for (int32_t i = 0; i < c.n; i++) {
    w->probs[i] = c.w[i] * inv;
    if (!c.ids) w->ids[i] = i;
  }
  *ids_out = w->ids;
  *probs_out = w->probs;
  return c.n;
}

/* ---- raw log-probabilities ------------------------------------------------------- */

void samp_logprobs(const float *x, int32_t n_vocab, int32_t token, int32_t n_top, float *logprob,
                   samp_logprob_t *top) {
  float m = max_of(x, n_vocab);
  double lse = (double)m + log(isfinite(m) ? exp_weights(x, n_vocab, m, 1.0f, NULL) : 0.0);
  float xt = token >= 0 && token < n_vocab && !isnan(x[token]) ? x[token] : -INFINITY;
  *logprob = (float)((double)xt - lse);
  if (n_top > SAMP_MAX_TOP_LOGPROBS) n_top = SAMP_MAX_TOP_LOGPROBS;
  if (n_top > n_vocab) n_top = n_vocab;
  if (n_top <= 0) return;
  cand_t h[SAMP_MAX_TOP_LOGPROBS];
  heap_top(x, n_vocab, n_top, h);
  qsort(h, (size_t)n_top, sizeof *h, cmp_desc);
  for (int32_t i = 0; i < n_top; i++) {
    top[i].token = h[i].id;
    top[i].logprob = (float)((double)h[i].v - lse);
  }
}
