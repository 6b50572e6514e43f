/* model/tok_encode.c — text → ids: UTF-8 check (or U+FFFD replacement),
 * the split at special tokens, BOS/EOS, and the hand-off of each plain-text
 * fragment to the pre-tokenizer and byte-level BPE, or to SentencePiece BPE. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

/* The longest special token eligible under `flags` that starts at s[0..n),
 * or -1. Control and unknown tokens count only with TOK_ENC_PARSE_SPECIAL;
 * user-defined tokens always. */
static int32_t special_at(const tok_t *tok, const uint8_t *s, size_t n, int flags) {
  for (uint32_t k = tok->special_at[s[0]]; k < tok->special_at[s[0] + 1]; k++) {
    int32_t id = tok->special[k];
    if (tok->types[id] != TOK_TYPE_USER_DEFINED && !(flags & TOK_ENC_PARSE_SPECIAL)) continue;
    size_t len;
    const char *t = tok__text(tok, id, &len);
    if (len <= n && memcmp(t, s, len) == 0) return id; /* longest first */
  }
  return -1;
}

typedef struct word_ctx {
  const tok_t *tok;
  tok__scratch_t *sc;
  tok__out_t *out;
} word_ctx_t;

static int on_word(void *arg, const uint8_t *w, size_t n) {
  word_ctx_t *c = arg;
  tok__bpe_word(c->tok, c->sc, w, n, c->out);
  return 0;
}

/* Encodes plain text s[n]; after_special: it follows a special token (or
 * starts the input), where SentencePiece puts its space prefix. */
static int fragment(const tok_t *tok, tok__scratch_t *sc, const uint8_t *s, size_t n,
                    int after_special, tok__out_t *out) {
  if (n == 0) return 0;
  if (tok->model == TOK_MODEL_SPM) {
    tok__spm_fragment(tok, sc, s, n, tok->add_space_prefix && after_special, out);
    return 0;
  }
  word_ctx_t c = {tok, sc, out};
  return tok__pre_split(tok->pre, s, n, on_word, &c);
}

int64_t tok_encode(const tok_t *tok, const char *text, size_t len, int flags, int32_t *ids,
                   size_t cap) {
  if (!text && len > 0) return -EINVAL;
  if (!ids) cap = 0;
  const uint8_t *s = (const uint8_t *)text;
  uint8_t *clean = NULL;
  if (len > 0 && !tok__utf8_valid(s, len)) {
    if (flags & TOK_ENC_STRICT) return -EILSEQ;
    clean = malloc(3 * len);
    if (!clean) abort();
    len = tok__utf8_sanitize(s, len, 0, clean, NULL);
    s = clean;
  }

  tok__out_t out = {ids, cap, 0};
  tok__scratch_t sc;
  memset(&sc, 0, sizeof sc);
  int rc = 0;
  if ((flags & TOK_ENC_ADD_SPECIAL) && tok->add_bos) tok__emit(&out, tok->bos);

  size_t start = 0; /* of the plain text not yet encoded */
  int after_special = 1;
  for (size_t i = 0; i < len && rc == 0;) {
    if (tok->special_at[s[i]] == tok->special_at[s[i] + 1]) { /* no special starts with s[i] */
      i++;
      continue;
    }
    int32_t id = special_at(tok, s + i, len - i, flags);
    if (id < 0) {
      i++;
      continue;
    }
    rc = fragment(tok, &sc, s + start, i - start, after_special, &out);
    tok__emit(&out, id);
    after_special = 1;
    size_t tlen;
    tok__text(tok, id, &tlen);
    i += tlen;
    start = i;
  }
  if (rc == 0) rc = fragment(tok, &sc, s + start, len - start, after_special, &out);
  if ((flags & TOK_ENC_ADD_SPECIAL) && tok->add_eos) tok__emit(&out, tok->eos);

  free(sc.sym);
  free(sc.heap);
  free(sc.buf);
  free(clean);
  return rc < 0 ? rc : out.n;
}
