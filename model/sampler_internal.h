/* model/sampler_internal.h — what sampler.c and sampler_select.c share
 * (internal to model/; see sampler.h). */
#ifndef TRAM_SAMPLER_INTERNAL_H
#define TRAM_SAMPLER_INTERNAL_H

#include <stdint.h>

#include "model/sampler.h"

/* The workspace's row buffer: n_vocab floats the caller may overwrite. */
float *samp__ws_row(samp_ws_t *w);
int32_t samp__ws_n_vocab(const samp_ws_t *w);

/* Inverse-CDF draw: the first candidate whose cumulative probability
 * exceeds u * (sum of probs); u in [0, 1). Never a zero-probability one. */
int32_t samp__pick(const int32_t *ids, const float *probs, int n, double u);

#endif
