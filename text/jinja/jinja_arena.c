/* text/jinja/jinja_arena.c — the interpreter's memory and error exits: a bump
 * allocator with a byte cap, growable output buffers in it, and jinja_fail().
 * See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jinja_chunk {
  jinja_chunk_t *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
};

enum { CHUNK_MIN = 64 * 1024 };

void jinja_arena_init(jinja_arena_t *a, size_t cap) {
  a->head = NULL;
  a->used = 0;
  a->cap = cap;
}

void jinja_arena_free(jinja_arena_t *a) {
  jinja_chunk_t *ch = a->head;
  while (ch) {
    jinja_chunk_t *next = ch->next;
    free(ch);
    ch = next;
  }
  a->head = NULL;
  a->used = 0;
}

void *jinja_alloc(jinja_ctx_t *c, size_t n) {
  jinja_arena_t *a = &c->arena;
  size_t need = (n + 15) & ~(size_t)15;
  if (need < n || (a->cap && (need > a->cap || a->used > a->cap - need)))
    jinja_fail(c, -E2BIG, "template used more than %zu bytes of memory", a->cap);
  jinja_chunk_t *ch = a->head;
  if (!ch || ch->size - ch->used < need) {
    size_t size = need > CHUNK_MIN ? need : CHUNK_MIN;
    if (ch && ch->size * 2 > size && ch->size < (64u << 20)) size = ch->size * 2;
    ch = malloc(sizeof *ch + size);
    if (!ch) abort();
    ch->size = size;
    ch->used = 0;
    ch->next = a->head;
    a->head = ch;
  }
  void *p = ch->data + ch->used;
  ch->used += need;
  a->used += need;
  memset(p, 0, n);
  return p;
}

char *jinja_strdup(jinja_ctx_t *c, const char *s, size_t n) {
  char *p = jinja_alloc(c, n + 1);
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return p;
}

static void buf_reserve(jinja_ctx_t *c, jinja_buf_t *b, size_t extra) {
  if (c->max_output && (extra > c->max_output || b->n > c->max_output - extra))
    jinja_fail(c, -E2BIG, "rendered text exceeds %zu bytes", c->max_output);
  if (b->cap - b->n >= extra) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->n < extra) cap *= 2;
  char *p = jinja_alloc(c, cap);
  if (b->n) memcpy(p, b->p, b->n);
  b->p = p;
  b->cap = cap;
}

void jinja_buf_put(jinja_ctx_t *c, jinja_buf_t *b, const char *s, size_t n) {
  if (!n) return;
  buf_reserve(c, b, n);
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

void jinja_buf_putc(jinja_ctx_t *c, jinja_buf_t *b, char ch) {
  buf_reserve(c, b, 1);
  b->p[b->n++] = ch;
}

void jinja_buf_printf(jinja_ctx_t *c, jinja_buf_t *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    jinja_buf_put(c, b, tmp, (size_t)n);
    return;
  }
  buf_reserve(c, b, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}

void jinja_fail(jinja_ctx_t *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  c->code = code;
  longjmp(*c->jb, 1);
}

void jinja_step(jinja_ctx_t *c) {
  if (++c->steps > c->max_steps && c->max_steps)
    jinja_fail(c, -E2BIG, "template did more than %llu steps of work",
               (unsigned long long)c->max_steps);
}
