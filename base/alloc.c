/* base/alloc.c — checked allocation (see alloc.h). */
#include "base/alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"

void xoom(const char *what, size_t bytes) {
  fprintf(stderr, "tram: out of memory (%s, %zu bytes)\n", what ? what : "alloc", bytes);
  abort();
}

void *alloc_fallible(size_t n) { return fault_hit("alloc_fail") ? NULL : malloc(n ? n : 1); }

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) xoom("malloc", n);
  return p;
}

void *xcalloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) xoom("calloc overflow", SIZE_MAX);
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) xoom("calloc", count * size);
  return p;
}

void *xreallocarray(void *p, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) xoom("realloc overflow", SIZE_MAX);
  size_t n = count * size;
  void *q = realloc(p, n ? n : 1);
  if (!q) xoom("realloc", n);
  return q;
}

void *xmallocarray(size_t count, size_t size) { return xreallocarray(NULL, count, size); }

char *xstrndup(const char *s, size_t n) {
  char *p = xmalloc(n + 1);
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

void xgrow(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap) {
  if (need <= *cap) return;
  size_t c = *cap > min_cap ? *cap : (min_cap ? min_cap : 1);
  while (c < need) {
    if (c > SIZE_MAX / 2) xoom("grow overflow", SIZE_MAX);
    c *= 2;
  }
  void **p = pp;
  *p = xreallocarray(*p, c, size);
  *cap = c;
}

void xgrow_i32(void *pp, int32_t *cap, int32_t need, size_t size, int32_t min_cap) {
  if (need <= *cap) return;
  size_t c = *cap > 0 ? (size_t)*cap : 0;
  xgrow(pp, &c, (size_t)need, size, min_cap > 0 ? (size_t)min_cap : 1);
  if (c > INT32_MAX) c = INT32_MAX; /* need <= INT32_MAX: the array holds it */
  *cap = (int32_t)c;
}
