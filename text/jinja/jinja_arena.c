/* text/jinja/jinja_arena.c — the interpreter's memory and error exits: a bump
 * allocator with a byte cap, growable output buffers in it, and jinja_fail().
 * See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jinja_arena_init(arena_t *a, size_t cap) { arena_init(a, 64 * 1024, cap); }

void *jinja_alloc(jinja_ctx_t *c, size_t n) {
  void *p = arena_zalloc(&c->arena, n);
  if (!p && c->arena.oom) jinja_fail(c, -ENOMEM, "the server ran out of memory rendering the chat template");
  if (!p) jinja_fail(c, -E2BIG, "template used more than %zu bytes of memory", c->arena.cap);
  return p;
}

char *jinja_strdup(jinja_ctx_t *c, const char *s, size_t n) {
  char *p = jinja_alloc(c, n + 1);
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return p;
}

/* Binds a {0} buffer to the run's arena and output limit. */
static buf_t *bind(jinja_ctx_t *c, buf_t *b) {
  if (!b->arena) {
    b->arena = &c->arena;
    b->max = c->max_output;
  }
  return b;
}

/* Fails the run when appending n bytes to b failed (rc < 0): past the
 * output limit, or else past the arena's memory cap. */
static void check(jinja_ctx_t *c, const buf_t *b, size_t n, int rc) {
  if (rc == 0) return;
  if (b->max && (n > b->max || b->len > b->max - n))
    jinja_fail(c, -E2BIG, "rendered text exceeds %zu bytes", c->max_output);
  if (c->arena.oom) jinja_fail(c, -ENOMEM, "the server ran out of memory rendering the chat template");
  jinja_fail(c, -E2BIG, "template used more than %zu bytes of memory", c->arena.cap);
}

void jinja_buf_put(jinja_ctx_t *c, jinja_buf_t *b, const char *s, size_t n) {
  check(c, b, n, buf_put(bind(c, b), s, n));
}

void jinja_buf_putc(jinja_ctx_t *c, jinja_buf_t *b, char ch) { check(c, b, 1, buf_putc(bind(c, b), ch)); }

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
  char *big = jinja_alloc(c, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  jinja_buf_put(c, b, big, (size_t)n);
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
