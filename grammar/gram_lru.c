/* grammar/gram_lru.c — compiled grammars kept by content (gram_lru.h). A
 * doubly linked list in recency order, most recent first, searched by a
 * 64-bit FNV-1a hash of the key and then the key's bytes: the cache holds
 * tens of entries, so a scan costs less than the request that asks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "grammar/gram_lru.h"

struct gram_entry {
  atomic_int refs;
  gram_t *g;
  gram_cache_t *cache;
  uint64_t hash;
  size_t klen;
  gram_entry_t *prev, *next; /* the recency list (the lru's lock) */
  char key[];
};

struct gram_lru {
  pthread_mutex_t mu;
  const gram_vocab_t *v;
  int32_t max_entries, n;
  size_t max_bytes, bytes;
  gram_entry_t *head, *tail;
  uint64_t hits, misses, evictions;
};

gram_lru_t *gram_lru_create(const gram_vocab_t *v, int32_t max_entries, size_t max_bytes) {
  gram_lru_t *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  pthread_mutex_init(&l->mu, NULL);
  l->v = v;
  l->max_entries = max_entries > 0 ? max_entries : 64;
  l->max_bytes = max_bytes ? max_bytes : (size_t)256 << 20;
  return l;
}

gram_entry_t *gram_entry_ref(gram_entry_t *e) {
  if (e) atomic_fetch_add(&e->refs, 1);
  return e;
}

void gram_entry_unref(gram_entry_t *e) {
  if (!e || atomic_fetch_sub(&e->refs, 1) != 1) return;
  gram_cache_destroy(e->cache);
  gram_destroy(e->g);
  free(e);
}

const gram_t *gram_entry_grammar(const gram_entry_t *e) { return e->g; }
const gram_cache_t *gram_entry_cache(const gram_entry_t *e) { return e->cache; }

static void unlink_entry(gram_lru_t *l, gram_entry_t *e) {
  if (e->prev) e->prev->next = e->next;
  else l->head = e->next;
  if (e->next) e->next->prev = e->prev;
  else l->tail = e->prev;
  e->prev = e->next = NULL;
  l->n--;
}

static void push_front(gram_lru_t *l, gram_entry_t *e) {
  e->prev = NULL;
  e->next = l->head;
  if (l->head) l->head->prev = e;
  else l->tail = e;
  l->head = e;
  l->n++;
}

/* The entry of key, moved to the front; NULL when absent. Under the lock. */
static gram_entry_t *find(gram_lru_t *l, uint64_t h, const void *key, size_t klen) {
  for (gram_entry_t *e = l->head; e; e = e->next)
    if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
      unlink_entry(l, e);
      push_front(l, e);
      return e;
    }
  return NULL;
}

gram_entry_t *gram_lru_get(gram_lru_t *l, const void *key, size_t klen) {
  const uint64_t h = hash_fnv1a(HASH_FNV_OFFSET, key, klen);
  pthread_mutex_lock(&l->mu);
  gram_entry_t *e = gram_entry_ref(find(l, h, key, klen));
  if (e) l->hits++;
  else l->misses++;
  pthread_mutex_unlock(&l->mu);
  return e;
}

/* Sums the token caches' bytes and evicts from the back past the bounds,
 * never the front entry (the one just used). Under the lock. */
static void evict(gram_lru_t *l) {
  size_t bytes = 0;
  for (gram_entry_t *e = l->head; e; e = e->next) bytes += gram_cache_bytes(e->cache);
  while (l->tail && l->tail != l->head && (l->n > l->max_entries || bytes > l->max_bytes)) {
    gram_entry_t *e = l->tail;
    bytes -= gram_cache_bytes(e->cache);
    unlink_entry(l, e);
    l->evictions++;
    gram_entry_unref(e);
  }
  l->bytes = bytes;
}

gram_entry_t *gram_lru_put(gram_lru_t *l, const void *key, size_t klen, gram_t *g) {
  gram_entry_t *e = malloc(sizeof *e + klen);
  gram_cache_t *c = e ? gram_cache_create(g, l->v) : NULL;
  if (!c) {
    free(e);
    gram_destroy(g);
    return NULL;
  }
  atomic_init(&e->refs, 2); /* the cache's and the caller's */
  e->g = g;
  e->cache = c;
  e->hash = hash_fnv1a(HASH_FNV_OFFSET, key, klen);
  e->klen = klen;
  e->prev = e->next = NULL;
  memcpy(e->key, key, klen);
  pthread_mutex_lock(&l->mu);
  gram_entry_t *old = gram_entry_ref(find(l, e->hash, key, klen));
  if (!old) {
    push_front(l, e);
    evict(l);
  }
  pthread_mutex_unlock(&l->mu);
  if (!old) return e;
  atomic_store(&e->refs, 1);
  gram_entry_unref(e);
  return old;
}

void gram_lru_get_stats(gram_lru_t *l, gram_lru_stats_t *st) {
  pthread_mutex_lock(&l->mu);
  *st = (gram_lru_stats_t){l->n, l->bytes, l->hits, l->misses, l->evictions};
  pthread_mutex_unlock(&l->mu);
}

void gram_lru_destroy(gram_lru_t *l) {
  if (!l) return;
  for (gram_entry_t *e = l->head, *next; e; e = next) {
    next = e->next;
    gram_entry_unref(e);
  }
  pthread_mutex_destroy(&l->mu);
  free(l);
}
