/* cache/kv_alloc_internal.h — the allocator's private state, shared by
 * kv_alloc.c (blocks, free list, sequences) and kv_prefix.c (prefix
 * caching). Not for use outside cache/. */
#ifndef TRAM_KV_ALLOC_INTERNAL_H
#define TRAM_KV_ALLOC_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

#include "cache/kv_alloc.h"
#include "base/log.h"

#define KV_NONE (-1)

typedef struct kv_block_meta {
  int32_t refs;       /* 0: free, on the list */
  int32_t prev, next; /* free-list neighbours while free; KV_NONE at the ends */
  int32_t published;  /* 1: in the hash table under `hash` */
  uint64_t hash;      /* chained hash of the block's content (when published) */
  uint64_t parent;    /* the hash it was chained from (when published) */
} kv_block_meta_t;

struct kv_alloc {
  int32_t num_blocks, block_size;
  int32_t n_free;
  int32_t head, tail;    /* free list: head = least recently freed */
  kv_block_meta_t *meta; /* [num_blocks] */
  /* prefix cache, allocated at the first publish */
  int32_t *tokens;       /* [num_blocks, block_size] token ids of published blocks */
  int32_t *table;        /* [table_mask + 1] block ids by hash (linear probing), KV_NONE = empty */
  uint64_t table_mask;
  int32_t n_published;
  uint64_t evictions;
  kv_observer_t observer; /* zero: none */
  void (*evict_hook)(void *arg, int32_t block); /* NULL: none (kv_alloc_set_evict_hook) */
  void *evict_arg;
};

/* Programmer errors: report and stop. */
#define KV_CHECK(cond, ...)   \
  do {                        \
    if (!(cond)) {            \
      log_error(__VA_ARGS__); \
      abort();                \
    }                         \
  } while (0)

/* Makes room for n_blocks entries in s->blocks. */
void kv__seq_grow(kv_seq_t *s, int32_t n_blocks);

/* Removes a published block from the hash table (it is being reused). */
void kv__prefix_evict(kv_alloc_t *a, int32_t block);

/* Frees the prefix cache's arrays. */
void kv__prefix_free(kv_alloc_t *a);

#endif
