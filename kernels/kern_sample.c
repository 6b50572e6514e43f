/* kernels/kern_sample.c — the host emulation of be->sample (see
 * kern_sample.h): the device kernel's arithmetic in its order, one row at a
 * time. */
#include "kernels/kern_sample.h"

#include <stdlib.h>

#include "base/alloc.h"

/* The row's max, NaN ignored (-inf when nothing else), and the first id
 * holding it. */
static float row_max(const float *x, int32_t n, int32_t *first) {
  float m = -INFINITY;
  for (int32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  int32_t i = 0;
  while (i < n && !(x[i] == m)) i++;
  *first = i;
  return m;
}

/* (rank key << 32) | ~id: descending order is (value, then lower id). */
static int cmp_rank_desc(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Every id of the row by (value, then lower id), best first, as rank
 * entries (malloc'd; the caller frees). */
static uint64_t *ranked(const float *x, int32_t n_vocab) {
  uint64_t *rank = xmalloc((size_t)n_vocab * sizeof *rank);
  for (int32_t i = 0; i < n_vocab; i++) rank[i] = (uint64_t)kern_sample_key(x[i]) << 32 | (0xffffffffu - (uint32_t)i);
  qsort(rank, (size_t)n_vocab, sizeof *rank, cmp_rank_desc);
  return rank;
}

static int32_t rank_id(uint64_t e) { return (int32_t)(0xffffffffu - (uint32_t)e); }

/* x[id], NaN as -inf (how the host sampler ranks and reports it). */
static float value_of(const float *x, int32_t id) { return x[id] != x[id] ? -INFINITY : x[id]; }

/* The top-k draw: the k best logits in order, then the serial tail. */
static int32_t sample_top_k(const float *x, const kern_sample_row_t *r, int32_t n_vocab) {
  uint64_t *rank = ranked(x, n_vocab);
  float v[KERN_SAMPLE_MAX_TOP_K], w[KERN_SAMPLE_MAX_TOP_K];
  const int32_t k = r->top_k;
  for (int32_t i = 0; i < k; i++) v[i] = value_of(x, rank_id(rank[i]));
  const int32_t at = kern_sample_top_k_pick(v, w, k, 1.0f / r->temperature, r->top_p, r->min_p,
                                            kern_sample_uniform(r->seed, r->draw));
  const int32_t token = rank_id(rank[at]);
  free(rank);
  return token;
}

/* The raw log-probabilities of a logprobs row (the device's order). */
static void row_logprobs(const float *x, const kern_sample_row_t *r, int32_t n_vocab, kern_sample_out_t *o) {
  int32_t first;
  const float m = row_max(x, n_vocab, &first);
  const int32_t len = kern_sample_chunk_len(n_vocab);
  double total = 0;
  for (int c = 0; c < KERN_SAMPLE_CHUNKS; c++) {
    double s = 0;
    for (int32_t i = c * len; i < (c + 1) * len && i < n_vocab; i++) s += kern_sample_weight(x[i], m, 1.0f, 0.0f);
    total += s;
  }
  const double lse = (double)m + log(isfinite(m) ? total : 0.0);
  o->logprob = (float)((double)value_of(x, o->token) - lse);
  if (r->n_top <= 0) return;
  uint64_t *rank = ranked(x, n_vocab);
  for (int32_t i = 0; i < r->n_top && i < n_vocab; i++) {
    o->top_id[i] = rank_id(rank[i]);
    o->top_logprob[i] = (float)((double)value_of(x, o->top_id[i]) - lse);
  }
  free(rank);
}

/* ---- top-p over the whole vocabulary (kern_sample.h) ------------------------------ */

typedef struct tp_row {
  const float *x;
  int32_t n;
  float m, inv_t, min_p;
  float wstar;      /* the cut's weight: kept = w > wstar, or w == wstar and id <= tie_last */
  int32_t tie_last;
  int edge;         /* kern_sample_bucket(wstar) */
} tp_row_t;

enum { TP_ALL, TP_ABOVE, TP_A, TP_B_GE, TP_B_GT, TP_B_EQ };

static float tp_w(const tp_row_t *t, int32_t i) { return kern_sample_weight(t->x[i], t->m, t->inv_t, 0.0f); }

/* Whether id i of weight w counts in a sum of kind `what` at threshold v. */
static int tp_in(const tp_row_t *t, int what, float w, int32_t i, float v) {
  if (!(w > 0)) return 0;
  if (what == TP_ALL) return 1;
  if (what == TP_ABOVE) return w > v;
  const int kept = (w > t->wstar || (w == t->wstar && i <= t->tie_last)) && (t->min_p <= 0 || w >= t->min_p);
  if (!kept) return 0;
  const int b = kern_sample_bucket(w);
  if (what == TP_A) return b < t->edge;
  if (b != t->edge) return 0;
  return what == TP_B_GE ? w >= v : what == TP_B_GT ? w > v : w == v;
}

/* The total of the weights of kind `what`: chunk sums in id order, added in
 * the device's tree. */
static double tp_total(const tp_row_t *t, int what, float v) {
  double part[KERN_SAMPLE_CHUNKS];
  const int32_t len = kern_sample_chunk_len(t->n);
  for (int c = 0; c < KERN_SAMPLE_CHUNKS; c++) {
    double s = 0;
    for (int32_t i = c * len; i < (c + 1) * len && i < t->n; i++) {
      const float w = tp_w(t, i);
      if (tp_in(t, what, w, i, v)) s += w;
    }
    part[c] = s;
  }
  for (int h = KERN_SAMPLE_CHUNKS / 2; h > 0; h >>= 1)
    for (int c = 0; c < h; c++) part[c] += part[c + h];
  return part[0];
}

/* The ids of kind `what` at v (TP_ABOVE: w == v here) in id order: how
 * many (k < 0), or the id of the k-th (0-based). */
static int64_t tp_ties(const tp_row_t *t, int what, float v, int64_t k) {
  int64_t seen = 0;
  for (int32_t i = 0; i < t->n; i++) {
    const float w = tp_w(t, i);
    if (!(what == TP_ABOVE ? w == v && w > 0 : tp_in(t, what, w, i, v))) continue;
    if (seen++ == k) return i;
  }
  return seen;
}

static int32_t sample_top_p_all(const float *x, const kern_sample_row_t *r, int32_t n, float m) {
  tp_row_t t = {.x = x, .n = n, .m = m, .inv_t = 1.0f / r->temperature, .min_p = r->min_p};
  const double need = (double)r->top_p * tp_total(&t, TP_ALL, 0.0f);
  uint32_t lo = 0, hi = 0x3f800000u; /* M(> lo) >= need, M(> hi) < need (M(> 1) = 0) */
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (tp_total(&t, TP_ABOVE, kern_sample_from_bits(mid)) < need)
      hi = mid;
    else
      lo = mid;
  }
  t.wstar = kern_sample_from_bits(hi);
  const int64_t keep = kern_sample_tie_keep(tp_total(&t, TP_ABOVE, t.wstar), t.wstar, need,
                                            tp_ties(&t, TP_ABOVE, t.wstar, -1));
  t.tie_last = (int32_t)tp_ties(&t, TP_ABOVE, t.wstar, keep - 1);
  t.edge = kern_sample_bucket(t.wstar);

  /* A: chunk sums scanned in order, walked as the plain draw */
  const int32_t len = kern_sample_chunk_len(n);
  double off[KERN_SAMPLE_CHUNKS + 1];
  off[0] = 0;
  for (int c = 0; c < KERN_SAMPLE_CHUNKS; c++) {
    double s = 0;
    for (int32_t i = c * len; i < (c + 1) * len && i < n; i++) {
      const float w = tp_w(&t, i);
      if (tp_in(&t, TP_A, w, i, 0.0f)) s += w;
    }
    off[c + 1] = off[c] + s;
  }
  const double mass_a = off[KERN_SAMPLE_CHUNKS];
  const double target = kern_sample_uniform(r->seed, r->draw) * (mass_a + tp_total(&t, TP_B_GT, 0.0f));
  if (target < mass_a)
    for (int c = 0; c < KERN_SAMPLE_CHUNKS; c++) {
      double cum = off[c];
      for (int32_t i = c * len; i < (c + 1) * len && i < n; i++) {
        const float w = tp_w(&t, i);
        if (!tp_in(&t, TP_A, w, i, 0.0f)) continue;
        cum += w;
        if (target < cum) return i;
      }
    }
  /* B: the level L, then its ties */
  lo = 0, hi = 0x3f800001u; /* mass_a + M_B(>= lo) > target (lo = 0: taken as true), not at hi */
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (mass_a + tp_total(&t, TP_B_GE, kern_sample_from_bits(mid)) > target)
      lo = mid;
    else
      hi = mid;
  }
  if (lo == 0) { /* rounding: B's lightest weight, its last tie */
    float lightest = 2.0f;
    for (int32_t i = 0; i < n; i++) {
      const float w = tp_w(&t, i);
      if (tp_in(&t, TP_B_GT, w, i, 0.0f) && w < lightest) lightest = w;
    }
    return (int32_t)tp_ties(&t, TP_B_EQ, lightest, tp_ties(&t, TP_B_EQ, lightest, -1) - 1);
  }
  const float level = kern_sample_from_bits(lo);
  const int64_t j = kern_sample_tie_pick(mass_a + tp_total(&t, TP_B_GT, level), level, target,
                                         tp_ties(&t, TP_B_EQ, level, -1));
  return (int32_t)tp_ties(&t, TP_B_EQ, level, j);
}

static int32_t sample_row(const float *x, const kern_sample_row_t *r, int32_t n_vocab) {
  int32_t first;
  const float m = row_max(x, n_vocab, &first);
  if (m == -INFINITY) return KERN_SAMPLE_NO_TOKEN;
  if (r->temperature <= 0 || m == INFINITY) return first; /* greedy (the host sampler's too at +inf) */
  if (r->top_k > 0) return sample_top_k(x, r, n_vocab);
  if (r->top_p < 1.0f) return sample_top_p_all(x, r, n_vocab, m);
  const float inv_t = 1.0f / r->temperature;
  const int32_t len = kern_sample_chunk_len(n_vocab);
  double off[KERN_SAMPLE_CHUNKS + 1]; /* the chunks' exclusive scan; off[CHUNKS] is the mass */
  off[0] = 0;
  for (int c = 0; c < KERN_SAMPLE_CHUNKS; c++) {
    double s = 0;
    for (int32_t i = c * len; i < (c + 1) * len && i < n_vocab; i++) s += kern_sample_weight(x[i], m, inv_t, r->min_p);
    off[c + 1] = off[c] + s;
  }
  const double target = kern_sample_uniform(r->seed, r->draw) * off[KERN_SAMPLE_CHUNKS];
  int32_t last = first; /* the max is always kept (weight 1 >= min_p) */
  for (int c = 0; c < KERN_SAMPLE_CHUNKS; c++) {
    double cum = off[c];
    for (int32_t i = c * len; i < (c + 1) * len && i < n_vocab; i++) {
      const float w = kern_sample_weight(x[i], m, inv_t, r->min_p);
      if (w <= 0) continue;
      cum += w;
      last = i;
      if (target < cum) return i;
    }
  }
  return last; /* rounding left the target at the mass */
}

void kern_sample_ref(kern_sample_out_t *out, float *logits, const kern_sample_row_t *rows,
                     const kern_sample_op_t *ops, int n_rows, int32_t n_vocab) {
  for (int i = 0; i < n_rows; i++) {
    const kern_sample_row_t *r = &rows[i];
    if (!r->on_device) continue;
    float *x = logits + (size_t)i * (size_t)n_vocab;
    for (int32_t j = r->op_begin; j < r->op_begin + r->n_bias + r->n_count; j++) {
      const kern_sample_op_t *op = &ops[j];
      x[op->token] = kern_sample_apply(x[op->token], op);
    }
    out[i].token = sample_row(x, r, n_vocab);
    if (r->logprobs && out[i].token >= 0) row_logprobs(x, r, n_vocab, &out[i]);
  }
}
