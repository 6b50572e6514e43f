/* model/sampler.h — turns a row of logits into the next token.
 *
 * A request's sampling parameters, as the HTTP layer fills them from the
 * OpenAI request and the engine hands them to the sampler. Defaults (from
 * samp_params_default()) change nothing: greedy when temperature is 0. */
#ifndef TRAM_SAMPLER_H
#define TRAM_SAMPLER_H

#include <stdint.h>

typedef struct samp_logit_bias {
  int32_t token;
  float bias; /* added to the token's logit; OpenAI allows -100..100 */
} samp_logit_bias_t;

typedef struct samp_params {
  float temperature;        /* 0: greedy (argmax); > 0: sample */
  int32_t top_k;            /* keep the k most likely; <= 0: off */
  float top_p;              /* nucleus: smallest set with mass >= top_p; 1: off */
  float min_p;              /* drop tokens below min_p * p(max); 0: off */
  float repetition_penalty; /* llama.cpp/HF, over prompt and output; 1: off */
  float presence_penalty;   /* OpenAI, over the output; 0: off */
  float frequency_penalty;  /* OpenAI, over the output; 0: off */
  uint64_t seed;            /* the request's random stream */
  int has_seed;             /* 0: the engine picks a seed */
  const samp_logit_bias_t *logit_bias; /* [n_logit_bias], owned by the request */
  int32_t n_logit_bias;
  int32_t logprobs;     /* return the chosen token's logprob (1) or not (0) */
  int32_t top_logprobs; /* and this many alternatives (0..20) */
} samp_params_t;

/* The parameters that change nothing: temperature 0 (greedy), top_k 0,
 * top_p 1, min_p 0, penalties off, no seed, no bias, no logprobs. */
samp_params_t samp_params_default(void);

#endif
