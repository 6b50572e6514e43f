/* text/tok_bpe.c — byte-level BPE: the merge table and the merging of one
 * pre-tokenized word.
 *
 * A word's UTF-8 bytes are its initial symbols, each the token of that byte's
 * character in the GPT-2 byte alphabet (a byte with no token is dropped, and
 * its neighbours become adjacent, as in Hugging Face's `tokenizers`). Every
 * adjacent pair that has a merge goes into a min-heap ordered by (rank,
 * position); the best pair is merged, the two pairs it creates with its
 * neighbours are pushed, and stale entries (a side already merged away) are
 * skipped when popped. O(n log n) per word of n bytes.
 *
 * tokenizer.json's BPE with byte_fallback (tok__bpe_chars, for "llama"
 * vocabularies that come with merges) starts from characters instead: each
 * UTF-8 character is its token, or the <0xXX> tokens of its bytes, or the
 * unknown token, as Hugging Face's BPE model does; then the same merging. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/alloc.h"
#include "gguf/gguf.h"
#include "text/tok_internal.h"

static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }

static uint64_t pair_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  return k;
}

static const tok__merge_t *merge_get(const tok__mergemap_t *m, int32_t l, int32_t r) {
  uint64_t key = pair_key(l, r);
  for (uint64_t i = pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
    const tok__merge_t *e = &m->slots[i];
    if (e->key == key) return e;
    if (e->key == UINT64_MAX) return NULL;
  }
}

int tok__bpe_init(tok_t *tok, const gguf_str_t *merges, int32_t n_merges, char *err,
                  size_t err_len) {
  if (n_merges < 0 || (n_merges > 0 && !merges)) {
    snprintf(err, err_len, "tokenizer: bad merges array (%d)", n_merges);
    return -EINVAL;
  }
  uint64_t size = 16;
  while (size < 2 * (uint64_t)n_merges) size *= 2;
  tok->merges.mask = size - 1;
  tok->merges.slots = xmalloc(size * sizeof(tok__merge_t));
  memset(tok->merges.slots, 0xFF, size * sizeof(tok__merge_t));

  char *joined = NULL;
  size_t joined_cap = 0;
  int32_t bad = 0, dup = 0;
  for (int32_t rank = 0; rank < n_merges; rank++) {
    const char *s = merges[rank].ptr;
    size_t n = (size_t)merges[rank].len;
    const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL; /* the left part may start with ' ' */
    int32_t l = -1, r = -1, id = -1;
    if (sp) {
      size_t nl = (size_t)(sp - s), nr = n - nl - 1;
      l = strmap_find(&tok->vocab, s, nl);
      r = strmap_find(&tok->vocab, sp + 1, nr);
      xgrow(&joined, &joined_cap, nl + nr + 1, 1, 16);
      memcpy(joined, s, nl);
      memcpy(joined + nl, sp + 1, nr);
      id = strmap_find(&tok->vocab, joined, nl + nr);
    }
    if (l < 0 || r < 0 || id < 0) {
      if (bad++ == 0)
        log_warn("tokenizer: merge %d \"%.*s\" is not two tokens whose concatenation is a token; "
                 "skipped", rank, (int)(n < 64 ? n : 64), s);
      continue;
    }
    uint64_t key = pair_key(l, r);
    uint64_t i = pair_hash(key) & tok->merges.mask;
    while (tok->merges.slots[i].key != UINT64_MAX && tok->merges.slots[i].key != key)
      i = (i + 1) & tok->merges.mask;
    if (tok->merges.slots[i].key == key) { /* the lower rank stays */
      dup++;
      continue;
    }
    tok->merges.slots[i] = (tok__merge_t){.key = key, .rank = rank, .id = id};
  }
  free(joined);
  if (bad) log_warn("tokenizer: %d of %d merges skipped", bad, n_merges);
  if (dup) log_warn("tokenizer: %d merges repeat an earlier pair; the lower rank stays", dup);
  return 0;
}

/* ---- merging one word ------------------------------------------------------------- */

typedef struct sym {
  int32_t id;   /* current token; -1 once merged into its left neighbour */
  int32_t prev; /* index of the previous live symbol, -1 at the start */
  int32_t next; /* index of the next live symbol, -1 at the end */
} sym_t;

static void try_pair(const tok_t *tok, const sym_t *s, tok__heap_t *h, int32_t l, int32_t r) {
  if (l < 0 || r < 0) return;
  const tok__merge_t *m = merge_get(&tok->merges, s[l].id, s[r].id);
  if (!m) return;
  tok__heap_push(h, (tok__cand_t){(uint64_t)m->rank, l, r, m->id, s[l].id, s[r].id});
}

static void merge(const tok_t *tok, tok__scratch_t *sc, int32_t m, tok__out_t *out);

void tok__bpe_word(const tok_t *tok, tok__scratch_t *sc, const uint8_t *w, size_t n,
                   tok__out_t *out) {
  if (n == 1) {
    if (tok->byte_id[w[0]] >= 0) tok__emit(out, tok->byte_id[w[0]]);
    return;
  }
  if (tok->ignore_merges) { /* the whole word is a token: take it as it is */
    xgrow(&sc->buf, &sc->buf_cap, 2 * n, 1, 16);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      memcpy(sc->buf + k, tok->byte_text[w[i]], tok->byte_text_len[w[i]]);
      k += tok->byte_text_len[w[i]];
    }
    int32_t id = strmap_find(&tok->vocab, sc->buf, k);
    if (id >= 0 && tok->types[id] == TOK_TYPE_NORMAL) {
      tok__emit(out, id);
      return;
    }
  }
  xgrow(&sc->sym, &sc->sym_cap, n, sizeof(sym_t), 16);
  sym_t *s = sc->sym;
  int32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = tok->byte_id[w[i]];
    if (id < 0) continue; /* no token for this byte: dropped */
    s[m] = (sym_t){id, m - 1, -1};
    if (m > 0) s[m - 1].next = m;
    m++;
  }
  merge(tok, sc, m, out);
}

void tok__bpe_chars(const tok_t *tok, tok__scratch_t *sc, const uint8_t *w, size_t n, tok__out_t *out) {
  xgrow(&sc->sym, &sc->sym_cap, n, sizeof(sym_t), 16);
  sym_t *s = sc->sym;
  int32_t m = 0;
  for (size_t i = 0; i < n;) {
    int c = utf8_char(w + i, n - i);
    if (c <= 0) c = 1; /* the input was sanitized; defensive */
    int32_t id = strmap_find(&tok->vocab, (const char *)w + i, (size_t)c);
    int fallback = id < 0;
    for (int j = 0; fallback && j < c; j++) fallback = tok->spm_byte_id[w[i + j]] >= 0;
    for (int j = 0; j < (fallback ? c : 1); j++) {
      int32_t sid = fallback ? tok->spm_byte_id[w[i + j]] : id >= 0 ? id : tok->unk;
      if (sid < 0) break; /* neither a token nor its bytes nor <unk>: dropped */
      s[m] = (sym_t){sid, m - 1, -1};
      if (m > 0) s[m - 1].next = m;
      m++;
    }
    i += (size_t)c;
  }
  merge(tok, sc, m, out);
}

/* Merges the m symbols in sc->sym by rank and emits the result. */
static void merge(const tok_t *tok, tok__scratch_t *sc, int32_t m, tok__out_t *out) {
  xgrow(&sc->heap, &sc->heap_cap, 2 * (size_t)m + 2, sizeof(tok__cand_t), 16);
  sym_t *s = sc->sym;
  tok__heap_t h = {sc->heap, 0};
  for (int32_t i = 0; i + 1 < m; i++) try_pair(tok, s, &h, i, i + 1);
  /* Each merge removes one symbol and pushes at most two candidates, so the
   * heap never holds more than (m - 1) + 2 (m - 1) < 3 n entries; the growth
   * below keeps room for that. */
  while (h.n > 0) {
    tok__cand_t c = tok__heap_pop(&h);
    if (s[c.left].id != c.a || s[c.right].id != c.b || s[c.left].next != c.right)
      continue; /* stale */
    s[c.left].id = c.id;
    s[c.right].id = -1;
    s[c.left].next = s[c.right].next;
    if (s[c.right].next >= 0) s[s[c.right].next].prev = c.left;
    if (h.n + 2 > sc->heap_cap) {
      xgrow(&sc->heap, &sc->heap_cap, h.n + 2, sizeof(tok__cand_t), 16);
      h.a = sc->heap;
    }
    try_pair(tok, s, &h, s[c.left].prev, c.left);
    try_pair(tok, s, &h, c.left, s[c.left].next);
  }
  for (int32_t i = m > 0 ? 0 : -1; i >= 0; i = s[i].next) tok__emit(out, s[i].id);
}
