/* tests/fuzz/fuzz_oai_embed.c — libFuzzer target for POST /v1/embeddings'
 * parser (api/oai_embed.h): on any bytes it must not crash, hang, leak or
 * read out of bounds; a parse that succeeds holds what the contract says
 * (1..OAI_EMBED_MAX_INPUTS inputs, each text or in-vocabulary token ids,
 * none empty), and its inputs go through the response writer. The first
 * byte picks an arena cap (0: none), so the out-of-memory paths run too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/oai_embed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const size_t cap = data[0] < 128 ? 0 : (size_t)(data[0] - 127) * 64;
  arena_t a;
  arena_init(&a, 0, cap);
  oai_limits_t lim = oai_limits_default();
  lim.vocab_size = 50000;
  oai_embed_req_t q;
  oai_error_t e;
  if (oai_parse_embeddings((const char *)data + 1, size - 1, &lim, &a, &q, &e) == 0) {
    if (q.n_inputs < 1 || q.n_inputs > OAI_EMBED_MAX_INPUTS) abort();
    float *v = calloc((size_t)q.n_inputs, sizeof *v);
    const float **vecs = calloc((size_t)q.n_inputs, sizeof *vecs);
    for (int32_t i = 0; i < q.n_inputs; i++) {
      const oai_prompt_t *p = &q.inputs[i];
      if (!p->text == !p->tokens) abort();
      if (p->text && p->text_len == 0) abort();
      if (p->tokens && p->n_tokens < 1) abort();
      for (int32_t k = 0; p->tokens && k < p->n_tokens; k++)
        if (p->tokens[k] < 0 || p->tokens[k] >= lim.vocab_size) abort();
      v[i] = (float)(p->text ? p->text_len : (size_t)p->n_tokens);
      vecs[i] = &v[i];
    }
    free(oai_write_embeddings(q.model ? q.model : "m", vecs, q.n_inputs, 1, q.base64, 1));
    free(vecs);
    free(v);
  } else if (e.status != 400 && e.status != 503) {
    abort();
  }
  arena_free(&a);
  return 0;
}
