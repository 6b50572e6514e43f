/* cache/kv_alloc.c — block allocator and sequence block tables (see
 * kv_alloc.h).
 *
 * The free list is doubly linked through the per-block metadata, so a block
 * can leave it from anywhere in O(1). It is kept in the order blocks were
 * freed: kv_block_alloc() takes the head, a freed block joins the tail. That
 * order is what prefix caching (kv_prefix.c) needs: a freed block keeps its
 * content hash and stays on the list, reusable by kv_block_ref() on a cache
 * hit, until kv_block_alloc() reaches it (least recently freed first) and
 * evicts the hash. */
#include <errno.h>
#include <stdlib.h>

#include "cache/kv_alloc_internal.h"
#include "base/alloc.h"

#define NONE KV_NONE

static void list_push_tail(kv_alloc_t *a, int32_t b) {
  kv_block_meta_t *m = &a->meta[b];
  m->prev = a->tail;
  m->next = NONE;
  if (a->tail != NONE)
    a->meta[a->tail].next = b;
  else
    a->head = b;
  a->tail = b;
  a->n_free++;
}

static void list_remove(kv_alloc_t *a, int32_t b) {
  kv_block_meta_t *m = &a->meta[b];
  if (m->prev != NONE)
    a->meta[m->prev].next = m->next;
  else
    a->head = m->next;
  if (m->next != NONE)
    a->meta[m->next].prev = m->prev;
  else
    a->tail = m->prev;
  m->prev = m->next = NONE;
  a->n_free--;
}

kv_alloc_t *kv_alloc_create(int32_t num_blocks, int32_t block_size) {
  if (num_blocks < 1 || block_size < 1 || (int64_t)num_blocks * block_size > INT32_MAX) {
    log_error("kv_alloc_create: %d blocks of %d tokens: need at least one block of at least one "
              "token, and at most %d slots in all",
              num_blocks, block_size, INT32_MAX);
    return NULL;
  }
  kv_alloc_t *a = xcalloc(1, sizeof *a);
  a->meta = xmalloc((size_t)num_blocks * sizeof *a->meta);
  a->num_blocks = num_blocks;
  a->block_size = block_size;
  a->head = a->tail = NONE;
  for (int32_t b = 0; b < num_blocks; b++) {
    a->meta[b] = (kv_block_meta_t){0};
    list_push_tail(a, b);
  }
  return a;
}

void kv_alloc_destroy(kv_alloc_t *a) {
  if (!a) return;
  kv__prefix_free(a);
  free(a->meta);
  free(a);
}

int32_t kv_alloc_num_blocks(const kv_alloc_t *a) { return a->num_blocks; }
int32_t kv_alloc_block_size(const kv_alloc_t *a) { return a->block_size; }
int32_t kv_alloc_free_blocks(const kv_alloc_t *a) { return a->n_free; }
int32_t kv_alloc_used_blocks(const kv_alloc_t *a) { return a->num_blocks - a->n_free; }

int32_t kv_block_alloc(kv_alloc_t *a) {
  if (a->head == NONE) return -ENOSPC;
  int32_t b = a->head;
  list_remove(a, b);
  if (a->meta[b].published) kv__prefix_evict(a, b);
  a->meta[b].refs = 1;
  return b;
}

void kv_block_ref(kv_alloc_t *a, int32_t block) {
  KV_CHECK(block >= 0 && block < a->num_blocks, "kv_block_ref: block %d out of [0, %d)", block, a->num_blocks);
  kv_block_meta_t *m = &a->meta[block];
  if (m->refs == 0) list_remove(a, block);
  KV_CHECK(m->refs < INT32_MAX, "kv_block_ref: block %d: reference count overflow", block);
  m->refs++;
}

void kv_block_unref(kv_alloc_t *a, int32_t block) {
  KV_CHECK(block >= 0 && block < a->num_blocks, "kv_block_unref: block %d out of [0, %d)", block, a->num_blocks);
  kv_block_meta_t *m = &a->meta[block];
  KV_CHECK(m->refs > 0, "kv_block_unref: block %d is already free", block);
  if (--m->refs == 0) list_push_tail(a, block);
}

int32_t kv_block_refs(const kv_alloc_t *a, int32_t block) {
  KV_CHECK(block >= 0 && block < a->num_blocks, "kv_block_refs: block %d out of [0, %d)", block, a->num_blocks);
  return a->meta[block].refs;
}

/* --- sequences -------------------------------------------------------------- */

void kv_seq_init(kv_seq_t *s) { *s = (kv_seq_t){0}; }

void kv__seq_grow(kv_seq_t *s, int32_t n_blocks) {
  xgrow_i32(&s->blocks, &s->cap, n_blocks, sizeof *s->blocks, 4);
}

int32_t kv_seq_blocks_needed(const kv_alloc_t *a, const kv_seq_t *s, int64_t n_new) {
  int64_t tokens = s->n_tokens + (n_new > 0 ? n_new : 0);
  int64_t want = (tokens + a->block_size - 1) / a->block_size;
  return want > s->n_blocks ? (int32_t)(want - s->n_blocks) : 0;
}

int kv_seq_reserve(kv_alloc_t *a, kv_seq_t *s, int64_t n_new) {
  if (n_new < 0 || s->n_tokens + n_new > INT32_MAX) return -EINVAL;
  const int32_t need = kv_seq_blocks_needed(a, s, n_new);
  if (need == 0) return 0;
  if (need > a->n_free) return -ENOSPC;
  kv__seq_grow(s, s->n_blocks + need);
  for (int32_t i = 0; i < need; i++) s->blocks[s->n_blocks++] = kv_block_alloc(a);
  return 0;
}

void kv_seq_commit(const kv_alloc_t *a, kv_seq_t *s, int64_t n) {
  KV_CHECK(n >= 0 && s->n_tokens + n <= (int64_t)s->n_blocks * a->block_size,
           "kv_seq_commit: %lld + %lld tokens, but room for %lld reserved", (long long)s->n_tokens,
           (long long)n, (long long)s->n_blocks * a->block_size);
  s->n_tokens += n;
}

void kv_seq_truncate(kv_alloc_t *a, kv_seq_t *s, int64_t n) {
  KV_CHECK(n >= (int64_t)s->n_hashed * a->block_size && n <= s->n_tokens,
           "kv_seq_truncate: to %lld tokens of %lld, %d blocks hashed", (long long)n, (long long)s->n_tokens,
           s->n_hashed);
  s->n_tokens = n;
  const int32_t keep = (int32_t)((n + a->block_size - 1) / a->block_size);
  KV_CHECK(keep >= s->n_released, "kv_seq_truncate: to %lld tokens, %d blocks released", (long long)n,
           s->n_released);
  while (s->n_blocks > keep) kv_block_unref(a, s->blocks[--s->n_blocks]);
}

void kv_seq_release_before(kv_alloc_t *a, kv_seq_t *s, int64_t pos) {
  KV_CHECK(pos >= 0 && pos <= s->n_tokens, "kv_seq_release_before: token %lld of %lld", (long long)pos,
           (long long)s->n_tokens);
  const int32_t end = (int32_t)(pos / a->block_size);
  for (; s->n_released < end; s->n_released++) {
    kv_block_unref(a, s->blocks[s->n_released]);
    s->blocks[s->n_released] = -1;
  }
}

int32_t kv_seq_slot(const kv_alloc_t *a, const kv_seq_t *s, int64_t pos) {
  if (pos < 0 || pos >= (int64_t)s->n_blocks * a->block_size || pos / a->block_size < s->n_released) return -1;
  return kv_table_slot(s->blocks, a->block_size, pos);
}

void kv_seq_free(kv_alloc_t *a, kv_seq_t *s) {
  /* last block first: with prefix caching the tail of a prompt is the least
   * likely to be shared, so it should be the first evicted */
  for (int32_t i = s->n_blocks - 1; i >= s->n_released; i--) kv_block_unref(a, s->blocks[i]);
  free(s->blocks);
  kv_seq_init(s);
}
