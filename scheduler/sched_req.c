/* scheduler/sched_req.c — requests: creation (copying what the submitter
 * gives), destruction, cancellation, accessors (see sched.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched_internal.h"
#include "base/alloc.h"

sched_req_params_t sched_req_params_default(void) {
  return (sched_req_params_t){.samp = samp_params_default(), .n = 1, .think_budget = -1, .think_open = -1};
}

const char *sched_finish_name(sched_finish_t f) {
  switch (f) {
    case SCHED_FINISH_STOP: return "stop";
    case SCHED_FINISH_LENGTH: return "length";
    case SCHED_FINISH_ABORT: return "abort";
    case SCHED_FINISH_ERROR: return "error";
    default: return "none";
  }
}

static void *dup_array(const void *src, size_t n, size_t size) {
  if (n == 0) return NULL;
  void *p = xmallocarray(n, size);
  memcpy(p, src, n * size);
  return p;
}

sched_req_t *sched_req_create(const int32_t *prompt, int32_t n_prompt, const sched_req_params_t *p, void *user,
                              char *err, size_t err_len) {
  const int32_t n = p->n ? p->n : 1;
  if (n_prompt < 1 || !prompt) {
    snprintf(err, err_len, "the prompt is empty: at least one token is needed");
    return NULL;
  }
  if (n < 1 || n > SCHED_MAX_N) {
    snprintf(err, err_len, "n = %d: must be 1..%d", n, SCHED_MAX_N);
    return NULL;
  }
  if (p->min_tokens < 0 || (p->max_tokens > 0 && p->min_tokens > p->max_tokens)) {
    snprintf(err, err_len, "min_tokens = %d: must be 0..max_tokens (%d)", p->min_tokens, p->max_tokens);
    return NULL;
  }
  if (p->max_tokens < 0) {
    snprintf(err, err_len, "max_tokens = %d: must be positive", p->max_tokens);
    return NULL;
  }
  if (p->pooling < SCHED_POOL_NONE || p->pooling > SCHED_POOL_LAST ||
      (p->pooling && (n != 1 || p->grammar || p->prompt_logprobs || p->score_only))) {
    snprintf(err, err_len, "pooling %d: must be 0..3, and a pooling request has n 1 and samples nothing", p->pooling);
    return NULL;
  }
  if (p->n_stop_ids < 0 || p->n_stop_ids > SCHED_MAX_STOP_IDS || (p->n_stop_ids > 0 && !p->stop_ids)) {
    snprintf(err, err_len, "%d stop token ids: at most %d are allowed", p->n_stop_ids, SCHED_MAX_STOP_IDS);
    return NULL;
  }
  if (p->n_think_close < 0 || p->n_think_close > SCHED_MAX_THINK_IDS || (p->n_think_close > 0 && !p->think_close)) {
    snprintf(err, err_len, "%d reasoning close ids: at most %d are allowed", p->n_think_close, SCHED_MAX_THINK_IDS);
    return NULL;
  }
  if (p->n_think_lead < 0 || p->n_think_lead > SCHED_MAX_THINK_IDS || (p->n_think_lead > 0 && !p->think_lead)) {
    snprintf(err, err_len, "%d reasoning lead ids: at most %d are allowed", p->n_think_lead, SCHED_MAX_THINK_IDS);
    return NULL;
  }
  if (p->samp.n_logit_bias < 0 || (p->samp.n_logit_bias > 0 && !p->samp.logit_bias)) {
    snprintf(err, err_len, "logit_bias: bad count %d", p->samp.n_logit_bias);
    return NULL;
  }
  sched_req_t *r = xcalloc(1, sizeof *r);
  if (sched_stops_init(&r->stops, p->stop, p->n_stop, SCHED_MAX_STOP, SCHED_MAX_STOP_LEN, err, err_len) != 0) {
    free(r);
    return NULL;
  }
  r->prompt = dup_array(prompt, (size_t)n_prompt, sizeof *prompt);
  r->n_prompt = n_prompt;
  r->p = *p;
  r->p.n = n;
  r->bias = dup_array(p->samp.logit_bias, (size_t)p->samp.n_logit_bias, sizeof *r->bias);
  r->p.samp.logit_bias = r->bias;
  r->stop_ids = dup_array(p->stop_ids, (size_t)p->n_stop_ids, sizeof *r->stop_ids);
  r->p.stop_ids = r->stop_ids;
  r->think_close = dup_array(p->think_close, (size_t)p->n_think_close, sizeof *r->think_close);
  r->p.think_close = r->think_close;
  r->think_lead = dup_array(p->think_lead, (size_t)p->n_think_lead, sizeof *r->think_lead);
  r->p.think_lead = r->think_lead;
  r->p.stop = (const char *const *)r->stops.str;
  r->grammar = gram_entry_ref(p->grammar);
  r->user = user;
  atomic_init(&r->cancelled, 0);
  atomic_init(&r->paused, 0);
  return r;
}

void sched__req_free_seqs(sched_req_t *r) {
  for (int32_t i = 0; r->seqs && i < r->p.n; i++) {
    sched_eseq_t *q = &r->seqs[i];
    samp_state_destroy(q->samp);
    gram_matcher_destroy(q->gm);
    sched_stop_state_free(&q->stop);
    free(q->pool);
    if (q->started) sched_seq_free(&q->s);
  }
  free(r->seqs);
  r->seqs = NULL;
}

void sched_req_destroy(sched_req_t *r) {
  if (!r) return;
  sched__req_free_seqs(r);
  sched_stops_free(&r->stops);
  free(r->embedding);
  free(r->prompt);
  free(r->bias);
  free(r->stop_ids);
  free(r->think_close);
  free(r->think_lead);
  gram_entry_unref(r->grammar);
  free(r);
}

void sched_req_cancel(sched_req_t *r) {
  if (atomic_exchange(&r->cancelled, 1)) return;
  sched_engine_t *e = r->engine;
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  e->wake = 1;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

void sched_req_pause(sched_req_t *r, int paused) {
  if (atomic_exchange(&r->paused, paused ? 1 : 0) == (paused ? 1 : 0) || paused) return;
  sched_engine_t *e = r->engine; /* resumed: the engine may be asleep with nothing else to do */
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  e->wake = 1;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

void *sched_req_user(const sched_req_t *r) { return r->user; }
uint64_t sched_req_id(const sched_req_t *r) { return r->id; }
int32_t sched_req_prompt_tokens(const sched_req_t *r) { return r->n_prompt; }

uint64_t sched_req_seed(const sched_req_t *r, int32_t index) {
  if (!r->seqs || index < 0 || index >= r->p.n) return 0;
  return samp_state_seed(r->seqs[index].samp);
}
