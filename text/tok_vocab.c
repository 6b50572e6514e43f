/* text/tok_vocab.c — building a tokenizer from plain arrays: the token
 * table (stored texts, decoded pieces, types, scores), the text → id map,
 * the special tokens matched in text, the end-of-generation set; plus the
 * vocabulary accessors of text/tokenizer.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "gguf/gguf.h"
#include "text/tok_internal.h"

static void fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t err_len, const char *fmt, ...) {
  if (!err || err_len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_len, fmt, ap);
  va_end(ap);
}

/* ---- the text → id map ----------------------------------------------------- */

static const char *vocab_key(const void *ctx, int32_t id, size_t *len) {
  return tok__text(ctx, id, len);
}

static void strmap_build(tok_t *tok) {
  if (strmap_init(&tok->vocab, (uint64_t)tok->n_vocab, vocab_key, tok) < 0) xoom("tokenizer vocabulary index", 0);
  int dups = 0;
  for (int32_t id = 0; id < tok->n_vocab; id++)
    if (strmap_add(&tok->vocab, id) >= 0) dups++; /* a duplicate text: the first id keeps it */
  if (dups) log_warn("tokenizer: %d tokens repeat an earlier token's text; the first id wins", dups);
}

/* ---- decoded pieces ----------------------------------------------------------- */

static int is_special_type(int t) {
  return t == TOK_TYPE_CONTROL || t == TOK_TYPE_UNKNOWN || t == TOK_TYPE_USER_DEFINED;
}

/* "<0xAB>" → 0xAB, else -1. */
static int byte_token_value(const char *t, size_t len) {
  if (len != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = t[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Writes token id's decoded bytes to out and returns their count, which is
 * never more than the length of its stored text. */
static size_t decode_piece(const tok_t *tok, int32_t id, char *out) {
  size_t len;
  const char *t = tok__text(tok, id, &len);
  int type = tok->types[id];
  if (is_special_type(type)) {
    memcpy(out, t, len);
    return len;
  }
  size_t o = 0;
  if (tok->model == TOK_MODEL_SPM) {
    if (type == TOK_TYPE_BYTE) {
      int v = byte_token_value(t, len);
      if (v >= 0) {
        out[0] = (char)v;
        return 1;
      }
    }
    for (size_t i = 0; i < len; i++) { /* "▁" (E2 96 81) → " " */
      if (i + 2 < len && (uint8_t)t[i] == 0xE2 && (uint8_t)t[i + 1] == 0x96 &&
          (uint8_t)t[i + 2] == 0x81) {
        out[o++] = ' ';
        i += 2;
      } else {
        out[o++] = t[i];
      }
    }
    return o;
  }
  /* byte-level: each character stands for one byte; a character outside the
   * alphabet (a malformed vocabulary) is kept as it is */
  size_t i = 0;
  while (i < len) {
    uint32_t cp = (uint8_t)t[i];
    int k = utf8_decode(t + i, len - i, &cp);
    if (k <= 0) k = 1;
    int b = k <= 2 ? tok__cp_byte(cp) : -1;
    if (b >= 0) {
      out[o++] = (char)b;
    } else {
      memcpy(out + o, t + i, (size_t)k);
      o += (size_t)k;
    }
    i += (size_t)k;
  }
  return o;
}

static void pieces_build(tok_t *tok) {
  uint64_t total = tok->text_off[tok->n_vocab];
  tok->piece = xcalloc(total + 1, 1);
  tok->piece_off = xcalloc((size_t)tok->n_vocab + 1, sizeof(uint64_t));
  uint64_t o = 0;
  for (int32_t id = 0; id < tok->n_vocab; id++) {
    tok->piece_off[id] = o;
    size_t n = decode_piece(tok, id, tok->piece + o); /* never longer than the text */
    if (n > tok->max_piece) tok->max_piece = n;
    o += n;
  }
  tok->piece_off[tok->n_vocab] = o;
}

/* ---- special tokens and end of generation ------------------------------------ */

static int special_cmp(const void *a, const void *b, void *arg) {
  const tok_t *tok = arg;
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  size_t lx, ly;
  const char *tx = tok__text(tok, x, &lx), *ty = tok__text(tok, y, &ly);
  if ((uint8_t)tx[0] != (uint8_t)ty[0]) return (uint8_t)tx[0] < (uint8_t)ty[0] ? -1 : 1;
  if (lx != ly) return lx > ly ? -1 : 1; /* longest first */
  return x < y ? -1 : x > y;
}

static void specials_build(tok_t *tok) {
  int32_t n = 0;
  for (int32_t id = 0; id < tok->n_vocab; id++) {
    if (is_special_type(tok->types[id]) && tok->text_off[id + 1] > tok->text_off[id]) n++;
  }
  tok->special = xcalloc((size_t)n, sizeof(int32_t));
  n = 0;
  for (int32_t id = 0; id < tok->n_vocab; id++) {
    if (is_special_type(tok->types[id]) && tok->text_off[id + 1] > tok->text_off[id])
      tok->special[n++] = id;
  }
  qsort_r(tok->special, (size_t)n, sizeof(int32_t), special_cmp, tok);
  int32_t k = 0;
  for (int b = 0; b < 256; b++) {
    tok->special_at[b] = (uint32_t)k;
    while (k < n && (uint8_t)tok->text[tok->text_off[tok->special[k]]] == b) k++;
  }
  tok->special_at[256] = (uint32_t)n;
}

/* Texts that end a turn or the text, as llama.cpp recognises them. The order
 * says which one becomes eot when the file names none (the harmony ones,
 * last, never do: the model ends its answer with <|return|>, a tool call
 * with <|call|>). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<|return|>", "<|call|>",
};
#define N_NOT_EOT 2 /* the last entries of eog_texts: never eot */

/* The id of `text` in the vocabulary, or -1. */
static int32_t vocab_id(const tok_t *tok, const char *text) {
  return strmap_find(&tok->vocab, text, strlen(text));
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return x < y ? -1 : x > y;
}

static void eog_build(tok_t *tok) {
  size_t n_texts = sizeof eog_texts / sizeof *eog_texts;
  tok->eog = xcalloc(n_texts + 3, sizeof(int32_t));
  int32_t n = 0;
  for (size_t i = 0; i < n_texts; i++) {
    int32_t id = vocab_id(tok, eog_texts[i]);
    if (id < 0) continue;
    if (tok->eot < 0 && strcmp(eog_texts[i], "<|eom_id|>") != 0 && i < n_texts - N_NOT_EOT) tok->eot = id;
    tok->eog[n++] = id;
  }
  int32_t extra[3] = {tok->eos, tok->eot, tok->eom};
  for (int i = 0; i < 3; i++) {
    if (extra[i] >= 0) tok->eog[n++] = extra[i];
  }
  qsort(tok->eog, (size_t)n, sizeof(int32_t), cmp_i32);
  /* harmony (gpt-oss's o200k_harmony): <|end|> closes a message, not the
   * generation (analysis…<|end|><|start|>assistant<|channel|>final…<|return|>),
   * so with <|return|> and <|call|> in the vocabulary it is no end of
   * generation, whatever the file names it (llama.cpp does the same) */
  const int32_t end = vocab_id(tok, "<|end|>");
  const int harmony = end >= 0 && vocab_id(tok, "<|return|>") >= 0 && vocab_id(tok, "<|call|>") >= 0;
  int32_t m = 0; /* drop repeats (and harmony's <|end|>) */
  for (int32_t i = 0; i < n; i++) {
    if (harmony && tok->eog[i] == end) continue;
    if (m == 0 || tok->eog[m - 1] != tok->eog[i]) tok->eog[m++] = tok->eog[i];
  }
  tok->n_eog = m;
}

/* ---- create / destroy ------------------------------------------------------------ */

tok_spec_t tok_spec_default(void) {
  tok_spec_t s;
  memset(&s, 0, sizeof s);
  s.bos_id = s.eos_id = s.eot_id = s.eom_id = s.unk_id = s.pad_id = -1;
  s.add_bos = s.add_eos = s.add_space_prefix = -1;
  return s;
}

static int check_id(const char *what, int32_t id, int32_t n, char *err, size_t err_len) {
  if (id >= -1 && id < n) return 0;
  fail(err, err_len, "tokenizer: %s %d is out of range (vocabulary of %d tokens)", what, id, n);
  return -EINVAL;
}

tok_t *tok_create(const tok_spec_t *spec, char *err, size_t err_len) {
  if (err && err_len) err[0] = 0;
  if (spec->model != TOK_MODEL_BPE && spec->model != TOK_MODEL_SPM) {
    fail(err, err_len, "tokenizer: unknown model kind %d", (int)spec->model);
    return NULL;
  }
  if (spec->n_tokens < 1 || !spec->tokens) {
    fail(err, err_len, "tokenizer: empty vocabulary");
    return NULL;
  }
  int32_t n = spec->n_tokens;
  if (check_id("bos_token_id", spec->bos_id, n, err, err_len) ||
      check_id("eos_token_id", spec->eos_id, n, err, err_len) ||
      check_id("eot_token_id", spec->eot_id, n, err, err_len) ||
      check_id("eom_token_id", spec->eom_id, n, err, err_len) ||
      check_id("unknown_token_id", spec->unk_id, n, err, err_len) ||
      check_id("padding_token_id", spec->pad_id, n, err, err_len))
    return NULL;

  tok_t *tok = xcalloc(1, sizeof *tok);
  tok->model = spec->model;
  tok->n_vocab = n;
  tok->bos = spec->bos_id;
  tok->eos = spec->eos_id;
  tok->eot = spec->eot_id;
  tok->eom = spec->eom_id;
  tok->unk = spec->unk_id;
  tok->pad = spec->pad_id;

  /* texts, types, scores */
  uint64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    if (spec->tokens[i].len > (1u << 20)) {
      fail(err, err_len, "tokenizer: token %d is %llu bytes long", i,
           (unsigned long long)spec->tokens[i].len);
      tok_destroy(tok);
      return NULL;
    }
    total += spec->tokens[i].len;
  }
  tok->text = xcalloc(total + 1, 1);
  tok->text_off = xcalloc((size_t)n + 1, sizeof(uint64_t));
  tok->types = xcalloc((size_t)n, 1);
  tok->scores = xcalloc((size_t)n, sizeof(float));
  uint64_t o = 0;
  int bad_types = 0;
  for (int32_t i = 0; i < n; i++) {
    tok->text_off[i] = o;
    if (spec->tokens[i].len) memcpy(tok->text + o, spec->tokens[i].ptr, spec->tokens[i].len);
    o += spec->tokens[i].len;
    int t = spec->types ? spec->types[i] : TOK_TYPE_NORMAL;
    if (t < TOK_TYPE_UNDEFINED || t > TOK_TYPE_BYTE) {
      bad_types++;
      t = TOK_TYPE_UNDEFINED;
    }
    tok->types[i] = (uint8_t)t;
    if (spec->scores) tok->scores[i] = spec->scores[i];
  }
  tok->text_off[n] = o;
  if (bad_types) log_warn("tokenizer: %d tokens have an unknown type; taken as undefined", bad_types);

  strmap_build(tok);
  pieces_build(tok);
  specials_build(tok);

  for (int b = 0; b < 256; b++) {
    tok->byte_text_len[b] = (uint8_t)tok__byte_utf8((uint8_t)b, tok->byte_text[b]);
    tok->byte_id[b] = -1;
    tok->spm_byte_id[b] = -1;
  }

  tok__pre_info_t info = {0, 0};
  if (tok->model == TOK_MODEL_BPE) {
    const char *pre = spec->pre ? spec->pre : "default";
    tok->pre = tok__pre_create(pre, &info, err, err_len);
    if (!tok->pre || tok__bpe_init(tok, spec->merges, spec->n_merges, err, err_len) != 0) {
      tok_destroy(tok);
      return NULL;
    }
    tok->ignore_merges = info.ignore_merges;
    char list[256 * 5 + 1] = "";
    int missing = 0;
    for (int b = 0; b < 256; b++) {
      tok->byte_id[b] = strmap_find(&tok->vocab, tok->byte_text[b], tok->byte_text_len[b]);
      /* C0, C1 and F5..FF never occur in UTF-8: no token needed */
      if (tok->byte_id[b] < 0 && b != 0xC0 && b != 0xC1 && b < 0xF5)
        snprintf(list + 5 * missing++, 6, " 0x%02X", b);
    }
    if (missing)
      log_info("tokenizer: %d byte values have no token and are dropped from input, as Hugging "
               "Face tokenizers drops them:%s", missing, list);
  } else {
    info.add_bos = 1;
    for (int b = 0; b < 256; b++) {
      char t[8];
      snprintf(t, sizeof t, "<0x%02X>", b);
      tok->spm_byte_id[b] = strmap_find(&tok->vocab, t, 6);
    }
    if (spec->n_merges > 0) { /* tokenizer.json's byte-fallback BPE: merged by rank */
      if (tok__bpe_init(tok, spec->merges, spec->n_merges, err, err_len) != 0) {
        tok_destroy(tok);
        return NULL;
      }
      tok->spm_ranked = 1;
    }
  }
  tok->add_bos = spec->add_bos >= 0 ? spec->add_bos != 0 : info.add_bos;
  tok->add_eos = spec->add_eos > 0;
  tok->add_space_prefix =
      spec->add_space_prefix >= 0 ? spec->add_space_prefix != 0 : tok->model == TOK_MODEL_SPM;
  tok->prefix_unless_space = spec->prefix_unless_space > 0;
  tok->newline_runs = spec->newline_runs > 0 && tok->model == TOK_MODEL_SPM;
  tok->prefix_pieces = spec->prefix_pieces;
  tok->nfc = spec->nfc > 0;
  if (tok->nfc && !tok__nfc_available()) {
    snprintf(err, err_len, "tokenizer: an NFC normalizer needs ICU, which this build does not link");
    tok_destroy(tok);
    return NULL;
  }
  if (tok->add_bos && tok->bos < 0) {
    if (spec->add_bos > 0) log_warn("tokenizer: add_bos_token is set but there is no bos_token_id; no BOS is added");
    tok->add_bos = 0;
  }
  if (tok->add_eos && tok->eos < 0) {
    if (spec->add_eos > 0) log_warn("tokenizer: add_eos_token is set but there is no eos_token_id; no EOS is added");
    tok->add_eos = 0;
  }
  eog_build(tok);
  return tok;
}

void tok_destroy(tok_t *tok) {
  if (!tok) return;
  tok__pre_destroy(tok->pre);
  free(tok->merges.slots);
  strmap_free(&tok->vocab);
  free(tok->text);
  free(tok->text_off);
  free(tok->piece);
  free(tok->piece_off);
  free(tok->types);
  free(tok->scores);
  free(tok->special);
  free(tok->eog);
  free(tok);
}

/* ---- accessors -------------------------------------------------------------------- */

int32_t tok_n_vocab(const tok_t *tok) { return tok->n_vocab; }
tok_model_t tok_model(const tok_t *tok) { return tok->model; }
int32_t tok_bos(const tok_t *tok) { return tok->bos; }
int32_t tok_eos(const tok_t *tok) { return tok->eos; }
int32_t tok_eot(const tok_t *tok) { return tok->eot; }
int tok_adds_bos(const tok_t *tok) { return tok->add_bos; }
int tok_adds_eos(const tok_t *tok) { return tok->add_eos; }

int tok_is_eog(const tok_t *tok, int32_t id) {
  for (int32_t i = 0; i < tok->n_eog; i++) {
    if (tok->eog[i] == id) return 1;
  }
  return 0;
}

int32_t tok_eog_ids(const tok_t *tok, const int32_t **ids) {
  *ids = tok->eog;
  return tok->n_eog;
}

int tok_type(const tok_t *tok, int32_t id) {
  if (id < 0 || id >= tok->n_vocab) return -EINVAL;
  return tok->types[id];
}

const char *tok_text(const tok_t *tok, int32_t id, size_t *len) {
  if (id < 0 || id >= tok->n_vocab) return NULL;
  return tok__text(tok, id, len);
}

const char *tok_piece(const tok_t *tok, int32_t id, size_t *len) {
  if (id < 0 || id >= tok->n_vocab) return NULL;
  *len = (size_t)(tok->piece_off[id + 1] - tok->piece_off[id]);
  return tok->piece + tok->piece_off[id];
}

int32_t tok_find(const tok_t *tok, const char *text, size_t len) {
  return strmap_find(&tok->vocab, text, len);
}
