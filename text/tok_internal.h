/* text/tok_internal.h — what the tokenizer's files (model/tok_*.c) share:
 * the tok_t layout, the hash maps, the pre-tokenizer, the per-call scratch
 * and the UTF-8 helpers. Not part of the public API (text/tokenizer.h). */
#ifndef TRAM_TOK_INTERNAL_H
#define TRAM_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/strmap.h"
#include "base/utf8.h"
#include "text/tokenizer.h"

/* ---- UTF-8 (tok_utf8.c; well-formedness is base/utf8.h's) ---------------- */

/* Copies s[n] to out (NULL: only count), replacing each maximal ill-formed
 * subsequence by U+FFFD (EF BF BD). With hold_tail, a valid but incomplete
 * character at the very end is not written and *consumed excludes it;
 * otherwise it is replaced too and *consumed = n. Returns the bytes written.
 * Output never exceeds 3 * n bytes. */
size_t tok__utf8_sanitize(const uint8_t *s, size_t n, int hold_tail, uint8_t *out,
                          size_t *consumed);

/* ---- string → id map (tok_vocab.c) ---------------------------------------- */

/* tok_t.vocab is a base/strmap.h index keyed by the tokens' stored texts:
 * strmap_find(&tok->vocab, s, n) is the id of the token whose stored text is
 * s[n], or -1. */

/* ---- (left, right) → merge map (tok_bpe.c) -------------------------------- */

typedef struct tok__merge {
  uint64_t key;   /* (left id << 32) | right id; UINT64_MAX empty */
  int32_t rank;   /* index in tokenizer.ggml.merges */
  int32_t id;     /* the merged token */
} tok__merge_t;

typedef struct tok__mergemap {
  tok__merge_t *slots; /* [mask + 1] */
  uint64_t mask;
} tok__mergemap_t;

/* Parses the merges into tok->merges. 0, or -EINVAL with err written. */
int tok__bpe_init(tok_t *tok, const gguf_str_t *merges, int32_t n_merges, char *err,
                  size_t err_len);

/* ---- pre-tokenizer (tok_pre.c) -------------------------------------------- */

typedef struct tok__pre tok__pre_t;

typedef struct tok__pre_info {
  int ignore_merges; /* a word that is a whole token is emitted as it (Llama 3) */
  int add_bos;       /* the default for add_bos_token */
} tok__pre_info_t;

/* Compiles the regexes `name` stands for. NULL with err written if the name
 * is unknown or PCRE2 fails. */
tok__pre_t *tok__pre_create(const char *name, tok__pre_info_t *info, char *err, size_t err_len);
void tok__pre_destroy(tok__pre_t *pre);

/* Called for each word, in order; a non-zero return stops the split. */
typedef int (*tok__word_fn)(void *ctx, const uint8_t *word, size_t len);

/* Splits valid UTF-8 text[len] into words by applying each regex in turn to
 * every piece the previous one left (matches and the gaps between them both
 * become pieces). Returns 0, the callback's non-zero value, or -ENOMEM. */
int tok__pre_split(const tok__pre_t *pre, const uint8_t *text, size_t len, tok__word_fn fn,
                   void *ctx);

/* ---- merge candidates: a binary min-heap ------------------------------------ */

/* Merging symbols left and right (indices in a word) into token id. BPE:
 * key = rank, a/b = the two sides' tokens when pushed; SentencePiece: key =
 * tok__score_key(score), a = the merged length. The heap pops the smallest
 * (key, left): the best merge, leftmost among equals. */
typedef struct tok__cand {
  uint64_t key;
  int32_t left, right, id;
  int32_t a, b;
} tok__cand_t;

typedef struct tok__heap {
  tok__cand_t *a;
  size_t n;
} tok__heap_t;

/* A key that sorts higher scores first. */
static inline uint64_t tok__score_key(float score) {
  union {
    float f;
    uint32_t u;
  } v = {score};
  uint32_t asc = (v.u & 0x80000000u) ? ~v.u : (v.u | 0x80000000u); /* ascending with score */
  return (uint64_t)(~asc);
}

static inline int tok__cand_less(const tok__cand_t *x, const tok__cand_t *y) {
  return x->key != y->key ? x->key < y->key : x->left < y->left;
}

static inline void tok__heap_push(tok__heap_t *h, tok__cand_t c) {
  size_t i = h->n++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!tok__cand_less(&c, &h->a[p])) break;
    h->a[i] = h->a[p];
    i = p;
  }
  h->a[i] = c;
}

static inline tok__cand_t tok__heap_pop(tok__heap_t *h) {
  tok__cand_t top = h->a[0], last = h->a[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && tok__cand_less(&h->a[c + 1], &h->a[c])) c++;
    if (!tok__cand_less(&h->a[c], &last)) break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n) h->a[i] = last;
  return top;
}

/* ---- per-call scratch and output (tok_encode.c) --------------------------- */

typedef struct tok__out {
  int32_t *ids;
  size_t cap;
  int64_t n; /* ids produced so far; only the first cap are stored */
} tok__out_t;

static inline void tok__emit(tok__out_t *o, int32_t id) {
  if ((size_t)o->n < o->cap) o->ids[o->n] = id;
  o->n++;
}

/* Growable arrays one encode call reuses for every word. */
typedef struct tok__scratch {
  void *sym;     /* symbol arrays (tok_bpe.c / tok_spm.c layout) */
  size_t sym_cap;
  void *heap;    /* merge candidates */
  size_t heap_cap;
  char *buf;     /* a word in stored form (BPE) or the escaped fragment (SPM) */
  size_t buf_cap;
  struct tok__wslot *cache; /* words already encoded in this call (tok_encode.c) */
  int32_t *piece_ids;       /* [TOK_PIECE_MAX] the last piece of a long word (tok_encode.c) */
  int64_t piece_n;          /* its ids */
  const uint8_t *piece;     /* its bytes (in the text being encoded), NULL: none */
  size_t piece_len;
} tok__scratch_t;

/* A pre-token longer than this many bytes (a run of spaces, letters without
 * a space) is merged in pieces of at most this size, cut at character
 * boundaries, so the cost of encoding stays linear in the text: merging one
 * word of n bytes costs O(n log n) and a huge word is a denial of service.
 * Hugging Face `tokenizers` merges the whole word; the ids of such a word
 * may differ from its at the cuts (the text decodes the same). Words of
 * ordinary text are far shorter: their ids are unchanged. */
#define TOK_PIECE_MAX 1024

/* Encodes one word (valid UTF-8 bytes) with byte-level BPE. */
void tok__bpe_word(const tok_t *tok, tok__scratch_t *sc, const uint8_t *w, size_t n,
                   tok__out_t *out);

/* Encodes one word (valid UTF-8 bytes) with character-level BPE and byte
 * fallback (tokenizer.json's byte_fallback): characters, merged by rank. */
void tok__bpe_chars(const tok_t *tok, tok__scratch_t *sc, const uint8_t *w, size_t n, tok__out_t *out);

/* The NFC form of valid UTF-8 s[n] (tok_norm.c): *out NULL when s is
 * already NFC (ASCII always is), else a malloc'd copy (the caller's) of
 * *out_n bytes. 0, or a negative errno (-ENOTSUP in a build without ICU,
 * -E2BIG for a fragment over 512 MiB). */
int tok__nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n);
/* 1 when this build can normalize (ICU linked), else 0. */
int tok__nfc_available(void);

/* Encodes one text fragment SentencePiece-style; prefix: put a space first. */
void tok__spm_fragment(const tok_t *tok, tok__scratch_t *sc, const uint8_t *text, size_t n,
                       int prefix, tok__out_t *out);

/* ---- the tokenizer -------------------------------------------------------- */

struct tok {
  tok_model_t model;
  int32_t n_vocab;

  char *text;          /* stored texts back to back */
  uint64_t *text_off;  /* [n_vocab + 1] offsets into text */
  char *piece;         /* decoded bytes back to back */
  uint64_t *piece_off; /* [n_vocab + 1] offsets into piece */
  size_t max_piece;    /* longest decoded piece, bytes */
  uint8_t *types;      /* [n_vocab] tok_type_t */
  float *scores;       /* [n_vocab] SPM scores (all 0 when not given) */
  strmap_t vocab;      /* stored text → id (first id wins on duplicates) */

  /* byte-level BPE */
  tok__mergemap_t merges;
  int32_t byte_id[256];    /* token of each byte's one-character text; -1: none (dropped) */
  char byte_text[256][2];  /* each byte's character in the byte-level alphabet, UTF-8 */
  uint8_t byte_text_len[256]; /* 1 or 2 */
  tok__pre_t *pre;
  int ignore_merges;

  /* SentencePiece */
  int32_t spm_byte_id[256]; /* the <0xXX> tokens; -1: none */
  int spm_ranked;           /* 1: merges given: merged by rank (tok__bpe_chars), not by score */
  int newline_runs;         /* tok_spec_t.newline_runs */

  /* special and added tokens, for matching in the text */
  int32_t *special;        /* ids of control/unknown/user-defined tokens with text,
                              sorted by first byte, then longest first */
  uint32_t special_at[257]; /* special[special_at[b] .. special_at[b + 1]) start with byte b */

  int32_t bos, eos, eot, eom, unk, pad; /* -1: none */
  int add_bos, add_eos, add_space_prefix;
  int prefix_unless_space; /* no space prefix before text that starts with a space */
  int prefix_pieces;       /* tok_spec_t.prefix_pieces */
  int nfc;                 /* text between special tokens NFC-normalized first */
  int32_t *eog; /* ascending */
  int32_t n_eog;
};

static inline const char *tok__text(const tok_t *tok, int32_t id, size_t *len) {
  *len = (size_t)(tok->text_off[id + 1] - tok->text_off[id]);
  return tok->text + tok->text_off[id];
}

/* The GPT-2 byte-level alphabet: byte b is written as code point
 * tok__byte_cp(b); tok__cp_byte(cp) is the inverse (-1 if cp is not one). */
uint32_t tok__byte_cp(uint8_t b);
int tok__cp_byte(uint32_t cp);

/* The UTF-8 of byte b's byte-level code point: 1 or 2 bytes into out[2].
 * (Slow: tok_create caches it in tok->byte_text.) */
int tok__byte_utf8(uint8_t b, char out[2]);

#endif
