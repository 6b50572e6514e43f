/* grammar/gram_lru.h — compiled grammars kept by content: a bounded,
 * least-recently-used cache of {gram_t, gram_cache_t} pairs over one
 * vocabulary, keyed by the bytes of what was compiled (the caller's key:
 * the form, its options and its source text). A request that repeats a
 * schema finds its grammar compiled and its token cache already filled,
 * which is what makes repeated schemas cost the "warm" mask times.
 *
 * Entries are reference counted: the cache holds one reference while an
 * entry is in it, each user (a request) one more; an evicted entry lives
 * until its last user lets go. Bounded by entry count, and by bytes: the
 * token caches grow as they fill, each within its grammar's cache_bytes,
 * all of them together (entries evicted but still used included) within
 * max_bytes: a cache that would pass it first evicts entries no request
 * uses, and if that is not enough its mask fails with GRAM_ELIMIT.
 *
 * Threads: every function may be called from any thread (one mutex); a
 * compile runs outside it, so two threads that miss on the same key both
 * compile and the second insertion keeps the first entry. */
#ifndef TRAM_GRAMMAR_GRAM_LRU_H
#define TRAM_GRAMMAR_GRAM_LRU_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/gram.h"

typedef struct gram_lru gram_lru_t;
typedef struct gram_entry gram_entry_t;

/* A cache over vocabulary v (which must outlive it and every entry) of at
 * most max_entries entries (0: 64) and at most max_bytes of token caches
 * (0: 256 MiB). NULL on no memory. */
gram_lru_t *gram_lru_create(const gram_vocab_t *v, int32_t max_entries, size_t max_bytes);
/* Drops the cache's references; entries still used live on. */
void gram_lru_destroy(gram_lru_t *l);

/* The entry for key[klen], referenced for the caller, or NULL when absent. */
gram_entry_t *gram_lru_get(gram_lru_t *l, const void *key, size_t klen);

/* Adds g (the caller's, now the entry's) under key[klen] with a new token
 * cache and returns the entry referenced for the caller; when the key is
 * present already, g is destroyed and the present entry returned. NULL on
 * no memory (g destroyed). Evicts least recently used entries past the
 * bounds. */
gram_entry_t *gram_lru_put(gram_lru_t *l, const void *key, size_t klen, gram_t *g);

/* Takes e out of the cache (if it is in it): later gets miss; users keep
 * their references. For a grammar found unusable after its insertion. */
void gram_lru_remove(gram_lru_t *l, gram_entry_t *e);

/* Counters for logs and metrics. */
typedef struct gram_lru_stats {
  int32_t entries;
  size_t bytes;       /* the token caches' bytes, as of the last insertion */
  uint64_t hits, misses, evictions;
} gram_lru_stats_t;
void gram_lru_get_stats(gram_lru_t *l, gram_lru_stats_t *st);

/* References: an entry is freed when its last one goes. NULL is a no-op. */
gram_entry_t *gram_entry_ref(gram_entry_t *e);
void gram_entry_unref(gram_entry_t *e);

/* What the entry holds (valid while referenced). */
const gram_t *gram_entry_grammar(const gram_entry_t *e);
const gram_cache_t *gram_entry_cache(const gram_entry_t *e);

#endif
