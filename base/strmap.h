/* base/strmap.h — one string map: an open-addressing hash index from byte
 * strings to the ids (0..n-1) of items that keep their strings elsewhere
 * (GGUF keys and tensor names in the mapped file, a vocabulary's token
 * texts). The map stores only ids; `key` hands back item id's bytes. FNV-1a
 * hash, linear probing, at most half full; immutable once built, so any
 * number of threads may look up at once. */
#ifndef TRAM_BASE_STRMAP_H
#define TRAM_BASE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

/* Item id's key: its bytes, with their length in *len. */
typedef const char *(*strmap_key_fn)(const void *ctx, int32_t id, size_t *len);

typedef struct strmap {
  int32_t *slots;    /* private: [mask + 1] ids, -1 empty */
  uint64_t mask;
  strmap_key_fn key;
  const void *ctx;
} strmap_t;

/* An empty map for up to n items (n <= INT32_MAX). 0, -E2BIG (n too
 * large) or -ENOMEM. */
int strmap_init(strmap_t *m, uint64_t n, strmap_key_fn key, const void *ctx);

/* Frees the slots; NULL slots (never initialised) are fine. */
void strmap_free(strmap_t *m);

/* Adds item id under its key. Returns -1 when added, or the id already
 * holding an equal key (then nothing changes: the first id wins). */
int32_t strmap_add(strmap_t *m, int32_t id);

/* The id whose key is s[0..n), or -1. */
int32_t strmap_find(const strmap_t *m, const char *s, size_t n);

/* The 64-bit FNV-1a hash of s[0..n) (with a final mix), for callers that
 * keep caches of their own. */
uint64_t strmap_hash(const void *s, size_t n);

#endif
