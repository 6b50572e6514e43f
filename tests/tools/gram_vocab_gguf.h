/* tests/tools/gram_vocab_gguf.h — builds a grammar vocabulary (gram_vocab_t)
 * from a GGUF model's tokenizer, for the grammar test tool and benchmark,
 * the way the server does (sched_gram_vocab_create). */
#ifndef TRAM_TESTS_GRAM_VOCAB_GGUF_H
#define TRAM_TESTS_GRAM_VOCAB_GGUF_H

#include <stdio.h>
#include <stdlib.h>

#include "grammar/gram.h"
#include "gguf/gguf.h"
#include "scheduler/sched.h"
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
  gram_vocab_t *v = sched_gram_vocab_create(tok, err, sizeof err);
  if (!v) fprintf(stderr, "vocab: %s\n", err);
  if (tok_out) *tok_out = tok;
  else tok_destroy(tok);
  return v;
}

#endif
