/* base/arena.c — the bump allocator (see arena.h). */
#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fault.h"

#define ARENA_ALIGN 16
#define ARENA_CHUNK_DEFAULT 4096
#define ARENA_CHUNK_MAX ((size_t)64 << 20)

struct arena_chunk {
  arena_chunk_t *next;
  size_t used; /* bytes of data[] handed out */
  size_t size; /* bytes of data[] */
  _Alignas(ARENA_ALIGN) unsigned char data[];
};

void arena_init(arena_t *a, size_t chunk, size_t cap) {
  a->head = NULL;
  a->used = 0;
  a->cap = cap;
  a->chunk = chunk ? chunk : ARENA_CHUNK_DEFAULT;
  a->fallible = 0;
  a->oom = false;
}

void arena_fallible(arena_t *a, bool on) {
  if (on && !a->fallible) a->oom = false; /* the outermost section starts clean */
  a->fallible += on ? 1 : -1;
}

/* Memory ran out (or a test build says so): NULL for a fallible or capped
 * arena, an abort for the others. */
static void *out_of_memory(arena_t *a, const char *what, size_t n) {
  if (!a->fallible && !a->cap) xoom(what, n);
  a->oom = true;
  return NULL;
}

void arena_free(arena_t *a) {
  arena_chunk_t *ch = a->head;
  while (ch) {
    arena_chunk_t *next = ch->next;
    free(ch);
    ch = next;
  }
  a->head = NULL;
  a->used = 0;
  a->oom = false;
}

void *arena_alloc(arena_t *a, size_t n) {
  if (n > SIZE_MAX / 2) return out_of_memory(a, "arena", n);
  if (a->fallible && fault_hit("alloc_fail")) return out_of_memory(a, "arena", n);
  size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (need == 0) need = ARENA_ALIGN;
  if (a->cap && (need > a->cap || a->used > a->cap - need)) return NULL;
  arena_chunk_t *ch = a->head;
  if (!ch || ch->size - ch->used < need) {
    const int big = need > a->chunk / 2;
    size_t size = big ? need : a->chunk;
    arena_chunk_t *nc = malloc(sizeof *nc + size);
    if (!nc) return out_of_memory(a, "arena", sizeof *nc + size);
    nc->used = 0;
    nc->size = size;
    if (ch && big && ch->size - ch->used >= ARENA_ALIGN) {
      nc->next = ch->next; /* a one-off behind the newest chunk */
      ch->next = nc;
    } else {
      nc->next = ch;
      a->head = nc;
      if (!big && a->chunk < ARENA_CHUNK_MAX) a->chunk *= 2;
    }
    ch = nc;
  }
  void *p = ch->data + ch->used;
  ch->used += need;
  a->used += need;
  return p;
}

void *arena_zalloc(arena_t *a, size_t n) {
  void *p = arena_alloc(a, n);
  if (p) memset(p, 0, n);
  return p;
}

void *arena_array(arena_t *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return out_of_memory(a, "arena array", SIZE_MAX);
  return arena_zalloc(a, count * size);
}

char *arena_strndup(arena_t *a, const char *s, size_t n) {
  if (n == SIZE_MAX) return out_of_memory(a, "arena string", n);
  char *p = arena_alloc(a, n + 1);
  if (!p) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return p;
}
