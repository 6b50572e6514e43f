/* base/buf.c — the growable byte buffer (see buf.h). */
#include "base/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

void buf_init_arena(buf_t *b, arena_t *a, size_t max) {
  memset(b, 0, sizeof *b);
  b->arena = a;
  b->max = max;
}

int buf_reserve(buf_t *b, size_t extra) {
  if (extra > SIZE_MAX - 1 - b->len) return -E2BIG;
  if (b->max && (extra > b->max || b->len > b->max - extra)) return -E2BIG;
  const size_t need = b->len + extra + 1;
  if (need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return -E2BIG;
    cap *= 2;
  }
  if (b->arena) {
    char *p = arena_alloc(b->arena, cap);
    if (!p) return -E2BIG;
    if (b->len) memcpy(p, b->p, b->len);
    b->p = p;
  } else {
    b->p = xreallocarray(b->p, cap, 1);
  }
  b->cap = cap;
  b->p[b->len] = 0;
  return 0;
}

int buf_put(buf_t *b, const void *s, size_t n) {
  if (n == 0) return 0;
  int rc = buf_reserve(b, n);
  if (rc) return rc;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
  return 0;
}

int buf_putc(buf_t *b, char c) { return buf_put(b, &c, 1); }

int buf_puts(buf_t *b, const char *s) { return buf_put(b, s, strlen(s)); }

int buf_printf(buf_t *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return -EINVAL;
  if ((size_t)n < sizeof tmp) return buf_put(b, tmp, (size_t)n);
  int rc = buf_reserve(b, (size_t)n);
  if (rc) return rc;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

void buf_reset(buf_t *b) {
  b->len = 0;
  if (b->cap) b->p[0] = 0;
}

char *buf_take(buf_t *b, size_t *len) {
  if (!b->p) buf_reserve(b, 0);
  char *p = b->p;
  if (len) *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

void buf_free(buf_t *b) {
  if (!b->arena) free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
