/* tests/unit/test_kv_prefix.c — prefix caching on the block allocator:
 * the chained hash, publish/find/evict, sequence lookup, publish and fork,
 * and a random storm checked against the contents the test itself tracks
 * (and against what an observer of stores and evictions was told). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv_alloc.h"
#include "tests/unit/testutil.h"

/* Random token ids in [1, 50000). */
static void fill_tokens(tu_rng_t *r, int32_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) t[i] = 1 + (int32_t)tu_below(r, 49999);
}

/* The hash is a pure function of (parent, tokens): equal inputs agree,
 * any change of parent, one token, the order or the count changes it. */
static void hash_chain(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  int32_t t[16], u[16];
  fill_tokens(&r, t, 16);
  memcpy(u, t, sizeof t);
  const uint64_t h = kv_hash_block(KV_HASH_ROOT, t, 16);
  assert_true(h == kv_hash_block(KV_HASH_ROOT, u, 16));
  assert_true(h != kv_hash_block(KV_HASH_ROOT + 1, t, 16));
  assert_true(h != kv_hash_block(KV_HASH_ROOT, t, 15));
  u[7]++;
  assert_true(h != kv_hash_block(KV_HASH_ROOT, u, 16));
  memcpy(u, t, sizeof t);
  u[3] = t[4];
  u[4] = t[3];
  if (t[3] != t[4]) assert_true(h != kv_hash_block(KV_HASH_ROOT, u, 16));
  /* chaining: a block's hash depends on its parent's */
  assert_true(kv_hash_block(h, t, 16) != kv_hash_block(KV_HASH_ROOT, t, 16));
}

/* A published block is found by (parent, tokens) and nothing else, stays
 * found while free, comes back with a reference (a hit), and loses its hash
 * when the allocator hands it out again, least recently freed first. */
static void publish_find_evict(void **state) {
  (void)state;
  enum { BS = 4 };
  kv_alloc_t *a = kv_alloc_create(3, BS);
  assert_non_null(a);
  int32_t t[3][BS] = {{5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 16}};
  int32_t b[3];
  for (int i = 0; i < 3; i++) b[i] = kv_block_alloc(a);
  assert_int_equal(kv_prefix_find(a, KV_HASH_ROOT, t[0]), -1); /* nothing published: no table yet */
  assert_int_equal(kv_prefix_insert(a, b[0], KV_HASH_ROOT, t[0]), 1);
  assert_int_equal(kv_prefix_insert(a, b[0], KV_HASH_ROOT, t[0]), 0); /* already published */
  assert_int_equal(kv_prefix_insert(a, b[1], KV_HASH_ROOT, t[0]), 0); /* hash taken by b[0] */
  uint64_t h0 = 0;
  assert_true(kv_block_published(a, b[0], &h0));
  assert_true(h0 == kv_hash_block(KV_HASH_ROOT, t[0], BS));
  assert_false(kv_block_published(a, b[1], NULL));
  assert_int_equal(kv_prefix_insert(a, b[1], h0, t[1]), 1);
  assert_int_equal(kv_prefix_insert(a, b[2], h0, t[2]), 1);
  assert_int_equal(kv_alloc_published_blocks(a), 3);

  assert_int_equal(kv_prefix_find(a, KV_HASH_ROOT, t[0]), b[0]);
  assert_int_equal(kv_prefix_find(a, h0, t[1]), b[1]);
  assert_int_equal(kv_prefix_find(a, h0, t[2]), b[2]);
  assert_int_equal(kv_prefix_find(a, KV_HASH_ROOT, t[1]), -1); /* right tokens, wrong parent */
  int32_t odd[BS] = {5, 6, 7, 9};
  assert_int_equal(kv_prefix_find(a, KV_HASH_ROOT, odd), -1);

  /* free in the order 2, 0, 1: all still found; a hit takes 0 back */
  kv_block_unref(a, b[2]);
  kv_block_unref(a, b[0]);
  kv_block_unref(a, b[1]);
  assert_int_equal(kv_alloc_free_blocks(a), 3);
  assert_int_equal(kv_prefix_find(a, h0, t[2]), b[2]);
  assert_int_equal(kv_prefix_find(a, KV_HASH_ROOT, t[0]), b[0]);
  kv_block_ref(a, b[0]);
  assert_int_equal(kv_alloc_free_blocks(a), 2);
  assert_true(kv_block_published(a, b[0], NULL));

  /* allocation evicts the least recently freed: b[2], then b[1] */
  assert_int_equal(kv_alloc_evictions(a), 0);
  assert_int_equal(kv_block_alloc(a), b[2]);
  assert_false(kv_block_published(a, b[2], NULL));
  assert_int_equal(kv_prefix_find(a, h0, t[2]), -1);
  assert_int_equal(kv_prefix_find(a, h0, t[1]), b[1]);
  assert_int_equal(kv_block_alloc(a), b[1]);
  assert_int_equal(kv_prefix_find(a, h0, t[1]), -1);
  assert_int_equal(kv_alloc_evictions(a), 2);
  assert_int_equal(kv_alloc_published_blocks(a), 1);
  /* the freed hash can be published again, on another block */
  assert_int_equal(kv_prefix_insert(a, b[2], h0, t[1]), 1);
  assert_int_equal(kv_prefix_find(a, h0, t[1]), b[2]);
  kv_block_unref(a, b[0]);
  kv_block_unref(a, b[1]);
  kv_block_unref(a, b[2]);
  assert_int_equal(kv_alloc_free_blocks(a), 3);
  kv_alloc_destroy(a);
}

/* Sequences: a second sequence with the same tokens matches the first's
 * full blocks, never the block holding its last token when asked to leave
 * one; a different token in block 1 stops the match after block 0; the
 * matched blocks are shared (two references). */
static void seq_match_publish(void **state) {
  (void)state;
  enum { BS = 8, N = 3 * BS + 5 };
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 1);
  kv_alloc_t *a = kv_alloc_create(16, BS);
  assert_non_null(a);
  int32_t t[N];
  fill_tokens(&r, t, N);
  kv_seq_t s, u, v;
  kv_seq_init(&s);
  kv_seq_init(&u);
  kv_seq_init(&v);
  assert_int_equal(kv_seq_match_prefix(a, &s, t, N - 1), 0);
  assert_int_equal(s.n_tokens, 0);
  assert_int_equal(kv_seq_reserve(a, &s, N), 0);
  /* publish step by step: only full committed blocks count */
  kv_seq_commit(a, &s, BS - 1);
  kv_seq_publish(a, &s, t);
  assert_int_equal(kv_alloc_published_blocks(a), 0);
  kv_seq_commit(a, &s, 1 + 2 * BS + 2);
  kv_seq_publish(a, &s, t);
  assert_int_equal(kv_alloc_published_blocks(a), 3);
  kv_seq_commit(a, &s, 3);
  kv_seq_publish(a, &s, t);
  assert_int_equal(kv_alloc_published_blocks(a), 3); /* the last block is partial */

  assert_int_equal(kv_seq_match_prefix(a, &u, t, N - 1), 3);
  assert_int_equal(u.n_tokens, 3 * BS);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(u.blocks[i], s.blocks[i]);
    assert_int_equal(kv_block_refs(a, s.blocks[i]), 2);
  }
  /* a prompt of exactly 3 blocks leaves its last token: 2 blocks match */
  assert_int_equal(kv_seq_match_prefix(a, &v, t, 3 * BS - 1), 2);
  kv_seq_free(a, &v);
  /* a change in block 1 */
  int32_t w[N];
  memcpy(w, t, sizeof w);
  w[BS + 3] ^= 1;
  assert_int_equal(kv_seq_match_prefix(a, &v, w, N - 1), 1);
  assert_int_equal(v.blocks[0], s.blocks[0]);
  /* v goes on from block 1 with its own blocks; publishing them chains
   * from block 0's hash */
  assert_int_equal(kv_seq_reserve(a, &v, N - BS), 0);
  kv_seq_commit(a, &v, N - BS);
  kv_seq_publish(a, &v, w);
  assert_int_equal(kv_alloc_published_blocks(a), 5);
  kv_seq_t x;
  kv_seq_init(&x);
  assert_int_equal(kv_seq_match_prefix(a, &x, w, N), 3);
  assert_int_equal(x.blocks[1], v.blocks[1]);
  assert_int_equal(x.blocks[2], v.blocks[2]);

  /* all freed: every block free, the published ones still found */
  kv_seq_free(a, &s);
  kv_seq_free(a, &u);
  kv_seq_free(a, &v);
  kv_seq_free(a, &x);
  assert_int_equal(kv_alloc_free_blocks(a), 16);
  assert_int_equal(kv_seq_match_prefix(a, &s, t, N), 3);
  kv_seq_free(a, &s);
  kv_alloc_destroy(a);
}

/* Fork: the child shares every full block and gets a fresh block for a
 * partial last one (the copy pair says which); -ENOSPC leaves it empty. */
static void seq_fork(void **state) {
  (void)state;
  enum { BS = 4 };
  kv_alloc_t *a = kv_alloc_create(4, BS);
  assert_non_null(a);
  int32_t t[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  kv_seq_t p, c1, c2, c3;
  kv_seq_init(&p);
  kv_seq_init(&c1);
  kv_seq_init(&c2);
  kv_seq_init(&c3);
  assert_int_equal(kv_seq_reserve(a, &p, 10), 0); /* 3 blocks */
  kv_seq_commit(a, &p, 10);
  kv_seq_publish(a, &p, t);
  int32_t src = -1, dst = -1;
  assert_int_equal(kv_seq_fork(a, &c1, &p, &src, &dst), 1);
  assert_int_equal(src, p.blocks[2]);
  assert_int_equal(dst, c1.blocks[2]);
  assert_true(dst != src);
  assert_int_equal(c1.n_tokens, 10);
  assert_int_equal(c1.n_blocks, 3);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(c1.blocks[i], p.blocks[i]);
    assert_int_equal(kv_block_refs(a, p.blocks[i]), 2);
  }
  assert_int_equal(kv_block_refs(a, p.blocks[2]), 1);
  assert_int_equal(kv_alloc_free_blocks(a), 0);
  assert_int_equal(kv_seq_fork(a, &c2, &p, &src, &dst), -ENOSPC);
  assert_int_equal(c2.n_blocks, 0);
  assert_int_equal(kv_block_refs(a, p.blocks[0]), 2);
  /* the child's chain goes on: filling its copy publishes its own content */
  int32_t ct[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99, 98};
  kv_seq_commit(a, &c1, 2);
  kv_seq_publish(a, &c1, ct);
  assert_int_equal(kv_prefix_find(a, kv_hash_block(kv_hash_block(KV_HASH_ROOT, ct, BS), ct + BS, BS), ct + 2 * BS),
                   c1.blocks[2]);
  kv_seq_free(a, &c1);
  /* a parent ending on a block boundary: nothing to copy */
  kv_seq_t q;
  kv_seq_init(&q);
  assert_int_equal(kv_seq_reserve(a, &q, 4), 0);
  kv_seq_commit(a, &q, 4);
  assert_int_equal(kv_seq_fork(a, &c3, &q, &src, &dst), 0);
  assert_int_equal(c3.n_blocks, 1);
  assert_int_equal(c3.blocks[0], q.blocks[0]);
  kv_seq_free(a, &c3);
  kv_seq_free(a, &q);
  kv_seq_free(a, &p);
  assert_int_equal(kv_alloc_free_blocks(a), 4);
  kv_alloc_destroy(a);
}

/* The storm: sequences over a few documents that share prefixes come and
 * go (match, reserve, commit, publish, free) in a cache too small for all.
 * The test tracks what each block holds; at every check each published
 * block is found by its content and each lookup returns a block holding
 * exactly the asked content, and matches are maximal. */
enum { S_BS = 4, S_BLOCKS = 61, S_DOCS = 6, S_DOC_LEN = 16 * S_BS, S_SEQS = 10 };

typedef struct content {
  int doc, nb; /* the block holds doc tokens [(nb - 1) * BS, nb * BS) after that doc's prefix; doc -1: unknown */
} content_t;

static int32_t docs[S_DOCS][S_DOC_LEN];

static int same_prefix(content_t x, int doc, int nb) {
  return x.doc >= 0 && x.nb == nb && memcmp(docs[x.doc], docs[doc], (size_t)nb * S_BS * sizeof(int32_t)) == 0;
}

static uint64_t chain_hash(int doc, int nb) {
  uint64_t h = KV_HASH_ROOT;
  for (int i = 0; i < nb; i++) h = kv_hash_block(h, docs[doc] + i * S_BS, S_BS);
  return h;
}

/* An observer that keeps the set of hashes it was told are stored, checking
 * each against its parent and tokens. */
typedef struct seen {
  uint64_t hash[S_BLOCKS];
  int n;
} seen_t;

static int seen_find(const seen_t *o, uint64_t h) {
  for (int i = 0; i < o->n; i++)
    if (o->hash[i] == h) return i;
  return -1;
}

static void seen_stored(void *arg, uint64_t hash, uint64_t parent, const int32_t *tokens, int32_t block_size) {
  seen_t *o = arg;
  assert_int_equal(block_size, S_BS);
  assert_true(hash == kv_hash_block(parent, tokens, block_size));
  assert_int_equal(seen_find(o, hash), -1);
  assert_true(o->n < S_BLOCKS);
  o->hash[o->n++] = hash;
}

static void seen_removed(void *arg, uint64_t hash) {
  seen_t *o = arg;
  int i = seen_find(o, hash);
  assert_true(i >= 0);
  o->hash[i] = o->hash[--o->n];
}

static void storm(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 2);
  /* docs 1.. share a prefix of random length with doc 0 */
  fill_tokens(&r, docs[0], S_DOC_LEN);
  for (int d = 1; d < S_DOCS; d++) {
    int shared = (int)tu_below(&r, S_DOC_LEN);
    memcpy(docs[d], docs[0], (size_t)shared * sizeof(int32_t));
    fill_tokens(&r, docs[d] + shared, (size_t)(S_DOC_LEN - shared));
  }
  kv_alloc_t *a = kv_alloc_create(S_BLOCKS, S_BS);
  assert_non_null(a);
  seen_t seen = {0};
  kv_alloc_set_observer(a, &(kv_observer_t){.stored = seen_stored, .removed = seen_removed, .arg = &seen});
  content_t content[S_BLOCKS];
  for (int b = 0; b < S_BLOCKS; b++) content[b] = (content_t){-1, 0};
  kv_seq_t seqs[S_SEQS];
  int seq_doc[S_SEQS];
  for (int i = 0; i < S_SEQS; i++) kv_seq_init(&seqs[i]);
  int hits = 0, evict_seen = 0;
  for (int round = 0; round < 4000; round++) {
    int i = (int)tu_below(&r, S_SEQS);
    kv_seq_t *s = &seqs[i];
    if (s->n_blocks > 0) {
      kv_seq_free(a, s);
      continue;
    }
    int d = (int)tu_below(&r, S_DOCS);
    int64_t len = 1 + (int64_t)tu_below(&r, S_DOC_LEN);
    int32_t m = kv_seq_match_prefix(a, s, docs[d], len - 1);
    hits += m > 0;
    for (int j = 0; j < m; j++) assert_true(same_prefix(content[s->blocks[j]], d, j + 1));
    if ((m + 1) * S_BS <= len - 1) /* maximal: the next block is not found */
      assert_int_equal(kv_prefix_find(a, chain_hash(d, m), docs[d] + m * S_BS), -1);
    int32_t had = s->n_blocks;
    if (kv_seq_reserve(a, s, len - s->n_tokens) != 0) {
      kv_seq_free(a, s);
      continue;
    }
    for (int j = had; j < s->n_blocks; j++) content[s->blocks[j]] = (content_t){-1, 0}; /* reused */
    kv_seq_commit(a, s, len - s->n_tokens);
    kv_seq_publish(a, s, docs[d]);
    for (int j = had; j < s->n_blocks; j++)
      if ((j + 1) * S_BS <= len) content[s->blocks[j]] = (content_t){d, j + 1};
    seq_doc[i] = d;
    if (round % 50 == 0) {
      int published = 0;
      for (int b = 0; b < S_BLOCKS; b++) {
        uint64_t h;
        if (!kv_block_published(a, b, &h)) continue;
        published++;
        assert_true(seen_find(&seen, h) >= 0); /* the observer was told of exactly these */
        assert_true(content[b].doc >= 0);
        const content_t c = content[b];
        assert_int_equal(kv_prefix_find(a, chain_hash(c.doc, c.nb - 1), docs[c.doc] + (c.nb - 1) * S_BS), b);
      }
      assert_int_equal(published, kv_alloc_published_blocks(a));
      assert_int_equal(seen.n, published);
      for (int k = 0; k < S_SEQS; k++) /* a sequence's blocks are its own or shared, never reused */
        for (int j = 0; j < seqs[k].n_blocks && (j + 1) * S_BS <= seqs[k].n_tokens; j++)
          assert_true(same_prefix(content[seqs[k].blocks[j]], seq_doc[k], j + 1));
    }
    evict_seen = kv_alloc_evictions(a) > 0;
  }
  assert_true(hits > 0);
  assert_true(evict_seen);
  for (int i = 0; i < S_SEQS; i++) kv_seq_free(a, &seqs[i]);
  assert_int_equal(kv_alloc_free_blocks(a), S_BLOCKS);
  kv_alloc_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hash_chain),
      cmocka_unit_test(publish_find_evict),
      cmocka_unit_test(seq_match_publish),
      cmocka_unit_test(seq_fork),
      cmocka_unit_test(storm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
