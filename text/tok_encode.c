/* text/tok_encode.c — text → ids: UTF-8 check (or U+FFFD replacement),
 * the split at special tokens, BOS/EOS, and the hand-off of each plain-text
 * fragment to the pre-tokenizer and byte-level BPE, or to SentencePiece BPE. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strmap.h"
#include "text/tok_internal.h"

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

/* A direct-mapped cache of short words and their ids, for one encode call:
 * text repeats its words, and merging is most of the cost. A word's ids do
 * not depend on its neighbours, so a hit is exact. */
enum { CACHE_SLOTS = 4096, CACHE_WORD = 22, CACHE_IDS = 6 };

typedef struct tok__wslot {
  uint8_t len;   /* word bytes; 0: empty */
  uint8_t n_ids;
  char word[CACHE_WORD];
  int32_t ids[CACHE_IDS];
} wslot_t;

typedef struct word_ctx {
  const tok_t *tok;
  tok__scratch_t *sc;
  tok__out_t *out;
} word_ctx_t;

/* A word longer than TOK_PIECE_MAX: merged piece by piece, a piece equal
 * to the one before (a run of one character) taking its ids again. */
static void long_word(word_ctx_t *c, const uint8_t *w, size_t n) {
  tok__scratch_t *sc = c->sc;
  if (!sc->piece_ids) {
    sc->piece_ids = xmalloc(TOK_PIECE_MAX * sizeof *sc->piece_ids);
  }
  for (size_t at = 0; at < n;) {
    size_t k = n - at;
    if (k > TOK_PIECE_MAX) {
      k = TOK_PIECE_MAX;
      while (k > 1 && (w[at + k] & 0xC0) == 0x80) k--; /* not inside a character */
    }
    const uint8_t *p = w + at;
    if (!sc->piece || sc->piece_len != k || memcmp(sc->piece, p, k) != 0) {
      tok__out_t mine = {sc->piece_ids, TOK_PIECE_MAX, 0}; /* k bytes give at most k ids */
      tok__bpe_word(c->tok, sc, p, k, &mine);
      sc->piece = p;
      sc->piece_len = k;
      sc->piece_n = mine.n;
    }
    for (int64_t i = 0; i < sc->piece_n; i++) tok__emit(c->out, sc->piece_ids[i]);
    at += k;
  }
}

static int on_word(void *arg, const uint8_t *w, size_t n) {
  word_ctx_t *c = arg;
  if (n > TOK_PIECE_MAX) {
    long_word(c, w, n);
    return 0;
  }
  if (n < 2 || n > CACHE_WORD || !c->sc->cache) {
    tok__bpe_word(c->tok, c->sc, w, n, c->out);
    return 0;
  }
  wslot_t *slot = &c->sc->cache[strmap_hash(w, n) & (CACHE_SLOTS - 1)];
  if (slot->len == n && memcmp(slot->word, w, n) == 0) {
    for (int i = 0; i < slot->n_ids; i++) tok__emit(c->out, slot->ids[i]);
    return 0;
  }
  int32_t ids[CACHE_IDS];
  tok__out_t mine = {ids, CACHE_IDS, 0};
  tok__bpe_word(c->tok, c->sc, w, n, &mine);
  if (mine.n > CACHE_IDS) { /* too many to keep: encode into the real output */
    tok__bpe_word(c->tok, c->sc, w, n, c->out);
    return 0;
  }
  for (int64_t i = 0; i < mine.n; i++) tok__emit(c->out, ids[i]);
  slot->len = (uint8_t)n;
  slot->n_ids = (uint8_t)mine.n;
  memcpy(slot->word, w, n);
  memcpy(slot->ids, ids, (size_t)mine.n * sizeof *ids);
  return 0;
}

/* Encodes plain text s[n]. *prefix: SentencePiece's space prefix is due
 * (at the start, and after a control token as llama.cpp does); the text
 * takes it. */
static int fragment(const tok_t *tok, tok__scratch_t *sc, const uint8_t *s, size_t n,
                    int *prefix, tok__out_t *out) {
  if (n == 0) return 0;
  uint8_t *norm = NULL; /* the NFC form, when it differs */
  if (tok->nfc) {
    size_t m = n;
    int rc = tok__nfc(s, n, &norm, &m);
    if (rc != 0) return rc;
    if (norm) s = norm, n = m;
  }
  int rc = 0;
  if (tok->model == TOK_MODEL_SPM) {
    tok__spm_fragment(tok, sc, s, n, tok->add_space_prefix && *prefix, out);
    *prefix = 0;
  } else {
    word_ctx_t c = {tok, sc, out};
    rc = tok__pre_split(tok->pre, s, n, on_word, &c);
  }
  free(norm);
  return rc;
}

size_t tok_mark_specials(const tok_t *tok, const char *text, size_t len, char *out) {
  const uint8_t *s = (const uint8_t *)text;
  size_t k = 0;
  for (size_t i = 0; i < len;) {
    if (s[i] == TOK_MARK) { /* never UTF-8: what encoding would make of it */
      memcpy(out + k, "\xEF\xBF\xBD", 3);
      k += 3;
      i++;
      continue;
    }
    int32_t id = tok->special_at[s[i]] == tok->special_at[s[i] + 1]
                     ? -1
                     : special_at(tok, s + i, len - i, TOK_ENC_PARSE_SPECIAL);
    size_t tlen = 1;
    if (id >= 0 && tok->types[id] != TOK_TYPE_USER_DEFINED) {
      tok__text(tok, id, &tlen);
      for (size_t j = 0; j < tlen;) { /* a mark after each character: no special starts inside */
        int cl = utf8_char(s + i + j, tlen - j);
        if (cl < 1) cl = 1;
        memcpy(out + k, s + i + j, (size_t)cl);
        k += (size_t)cl;
        out[k++] = (char)TOK_MARK;
        j += (size_t)cl;
      }
    } else {
      out[k++] = (char)s[i];
    }
    i += tlen;
  }
  return k;
}

/* fragment() for TOK_ENC_MARKED text: the marks dropped, then invalid UTF-8
 * replaced (or refused with TOK_ENC_STRICT) as tok_encode does for the whole
 * text otherwise. */
static int marked_fragment(const tok_t *tok, tok__scratch_t *sc, const uint8_t *s, size_t n, int flags,
                           int *prefix, tok__out_t *out) {
  if (n == 0) return 0;
  uint8_t *plain = xmalloc(n), *clean = NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] != TOK_MARK) plain[m++] = s[i];
  if (m == 0) { /* marks only */
    free(plain);
    return 0;
  }
  const uint8_t *t = plain;
  int rc = 0;
  if (!utf8_valid(plain, m)) {
    if (flags & TOK_ENC_STRICT) rc = -EILSEQ;
    clean = xmalloc(3 * m);
    m = tok__utf8_sanitize(plain, m, 0, clean, NULL);
    t = clean;
  }
  if (rc == 0) rc = fragment(tok, sc, t, m, prefix, out);
  free(plain);
  free(clean);
  return rc;
}

int64_t tok_encode(const tok_t *tok, const char *text, size_t len, int flags, int32_t *ids,
                   size_t cap) {
  if (!text && len > 0) return -EINVAL;
  if (!ids) cap = 0;
  const uint8_t *s = (const uint8_t *)text;
  uint8_t *clean = NULL;
  const int marked = flags & TOK_ENC_MARKED; /* checked per fragment, the marks dropped */
  if (!marked && len > 0 && !utf8_valid(s, len)) {
    if (flags & TOK_ENC_STRICT) return -EILSEQ;
    clean = xmalloc(3 * len);
    len = tok__utf8_sanitize(s, len, 0, clean, NULL);
    s = clean;
  }

  tok__out_t out = {ids, cap, 0};
  tok__scratch_t sc;
  memset(&sc, 0, sizeof sc);
  if (tok->model == TOK_MODEL_BPE && len >= 256) { /* worth its setup */
    sc.cache = xcalloc(CACHE_SLOTS, sizeof *sc.cache);
  }
  int rc = 0;
  if ((flags & TOK_ENC_ADD_SPECIAL) && tok->add_bos) tok__emit(&out, tok->bos);

  size_t start = 0; /* of the plain text not yet encoded */
  int prefix = 1;
  for (size_t i = 0; i < len && rc == 0;) {
    if (tok->special_at[s[i]] == tok->special_at[s[i] + 1]) { /* no special starts with s[i] */
      i++;
      continue;
    }
    int32_t id = marked && i + 1 < len && s[i + 1] == TOK_MARK ? -1 : special_at(tok, s + i, len - i, flags);
    if (id < 0) {
      i++;
      continue;
    }
    rc = marked ? marked_fragment(tok, &sc, s + start, i - start, flags, &prefix, &out)
                : fragment(tok, &sc, s + start, i - start, &prefix, &out);
    if (tok->prefix_pieces) {
      /* tokenizer.json's rule: the prefix goes before every piece between
       * added tokens (Prepend, Metaspace "always") or the first only */
      prefix = tok->prefix_pieces == TOK_PREFIX_EVERY_PIECE;
    } else if (tok->types[id] == TOK_TYPE_USER_DEFINED) {
      /* part of the text, as in SentencePiece: a prefix still due goes
       * before it, and the text after it gets none */
      if (tok->model == TOK_MODEL_SPM && tok->add_space_prefix && prefix)
        tok__spm_fragment(tok, &sc, s, 0, 1, &out);
      prefix = 0;
    } else {
      prefix = 1;
    }
    tok__emit(&out, id);
    size_t tlen;
    tok__text(tok, id, &tlen);
    i += tlen;
    start = i;
  }
  if (rc == 0)
    rc = marked ? marked_fragment(tok, &sc, s + start, len - start, flags, &prefix, &out)
                : fragment(tok, &sc, s + start, len - start, &prefix, &out);
  if ((flags & TOK_ENC_ADD_SPECIAL) && tok->add_eos) tok__emit(&out, tok->eos);

  free(sc.cache);
  free(sc.sym);
  free(sc.heap);
  free(sc.buf);
  free(sc.piece_ids);
  free(clean);
  return rc < 0 ? rc : out.n;
}
