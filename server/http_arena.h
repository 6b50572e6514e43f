/* server/http_arena.h — a per-request memory pool (h2o-style).
 *
 * Everything a request's parse produces (path, headers, the OpenAI request
 * struct, its prompt arrays and stop strings) is allocated from the request's
 * arena and freed at once when the response ends or the client goes away.
 * The engine copies what it keeps. An arena is used by one thread at a time.
 *
 * Allocation failure aborts (STYLE.md: allocation failure is not an input
 * error); sizes are checked for overflow first. */
#ifndef TRAM_HTTP_ARENA_H
#define TRAM_HTTP_ARENA_H

#include <stddef.h>

typedef struct http_arena_block http_arena_block_t;

typedef struct http_arena {
  http_arena_block_t *head; /* private: newest block first */
  size_t total;             /* read-only: bytes handed out so far */
} http_arena_t;

/* An empty arena; nothing is allocated until the first call. */
void http_arena_init(http_arena_t *a);

/* Frees every block; the arena is empty and usable again. */
void http_arena_free(http_arena_t *a);

/* n bytes aligned to 16, uninitialised (zeroed with _zalloc). n == 0 gives a
 * valid unique pointer. Valid until http_arena_free(). */
void *http_arena_alloc(http_arena_t *a, size_t n);
void *http_arena_zalloc(http_arena_t *a, size_t n);

/* count * size bytes, zeroed; aborts if the product overflows. */
void *http_arena_array(http_arena_t *a, size_t count, size_t size);

/* A NUL-terminated copy of s[0..n). */
char *http_arena_strndup(http_arena_t *a, const char *s, size_t n);

/* Module-internal (server/): reports that memory ran out and aborts. */
__attribute__((noreturn)) void http__oom(void);

/* Module-internal (server/): grows the malloc'd array *pbuf (of *cap
 * elements of elem_size bytes) to hold at least `need` elements, doubling
 * from 16; aborts if memory runs out. */
void http__reserve(void *pbuf, size_t *cap, size_t need, size_t elem_size);

#endif
