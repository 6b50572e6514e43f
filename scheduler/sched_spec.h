/* scheduler/sched_spec.h — the n-gram (prompt lookup) proposer of
 * speculative decoding, on token arrays alone (unit-tested as such). The
 * engine's side (which sequences speculate, verification, adaptivity) is in
 * sched_spec.c with the engine's private state. */
#ifndef TRAM_SCHED_SPEC_H
#define TRAM_SCHED_SPEC_H

#include <stdint.h>

/* Proposes up to k tokens to follow tokens[len]: for n from ngram_max down
 * to ngram_min (n < len), finds the most recent earlier occurrence of the
 * last n tokens and copies the (up to k) tokens that followed it into
 * out[k]. Returns the number proposed (0: no n-gram recurs). */
int32_t sched_spec_ngram(const int32_t *tokens, int64_t len, int ngram_min, int ngram_max, int k, int32_t *out);

#endif
