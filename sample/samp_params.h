/* sample/samp_params.h — a request's sampling parameters, on their own so
 * that the scheduler's and the server's headers can carry them without the
 * sampler itself. The HTTP layer and `tram generate` fill them from a
 * request and the engine hands them to the sampler (sample/sampler.h).
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

/* ---- the one table of fields and limits ---------------------------------------
 *
 * The numeric sampling fields of a request, named as OpenAI and vLLM name
 * them, with the ranges accepted from clients. Both request readers (the
 * HTTP API, api/oai_request.c; `tram generate`'s flags and JSON lines,
 * server/generate.c and gen_input.c) read through this table, and
 * samp_params_validate() checks against it, so one range holds everywhere:
 *   temperature        [0, 2]    (OpenAI's documented range)
 *   top_p              (0, 1]
 *   min_p              [0, 1]
 *   presence_penalty   [-2, 2]   (OpenAI)
 *   frequency_penalty  [-2, 2]   (OpenAI)
 *   repetition_penalty (0, 10]   (vLLM: > 0; 10 is far past any useful value)
 *   top_k              -1 (off, as vLLM), 0 (off) or 1..2^31-1, an integer
 * and, outside the table, logit_bias values in [-SAMP_MAX_LOGIT_BIAS,
 * SAMP_MAX_LOGIT_BIAS] (OpenAI) and top_logprobs 0..SAMP_MAX_TOP_LOGPROBS. */

#define SAMP_MAX_LOGIT_BIAS 100

typedef struct samp_field {
  const char *name; /* the request's key: "temperature" */
  double lo, hi;    /* the accepted range */
  int lo_open;      /* 1: lo itself is refused */
  int integral;     /* 1: an integer, stored as int32_t; 0: stored as float */
  size_t offset;    /* of the field in samp_params_t */
} samp_field_t;

extern const samp_field_t samp_fields[];
extern const int samp_n_fields;

/* 1 when v is a value f accepts: finite, in range, integral if f is, and
 * still above an open lower bound once stored as a float. */
int samp_field_accepts(const samp_field_t *f, double v);

/* Stores v, which f accepts, into p's field (top_k -1 is stored as 0). */
void samp_field_set(samp_params_t *p, const samp_field_t *f, double v);

/* Writes "[0, 2]" or "(0, 1]" for f into buf[cap]; returns buf. */
const char *samp_field_range(const samp_field_t *f, char *buf, size_t cap);

/* The sampler's preconditions, not request limits: what its arithmetic
 * needs, checked against a vocabulary of n_vocab tokens: finite values,
 * temperature >= 0, top_p and min_p in [0, 1] (top_p 0 keeps the top
 * token), repetition_penalty > 0, logit_bias tokens in [0, n_vocab) with
 * finite biases, top_logprobs in 0..SAMP_MAX_TOP_LOGPROBS. Every value the
 * table above accepts passes (tests/unit/test_sampler.c checks that), so a
 * request the readers accepted never fails here; the engine asserts it at
 * submit for callers that fill samp_params_t themselves (benchmarks, tests).
 * Returns 0, or -EINVAL with a message in err[err_size] (if err is not
 * NULL). */
int samp_params_validate(const samp_params_t *p, int32_t n_vocab, char *err, size_t err_size);

/* ---- a model's generation defaults -------------------------------------------
 *
 * The sampling a model file recommends (GGUF general.sampling.*, a
 * checkpoint's generation_config.json), as vLLM's `--generation-config auto`
 * reads it: a request that leaves one of these fields out takes the model's
 * value instead of OpenAI's default. */
typedef struct samp_gen_defaults {
  unsigned fields;    /* bit i: the model gives samp_fields[i] (its value in samp) */
  samp_params_t samp; /* those values; the others as samp_params_default() */
  int32_t max_tokens; /* generation_config's max_new_tokens; 0: none */
} samp_gen_defaults_t;

/* Sets p's field i (of samp_fields[]) to d's for every field d gives and
 * the bit of `given` is clear (the request did not set it). */
void samp_gen_apply(const samp_gen_defaults_t *d, unsigned given, samp_params_t *p);

/* Writes "temperature=0.7 top_k=20 max_tokens=512" (the fields d gives)
 * into buf[cap], or "none"; returns buf. */
const char *samp_gen_describe(const samp_gen_defaults_t *d, char *buf, size_t cap);

typedef struct samp_logprob {
  int32_t token;
  float logprob;
} samp_logprob_t;

#endif
