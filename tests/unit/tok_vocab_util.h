/* tests/unit/tok_vocab_util.h — small hand-built vocabularies for the
 * tokenizer's unit tests (test_tokenizer.c, test_tok_spm.c,
 * test_tok_stream.c): a vocabulary builder, GPT-2 byte-level text helpers
 * and an expectation on encoded ids. */
#ifndef TRAM_TEST_TOK_VOCAB_UTIL_H
#define TRAM_TEST_TOK_VOCAB_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

enum { MAXT = 1024, MAXM = 1024 };

typedef struct vb {
  char *text[MAXT];
  int32_t type[MAXT];
  float score[MAXT];
  int n;
  char *merge[MAXM];
  int nm;
} vb_t;

int vb_add(vb_t *v, const char *text, int type, float score);
int vb_find(const vb_t *v, const char *text);
void vb_merge(vb_t *v, const char *l, const char *r);
void vb_free(vb_t *v);
uint32_t vb_gpt2_cp(int b);
size_t vb_put_utf8(uint32_t cp, char *out);
const char *vb_bl(const char *s);
void vb_bytes(vb_t *v);
tok_t *vb_build(const vb_t *v, tok_model_t model, const char *pre, const tok_spec_t *base);
void vb_expect_ids(const tok_t *tok, const char *s, size_t len, int flags, const int *want);
/* Appends b to the NUL-terminated a (cap bytes); the text of a merge pair. */
void vb_join(char *a, const char *b, size_t cap);
void vb_pair_text(char *m, size_t cap, const char *l, const char *sep, const char *r);

#define IDS(...) ((const int[]){__VA_ARGS__, -1})
#define NOIDS ((const int[]){-1})

#endif
