/* scheduler/sched_stop.c — stop strings with hold-back (see sched_stop.h). */
#include "scheduler/sched_stop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"

int sched_stops_init(sched_stops_t *s, const char *const *strs, int32_t n, int32_t max_n, int32_t max_len, char *err,
                     size_t err_len) {
  memset(s, 0, sizeof *s);
  if (n < 0 || n > max_n) {
    snprintf(err, err_len, "%d stop strings: at most %d are allowed", n, max_n);
    return -EINVAL;
  }
  for (int32_t i = 0; i < n; i++) {
    const size_t len = strs[i] ? strlen(strs[i]) : 0;
    if (len == 0 || len > (size_t)max_len || !utf8_valid(strs[i], len)) {
      snprintf(err, err_len, "stop string %d: must be 1 to %d bytes of valid UTF-8", i, max_len);
      return -EINVAL;
    }
  }
  if (n == 0) return 0;
  s->n = n;
  s->str = xcalloc((size_t)n, sizeof *s->str);
  s->len = xcalloc((size_t)n, sizeof *s->len);
  s->fail = xcalloc((size_t)n, sizeof *s->fail);
  for (int32_t i = 0; i < n; i++) {
    const int32_t len = (int32_t)strlen(strs[i]);
    const char *p = s->str[i] = xstrndup(strs[i], (size_t)len);
    s->len[i] = len;
    if (len > s->max_len) s->max_len = len;
    int32_t *f = s->fail[i] = xcalloc((size_t)len, sizeof *f);
    f[0] = 0;
    for (int32_t j = 1, k = 0; j < len; j++) {
      while (k > 0 && p[j] != p[k]) k = f[k - 1];
      if (p[j] == p[k]) k++;
      f[j] = k;
    }
  }
  return 0;
}

void sched_stops_free(sched_stops_t *s) {
  for (int32_t i = 0; i < s->n; i++) {
    free(s->str[i]);
    free(s->fail[i]);
  }
  free(s->str);
  free(s->len);
  free(s->fail);
  memset(s, 0, sizeof *s);
}

void sched_stop_state_init(sched_stop_state_t *st, const sched_stops_t *stops) {
  memset(st, 0, sizeof *st);
  st->n_stops = stops->n;
  if (stops->n > 0) st->match = xcalloc((size_t)stops->n, sizeof *st->match);
}

void sched_stop_state_free(sched_stop_state_t *st) {
  buf_free(&st->held);
  free(st->match);
  memset(st, 0, sizeof *st);
}

/* Releases the first n held bytes. */
static void release(sched_stop_state_t *st, size_t n, buf_t *out) {
  if (n == 0) return;
  buf_put(out, st->held.p, n);
  memmove(st->held.p, st->held.p + n, st->held.len - n);
  st->held.len -= n;
}

int32_t sched_stop_push(sched_stop_state_t *st, const sched_stops_t *stops, const char *text, size_t len, buf_t *out) {
  if (stops->n == 0) {
    buf_put(out, text, len);
    return -1;
  }
  for (size_t b = 0; b < len; b++) {
    const char c = text[b];
    buf_putc(&st->held, c);
    int32_t hit = -1;
    for (int32_t i = 0; i < stops->n; i++) {
      const char *p = stops->str[i];
      int32_t k = st->match[i];
      while (k > 0 && p[k] != c) k = stops->fail[i][k - 1];
      if (p[k] == c) k++;
      st->match[i] = k;
      if (k == stops->len[i] && (hit < 0 || k > stops->len[hit])) hit = i; /* the longest starts first */
    }
    if (hit >= 0) {
      release(st, st->held.len - (size_t)stops->len[hit], out);
      buf_reset(&st->held);
      memset(st->match, 0, (size_t)stops->n * sizeof *st->match);
      return hit;
    }
  }
  int32_t keep = 0;
  for (int32_t i = 0; i < stops->n; i++)
    if (st->match[i] > keep) keep = st->match[i];
  release(st, st->held.len - (size_t)keep, out);
  return -1;
}

void sched_stop_flush(sched_stop_state_t *st, buf_t *out) {
  release(st, st->held.len, out);
  if (st->match) memset(st->match, 0, (size_t)st->n_stops * sizeof *st->match); /* nothing held, nothing matched */
}
