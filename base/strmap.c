/* base/strmap.c — the string map (see strmap.h). */
#include "base/strmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

uint64_t strmap_hash(const void *s, size_t n) {
  const uint64_t h = hash_fnv1a(HASH_FNV_OFFSET, s, n);
  return h ^ (h >> 29);
}

int strmap_init(strmap_t *m, uint64_t n, strmap_key_fn key, const void *ctx) {
  memset(m, 0, sizeof *m);
  if (n > INT32_MAX) return -E2BIG;
  uint64_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  m->slots = malloc(cap * sizeof *m->slots);
  if (!m->slots) return -ENOMEM;
  memset(m->slots, 0xFF, cap * sizeof *m->slots);
  m->mask = cap - 1;
  m->key = key;
  m->ctx = ctx;
  return 0;
}

void strmap_free(strmap_t *m) {
  free(m->slots);
  m->slots = NULL;
}

/* The slot holding s[0..n), or the empty slot where it would go. */
static uint64_t probe(const strmap_t *m, const char *s, size_t n) {
  for (uint64_t i = strmap_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
    int32_t id = m->slots[i];
    if (id < 0) return i;
    size_t len;
    const char *k = m->key(m->ctx, id, &len);
    if (len == n && memcmp(k, s, n) == 0) return i;
  }
}

int32_t strmap_add(strmap_t *m, int32_t id) {
  size_t len;
  const char *k = m->key(m->ctx, id, &len);
  uint64_t i = probe(m, k, len);
  if (m->slots[i] >= 0) return m->slots[i];
  m->slots[i] = id;
  return -1;
}

int32_t strmap_find(const strmap_t *m, const char *s, size_t n) {
  if (!m->slots) return -1;
  return m->slots[probe(m, s, n)];
}
