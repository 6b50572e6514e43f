/* sample/sampler_internal.h — what sampler.c and sampler_select.c share
 * (internal to model/; see sampler.h). */
#ifndef TRAM_SAMPLER_INTERNAL_H
#define TRAM_SAMPLER_INTERNAL_H

#include <stdint.h>

#include "sample/sampler.h"

/* The workspace's row buffer: n_vocab floats the caller may overwrite. */
float *samp__ws_row(samp_ws_t *w);
int32_t samp__ws_n_vocab(const samp_ws_t *w);

/* What is left to draw from: n tokens (ids[i], or i itself when ids is
 * NULL) with weights w[i] summing to total; they live in the workspace. */
typedef struct samp__cands {
  const int32_t *ids;
  const float *w;
  int32_t n;
  double total;
} samp__cands_t;

/* samp_candidates() without the normalisation. 0 or -EDOM. */
int samp__candidates(const samp_params_t *p, samp_ws_t *w, const float *logits, samp__cands_t *out);

/* Inverse-CDF draw: the first candidate whose cumulative weight exceeds
 * u * total; u in [0, 1). Never a zero-weight one. */
int32_t samp__pick(const samp__cands_t *c, double u);

#endif
