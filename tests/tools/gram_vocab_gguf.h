/* tests/tools/gram_vocab_gguf.h — builds a grammar vocabulary (gram_vocab_t)
 * from a GGUF model's tokenizer, for the grammar test tool and benchmark:
 * each token's decoded bytes; control tokens excluded (never allowed as
 * text) except the end-of-generation ones. The only place these programs
 * touch the model's headers (they move to text/ and gguf/ in the re-housing). */
#ifndef TRAM_TESTS_GRAM_VOCAB_GGUF_H
#define TRAM_TESTS_GRAM_VOCAB_GGUF_H

#include <stdio.h>
#include <stdlib.h>

#include "grammar/gram.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

/* The vocabulary of the model at path, or NULL after printing why. *tok_out
 * (if not NULL) receives the tokenizer; the caller destroys it. */
static inline gram_vocab_t *gram_vocab_from_gguf(const char *path, tok_t **tok_out) {
  char err[512];
  gguf_ctx_t *g = gguf_open(path, err, sizeof err);
  tok_t *tok = g ? tok_create_from_gguf(g, err, sizeof err) : NULL;
  gguf_close(g);
  if (!tok) {
    fprintf(stderr, "vocab: %s\n", err);
    return NULL;
  }
  int32_t n = tok_n_vocab(tok);
  const char **toks = malloc(sizeof *toks * (size_t)n);
  size_t *lens = malloc(sizeof *lens * (size_t)n);
  if (!toks || !lens) abort();
  for (int32_t i = 0; i < n; i++) {
    toks[i] = tok_piece(tok, i, &lens[i]);
    if (tok_type(tok, i) == TOK_TYPE_CONTROL && !tok_is_eog(tok, i)) lens[i] = 0;
  }
  const int32_t *eog;
  int32_t n_eog = tok_eog_ids(tok, &eog);
  gram_err_t ge;
  gram_vocab_t *v = gram_vocab_create(n, toks, lens, eog, n_eog, &ge);
  if (!v) fprintf(stderr, "vocab: %s\n", ge.msg);
  free(toks), free(lens);
  if (tok_out) *tok_out = tok;
  else tok_destroy(tok);
  return v;
}

#endif
