/* model/sampler_select.c — the truncation steps of the sampler (temperature,
 * top-k, top-p, min-p), the raw log-probabilities, and the workspace they
 * use. No step sorts the vocabulary:
 *
 *   top-k    a bounded min-heap (k <= 256) or a quickselect, then a sort of
 *            the k survivors;
 *   top-p    one pass buckets the weights w = exp((x - max) / T) by their
 *            power of two, which finds the weight above which the nucleus
 *            must lie; only those candidates are sorted;
 *   min-p    a threshold: keep w >= min_p (w is p / p_max);
 *   neither  one pass of exp, the candidates stay in id order.
 *
 * Ties are broken by the lower token id everywhere, so a row's result never
 * depends on anything but the row. See sampler.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/sampler.h"
#include "model/sampler_internal.h"

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
};

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}

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
  return w;
}

void samp_ws_destroy(samp_ws_t *w) {
  if (!w) return;
  free(w->row);
  free(w->w);
  free(w->c);
  free(w->ids);
  free(w->probs);
  free(w);
}

float *samp__ws_row(samp_ws_t *w) { return w->row; }
int32_t samp__ws_n_vocab(const samp_ws_t *w) { return w->n_vocab; }

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

int32_t samp__pick(const int32_t *ids, const float *probs, int n, double u) {
  double total = 0;
  for (int i = 0; i < n; i++) total += probs[i];
  double target = u * total, cum = 0;
  int last = 0;
  for (int i = 0; i < n; i++) {
    if (probs[i] <= 0) continue;
    cum += probs[i];
    last = i;
    if (target < cum) return ids[i];
  }
  return ids[last];
}

/* ---- candidates ------------------------------------------------------------------ */

/* Weight buckets for top-p: bucket b holds w in [2^-b, 2^(1-b)); the last
 * one also holds everything smaller. */
enum { N_BUCKETS = 64 };

static int bucket_of(float w) {
  uint32_t bits;
  memcpy(&bits, &w, sizeof bits);
  int b = 127 - (int)((bits >> 23) & 0xff);
  return b < 0 ? 0 : b >= N_BUCKETS ? N_BUCKETS - 1 : b;
}

static int greedy(const float *x, int32_t n, samp_ws_t *w) {
  int32_t best = -1;
  float bv = -INFINITY;
  for (int32_t i = 0; i < n; i++)
    if (x[i] > bv) bv = x[i], best = i;
  if (best < 0) return -EDOM;
  w->ids[0] = best;
  w->probs[0] = 1.0f;
  return 1;
}

int samp_candidates(const samp_params_t *p, samp_ws_t *w, const float *x, const int32_t **ids_out,
                    const float **probs_out) {
  int32_t V = w->n_vocab, n;
  cand_t *c = w->c;
  *ids_out = w->ids;
  *probs_out = w->probs;
  if (p->temperature <= 0) return greedy(x, V, w);
  float inv_t = 1.0f / p->temperature;
  int sorted = 0;
  double z = 0; /* total weight of the candidates */
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
    if (!isfinite(m)) return m > 0 ? greedy(x, V, w) : -EDOM;
    for (int32_t i = 0; i < n; i++) {
      c[i].v = expf((c[i].v - m) * inv_t);
      z += c[i].v;
    }
    sorted = 1;
  } else {
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
      if (x[i] > m) m = x[i];
    if (!isfinite(m)) return m > 0 ? greedy(x, V, w) : -EDOM;
    float *wt = w->w;
    if (p->top_p < 1.0f) {
      double mass[N_BUCKETS] = {0};
      for (int32_t i = 0; i < V; i++) {
        wt[i] = expf((x[i] - m) * inv_t); /* NaN x gives NaN: bucketed last, never gathered */
        if (!(wt[i] > 0)) wt[i] = 0;
        mass[bucket_of(wt[i])] += wt[i];
      }
      for (int b = 0; b < N_BUCKETS; b++) z += mass[b];
      double need = (double)p->top_p * z, cum = 0;
      int last = 0;
      while (last < N_BUCKETS - 1 && (cum += mass[last]) < need) last++;
      float thr = last == N_BUCKETS - 1 ? 0x1p-149f : ldexpf(1.0f, -last);
      if (p->min_p > thr) thr = p->min_p; /* min-p keeps a prefix too: no need to sort more */
      n = 0;
      for (int32_t i = 0; i < V; i++)
        if (wt[i] >= thr) c[n++] = (cand_t){wt[i], i};
      qsort(c, (size_t)n, sizeof *c, cmp_desc);
      sorted = 1;
    } else {
      for (int32_t i = 0; i < V; i++) {
        wt[i] = expf((x[i] - m) * inv_t);
        if (!(wt[i] > 0)) wt[i] = 0;
        z += wt[i];
      }
      if (p->min_p <= 0) { /* no truncation: the whole vocabulary in id order */
        for (int32_t i = 0; i < V; i++) {
          w->ids[i] = i;
          w->probs[i] = (float)(wt[i] / z);
        }
        return V;
      }
      n = 0;
      for (int32_t i = 0; i < V; i++)
        if (wt[i] >= p->min_p) c[n++] = (cand_t){wt[i], i};
    }
  }
  if (p->top_p < 1.0f && sorted) { /* keep i while the mass before it is < top_p */
    double need = (double)p->top_p * z, cum = 0;
    int32_t keep = 0;
    while (keep < n && (keep == 0 || cum < need)) cum += c[keep++].v;
    n = keep;
  }
  if (p->min_p > 0) { /* w = p / p_max */
    int32_t keep = 0;
    for (int32_t i = 0; i < n; i++)
      if (c[i].v >= p->min_p) c[keep++] = c[i];
    n = keep;
  }
  double kept = 0;
  for (int32_t i = 0; i < n; i++) kept += c[i].v;
  for (int32_t i = 0; i < n; i++) {
    w->ids[i] = c[i].id;
    w->probs[i] = (float)(c[i].v / kept);
  }
  return n;
}

/* ---- raw log-probabilities ------------------------------------------------------- */

void samp_logprobs(const float *x, int32_t n_vocab, int32_t token, int32_t n_top, float *logprob,
                   samp_logprob_t *top) {
  float m = -INFINITY;
  for (int32_t i = 0; i < n_vocab; i++)
    if (x[i] > m) m = x[i];
  double sum = 0;
  if (isfinite(m))
    for (int32_t i = 0; i < n_vocab; i++) sum += isnan(x[i]) ? 0.0 : expf(x[i] - m);
  double lse = (double)m + log(sum);
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
