/* text/tok_pre.c — pre-tokenization: the regexes `tokenizer.ggml.pre`
 * names, compiled with PCRE2 (UTF + UCP, JIT when available), and the split
 * of text into words.
 *
 * A pre-tokenizer is a list of regexes applied in turn: each one splits every
 * piece the previous one produced into its matches and the gaps between them,
 * all kept (Hugging Face's Split with behaviour "Isolated", and llama.cpp's
 * unicode_regex_split). Names and regexes follow llama.cpp's table
 * (llama-vocab.cpp) and the models' tokenizer.json:
 *
 *   gpt2    GPT-2's ByteLevel regex (tokenizers' ByteLevel with use_regex).
 *   smollm  \p{N} first (tokenizers' Digits with individual_digits), then
 *           GPT-2's: SmolLM2's Sequence[Digits, ByteLevel]. StarCoder's too.
 *   llama3  Llama 3's Split regex, with ignore_merges and BOS by default.
 *   qwen2   Llama 3's with single digits.
 *   gpt-4o  o200k (GPT-4o, gpt-oss's o200k_harmony): case-aware letter runs
 *           with the contraction as their suffix, digits in threes, a
 *           punctuation run that takes trailing newlines and '/'.
 *   default llama.cpp's fallback list.
 *
 * The regexes are the tokenizer.json originals (PCRE2 reads (?i:...) as
 * Oniguruma does), not llama.cpp's hand-adapted versions. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "text/tok_internal.h"

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3                                                                           \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+" \
  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                        \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+" \
  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RE_GPT4O                                                                                        \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"                \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"           \
  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*" \
  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

enum { MAX_RES = 4 };

typedef struct pre_kind {
  const char *names[8]; /* NULL-terminated */
  const char *res[MAX_RES + 1];
  int ignore_merges, add_bos;
} pre_kind_t;

static const pre_kind_t kinds[] = {
    {{"default", NULL},
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
     0, 0},
    {{"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", NULL}, {RE_GPT2, NULL}, 0, 0},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", NULL},
     {"\\p{N}", RE_GPT2, NULL},
     0, 0},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", NULL},
     {RE_LLAMA3, NULL},
     1, 1},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", NULL}, {RE_QWEN2, NULL}, 0, 0},
    {{"gpt-4o", "llama4", NULL}, {RE_GPT4O, NULL}, 0, 0},
};

struct tok__pre {
  int n;
  pcre2_code *re[MAX_RES];
};

static const pre_kind_t *find_kind(const char *name) {
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    for (const char *const *n = kinds[k].names; *n; n++) {
      if (strcmp(*n, name) == 0) return &kinds[k];
    }
  }
  return NULL;
}

int tok_pre_supported(const char *name) { return name && find_kind(name) != NULL; }

void tok__pre_destroy(tok__pre_t *pre) {
  if (!pre) return;
  for (int i = 0; i < pre->n; i++) pcre2_code_free(pre->re[i]);
  free(pre);
}

const char *tok_pre_name_of(const char *const *res, int n, int *ignore_merges) {
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    int i = 0;
    while (i < n && kinds[k].res[i]) {
      const char *r = strcmp(res[i], TOK_PRE_BYTELEVEL) == 0 ? RE_GPT2
                      : strcmp(res[i], TOK_PRE_DIGITS) == 0  ? "\\p{N}"
                                                             : res[i];
      if (strcmp(kinds[k].res[i], r) != 0) break;
      i++;
    }
    if (i == n && !kinds[k].res[n]) {
      *ignore_merges = kinds[k].ignore_merges;
      return kinds[k].names[0];
    }
  }
  return NULL;
}

tok__pre_t *tok__pre_create(const char *name, tok__pre_info_t *info, char *err, size_t err_len) {
  const pre_kind_t *kind = find_kind(name);
  if (!kind) {
    snprintf(err, err_len, "tokenizer: unknown pre-tokenizer \"%s\" (tokenizer.ggml.pre)", name);
    return NULL;
  }
  tok__pre_t *pre = xcalloc(1, sizeof *pre);
  for (int i = 0; kind->res[i]; i++) {
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)kind->res[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    if (!re) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(code, msg, sizeof msg);
      snprintf(err, err_len, "tokenizer: pre-tokenizer \"%s\" regex %d: %s at offset %zu", name,
               i, (const char *)msg, (size_t)off);
      tok__pre_destroy(pre);
      return NULL;
    }
    int jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    if (jit != 0) log_debug("tokenizer: PCRE2 JIT unavailable (%d); using the interpreter", jit);
    pre->re[pre->n++] = re;
  }
  info->ignore_merges = kind->ignore_merges;
  info->add_bos = kind->add_bos;
  return pre;
}

/* ---- splitting ----------------------------------------------------------------- */

typedef struct split {
  const tok__pre_t *pre;
  pcre2_match_data *md[MAX_RES];
  tok__word_fn fn;
  void *ctx;
} split_t;

/* Finds the next match of regex `level` in s[0..n) at or after `from`.
 * Returns 1 and [*b, *e), 0 if none, or -ENOMEM. */
static int next_match(split_t *sp, int level, const uint8_t *s, size_t n, size_t from, size_t *b,
                      size_t *e) {
  pcre2_code *re = sp->pre->re[level];
  pcre2_match_data *md = sp->md[level];
  int rc = pcre2_match(re, s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* deep backtracking: the interpreter has a heap stack */
    rc = pcre2_match(re, s, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) {
    log_error("tokenizer: PCRE2 match failed (%d)", rc);
    return -ENOMEM;
  }
  PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  *b = ov[0];
  *e = ov[1];
  return 1;
}

static int split_level(split_t *sp, int level, const uint8_t *s, size_t n) {
  if (n == 0) return 0;
  if (level == sp->pre->n) return sp->fn(sp->ctx, s, n);
  size_t gap = 0, from = 0;
  while (from < n) {
    size_t b, e;
    int rc = next_match(sp, level, s, n, from, &b, &e);
    if (rc < 0) return rc;
    if (rc == 0) break;
    if (e == b) { /* an empty match splits nothing: search on from the next character */
      int k = utf8_char(s + b, n - b);
      from = b + (size_t)(k > 0 ? k : 1);
      continue;
    }
    if ((rc = split_level(sp, level + 1, s + gap, b - gap)) != 0) return rc;
    if ((rc = split_level(sp, level + 1, s + b, e - b)) != 0) return rc;
    gap = from = e;
  }
  return split_level(sp, level + 1, s + gap, n - gap);
}

int tok__pre_split(const tok__pre_t *pre, const uint8_t *text, size_t len, tok__word_fn fn,
                   void *ctx) {
  split_t sp = {.pre = pre, .fn = fn, .ctx = ctx};
  int rc = 0;
  for (int i = 0; i < pre->n; i++) {
    sp.md[i] = pcre2_match_data_create_from_pattern(pre->re[i], NULL);
    if (!sp.md[i]) rc = -ENOMEM;
  }
  if (rc == 0) rc = split_level(&sp, 0, text, len);
  for (int i = 0; i < pre->n; i++) pcre2_match_data_free(sp.md[i]);
  return rc;
}
