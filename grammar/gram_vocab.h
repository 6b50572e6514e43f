/* grammar/gram_vocab.h — inside the grammar module: the vocabulary's layout
 * (gram_vocab.c builds it, gram_mask.c walks it). */
#ifndef TRAM_GRAMMAR_GRAM_VOCAB_H
#define TRAM_GRAMMAR_GRAM_VOCAB_H

#include <pthread.h>

#include "grammar/gram_int.h"

struct gram_vocab {
  int32_t n;          /* tokens */
  char *blob;         /* every token's bytes, end to end */
  int64_t *off;       /* [n + 1] token i is blob[off[i] .. off[i+1]) */
  uint8_t *is_eog;    /* [n] */
  int32_t *eog;       /* [n_eog] the end-of-generation ids */
  int32_t n_eog;
  int32_t *sorted;    /* [n_sorted] non-empty, non-EOG ids in byte order: the trie */
  uint16_t *lcp;      /* [n_sorted] common prefix length with the previous sorted token */
  int32_t n_sorted;
  int32_t max_len;    /* longest token */
};

#endif
