/* server/http_arena.c — per-request memory pool (see http_arena.h).
 *
 * Blocks of 4 KiB (or the request's size when larger) are chained newest
 * first; allocation bumps an offset in the newest block. */
#include "server/http_arena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK 4096
#define ARENA_ALIGN 16

struct http_arena_block {
  http_arena_block_t *next;
  size_t used; /* bytes of data[] handed out */
  size_t cap;  /* bytes of data[] */
  _Alignas(ARENA_ALIGN) unsigned char data[];
};

__attribute__((noreturn)) static void arena_oom(size_t n) {
  fprintf(stderr, "tram: server: out of memory allocating %zu bytes\n", n);
  abort();
}

void http__oom(void) { arena_oom(0); }

void http_arena_init(http_arena_t *a) {
  a->head = NULL;
  a->total = 0;
}

void http_arena_free(http_arena_t *a) {
  http_arena_block_t *b = a->head;
  while (b) {
    http_arena_block_t *next = b->next;
    free(b);
    b = next;
  }
  http_arena_init(a);
}

void *http_arena_alloc(http_arena_t *a, size_t n) {
  if (n > SIZE_MAX / 2) arena_oom(n);
  size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (need == 0) need = ARENA_ALIGN;
  http_arena_block_t *b = a->head;
  if (!b || b->cap - b->used < need) {
    size_t cap = need > ARENA_BLOCK / 2 ? need : ARENA_BLOCK;
    http_arena_block_t *nb = malloc(sizeof *nb + cap);
    if (!nb) arena_oom(cap);
    nb->used = 0;
    nb->cap = cap;
    if (b && need > ARENA_BLOCK / 2 && b->cap - b->used >= ARENA_ALIGN) {
      /* A big one-off: put it behind the current block so the current block's
       * free space stays in use for the small allocations that follow. */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      a->head = nb;
    }
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += need;
  a->total += n;
  return p;
}

void *http_arena_zalloc(http_arena_t *a, size_t n) {
  void *p = http_arena_alloc(a, n);
  memset(p, 0, n);
  return p;
}

void *http_arena_array(http_arena_t *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) arena_oom(SIZE_MAX);
  return http_arena_zalloc(a, count * size);
}

char *http_arena_strndup(http_arena_t *a, const char *s, size_t n) {
  if (n == SIZE_MAX) arena_oom(n);
  char *p = http_arena_alloc(a, n + 1);
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void http__reserve(void *pbuf, size_t *cap, size_t need, size_t elem_size) {
  if (need <= *cap) return;
  size_t n = *cap ? *cap : 16;
  while (n < need) {
    if (n > SIZE_MAX / 2 / elem_size) arena_oom(SIZE_MAX);
    n *= 2;
  }
  void **buf = pbuf;
  void *nb = realloc(*buf, n * elem_size);
  if (!nb) arena_oom(n * elem_size);
  *buf = nb;
  *cap = n;
}
