/* tests/unit/test_attn_step.c — attention/: the metadata builders with the
 * spec's two worked examples, and the paged attention forward driven step by
 * step (attn_step_begin, attn_layer_forward) against a float64 reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn.h"
#include "attention/attn_meta.h"
#include "cache/kv_cache.h"
#include "tests/unit/attn_ref.h"
#include "tests/unit/testutil.h"

/* The request that token t belongs to, read off cumulative lengths. */
static int owner(const int32_t *cu, int n_seqs, int t) {
  for (int b = 0; b < n_seqs; b++)
    if (t >= cu[b] && t < cu[b + 1]) return b;
  return -1;
}

/* The spec's varlen example: query lengths [10, 3, 1], key lengths [0, 1, 7]. */
static void spec_varlen_metadata(void **state) {
  (void)state;
  const int32_t ql[] = {10, 3, 1}, kl[] = {0, 1, 7};
  int32_t cu_q[4], cu_k[4];
  int max_q = -1, max_k = -1;
  assert_int_equal(attn_meta_varlen(3, ql, kl, cu_q, cu_k, &max_q, &max_k), 0);
  const int32_t want_q[] = {0, 10, 13, 14}, want_k[] = {0, 0, 1, 8};
  assert_memory_equal(cu_q, want_q, sizeof want_q);
  assert_memory_equal(cu_k, want_k, sizeof want_k);
  assert_int_equal(max_q, 10);
  assert_int_equal(max_k, 7);
  /* Q: [1, 14, heads, dim], K/V: [1, 8, kv_heads, dim] */
  assert_int_equal(cu_q[3], 14);
  assert_int_equal(cu_k[3], 8);
  const int q_owner[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2};
  const int k_owner[8] = {1, 2, 2, 2, 2, 2, 2, 2}; /* r0 has no K tokens */
  for (int t = 0; t < 14; t++) assert_int_equal(owner(cu_q, 3, t), q_owner[t]);
  for (int t = 0; t < 8; t++) assert_int_equal(owner(cu_k, 3, t), k_owner[t]);

  const int32_t neg[] = {1, -1};
  assert_int_equal(attn_meta_varlen(2, neg, ql, cu_q, cu_k, &max_q, &max_k), -EINVAL);
  const int32_t big[] = {INT32_MAX, 1};
  assert_int_equal(attn_meta_varlen(2, big, ql, cu_q, cu_k, &max_q, &max_k), -EOVERFLOW);
  assert_int_equal(attn_meta_varlen(0, ql, kl, cu_q, cu_k, &max_q, &max_k), 0);
  assert_int_equal(cu_q[0], 0);
  assert_int_equal(max_q, 0);
}

/* Takes one block into a scratch sequence (to steer which ids come next). */
static void take_block(kv_alloc_t *a, kv_seq_t *s, int32_t want) {
  assert_int_equal(kv_seq_reserve(a, s, (int64_t)(s->n_blocks + 1) * kv_alloc_block_size(a) - s->n_tokens), 0);
  assert_int_equal(s->blocks[s->n_blocks - 1], want);
}

/* The spec's decode example, built through the allocator: cached lengths
 * [30, 32, 70], block size 32, 4 blocks per sequence, tables [2], [0, 1],
 * [3, 5, 6]; sequence 1 gets its second block before the step (32 + 1 > 32),
 * the others have room. Then the decode step runs on that state. */
static void spec_decode_example(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  const int H = 6, KVH = 2, hd = 64;
  kv_cache_config_t cc = {.n_layers = 1, .n_kv_heads = KVH, .head_dim = hd, .block_size = 32, .num_blocks = 7};
  kv_cache_t *c = kv_cache_create(be, &cc);
  assert_non_null(c);
  kv_alloc_t *a = c->alloc;
  kv_seq_t seq[3], tmp_a, tmp_b;
  for (int i = 0; i < 3; i++) kv_seq_init(&seq[i]);
  kv_seq_init(&tmp_a);
  kv_seq_init(&tmp_b);
  take_block(a, &seq[1], 0);
  take_block(a, &tmp_a, 1);
  take_block(a, &seq[0], 2);
  take_block(a, &seq[2], 3);
  take_block(a, &tmp_b, 4);
  take_block(a, &seq[2], 5);
  take_block(a, &seq[2], 6);
  kv_seq_free(a, &tmp_a); /* block 1 is now the next to be handed out */
  kv_seq_free(a, &tmp_b);
  assert_int_equal(kv_alloc_free_blocks(a), 2);

  /* the cached tokens' K/V, written through the cache's update */
  const int32_t cached[3] = {30, 32, 70};
  float *hist_k[3], *hist_v[3]; /* [cached + 1, KVH, hd]: the ground truth, new token last */
  for (int b = 0; b < 3; b++) {
    const size_t n = (size_t)(cached[b] + 1) * c->kv_dim;
    hist_k[b] = malloc(n * sizeof(float));
    hist_v[b] = malloc(n * sizeof(float));
    tu_fill_normal(&rng, hist_k[b], n, 1.0f);
    tu_fill_normal(&rng, hist_v[b], n, 1.0f);
    int32_t *slots = malloc((size_t)cached[b] * sizeof *slots);
    for (int p = 0; p < cached[b]; p++) slots[p] = kv_seq_slot(a, &seq[b], p);
    kv_update_t u = {.k = hist_k[b], .v = hist_v[b], .slots = slots, .n_tokens = cached[b]};
    kv_cache_update(c, 0, &u);
    kv_seq_commit(a, &seq[b], cached[b]);
    free(slots);
  }

  /* before the step: only sequence 1 needs a block, and gets block 1 */
  const int32_t need[3] = {0, 1, 0};
  for (int b = 0; b < 3; b++) {
    assert_int_equal(kv_seq_blocks_needed(a, &seq[b], 1), need[b]);
    assert_int_equal(kv_seq_reserve(a, &seq[b], 1), 0);
  }
  assert_int_equal(kv_alloc_free_blocks(a), 1);

  const kv_seq_t *sp[3] = {&seq[0], &seq[1], &seq[2]};
  int32_t table[3 * 4], seqlens[3];
  assert_int_equal(attn_meta_paged(sp, 3, 4, table, seqlens), 0);
  const int32_t want_table[12] = {2, -1, -1, -1, 0, 1, -1, -1, 3, 5, 6, -1};
  assert_memory_equal(table, want_table, sizeof want_table);
  assert_memory_equal(seqlens, cached, sizeof cached);
  assert_int_equal(attn_meta_paged(sp, 3, 2, table, seqlens), -E2BIG); /* seq 2 has 3 blocks */

  /* the decode step itself */
  attn_config_t ac = {.n_heads = H, .max_seqs = 4, .max_tokens = 8, .max_seq_len = 128};
  attn_t *at = attn_create(be, c, &ac);
  assert_non_null(at);
  attn_meta_t m;
  assert_int_equal(attn_meta_init(&m, 4, 8, 4), 0);
  const int32_t ones[3] = {1, 1, 1};
  assert_int_equal(attn_meta_build(&m, a, sp, ones, 3), 0);
  /* compact: the stride is the most blocks a sequence of the batch holds (3), not the capacity (4) */
  const int32_t want_compact[9] = {2, -1, -1, 0, 1, -1, 3, 5, 6};
  assert_int_equal(m.batch.max_blocks_per_seq, 3);
  assert_memory_equal(m.batch.block_table, want_compact, sizeof want_compact);
  const int32_t want_slots[3] = {2 * 32 + 30, 1 * 32 + 0, 6 * 32 + 6};
  assert_memory_equal(m.batch.slots, want_slots, sizeof want_slots);
  assert_int_equal(attn_step_begin(at, &m.batch), 0);
  assert_int_equal(attn_step_path(at), ATTN_PATH_DECODE);
  float *q = malloc((size_t)3 * H * hd * sizeof(float)), *out = malloc((size_t)3 * H * hd * sizeof(float));
  float *kn = malloc((size_t)3 * c->kv_dim * sizeof(float)), *vn = malloc((size_t)3 * c->kv_dim * sizeof(float));
  tu_fill_normal(&rng, q, (size_t)3 * H * hd, 1.0f);
  for (int b = 0; b < 3; b++) {
    memcpy(kn + (size_t)b * c->kv_dim, hist_k[b] + (size_t)cached[b] * c->kv_dim, (size_t)c->kv_dim * sizeof(float));
    memcpy(vn + (size_t)b * c->kv_dim, hist_v[b] + (size_t)cached[b] * c->kv_dim, (size_t)c->kv_dim * sizeof(float));
  }
  tu_poison_f32(out, (size_t)3 * H * hd);
  assert_int_equal(attn_layer_forward(at, 0, q, kn, vn, out), 0);
  double *want = malloc((size_t)3 * H * hd * sizeof(double));
  for (int b = 0; b < 3; b++)
    ref_attn_seq(1, cached[b] + 1, H, KVH, hd, q + (size_t)b * H * hd, hist_k[b], hist_v[b], want + (size_t)b * H * hd);
  ref_check("spec decode example", out, want, 3L * H * hd);
  for (int b = 0; b < 3; b++) /* the new token landed in place */
    assert_memory_equal((float *)kv_cache_k(c, 0) + (size_t)want_slots[b] * c->kv_dim, kn + (size_t)b * c->kv_dim,
                        (size_t)c->kv_dim * sizeof(float));

  free(q);
  free(out);
  free(kn);
  free(vn);
  free(want);
  for (int b = 0; b < 3; b++) {
    free(hist_k[b]);
    free(hist_v[b]);
    kv_seq_free(a, &seq[b]);
  }
  assert_int_equal(kv_alloc_free_blocks(a), 7);
  attn_meta_free(&m);
  attn_destroy(at);
  kv_cache_destroy(c);
  kern_backend_destroy(be);
}

/* --- the forward, step by step --------------------------------------------- */

enum { L = 2, H = 6, KVH = 2, HD = 64, BS = 16, MAXS = 8, MAXT = 128, MAXLEN = 96 };
#define KVD (KVH * HD)

/* A cache, its attention forward and the sequences living in it. */
typedef struct rig {
  kv_cache_t *cache;
  attn_t *attn;
  attn_meta_t meta;
  kv_seq_t seqs[MAXS];
} rig_t;

static void rig_init(rig_t *r, kern_backend_t *be, int gather) {
  kv_cache_config_t cc = {.n_layers = L, .n_kv_heads = KVH, .head_dim = HD, .block_size = BS, .num_blocks = 40};
  r->cache = kv_cache_create(be, &cc);
  assert_non_null(r->cache);
  attn_config_t ac = {.n_heads = H, .max_seqs = MAXS, .max_tokens = MAXT, .max_seq_len = MAXLEN, .gather = gather};
  r->attn = attn_create(be, r->cache, &ac);
  assert_non_null(r->attn);
  assert_int_equal(attn_meta_init(&r->meta, MAXS, MAXT, (MAXLEN + BS - 1) / BS), 0);
  for (int i = 0; i < MAXS; i++) kv_seq_init(&r->seqs[i]);
}

static void rig_free(rig_t *r) {
  for (int i = 0; i < MAXS; i++) kv_seq_free(r->cache->alloc, &r->seqs[i]);
  assert_int_equal(kv_alloc_free_blocks(r->cache->alloc), r->cache->num_blocks);
  attn_meta_free(&r->meta);
  attn_destroy(r->attn);
  kv_cache_destroy(r->cache);
}

/* One step: sequences ids[0..n) add q_lens tokens; q/k/v/out per layer,
 * packed by sequence in ids order. Returns the path taken. */
static attn_path_t rig_step(rig_t *r, const int *ids, const int32_t *q_lens, int n, float *const *q,
                            float *const *k, float *const *v, float *const *out) {
  const kv_seq_t *sp[MAXS + 1];
  for (int i = 0; i < n; i++) {
    assert_int_equal(kv_seq_reserve(r->cache->alloc, &r->seqs[ids[i]], q_lens[i]), 0);
    sp[i] = &r->seqs[ids[i]];
  }
  assert_int_equal(attn_meta_build(&r->meta, r->cache->alloc, sp, q_lens, n), 0);
  assert_int_equal(attn_step_begin(r->attn, &r->meta.batch), 0);
  for (int l = 0; l < L; l++) assert_int_equal(attn_layer_forward(r->attn, l, q[l], k[l], v[l], out[l]), 0);
  for (int i = 0; i < n; i++) kv_seq_commit(r->cache->alloc, &r->seqs[ids[i]], q_lens[i]);
  return attn_step_path(r->attn);
}

/* Several engine steps — prefills (one chunked), decodes that cross block
 * edges, a sequence that leaves and one that joins — through
 * attn_step_begin/attn_layer_forward, against the float64 reference over each
 * sequence's whole K/V history. The gather variant gives the same bits; so
 * does the varlen path run on each decode step (forced by an extra
 * two-token sequence in a third cache). */
static void steps_end_to_end(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 1);
  rig_t paged, gather, forced;
  rig_init(&paged, be, 0);
  rig_init(&gather, be, 1);
  rig_init(&forced, be, 0);
  enum { A, B, C, D, X, NSEQ };
  float *hk[L][NSEQ], *hv[L][NSEQ]; /* K/V history per layer and sequence: [MAXLEN, KVH, HD] */
  int hlen[NSEQ] = {0};
  for (int l = 0; l < L; l++)
    for (int s = 0; s < NSEQ; s++) {
      hk[l][s] = malloc((size_t)MAXLEN * KVD * sizeof(float));
      hv[l][s] = malloc((size_t)MAXLEN * KVD * sizeof(float));
    }
  /* the schedule: (sequence, tokens) per step */
  static const struct {
    int n;
    int ids[4];
    int32_t q[4];
  } steps[] = {
      {3, {A, B, C}, {44, 20, 15}}, /* prefills; B's first chunk */
      {3, {A, B, C}, {1, 17, 1}},   /* B's second chunk, with decodes: varlen */
      {3, {A, B, C}, {1, 1, 1}},    /* decode (C crosses into its second block) */
      {4, {A, B, C, D}, {1, 1, 1, 5}},
      {3, {A, B, D}, {1, 1, 1}},    /* C has left */
      {3, {D, A, B}, {1, 1, 1}},    /* A crosses into a new block */
      {3, {A, B, D}, {1, 1, 1}},
  };
  const int n_steps = (int)(sizeof steps / sizeof *steps);
  uint64_t want_decode = 0, want_varlen = 0, tok_decode = 0, tok_varlen = 0;
  for (int st = 0; st < n_steps; st++) {
    const int n = steps[st].n;
    int nt = 0, is_decode = 1;
    for (int i = 0; i < n; i++) nt += steps[st].q[i], is_decode &= steps[st].q[i] == 1;
    if (st == 4) { /* C leaves: its blocks go back */
      kv_seq_free(paged.cache->alloc, &paged.seqs[C]);
      kv_seq_free(gather.cache->alloc, &gather.seqs[C]);
      kv_seq_free(forced.cache->alloc, &forced.seqs[C]);
    }
    float *q[L], *k[L], *v[L], *o1[L], *o2[L], *o3[L];
    const size_t qn = (size_t)(nt + 2) * H * HD, kn = (size_t)(nt + 2) * KVD;
    for (int l = 0; l < L; l++) {
      q[l] = malloc(qn * sizeof(float));
      k[l] = malloc(kn * sizeof(float));
      v[l] = malloc(kn * sizeof(float));
      o1[l] = malloc(qn * sizeof(float));
      o2[l] = malloc(qn * sizeof(float));
      o3[l] = malloc(qn * sizeof(float));
      tu_fill_normal(&rng, q[l], qn, 1.0f);
      tu_fill_normal(&rng, k[l], kn, 1.0f);
      tu_fill_normal(&rng, v[l], kn, 1.0f);
      tu_poison_f32(o1[l], qn);
      tu_poison_f32(o2[l], qn);
      tu_poison_f32(o3[l], qn);
    }
    attn_path_t p1 = rig_step(&paged, steps[st].ids, steps[st].q, n, q, k, v, o1);
    attn_path_t p2 = rig_step(&gather, steps[st].ids, steps[st].q, n, q, k, v, o2);
    assert_int_equal(p1, is_decode ? ATTN_PATH_DECODE : ATTN_PATH_VARLEN);
    assert_int_equal(p2, p1);
    if (is_decode) {
      want_decode++, tok_decode += (uint64_t)nt;
      /* the same rows, plus a two-token sequence X that forces the varlen path */
      int ids[5];
      int32_t ql[5];
      memcpy(ids, steps[st].ids, sizeof ids[0] * (size_t)n);
      memcpy(ql, steps[st].q, sizeof ql[0] * (size_t)n);
      ids[n] = X, ql[n] = 2;
      assert_int_equal(rig_step(&forced, ids, ql, n + 1, q, k, v, o3), ATTN_PATH_VARLEN);
    } else {
      want_varlen++, tok_varlen += (uint64_t)nt;
      assert_int_equal(rig_step(&forced, steps[st].ids, steps[st].q, n, q, k, v, o3), ATTN_PATH_VARLEN);
    }
    for (int l = 0; l < L; l++) {
      int t0 = 0;
      for (int i = 0; i < n; i++) {
        const int s = steps[st].ids[i], ql = steps[st].q[i];
        memcpy(hk[l][s] + (size_t)hlen[s] * KVD, k[l] + (size_t)t0 * KVD, (size_t)ql * KVD * sizeof(float));
        memcpy(hv[l][s] + (size_t)hlen[s] * KVD, v[l] + (size_t)t0 * KVD, (size_t)ql * KVD * sizeof(float));
        double *want = malloc((size_t)ql * H * HD * sizeof(double));
        ref_attn_seq(ql, hlen[s] + ql, H, KVH, HD, q[l] + (size_t)t0 * H * HD, hk[l][s], hv[l][s], want);
        ref_check(is_decode ? "decode step" : "varlen step", o1[l] + (size_t)t0 * H * HD, want, (long)ql * H * HD);
        free(want);
        t0 += ql;
      }
      assert_memory_equal(o1[l], o2[l], (size_t)nt * H * HD * sizeof(float)); /* paged == gather */
      assert_memory_equal(o1[l], o3[l], (size_t)nt * H * HD * sizeof(float)); /* decode == varlen */
      free(q[l]), free(k[l]), free(v[l]), free(o1[l]), free(o2[l]), free(o3[l]);
    }
    for (int i = 0; i < n; i++) hlen[steps[st].ids[i]] += steps[st].q[i];
    if (is_decode) hlen[X] += 2;
    if (st == 4) hlen[C] = 0;
  }
  attn_stats_t stats;
  attn_get_stats(paged.attn, &stats);
  assert_int_equal(stats.decode_steps, want_decode);
  assert_int_equal(stats.varlen_steps, want_varlen);
  assert_int_equal(stats.decode_tokens, tok_decode);
  assert_int_equal(stats.varlen_tokens, tok_varlen);
  assert_true(want_decode >= 3 && want_varlen >= 3);
  attn_get_stats(forced.attn, &stats);
  assert_int_equal(stats.decode_steps, 0);
  assert_int_equal(stats.varlen_steps, n_steps);
  for (int l = 0; l < L; l++)
    for (int s = 0; s < NSEQ; s++) free(hk[l][s]), free(hv[l][s]);
  rig_free(&paged);
  rig_free(&gather);
  rig_free(&forced);
  kern_backend_destroy(be);
}

/* Bad batches are refused with a clear error and leave no step active. */
static void step_rejects_bad_batches(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  assert_non_null(be);
  rig_t r;
  rig_init(&r, be, 0);
  kv_alloc_t *a = r.cache->alloc;
  float buf[4 * H * HD];
  assert_int_equal(attn_layer_forward(r.attn, 0, buf, buf, buf, buf), -EINVAL); /* no step yet */

  assert_int_equal(kv_seq_reserve(a, &r.seqs[0], 20), 0);
  assert_int_equal(kv_seq_reserve(a, &r.seqs[1], 3), 0);
  const kv_seq_t *sp[2] = {&r.seqs[0], &r.seqs[1]};
  const int32_t ql[2] = {20, 3};
  assert_int_equal(attn_meta_build(&r.meta, a, sp, ql, 2), 0);
  attn_batch_t ok = r.meta.batch;
  assert_int_equal(attn_step_begin(r.attn, &ok), 0);
  assert_int_equal(attn_step_path(r.attn), ATTN_PATH_VARLEN);
  assert_int_equal(attn_layer_forward(r.attn, L, buf, buf, buf, buf), -EINVAL); /* bad layer */
  assert_int_equal(attn_layer_forward(r.attn, -1, buf, buf, buf, buf), -EINVAL);

  attn_batch_t bad = ok;
  int32_t cu[3], table[2 * 6], slots[23], seqlens[2];
  bad.n_seqs = MAXS + 1;
  assert_int_equal(attn_step_begin(r.attn, &bad), -E2BIG);
  assert_int_equal(attn_step_path(r.attn), ATTN_PATH_NONE);
  assert_int_equal(attn_layer_forward(r.attn, 0, buf, buf, buf, buf), -EINVAL);
  bad = ok;
  memcpy(seqlens, ok.cache_seqlens, sizeof seqlens);
  seqlens[1] = 1; /* k_len != cached + q_len */
  bad.cache_seqlens = seqlens;
  assert_int_equal(attn_step_begin(r.attn, &bad), -EINVAL);
  bad = ok;
  memcpy(table, ok.block_table, sizeof table);
  table[1] = -1; /* sequence 0 needs two blocks */
  bad.block_table = table;
  assert_int_equal(attn_step_begin(r.attn, &bad), -EINVAL);
  table[1] = r.cache->num_blocks; /* out of range */
  assert_int_equal(attn_step_begin(r.attn, &bad), -EINVAL);
  bad = ok;
  memcpy(slots, ok.slots, sizeof slots);
  slots[21] = slots[20]; /* not where the block table says */
  bad.slots = slots;
  assert_int_equal(attn_step_begin(r.attn, &bad), -EINVAL);
  bad = ok;
  bad.slots = NULL; /* derived: fine */
  assert_int_equal(attn_step_begin(r.attn, &bad), 0);
  bad = ok;
  memcpy(cu, ok.cu_seq_lens_q, sizeof cu);
  cu[1] = 24; /* past n_tokens, so sequence 1 has a negative length */
  bad.cu_seq_lens_q = cu;
  assert_int_equal(attn_step_begin(r.attn, &bad), -EINVAL);
  bad = ok;
  bad.max_seqlen_q = 3; /* below sequence 0's 20 */
  assert_int_equal(attn_step_begin(r.attn, &bad), -EINVAL);

  /* builders: tokens that were not reserved; capacities */
  const int32_t too_many[2] = {33, 3}; /* sequence 0 has room for 32 */
  assert_int_equal(attn_meta_build(&r.meta, a, sp, too_many, 2), -EINVAL);
  const int32_t huge[2] = {MAXT, 1};
  assert_int_equal(attn_meta_build(&r.meta, a, sp, huge, 2), -E2BIG);
  assert_int_equal(attn_meta_build(&r.meta, a, sp, ql, 0), -EINVAL);

  /* bad configurations */
  attn_config_t ac = {.n_heads = 5, .max_seqs = 4, .max_tokens = 8}; /* 5 heads over 2 KV heads */
  assert_null(attn_create(be, r.cache, &ac));
  ac.n_heads = H;
  ac.max_tokens = 0;
  assert_null(attn_create(be, r.cache, &ac));
  attn_destroy(NULL);
  rig_free(&r);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(spec_varlen_metadata),
      cmocka_unit_test(spec_decode_example),
      cmocka_unit_test(steps_end_to_end),
      cmocka_unit_test(step_rejects_bad_batches),
  };
  return cmocka_run_group_tests_name("attention forward", tests, NULL, NULL);
}
