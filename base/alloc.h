/* base/alloc.h — checked allocation: the x* helpers abort (after one line on
 * stderr) when memory runs out or a size overflows, so callers never test
 * for NULL. STYLE.md: running out of memory is not an input error; input
 * that asks for too much is refused by its parser before it gets here.
 *
 * xgrow() is the one "double the capacity" loop: it grows a malloc'd array
 * to hold at least `need` elements. */
#ifndef TRAM_BASE_ALLOC_H
#define TRAM_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* n bytes, uninitialised (n == 0 gives a unique pointer). */
void *xmalloc(size_t n);
/* count * size bytes, zeroed; aborts if the product overflows. */
void *xcalloc(size_t count, size_t size);
/* count * size bytes, uninitialised; aborts if the product overflows. */
void *xmallocarray(size_t count, size_t size);
/* realloc(p, count * size); aborts if the product overflows. */
void *xreallocarray(void *p, size_t count, size_t size);
/* A NUL-terminated malloc'd copy of s[0..n). */
char *xstrndup(const char *s, size_t n);
/* A malloc'd copy of the NUL-terminated string s. */
char *xstrdup(const char *s);

/* Grows the malloc'd array *pp (of *cap elements of `size` bytes) so it
 * holds at least `need` elements: the capacity doubles from `min_cap` (or
 * from *cap when it is larger) until it suffices. Contents are kept; new
 * elements are uninitialised. No-op when *cap >= need. */
void xgrow(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap);
/* The same for an int32_t capacity (aborts past INT32_MAX elements). */
void xgrow_i32(void *pp, int32_t *cap, int32_t need, size_t size, int32_t min_cap);

/* The one fallible allocation, for an allocator where running out must be
 * survived and that cannot be an arena (cJSON's hooks inside a request's
 * parse, api/json_alloc.c): n bytes, or NULL when memory ran out or, in
 * test builds, when TRAM_FAULTS' alloc_fail fires (base/fault.h). Every
 * other allocation outside base/ is an x* call above or comes from an arena
 * (base/arena.h; arena_fallible where running out must be survived). */
void *alloc_fallible(size_t n);

/* Reports that memory ran out (what, bytes) and aborts. */
__attribute__((noreturn)) void xoom(const char *what, size_t bytes);

#endif
