/* server/srv_prompt_lp.c — prompt logprobs on the server side: each part
 * (one prompt) keeps an entry per prompt token, filled from the engine's
 * SCHED_EV_PROMPT events, and hands out views of them for the two formats
 * srv_events.c writes: OpenAI's echo + logprobs (the prompt's entries lead
 * the choice's "logprobs") and vLLM's "prompt_logprobs". */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/srv_internal.h"

/* The token's text as the tokenizer spells it in output ("" if none). */
static const char *piece(const srv_t *s, int32_t id, size_t *len) {
  const char *p = tok_piece(s->tok, id, len);
  if (!p) *len = 0;
  return p ? p : "";
}

void srv__plp_init(srv_t *s, srv_part_t *p, const int32_t *ids, int32_t n) {
  p->plp = xcalloc((size_t)(n ? n : 1), sizeof *p->plp);
  p->plp_top = xcalloc((size_t)(n ? n : 1) * SAMP_MAX_TOP_LOGPROBS, sizeof *p->plp_top);
  for (int32_t i = 0; i < n; i++) {
    oai_token_logprob_t *e = &p->plp[i];
    e->id = ids[i];
    e->token = piece(s, ids[i], &e->token_len);
    e->no_logprob = true; /* until its event comes (entry 0: never) */
    e->top = &p->plp_top[(size_t)i * SAMP_MAX_TOP_LOGPROBS];
  }
}

void srv__plp_event(srv_t *s, srv_part_t *p, const sched_event_t *ev) {
  if (!p->plp || ev->position < 1 || ev->position >= p->prompt_tokens) return;
  oai_token_logprob_t *e = &p->plp[ev->position];
  oai_top_logprob_t *top = &p->plp_top[(size_t)ev->position * SAMP_MAX_TOP_LOGPROBS];
  e->logprob = ev->logprob;
  e->rank = ev->rank;
  e->no_logprob = false;
  e->n_top = ev->n_top < SAMP_MAX_TOP_LOGPROBS ? ev->n_top : SAMP_MAX_TOP_LOGPROBS;
  for (int32_t k = 0; k < e->n_top; k++) {
    top[k].id = ev->top[k].token;
    top[k].logprob = ev->top[k].logprob;
    top[k].token = piece(s, ev->top[k].token, &top[k].token_len);
  }
}

oai_token_logprob_t *srv__plp_view(const srv_part_t *p, int32_t n_top) {
  const int32_t n = p->prompt_tokens;
  oai_token_logprob_t *v = xmalloc((size_t)(n ? n : 1) * sizeof *v);
  int32_t offset = 0;
  for (int32_t i = 0; i < n; i++) {
    v[i] = p->plp[i];
    if (v[i].n_top > n_top) v[i].n_top = n_top;
    v[i].text_offset = offset;
    offset += (int32_t)v[i].token_len;
  }
  return v;
}

void srv__plp_free(srv_part_t *p) {
  free(p->plp);
  free(p->plp_top);
  p->plp = NULL;
  p->plp_top = NULL;
}
