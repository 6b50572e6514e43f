/* model/samp_params.h — a request's sampling parameters, on their own so
 * that the scheduler's and the server's headers can carry them without the
 * sampler itself. The HTTP layer and `tram generate` fill them from a
 * request and the engine hands them to the sampler (model/sampler.h).
 * Defaults (samp_params_default()) change nothing: greedy when temperature
 * is 0. */
#ifndef TRAM_SAMP_PARAMS_H
#define TRAM_SAMP_PARAMS_H

#include <stddef.h>
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

#define SAMP_MAX_TOP_LOGPROBS 20

/* The parameters that change nothing: temperature 0 (greedy), top_k 0,
 * top_p 1, min_p 0, penalties off, no seed, no bias, no logprobs. */
samp_params_t samp_params_default(void);

/* Checks p against a vocabulary of n_vocab tokens: finite values,
 * temperature >= 0, top_p and min_p in [0, 1], repetition_penalty > 0,
 * logit_bias tokens in [0, n_vocab) with finite biases, top_logprobs in
 * 0..SAMP_MAX_TOP_LOGPROBS. Returns 0, or -EINVAL with a message for the
 * client in err[err_size] (if err is not NULL). */
int samp_params_validate(const samp_params_t *p, int32_t n_vocab, char *err, size_t err_size);

typedef struct samp_logprob {
  int32_t token;
  float logprob;
} samp_logprob_t;

#endif
