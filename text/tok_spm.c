/* text/tok_spm.c — SentencePiece-style BPE ("llama" tokenizers: Llama 2,
 * Mistral) for one text fragment.
 *
 * Spaces become "▁" (U+2581), with one put in front when add_space_prefix
 * asks. The fragment's characters are the initial symbols; every adjacent
 * pair whose concatenation is a normal token goes into a max-heap by that
 * token's score (leftmost first among equals), as SentencePiece's BPE model
 * does; the best is merged and the pairs it forms with its neighbours are
 * pushed. A final symbol that is not a token (a character the vocabulary
 * lacks) falls back to the <0xXX> tokens of its UTF-8 bytes, or to one
 * unknown token when the vocabulary lacks one of those byte tokens. Pieces SentencePiece
 * marks unused are not resegmented (llama.cpp does not either). With merges
 * (a vocabulary from tokenizer.json, `spm_ranked`) the escaped fragment is
 * merged by rank instead, as Hugging Face's BPE model does (tok_bpe.c).
 * llama.cpp's "gemma4" model (newline_runs): the fragment is cut into runs
 * of newlines and runs of other characters, each merged alone; a newline
 * run that is a token is taken whole (llama-vocab.cpp's gemma4 pre-type). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

typedef struct sym {
  uint32_t start, len; /* bytes of the escaped fragment; len 0 once merged away */
  int32_t prev, next;
} sym_t;

static void try_pair(const tok_t *tok, const char *buf, const sym_t *s, tok__heap_t *h, int32_t l,
                     int32_t r) {
  if (l < 0 || r < 0) return;
  uint32_t len = s[l].len + s[r].len;
  int32_t id = strmap_find(&tok->vocab, buf + s[l].start, len);
  if (id < 0 || tok->types[id] != TOK_TYPE_NORMAL) return;
  tok__heap_push(h, (tok__cand_t){tok__score_key(tok->scores[id]), l, r, id, (int32_t)len, 0});
}

static void emit_symbol(const tok_t *tok, const char *buf, const sym_t *s, tok__out_t *out) {
  int32_t id = strmap_find(&tok->vocab, buf + s->start, s->len);
  if (id >= 0 && (tok->types[id] == TOK_TYPE_NORMAL || tok->types[id] == TOK_TYPE_USER_DEFINED ||
                  tok->types[id] == TOK_TYPE_UNUSED)) {
    tok__emit(out, id);
    return;
  }
  for (uint32_t i = 0; i < s->len; i++) { /* byte fallback needs a token for every byte */
    if (tok->spm_byte_id[(uint8_t)buf[s->start + i]] < 0) {
      if (tok->unk >= 0) tok__emit(out, tok->unk);
      return;
    }
  }
  for (uint32_t i = 0; i < s->len; i++) tok__emit(out, tok->spm_byte_id[(uint8_t)buf[s->start + i]]);
}

static void spm_piece(const tok_t *tok, tok__scratch_t *sc, const uint8_t *text, size_t n, int prefix,
                      tok__out_t *out) {
  /* escape: at most 3 bytes per input byte, plus the prefix */
  xgrow(&sc->buf, &sc->buf_cap, 3 * n + 3, 1, 16);
  char *buf = sc->buf;
  size_t k = 0;
  if (prefix && !(tok->prefix_unless_space && n > 0 && text[0] == ' ')) {
    memcpy(buf, "\xE2\x96\x81", 3);
    k = 3;
  }
  for (size_t i = 0; i < n; i++) {
    if (text[i] == ' ') {
      memcpy(buf + k, "\xE2\x96\x81", 3);
      k += 3;
    } else {
      buf[k++] = (char)text[i];
    }
  }
  if (k == 0) return;
  if (tok->spm_ranked) { /* tokenizer.json's byte-fallback BPE: merges by rank */
    tok__bpe_chars(tok, sc, (const uint8_t *)buf, k, out);
    return;
  }

  xgrow(&sc->sym, &sc->sym_cap, k, sizeof(sym_t), 16);
  xgrow(&sc->heap, &sc->heap_cap, 3 * k, sizeof(tok__cand_t), 16);
  sym_t *s = sc->sym;
  tok__heap_t h = {sc->heap, 0};
  int32_t m = 0;
  for (size_t i = 0; i < k;) {
    int c = utf8_char((const uint8_t *)buf + i, k - i);
    if (c <= 0) c = 1; /* the input was sanitized; defensive */
    s[m] = (sym_t){(uint32_t)i, (uint32_t)c, m - 1, -1};
    if (m > 0) s[m - 1].next = m;
    m++;
    i += (size_t)c;
  }
  for (int32_t i = 0; i + 1 < m; i++) try_pair(tok, buf, s, &h, i, i + 1);
  /* at most (m - 1) initial candidates plus two per merge (m - 1 merges) */
  while (h.n > 0) {
    tok__cand_t c = tok__heap_pop(&h);
    uint32_t len = (uint32_t)c.a;
    if (s[c.left].len == 0 || s[c.right].len == 0 || s[c.left].next != c.right ||
        s[c.left].len + s[c.right].len != len)
      continue; /* stale */
    s[c.left].len = len;
    s[c.right].len = 0;
    s[c.left].next = s[c.right].next;
    if (s[c.right].next >= 0) s[s[c.right].next].prev = c.left;
    try_pair(tok, buf, s, &h, s[c.left].prev, c.left);
    try_pair(tok, buf, s, &h, c.left, s[c.left].next);
  }
  for (int32_t i = 0; i >= 0 && i < m; i = s[i].next) emit_symbol(tok, buf, &s[i], out);
}

void tok__spm_fragment(const tok_t *tok, tok__scratch_t *sc, const uint8_t *text, size_t n,
                       int prefix, tok__out_t *out) {
  if (!tok->newline_runs) {
    spm_piece(tok, sc, text, n, prefix, out);
    return;
  }
  for (size_t i = 0; i < n;) { /* llama.cpp's gemma4: runs of "\n" and of the rest, merged apart */
    const int nl = text[i] == '\n';
    size_t j = i;
    while (j < n && (text[j] == '\n') == nl) j++;
    const int32_t id = nl ? strmap_find(&tok->vocab, (const char *)text + i, (uint32_t)(j - i)) : -1;
    if (id >= 0 && (tok->types[id] == TOK_TYPE_NORMAL || tok->types[id] == TOK_TYPE_USER_DEFINED))
      tok__emit(out, id); /* a newline run that is a token: whole */
    else
      spm_piece(tok, sc, text + i, j - i, prefix && i == 0, out);
    i = j;
  }
}
