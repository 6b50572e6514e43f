/* sample/sampler.c — a request's sampler: its parameters (checked by
 * samp_params.c), its random stream (counter-based, one draw per sampled token), the token counts behind the penalties (an open-addressing
 * table of the distinct tokens seen, so a step costs O(distinct tokens), not
 * O(vocabulary)), the penalties themselves, and samp_sample() tying the
 * steps together. See sampler.h; the truncation steps are in
 * sampler_select.c. */
#include "sample/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/log.h"
#include "kernels/kern_sample.h"
#include "sample/sampler_internal.h"

typedef struct samp_count {
  int32_t token;
  int32_t out;    /* times in the output */
  uint8_t prompt; /* in the prompt */
} samp_count_t;

struct samp_state {
  samp_params_t p;         /* p.logit_bias points at bias */
  samp_logit_bias_t *bias; /* [p.n_logit_bias], owned */
  int32_t n_vocab;
  uint64_t seed;
  uint64_t n_draws;        /* draws taken from the stream so far */
  samp_count_t *counts;    /* [n_counts] distinct tokens seen */
  uint32_t n_counts, cap_counts;
  uint32_t *slots;         /* [n_slots] index + 1 into counts, 0 = empty */
  uint32_t n_slots;        /* a power of two, > 2 * n_counts */
};

/* ---- random stream ------------------------------------------------------------
 *
 * Counter-based: the draw for the request's i-th sampled token is
 * mix(seed + (i + 1) * gamma), splitmix64's output function, so it depends on
 * the seed and i alone (whatever the batch, the thread or a preemption). */

/* Uniform in [0, 1) with 53 random bits: the stream's next draw (the
 * device sampler's kern_sample_uniform, so both draw the same bits). */
static double next_uniform(samp_state_t *s) { return kern_sample_uniform(s->seed, ++s->n_draws); }

/* A seed for requests without one: distinct per call and per process. */
static uint64_t pick_seed(void) {
  static _Atomic uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^
               (atomic_fetch_add(&counter, 1) * 0xd1342543de82ef95ull);
  return hash_mix64(x + HASH_GAMMA);
}

/* ---- token counts ----------------------------------------------------------------- */

static uint32_t hash_token(int32_t t) { return (uint32_t)t * 2654435761u; }

static void rehash(samp_state_t *s, uint32_t n_slots) {
  free(s->slots);
  s->slots = xcalloc(n_slots, sizeof *s->slots);
  s->n_slots = n_slots;
  for (uint32_t i = 0; i < s->n_counts; i++) {
    uint32_t h = hash_token(s->counts[i].token) & (n_slots - 1);
    while (s->slots[h]) h = (h + 1) & (n_slots - 1);
    s->slots[h] = i + 1;
  }
}

/* The count entry of token t, created if new. */
static samp_count_t *count_of(samp_state_t *s, int32_t t) {
  uint32_t h = hash_token(t) & (s->n_slots - 1);
  while (s->slots[h]) {
    samp_count_t *c = &s->counts[s->slots[h] - 1];
    if (c->token == t) return c;
    h = (h + 1) & (s->n_slots - 1);
  }
  if (s->n_counts == s->cap_counts) {
    s->cap_counts = s->cap_counts ? s->cap_counts * 2 : 64;
    s->counts = xreallocarray(s->counts, s->cap_counts, sizeof *s->counts);
  }
  samp_count_t *c = &s->counts[s->n_counts++];
  c->token = t;
  c->out = 0;
  c->prompt = 0;
  s->slots[h] = s->n_counts;
  if (s->n_counts * 2 >= s->n_slots) {
    rehash(s, s->n_slots * 2);
    c = &s->counts[s->n_counts - 1];
  }
  return c;
}

/* ---- state ---------------------------------------------------------------------------- */

samp_state_t *samp_state_create(const samp_params_t *p, int32_t n_vocab, const int32_t *prompt, size_t n_prompt) {
  char err[160];
  if (samp_params_validate(p, n_vocab, err, sizeof err) < 0) {
    log_error("sampler: %s", err);
    return NULL;
  }
  samp_state_t *s = xcalloc(1, sizeof *s);
  s->p = *p;
  s->n_vocab = n_vocab;
  if (p->n_logit_bias > 0) {
    s->bias = xmalloc((size_t)p->n_logit_bias * sizeof *s->bias);
    memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
  }
  s->p.logit_bias = s->bias;
  s->seed = p->has_seed ? p->seed : pick_seed();
  rehash(s, 64);
  for (size_t i = 0; i < n_prompt; i++)
    if (prompt[i] >= 0 && prompt[i] < n_vocab) count_of(s, prompt[i])->prompt = 1;
  return s;
}

void samp_state_destroy(samp_state_t *s) {
  if (!s) return;
  free(s->bias);
  free(s->counts);
  free(s->slots);
  free(s);
}

void samp_state_accept(samp_state_t *s, int32_t token) {
  if (token < 0 || token >= s->n_vocab) return;
  samp_count_t *c = count_of(s, token);
  if (c->out < INT32_MAX) c->out++;
}

uint64_t samp_state_seed(const samp_state_t *s) { return s->seed; }
const samp_params_t *samp_state_params(const samp_state_t *s) { return &s->p; }

/* What samp_state_penalize subtracts for a token seen `out` times in the
 * output (one expression, so the host and the device ops round it alike). */
static float count_sub(const samp_params_t *p, int32_t out) {
  return p->frequency_penalty * (float)out + p->presence_penalty;
}

void samp_state_penalize(const samp_state_t *s, float *logits) {
  const samp_params_t *p = &s->p;
  for (int32_t i = 0; i < p->n_logit_bias; i++) logits[p->logit_bias[i].token] += p->logit_bias[i].bias;
  float rep = p->repetition_penalty, freq = p->frequency_penalty, pres = p->presence_penalty;
  if (rep == 1.0f && freq == 0.0f && pres == 0.0f) return;
  for (uint32_t i = 0; i < s->n_counts; i++) {
    const samp_count_t *c = &s->counts[i];
    float x = logits[c->token];
    if (rep != 1.0f) x = x > 0 ? x / rep : x * rep;
    if (c->out > 0) x -= count_sub(p, c->out);
    logits[c->token] = x;
  }
}

int samp_state_device_row(const samp_state_t *s, kern_sample_row_t *row, kern_sample_op_t *ops, int32_t op_begin,
                          int32_t op_cap) {
  const samp_params_t *p = &s->p;
  const int logprobs = p->logprobs || p->top_logprobs > 0;
  if (logprobs && (p->n_logit_bias > 0 || p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                   p->presence_penalty != 0.0f || p->top_logprobs >= s->n_vocab))
    return 0; /* raw logprobs of a row the device changes in place: the host's */
  const int top_k = p->temperature > 0 && p->top_k > 0 && p->top_k < s->n_vocab; /* else the whole vocabulary */
  if (top_k && p->top_k > KERN_SAMPLE_MAX_TOP_K) return 0;
  const float rep = p->repetition_penalty;
  const int penalized = rep != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
  int32_t n = op_begin;
  for (int32_t i = 0; i < p->n_logit_bias; i++) {
    if (n == op_cap) return 0;
    ops[n++] = (kern_sample_op_t){.token = p->logit_bias[i].token, .flags = KERN_SAMPLE_BIAS,
                                  .bias = p->logit_bias[i].bias};
  }
  for (uint32_t i = 0; penalized && i < s->n_counts; i++) {
    const samp_count_t *c = &s->counts[i];
    if (rep == 1.0f && c->out == 0) continue; /* changes nothing */
    if (n == op_cap) return 0;
    ops[n++] = (kern_sample_op_t){.token = c->token,
                                  .flags = (rep != 1.0f ? KERN_SAMPLE_REP : 0u) | (c->out > 0 ? KERN_SAMPLE_SUB : 0u),
                                  .rep = rep,
                                  .sub = c->out > 0 ? count_sub(p, c->out) : 0.0f};
  }
  memset(row, 0, sizeof *row);
  row->op_begin = op_begin;
  row->n_bias = p->n_logit_bias;
  row->n_count = n - op_begin - p->n_logit_bias;
  row->on_device = 1;
  row->temperature = p->temperature > 0 ? p->temperature : 0.0f;
  row->min_p = p->min_p;
  row->top_k = top_k ? p->top_k : 0;
  row->top_p = p->temperature > 0 ? p->top_p : 1.0f; /* over the top k, or the whole vocabulary */
  row->logprobs = logprobs;
  row->n_top = p->top_logprobs;
  row->seed = s->seed;
  row->draw = s->n_draws + 1; /* next_uniform's */
  return 1;
}

void samp_state_take_draw(samp_state_t *s) { s->n_draws++; }

int samp_sample(samp_state_t *s, samp_ws_t *w, const float *logits, samp_result_t *out) {
  int32_t n_vocab = s->n_vocab;
  if (samp__ws_n_vocab(w) != n_vocab) abort(); /* programmer error */
  float *x = samp__ws_row(w);
  memcpy(x, logits, (size_t)n_vocab * sizeof *x); /* every step reads NaN as -inf */
  samp_state_penalize(s, x);
  samp__cands_t cands;
  int rc = samp__candidates(&s->p, w, x, &cands);
  if (rc < 0) return rc;
  int32_t token = samp__pick(&cands, next_uniform(s));
  out->token = token;
  out->logprob = 0.0f;
  out->n_top = s->p.top_logprobs;
  if (s->p.logprobs || s->p.top_logprobs > 0)
    samp_logprobs(logits, n_vocab, token, s->p.top_logprobs, &out->logprob, out->top);
  return 0;
}
