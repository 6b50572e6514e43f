/* text/tok_decode.c — ids → bytes: whole sequences (tok_decode) and the
 * streaming detokenizer that only ever hands out complete UTF-8 characters
 * (tok_stream_*). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "base/alloc.h"

static int skipped(const tok_t *tok, int32_t id, int flags) {
  int t = tok->types[id];
  return !(flags & TOK_DEC_SPECIAL) && (t == TOK_TYPE_CONTROL || t == TOK_TYPE_UNKNOWN);
}

static int is_text_token(const tok_t *tok, int32_t id) {
  int t = tok->types[id];
  return t != TOK_TYPE_CONTROL && t != TOK_TYPE_UNKNOWN;
}

int64_t tok_decode(const tok_t *tok, const int32_t *ids, size_t n, int flags, char *out,
                   size_t cap) {
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= tok->n_vocab) return -EINVAL;
  }
  /* the raw bytes, gathered first: sanitizing needs them whole */
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += tok->piece_off[ids[i] + 1] - tok->piece_off[ids[i]];
  uint8_t *raw = xmalloc(total ? total : 1);
  size_t k = 0;
  int strip = (flags & TOK_DEC_STRIP_PREFIX) && tok->add_space_prefix;
  for (size_t i = 0; i < n; i++) {
    if (skipped(tok, ids[i], flags)) continue;
    size_t len;
    const char *p = tok_piece(tok, ids[i], &len);
    if (strip && is_text_token(tok, ids[i])) { /* the first text token carries the prefix */
      if (len > 0 && p[0] == ' ') {
        p++;
        len--;
      }
      strip = 0;
    }
    memcpy(raw + k, p, len);
    k += len;
  }
  const uint8_t *res = raw;
  uint8_t *clean = NULL;
  if ((flags & TOK_DEC_VALID_UTF8) && !utf8_valid(raw, k)) {
    clean = xmalloc(3 * k);
    k = tok__utf8_sanitize(raw, k, 0, clean, NULL);
    res = clean;
  }
  if (cap > 0) {
    size_t w = k < cap - 1 ? k : cap - 1;
    memcpy(out, res, w);
    out[w] = 0;
  }
  free(raw);
  free(clean);
  return (int64_t)k;
}

/* ---- streaming --------------------------------------------------------------------- */

void tok_stream_init(tok_stream_t *s, const tok_t *tok, int flags) {
  memset(s, 0, sizeof *s);
  s->tok = tok;
  s->flags = flags;
}

size_t tok_stream_max_out(const tok_t *tok) { return 3 * (tok->max_piece + sizeof ((tok_stream_t *)0)->pend); }

int tok_stream_push(tok_stream_t *s, int32_t id, char *out, size_t cap) {
  const tok_t *tok = s->tok;
  if (id < 0 || id >= tok->n_vocab) return -EINVAL;
  if (skipped(tok, id, s->flags)) return 0;
  size_t len;
  const char *p = tok_piece(tok, id, &len);
  /* the held-back bytes, then the piece */
  uint8_t small[256];
  size_t n = s->n_pend + len;
  uint8_t *b = n <= sizeof small ? small : xmalloc(n);
  memcpy(b, s->pend, s->n_pend);
  memcpy(b + s->n_pend, p, len);
  size_t used;
  size_t need = tok__utf8_sanitize(b, n, 1, NULL, &used);
  int rc;
  if (need > cap) {
    rc = -ENOSPC;
  } else {
    tok__utf8_sanitize(b, n, 1, (uint8_t *)out, &used);
    s->n_pend = (uint8_t)(n - used); /* an incomplete character: at most 3 bytes */
    memcpy(s->pend, b + used, s->n_pend);
    rc = (int)need;
  }
  if (b != small) free(b);
  return rc;
}

int tok_stream_flush(tok_stream_t *s, char *out, size_t cap) {
  if (s->n_pend == 0) return 0;
  if (cap < 3) return -ENOSPC;
  size_t w = tok__utf8_sanitize(s->pend, s->n_pend, 0, (uint8_t *)out, NULL);
  s->n_pend = 0;
  return (int)w;
}
