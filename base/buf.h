/* base/buf.h — one growable byte buffer (a string builder): append bytes,
 * characters or printf output; the bytes are always NUL-terminated after
 * len (once anything was reserved).
 *
 * Storage comes from malloc (aborting when memory runs out) or, when the
 * buffer is bound to an arena, from the arena (growth leaves the old copy
 * there). An optional `max` bounds len: an append past it, or past the
 * arena's cap, returns -E2BIG and leaves the buffer as it was, so a
 * renderer of hostile input can stop cleanly. */
#ifndef TRAM_BASE_BUF_H
#define TRAM_BASE_BUF_H

#include <stddef.h>

#include "base/arena.h"

typedef struct buf {
  char *p;        /* [cap] bytes; p[len] == 0 once cap > 0 */
  size_t len;     /* bytes written */
  size_t cap;     /* bytes allocated, including room for the NUL */
  size_t max;     /* most bytes len may reach; 0: no limit */
  arena_t *arena; /* storage from here when set; else malloc (buf_free frees) */
} buf_t;

/* An empty malloc'd buffer is {0}. buf_init_arena: an empty buffer whose
 * storage comes from `a` (which must outlive it), at most max bytes long. */
void buf_init_arena(buf_t *b, arena_t *a, size_t max);

/* Makes room for `extra` more bytes (and the NUL). 0, or -E2BIG. */
int buf_reserve(buf_t *b, size_t extra);

/* Appends; each returns 0 or -E2BIG (nothing appended). */
int buf_put(buf_t *b, const void *s, size_t n);
int buf_putc(buf_t *b, char c);
int buf_puts(buf_t *b, const char *s);
int buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Drops the contents, keeping the storage. */
void buf_reset(buf_t *b);

/* Hands the malloc'd bytes to the caller (NUL-terminated, never NULL) and
 * leaves b empty. Not for arena-bound buffers. */
char *buf_take(buf_t *b, size_t *len);

/* Frees malloc'd storage (arena storage is the arena's); b becomes {0}
 * with the same arena and max. */
void buf_free(buf_t *b);

#endif
