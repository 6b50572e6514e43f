/* scheduler/sched_gram.c — structured output in the engine: the grammar
 * vocabulary of a tokenizer, and per constrained sequence its parser state
 * (gram_matcher_t), the mask it puts on a logits row before sampling and
 * the token it accepts after.
 *
 * The mask sets the logits of the tokens the grammar refuses to -inf, on
 * the engine's scratch copy of the row, before the sampler: so penalties,
 * temperature and the filters see only allowed tokens, and the logprobs
 * the request gets are those of the constrained row (as min_tokens' mask;
 * docs/structured-output.md). A constrained sequence samples on the host. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "scheduler/sched_internal.h"

gram_vocab_t *sched_gram_vocab_create(const tok_t *tok, char *err, size_t err_len) {
  const int32_t n = tok_n_vocab(tok);
  const char **texts = xmalloc(sizeof *texts * (size_t)n);
  size_t *lens = xmalloc(sizeof *lens * (size_t)n);
  for (int32_t i = 0; i < n; i++) {
    texts[i] = tok_piece(tok, i, &lens[i]);
    const int type = tok_type(tok, i);
    /* never text: control tokens (but end of generation), unused and unknown ones */
    if (!texts[i] || ((type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNUSED || type == TOK_TYPE_UNKNOWN) &&
                      !tok_is_eog(tok, i)))
      lens[i] = 0;
  }
  const int32_t *eog;
  const int32_t n_eog = tok_eog_ids(tok, &eog);
  gram_err_t ge = {.pos = -1};
  gram_vocab_t *v = gram_vocab_create(n, texts, lens, eog, n_eog, &ge);
  if (!v) snprintf(err, err_len, "grammar vocabulary: %s", ge.msg);
  free(texts);
  free(lens);
  return v;
}

int sched__gram_start(sched_engine_t *e, sched_eseq_t *q, char *err, size_t err_len) {
  const gram_cache_t *c = gram_entry_cache(q->req->grammar);
  if (gram_vocab_size(gram_cache_vocab(c)) != e->n_vocab) {
    snprintf(err, err_len, "the grammar was compiled for a vocabulary of %d tokens, not the model's %d",
             gram_vocab_size(gram_cache_vocab(c)), e->n_vocab);
    return -EINVAL;
  }
  int rc;
  q->gm = gram_matcher_create(c, &rc);
  if (!q->gm) { /* never an abort: the request's own grammar or memory ran short */
    snprintf(err, err_len, rc == GRAM_ELIMIT ? "structured output: the grammar's start exceeds a bound of the parser"
                                             : "structured output: out of memory for the grammar's parser");
    return rc == GRAM_ELIMIT ? -EINVAL : -ENOMEM;
  }
  return 0;
}

int sched__gram_mask(sched_engine_t *e, sched_eseq_t *q, float *row) {
  const int32_t allowed = gram_matcher_fill_mask(q->gm, e->gmask);
  if (allowed < 0) return allowed;
  if (allowed == 0) return GRAM_EREJECT;
  for (int32_t w = 0, n = (e->n_vocab + 31) / 32; w < n; w++) {
    uint32_t refused = ~e->gmask[w];
    if (w == n - 1 && e->n_vocab % 32) refused &= (UINT32_C(1) << (e->n_vocab % 32)) - 1;
    while (refused) {
      row[w * 32 + __builtin_ctz(refused)] = -INFINITY;
      refused &= refused - 1;
    }
  }
  return 0;
}

const char *sched__sample_error(const sched_eseq_t *q, int rc) {
  static _Thread_local char msg[320]; /* the engine thread's; the caller copies it */
  const char *why = q->gm ? gram_matcher_error(q->gm) : "";
  switch (rc) {
  case -EDOM: return "the model produced no finite logit";
  case GRAM_ELIMIT:
  case GRAM_ENOMEM:
    snprintf(msg, sizeof msg, "structured output: %s (docs/structured-output.md, Hostile grammars)",
             why[0] ? why : rc == GRAM_ELIMIT ? "the grammar exceeded a bound of the parser" : "out of memory in the grammar's parser");
    return msg;
  case GRAM_EREJECT: return "the grammar allows no token here";
  default: return "sampling failed";
  }
}
