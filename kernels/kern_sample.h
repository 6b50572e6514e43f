/* kernels/kern_sample.h — picking a row's next token where its logits are
 * (be->sample), so a GPU step downloads token ids instead of vocab × rows
 * f32 logits.
 *
 * What a device takes (the rest stays with the host sampler,
 * model/sampler.h, which says per row whether a row qualifies:
 * samp_state_device_row): logit_bias and the repetition, frequency and
 * presence penalties (as ops on the row, in the host sampler's order),
 * then greedy (argmax, lowest id on ties), or a draw at temperature T,
 * over the whole vocabulary with min-p or over the top k (k <= 1,024) with
 * top-p and min-p, from the request's own counter-based random stream (the
 * same as the host sampler's: draw i of seed s is mix64(s + i * GAMMA), 53
 * bits); with logprobs (rows without penalties or bias), the raw
 * log-probabilities too; top-p over the whole vocabulary (with min-p) by a
 * threshold search, below. Not on a device yet: logprobs of a penalised
 * row, and the first row of an n > 1 request (its children sample the same
 * row).
 *
 * The arithmetic, fixed so that a host emulation gives the device's bits
 * (kern_sample_ref, which is also the CPU backend's op and the reference of
 * the GPU checks): weights w = exp((x - max) / T) by the host sampler's
 * AVX2 exp polynomial (kern_sample_exp: fused multiply-adds written out, so
 * no compiler contraction can change it; on an AVX2 build the weights are
 * the host sampler's own bits); kept: w > 0 and, with min-p, w >= min_p;
 * the row cut into KERN_SAMPLE_CHUNKS chunks of consecutive ids, each
 * summed in id order in double, the chunk sums scanned in order (their
 * total is the mass); the token is the first kept id whose cumulative mass
 * passes u * mass (the last kept one if rounding leaves none). The host
 * sampler sums in another order, so a draw within ~1e-15 of a boundary
 * between two tokens may differ; the tests measure that margin. With top_k:
 * the k largest logits by (value, then lower id) in that order, their
 * weights by kern_sample_exp, then top-p's cut, min-p's filter and the draw
 * as the host sampler walks them, one after the other (the host sampler
 * uses expf there: weights within a few ulps, so a draw or a top-p cut
 * within ~1e-6 of a boundary may differ).
 *
 * Top-p over the whole vocabulary (top_k 0, top_p < 1) keeps what the host
 * sampler keeps (sample/sampler_select.c: the tokens by weight, then lower
 * id, while the mass before each is < top_p · z; then min-p) and draws in
 * its order (the kept tokens of the weight buckets above the edge bucket,
 * kern_sample_bucket, in id order, then the edge bucket's by weight and
 * id), without sorting: every total below is a sum over the row in chunks
 * of consecutive ids, each in id order, the chunk sums added pairwise in a
 * tree (KERN_SAMPLE_CHUNKS / 2 apart, then / 4, ...), and each threshold a
 * binary search over the 31 bits of a positive float weight:
 *   z = the total of the weights (min-p not applied), need = top_p · z;
 *   w* = the smallest weight with M(> w*) < need (M(> v): the total of the
 *        weights > v); the first t ties at w* in id order are kept, t =
 *        kern_sample_tie_keep(M(> w*), w*, need, ties): kept = w > w*, or
 *        w = w* among those t; with min-p also w >= min_p;
 *   A = kept tokens of buckets before kern_sample_bucket(w*) (id order,
 *       chunk sums scanned in order as the plain draw's), B = kept tokens
 *       of that bucket; target = u · (mass(A) + tree total of B);
 *   in A: the first id whose cumulative mass passes target; else in B the
 *       largest weight L with mass(A) + M_B(>= L) > target and among B's
 *       ties at L (id order) tie kern_sample_tie_pick(mass(A) + M_B(> L),
 *       L, target, ties) (the last kept token of B if rounding leaves none).
 * Where the sums are exact (a bucket's weights share an exponent, so above
 * ~2^-12 every such sum is) this is the host sampler's choice; elsewhere a
 * cut or a draw within ~1e-15 of a boundary may differ, as for the plain
 * draw. Each threshold costs a pass over the row (~55 in all).
 *
 * The inline functions run on the host and the device (KERN_SAMPLE_HD). */
#ifndef TRAM_KERN_SAMPLE_H
#define TRAM_KERN_SAMPLE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"

#ifdef __CUDACC__
#define KERN_SAMPLE_HD __host__ __device__
#else
#define KERN_SAMPLE_HD
#endif

#define KERN_SAMPLE_CHUNKS 1024 /* one per thread of the device's block */
#define KERN_SAMPLE_MAX_TOP_K 1024 /* top-k the device sorts in shared memory */
#define KERN_SAMPLE_MAX_TOP_LOGPROBS 20

#ifdef __cplusplus
extern "C" {
#endif

/* One change to one logit before sampling (the host sampler's steps 1-3):
 * with KERN_SAMPLE_BIAS x += bias; then with KERN_SAMPLE_REP x = x > 0 ?
 * x / rep : x * rep; then with KERN_SAMPLE_SUB x -= sub (sub = frequency *
 * count + presence, computed by the host sampler). */
typedef struct kern_sample_op {
  int32_t token;
  uint32_t flags; /* KERN_SAMPLE_BIAS | KERN_SAMPLE_REP | KERN_SAMPLE_SUB */
  float bias, rep, sub;
} kern_sample_op_t;

#define KERN_SAMPLE_BIAS 1u
#define KERN_SAMPLE_REP 2u
#define KERN_SAMPLE_SUB 4u

/* How the device picks one row's token. Its ops are ops[op_begin ..
 * op_begin + n_bias + n_count): first n_bias bias ops applied one after the
 * other (a token may repeat), then n_count ops of distinct tokens (applied
 * in any order, or at once). */
typedef struct kern_sample_row {
  int32_t on_device; /* 1: the device picks it; 0: the host does (row skipped) */
  float temperature; /* 0: greedy */
  float min_p;       /* 0: off; else keep w >= min_p (w = p / p_max) */
  int32_t op_begin, n_bias, n_count;
  int32_t top_k;     /* 0: the whole vocabulary; else 1..KERN_SAMPLE_MAX_TOP_K */
  float top_p;       /* nucleus over the top k, or over the whole vocabulary (1: off) */
  int32_t logprobs;  /* 1: the token's raw logprob and the n_top best (a row without ops) */
  int32_t n_top;     /* 0..KERN_SAMPLE_MAX_TOP_LOGPROBS */
  uint64_t seed;     /* the request's stream */
  uint64_t draw;     /* this draw's index in the stream (1 for the first) */
} kern_sample_row_t;

/* What be->sample gives for one row: the token and, for a logprobs row,
 * the raw log-probabilities (log_softmax of the logits before any op) of the
 * token and of the n_top most likely tokens (most likely first, lower id
 * on ties), as the host sampler's samp_logprobs: lse = max + log(sum of
 * kern_sample_exp(x - max)), summed in the chunks' order. */
typedef struct kern_sample_out {
  int32_t token;
  float logprob;
  int32_t top_id[KERN_SAMPLE_MAX_TOP_LOGPROBS];
  float top_logprob[KERN_SAMPLE_MAX_TOP_LOGPROBS];
} kern_sample_out_t;

/* The token kern_sample_ref / be->sample writes for a row without a finite
 * logit (the host sampler's -EDOM). */
#define KERN_SAMPLE_NO_TOKEN (-1)

/* Draw `draw` (1-based) of the stream of `seed`: uniform in [0, 1), 53
 * bits, from splitmix64's mixer (base/hash.h). The host sampler draws
 * through this function too. */
static inline KERN_SAMPLE_HD double kern_sample_uniform(uint64_t seed, uint64_t draw) {
  return (double)(hash_mix64(seed + draw * HASH_GAMMA) >> 11) * 0x1.0p-53;
}

/* exp(v) for v <= 0, 0 below -87 and for NaN: exp(r ln2 + f) = 2^r e^f with
 * r = round-to-even(v / ln2), f by Cody-Waite, e^f by its degree-6 Taylor
 * series; every multiply-add fused, as the host sampler's AVX2 exp8. */
static inline KERN_SAMPLE_HD float kern_sample_exp(float v) {
  if (!(v >= -87.0f)) return 0.0f;
#ifdef __CUDA_ARCH__
  const float r = rintf(__fmul_rn(v, 1.44269504088896341f));
#else
  const float r = nearbyintf(v * 1.44269504088896341f);
#endif
  float f = fmaf(r, -0.693145751953125f, v);
  f = fmaf(r, -1.428606765330187045e-06f, f);
  float p = 1.0f / 720;
  p = fmaf(p, f, 1.0f / 120);
  p = fmaf(p, f, 1.0f / 24);
  p = fmaf(p, f, 1.0f / 6);
  p = fmaf(p, f, 0.5f);
  p = fmaf(p, f, 1.0f);
  p = fmaf(p, f, 1.0f);
  const uint32_t bits = (uint32_t)((int32_t)r + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
#ifdef __CUDA_ARCH__
  return __fmul_rn(p, scale);
#else
  return p * scale;
#endif
}

/* The weight of logit x given the row's max m and 1 / T: kern_sample_exp((x
 * - m) * inv_t), and 0 when it is not kept (NaN, underflow, below min_p). */
static inline KERN_SAMPLE_HD float kern_sample_weight(float x, float m, float inv_t, float min_p) {
#ifdef __CUDA_ARCH__
  const float w = kern_sample_exp(__fmul_rn(__fsub_rn(x, m), inv_t));
#else
  const float w = kern_sample_exp((x - m) * inv_t);
#endif
  return w > 0 && (min_p <= 0 || w >= min_p) ? w : 0.0f;
}

/* x after op (see kern_sample_op_t), rounded as the host sampler does. */
static inline KERN_SAMPLE_HD float kern_sample_apply(float x, const kern_sample_op_t *op) {
#ifdef __CUDA_ARCH__
  if (op->flags & KERN_SAMPLE_BIAS) x = __fadd_rn(x, op->bias);
  if (op->flags & KERN_SAMPLE_REP) x = x > 0 ? __fdiv_rn(x, op->rep) : __fmul_rn(x, op->rep);
  if (op->flags & KERN_SAMPLE_SUB) x = __fsub_rn(x, op->sub);
#else
  if (op->flags & KERN_SAMPLE_BIAS) x += op->bias;
  if (op->flags & KERN_SAMPLE_REP) x = x > 0 ? x / op->rep : x * op->rep;
  if (op->flags & KERN_SAMPLE_SUB) x -= op->sub;
#endif
  return x;
}

/* The ids of chunk c of a row of n_vocab: [c * len, min((c + 1) * len, n_vocab)). */
static inline KERN_SAMPLE_HD int32_t kern_sample_chunk_len(int32_t n_vocab) {
  return (n_vocab + KERN_SAMPLE_CHUNKS - 1) / KERN_SAMPLE_CHUNKS;
}

/* A logit's rank key: larger keys for larger logits, NaN as -inf, -0 as +0
 * (the host sampler ranks them by value, then lower id). */
static inline KERN_SAMPLE_HD uint32_t kern_sample_key(float x) {
  if (x != x) x = -INFINITY;
  if (x == 0.0f) x = 0.0f;
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  return b >> 31 ? ~b : b | 0x80000000u;
}

#define KERN_SAMPLE_BUCKETS 512 /* the host sampler's top-p buckets: 8 per power of two */

/* The top-p bucket of a weight w in (0, 1] (sample/sampler_select.c): from
 * its exponent and top three mantissa bits, so a larger weight never has a
 * larger bucket; weights below 2^-64 all share the last one. */
static inline KERN_SAMPLE_HD int kern_sample_bucket(float w) {
  uint32_t bits;
  memcpy(&bits, &w, sizeof bits);
  const int e = (int)((bits >> 23) & 0xff), sub = (int)((bits >> 20) & 7);
  const int b = ((127 - e) << 3) | (7 - sub);
  return b < 0 ? 0 : b >= KERN_SAMPLE_BUCKETS ? KERN_SAMPLE_BUCKETS - 1 : b;
}

/* How many of `ties` tokens of weight w (in id order) top-p keeps after a
 * mass `above` of heavier tokens: tie k is kept while k == 0 or above +
 * k · w < need (one fused multiply-add), so at least one. */
static inline KERN_SAMPLE_HD int64_t kern_sample_tie_keep(double above, float w, double need, int64_t ties) {
  const double q = (need - above) / (double)w;
  int64_t k = q >= (double)ties ? ties : q > 1 ? (int64_t)ceil(q) : 1;
  while (k > 1 && !(fma((double)(k - 1), (double)w, above) < need)) k--;
  while (k < ties && fma((double)k, (double)w, above) < need) k++;
  return k;
}

/* Which of `ties` tokens of weight w (in id order, after a mass `base`) a
 * draw at target takes: the first j with target < base + (j + 1) · w (one
 * fused multiply-add), the last when none. */
static inline KERN_SAMPLE_HD int64_t kern_sample_tie_pick(double base, float w, double target, int64_t ties) {
  const double q = (target - base) / (double)w;
  int64_t j = q >= (double)(ties - 1) ? ties - 1 : q > 0 ? (int64_t)q : 0;
  while (j > 0 && target < fma((double)j, (double)w, base)) j--;
  while (j < ties - 1 && !(target < fma((double)(j + 1), (double)w, base))) j++;
  return j;
}

/* A positive float from its bits (the threshold searches). */
static inline KERN_SAMPLE_HD float kern_sample_from_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* The serial tail of a top-k draw over v[k] (the k best logits, best first;
 * finite max v[0]): weights into w[k], top-p's cut, min-p's filter (kept
 * ones marked by w > 0), the draw. Returns the position in v of the token. */
static inline KERN_SAMPLE_HD int32_t kern_sample_top_k_pick(const float *v, float *w, int32_t k, float inv_t,
                                                           float top_p, float min_p, double u) {
  double z = 0;
  for (int32_t i = 0; i < k; i++) {
#ifdef __CUDA_ARCH__
    w[i] = kern_sample_exp(__fmul_rn(__fsub_rn(v[i], v[0]), inv_t));
#else
    w[i] = kern_sample_exp((v[i] - v[0]) * inv_t);
#endif
    z += w[i];
  }
  int32_t n = k;
  if (top_p < 1.0f) { /* keep i while the mass before it is < top_p */
    const double need = (double)top_p * z;
    double cum = 0;
    n = 0;
    while (n < k && (n == 0 || cum < need)) cum += w[n++];
  }
  double kept = 0;
  for (int32_t i = 0; i < k; i++) {
    if (i >= n || (min_p > 0 && !(w[i] >= min_p))) w[i] = 0.0f;
    kept += w[i];
  }
  const double target = u * kept;
  double cum = 0;
  int32_t last = 0;
  for (int32_t i = 0; i < n; i++) {
    if (w[i] <= 0) continue;
    cum += w[i];
    last = i;
    if (target < cum) break;
  }
  return last;
}

/* The host emulation of be->sample: for each of n_rows rows of logits
 * [n_rows, n_vocab] with rows[i].on_device, applies its ops (ops: the
 * step's op list; rows without ops leave it unread) and writes out[i]
 * (token KERN_SAMPLE_NO_TOKEN when no logit is finite; the logprobs only
 * for logprobs rows); other rows are left alone. Host memory; like the
 * device, it changes the logits of rows with ops. The device gives the same
 * tokens bit for bit; its log() may differ from the host's in the last bit
 * of a double, so a logprob may differ by a float ulp. */
void kern_sample_ref(kern_sample_out_t *out, float *logits, const kern_sample_row_t *rows,
                     const kern_sample_op_t *ops, int n_rows, int32_t n_vocab);

#ifdef __cplusplus
}
#endif

#endif
