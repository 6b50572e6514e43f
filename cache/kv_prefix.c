/* cache/kv_prefix.c — prefix caching on the block allocator (see
 * kv_alloc.h): the chained block hash, the hash -> block table, and the
 * sequence-level lookup, publish and fork.
 *
 * The table is open addressing with linear probing over block ids, at
 * least twice as many entries as blocks, so it never fills; deletion shifts
 * the following run back (no tombstones). Each published block keeps its
 * hash, its parent's hash and its tokens, which a lookup compares before it
 * answers. */
#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "cache/kv_alloc_internal.h"

uint64_t kv_hash_block(uint64_t parent, const int32_t *tokens, int32_t n) {
  uint64_t h = hash_mix64(parent ^ ((uint64_t)(uint32_t)n << 32));
  for (int32_t i = 0; i < n; i++) h = hash_mix64(h + ((uint64_t)(uint32_t)tokens[i] + 1) * HASH_GAMMA);
  return h;
}

static void prefix_init(kv_alloc_t *a) {
  if (a->table) return;
  uint64_t cap = 16;
  while (cap < 2 * (uint64_t)a->num_blocks) cap *= 2;
  a->table = xmallocarray(cap, sizeof *a->table);
  a->tokens = xmallocarray((size_t)a->num_blocks * (size_t)a->block_size, sizeof *a->tokens);
  for (uint64_t i = 0; i < cap; i++) a->table[i] = KV_NONE;
  a->table_mask = cap - 1;
}

void kv__prefix_free(kv_alloc_t *a) {
  free(a->table);
  free(a->tokens);
  a->table = NULL;
  a->tokens = NULL;
}

/* The table entry holding hash h, or the empty entry where it would go. */
static uint64_t probe(const kv_alloc_t *a, uint64_t h) {
  uint64_t i = h & a->table_mask;
  while (a->table[i] != KV_NONE && a->meta[a->table[i]].hash != h) i = (i + 1) & a->table_mask;
  return i;
}

void kv__prefix_evict(kv_alloc_t *a, int32_t block) {
  kv_block_meta_t *m = &a->meta[block];
  uint64_t i = probe(a, m->hash);
  KV_CHECK(a->table[i] == block, "kv prefix cache: block %d is not where its hash says", block);
  /* backward-shift deletion: pull later entries of the run into the hole
   * when their home slot does not lie cyclically in (hole, j] */
  for (uint64_t j = i;;) {
    j = (j + 1) & a->table_mask;
    if (a->table[j] == KV_NONE) break;
    uint64_t home = a->meta[a->table[j]].hash & a->table_mask;
    if (((j - home) & a->table_mask) >= ((j - i) & a->table_mask)) {
      a->table[i] = a->table[j];
      i = j;
    }
  }
  a->table[i] = KV_NONE;
  if (a->evict_hook) a->evict_hook(a->evict_arg, block);
  if (a->observer.removed) a->observer.removed(a->observer.arg, m->hash);
  m->published = 0;
  a->n_published--;
  a->evictions++;
}

int kv_prefix_insert(kv_alloc_t *a, int32_t block, uint64_t parent, const int32_t *tokens) {
  KV_CHECK(block >= 0 && block < a->num_blocks, "kv_prefix_insert: block %d out of [0, %d)", block, a->num_blocks);
  kv_block_meta_t *m = &a->meta[block];
  KV_CHECK(m->refs > 0, "kv_prefix_insert: block %d is free", block);
  if (m->published) return 0;
  prefix_init(a);
  const uint64_t h = kv_hash_block(parent, tokens, a->block_size);
  const uint64_t i = probe(a, h);
  if (a->table[i] != KV_NONE) return 0;
  a->table[i] = block;
  m->published = 1;
  m->hash = h;
  m->parent = parent;
  memcpy(a->tokens + (size_t)block * (size_t)a->block_size, tokens, (size_t)a->block_size * sizeof *tokens);
  a->n_published++;
  if (a->observer.stored) a->observer.stored(a->observer.arg, h, parent, tokens, a->block_size);
  return 1;
}

void kv_alloc_set_observer(kv_alloc_t *a, const kv_observer_t *o) {
  a->observer = o ? *o : (kv_observer_t){0};
}

void kv_alloc_set_evict_hook(kv_alloc_t *a, void (*fn)(void *arg, int32_t block), void *arg) {
  a->evict_hook = fn;
  a->evict_arg = arg;
}

int32_t kv_prefix_find(const kv_alloc_t *a, uint64_t parent, const int32_t *tokens) {
  if (!a->table) return KV_NONE;
  const uint64_t h = kv_hash_block(parent, tokens, a->block_size);
  const int32_t b = a->table[probe(a, h)];
  if (b == KV_NONE || a->meta[b].parent != parent ||
      memcmp(a->tokens + (size_t)b * (size_t)a->block_size, tokens, (size_t)a->block_size * sizeof *tokens) != 0)
    return KV_NONE;
  return b;
}

int kv_block_published(const kv_alloc_t *a, int32_t block, uint64_t *hash) {
  KV_CHECK(block >= 0 && block < a->num_blocks, "kv_block_published: block %d out of [0, %d)", block,
           a->num_blocks);
  if (!a->meta[block].published) return 0;
  if (hash) *hash = a->meta[block].hash;
  return 1;
}

int32_t kv_alloc_published_blocks(const kv_alloc_t *a) { return a->n_published; }
uint64_t kv_alloc_evictions(const kv_alloc_t *a) { return a->evictions; }

/* --- sequences -------------------------------------------------------------- */

static uint64_t chain_parent(const kv_seq_t *s) { return s->n_hashed > 0 ? s->hash : KV_HASH_ROOT; }

int32_t kv_seq_match_prefix(kv_alloc_t *a, kv_seq_t *s, const int32_t *tokens, int64_t n) {
  KV_CHECK(s->n_blocks == 0, "kv_seq_match_prefix: the sequence holds %d blocks already", s->n_blocks);
  const int64_t full = n > 0 ? n / a->block_size : 0;
  int32_t matched = 0;
  while (matched < full) {
    const uint64_t parent = chain_parent(s);
    const int32_t b = kv_prefix_find(a, parent, tokens + (size_t)matched * (size_t)a->block_size);
    if (b == KV_NONE) break;
    kv_block_ref(a, b);
    kv__seq_grow(s, s->n_blocks + 1);
    s->blocks[s->n_blocks++] = b;
    s->hash = a->meta[b].hash;
    s->n_hashed = ++matched;
  }
  s->n_tokens = (int64_t)matched * a->block_size;
  return matched;
}

void kv_seq_unmatch(kv_alloc_t *a, kv_seq_t *s, int32_t keep) {
  KV_CHECK(keep >= 0 && keep <= s->n_blocks && s->n_released == 0 && s->n_hashed == s->n_blocks &&
               s->n_tokens == (int64_t)s->n_blocks * a->block_size,
           "kv_seq_unmatch: keep %d of %d blocks, %d hashed, %lld tokens", keep, s->n_blocks, s->n_hashed,
           (long long)s->n_tokens);
  while (s->n_blocks > keep) kv_block_unref(a, s->blocks[--s->n_blocks]);
  s->n_hashed = keep;
  s->n_tokens = (int64_t)keep * a->block_size;
  s->hash = keep > 0 ? a->meta[s->blocks[keep - 1]].hash : 0;
}

int32_t kv_seq_tail_block(const kv_alloc_t *a, const kv_seq_t *s) {
  if (s->n_hashed == 0 || !a->table) return KV_NONE;
  return a->table[probe(a, s->hash)];
}

void kv_seq_publish(kv_alloc_t *a, kv_seq_t *s, const int32_t *tokens) {
  int64_t full = s->n_tokens / a->block_size;
  if (full > s->n_blocks) full = s->n_blocks;
  for (int32_t i = s->n_hashed; i < full; i++) {
    const int32_t *t = tokens + (size_t)i * (size_t)a->block_size;
    const uint64_t parent = chain_parent(s);
    if (s->blocks[i] >= 0) /* a released block is not published late */
      kv_prefix_insert(a, s->blocks[i], parent, t); /* no-op for a block shared by a fork or a hit */
    s->hash = kv_hash_block(parent, t, a->block_size);
    s->n_hashed = i + 1;
  }
}

int kv_seq_fork(kv_alloc_t *a, kv_seq_t *child, const kv_seq_t *parent, int32_t *copy_src, int32_t *copy_dst) {
  KV_CHECK(child->n_blocks == 0, "kv_seq_fork: the child holds %d blocks already", child->n_blocks);
  const int32_t full = (int32_t)(parent->n_tokens / a->block_size);
  const int partial = parent->n_tokens % a->block_size != 0;
  if (partial && a->n_free == 0) return -ENOSPC;
  kv__seq_grow(child, full + partial);
  for (int32_t i = 0; i < full; i++) {
    if (i >= parent->n_released) kv_block_ref(a, parent->blocks[i]);
    child->blocks[i] = parent->blocks[i];
  }
  child->n_blocks = full;
  child->n_released = parent->n_released < full ? parent->n_released : full;
  if (partial) {
    *copy_src = parent->blocks[full];
    *copy_dst = child->blocks[child->n_blocks++] = kv_block_alloc(a);
  }
  child->n_tokens = parent->n_tokens;
  child->n_hashed = parent->n_hashed;
  child->hash = parent->hash;
  return partial;
}
