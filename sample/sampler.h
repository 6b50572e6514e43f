/* sample/sampler.h — turns a row of logits into the next token.
 *
 * A request's sampling parameters (samp_params_t) are in sample/samp_params.h.
 *
 * The pipeline, in this order (docs/sampling.md has the formulas):
 *   1. logit_bias: logit[t] += bias
 *   2. repetition penalty over the distinct tokens of prompt and output
 *      (llama.cpp/HF): logit > 0 ? logit / p : logit * p
 *   3. frequency and presence penalties over the output (OpenAI):
 *      logit -= frequency * count + presence * (count > 0)
 *   4. temperature 0: the argmax (lowest id on ties); stop here
 *   5. temperature: logit / T
 *   6. top-k, then top-p over the top-k renormalised, then min-p
 *   7. one draw from the request's own random stream over what is left.
 * logprobs and top_logprobs describe the model's raw distribution,
 * log_softmax of the logits as the model produced them (before step 1), as
 * vLLM reports by default.
 *
 * Ownership: a samp_state_t belongs to one request and is used by one thread
 * at a time; a samp_ws_t is scratch memory for one thread, shared by all
 * the requests it samples. Nothing here allocates per token. Results depend
 * only on the request's parameters, prompt, accepted tokens and logits —
 * never on the batch, the other requests or the thread. */
#ifndef TRAM_SAMPLER_H
#define TRAM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "sample/samp_params.h"

/* ---- per-request state ---------------------------------------------------- */

typedef struct samp_state samp_state_t;

/* A request's sampler: a copy of its parameters (the logit_bias array is
 * copied too), its random stream, and the token counts the penalties need.
 * prompt[n_prompt] are the prompt's ids (not kept). Without p->has_seed the
 * stream is seeded from a process-wide source (see samp_state_seed()).
 * Returns NULL after logging why when p does not validate. */
samp_state_t *samp_state_create(const samp_params_t *p, int32_t n_vocab, const int32_t *prompt, size_t n_prompt);

/* Frees s; NULL is a no-op. */
void samp_state_destroy(samp_state_t *s);

/* Records a token appended to the request's output (the one samp_sample()
 * chose, or one the engine forced); the penalties count it from then on.
 * Tokens outside the vocabulary are ignored. */
void samp_state_accept(samp_state_t *s, int32_t token);

/* The seed of the request's stream (the given one, or the one picked). */
uint64_t samp_state_seed(const samp_state_t *s);

/* The state's parameters (its own copy). */
const samp_params_t *samp_state_params(const samp_state_t *s);

/* ---- scratch ------------------------------------------------------------------ */

typedef struct samp_ws samp_ws_t;

/* Scratch for sampling rows of n_vocab logits (about 20 bytes a token).
 * Never NULL (aborts when out of memory). */
samp_ws_t *samp_ws_create(int32_t n_vocab);
void samp_ws_destroy(samp_ws_t *w);

/* ---- sampling ----------------------------------------------------------------- */

typedef struct samp_result {
  int32_t token;   /* the chosen token */
  float logprob;   /* its raw log-probability (when params.logprobs or top_logprobs) */
  int32_t n_top;   /* = params.top_logprobs */
  samp_logprob_t top[SAMP_MAX_TOP_LOGPROBS]; /* the n_top most likely raw tokens, most likely first */
} samp_result_t;

/* Picks the next token of s's request from logits[n_vocab] (the model's raw
 * output for its last position; read only) and advances its random stream
 * by one draw (also when greedy). Does not record the token: call
 * samp_state_accept() when it joins the output. w must have been made for
 * the same n_vocab. NaN logits count as -inf. Returns 0, or -EDOM when no
 * token has a finite logit (out is then untouched). */
int samp_sample(samp_state_t *s, samp_ws_t *w, const float *logits, samp_result_t *out);

/* ---- sampling where the logits are (kernels/kern_sample.h) ------------------ */

struct kern_sample_row;
struct kern_sample_op;

/* 1 when a device can pick s's next token as samp_sample() would: greedy,
 * or a temperature with top-p and min-p over the whole vocabulary or over
 * a top-k of at most KERN_SAMPLE_MAX_TOP_K, after logit_bias and the penalties as ops, or with
 * logprobs (then without bias or penalties: they are of the raw logits); `row` is filled for the stream's next draw and its ops written to
 * ops[op_begin ..] (at most op_cap - op_begin of them). 0 when the host
 * must, or the ops do not fit (row untouched; ops past op_begin may have
 * been written). Changes nothing in s. */
int samp_state_device_row(const samp_state_t *s, struct kern_sample_row *row, struct kern_sample_op *ops,
                          int32_t op_begin, int32_t op_cap);

/* Takes the draw a device used for s's token (samp_sample() takes its own):
 * the next token gets the stream's next draw. */
void samp_state_take_draw(samp_state_t *s);

/* ---- the steps, for tests and tools ------------------------------------------ */

/* Steps 1-3 on logits[n_vocab] in place. */
void samp_state_penalize(const samp_state_t *s, float *logits);

/* What is left to draw from after steps 4-6 on penalised logits[n_vocab]:
 * ids[n] and probabilities summing to 1, in the fixed order the draw walks
 * (not necessarily by probability). The arrays live in w until its next
 * use. Returns n >= 1, or -EDOM when no logit is finite. */
int samp_candidates(const samp_params_t *p, samp_ws_t *w, const float *logits, const int32_t **ids,
                    const float **probs);

/* Raw log-probabilities: writes log_softmax(logits)[token] to *logprob and
 * the n_top (<= SAMP_MAX_TOP_LOGPROBS) most likely tokens to top (most likely
 * first, lowest id first on ties). */
void samp_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top, float *logprob,
                   samp_logprob_t *top);

#endif
