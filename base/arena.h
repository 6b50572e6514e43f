/* base/arena.h — a bump allocator (h2o-style memory pool): many small
 * allocations, freed all at once. Used for a request's parse (server/) and
 * a template render (text/jinja/).
 *
 * Chunks are malloc'd newest first; an allocation bumps an offset in the
 * newest chunk, and a large one-off goes into a chunk of its own behind it
 * so the newest chunk's free space stays in use. An optional cap bounds
 * the bytes handed out: past it arena_alloc() returns NULL (the caller
 * reports its own error); running out of memory, or a size that overflows
 * in an arena without a cap, aborts (base/alloc.h) — so an arena without a
 * cap never returns NULL — unless the arena is fallible (arena_fallible:
 * the request parsers, whose callers check every allocation), or capped:
 * then memory running out is a NULL too, and `oom` says which it was.
 * With -DTRAM_FAULTS, TRAM_FAULTS=alloc_fail=N fails every Nth allocation
 * of a fallible arena (base/fault.h).
 * An arena is used by one thread at a time. */
#ifndef TRAM_BASE_ARENA_H
#define TRAM_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct arena_chunk arena_chunk_t;

typedef struct arena {
  arena_chunk_t *head; /* private: newest chunk first */
  size_t used;         /* read-only: bytes handed out so far (rounded to 16) */
  size_t cap;          /* most bytes it may hand out; 0: no cap */
  size_t chunk;        /* bytes of a new chunk (first one), doubling while below 64 MiB */
  int fallible;        /* private: arena_fallible() nesting depth */
  bool oom;            /* read-only: an allocation found memory exhausted (sticky until arena_free) */
} arena_t;

/* An empty arena with chunks of `chunk` bytes (0: 4 KiB) and a cap of
 * `cap` bytes (0: none). Nothing is allocated until the first call. */
void arena_init(arena_t *a, size_t chunk, size_t cap);

/* Frees every chunk; the arena is empty and usable again (same settings). */
void arena_free(arena_t *a);

/* Enters (on) or leaves (!on) a section in which running out of memory is
 * a NULL from the allocators with a->oom set, not an abort; sections nest,
 * and entering the outermost one clears a->oom. A request parser enters one
 * and turns a->oom into a 503. */
void arena_fallible(arena_t *a, bool on);

/* n bytes aligned to 16, uninitialised (zeroed with arena_zalloc); n == 0
 * gives a valid unique pointer. NULL only when the cap would be passed, or
 * memory ran out in a capped or fallible arena (then a->oom is set).
 * Valid until arena_free(). */
void *arena_alloc(arena_t *a, size_t n);
void *arena_zalloc(arena_t *a, size_t n);

/* count * size bytes, zeroed; NULL when the product overflows, or as
 * arena_alloc. */
void *arena_array(arena_t *a, size_t count, size_t size);

/* A NUL-terminated copy of s[0..n); NULL as arena_alloc. */
char *arena_strndup(arena_t *a, const char *s, size_t n);

#endif
