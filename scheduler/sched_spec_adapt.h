/* scheduler/sched_spec_adapt.h — how many drafts a speculating sequence
 * proposes: the engine's cost model (what a draft row costs in decode
 * steps, measured) and a sequence's acceptance estimate with its pauses
 * and probes. Pure arithmetic on these two structs, no engine: the engine
 * (sched_spec.c) feeds it timings and verification results, and the unit
 * test feeds it synthetic ones. */
#ifndef TRAM_SCHED_SPEC_ADAPT_H
#define TRAM_SCHED_SPEC_ADAPT_H

#include <stdint.h>

/* The engine's side: one per engine (zeroed at start). */
typedef struct {
  double t_decode;     /* forward ns of a step of plain decodes (moving average; 0: none yet) */
  double row_cost;     /* a draft row's forward time over a decode step's (moving average; 0: the prior) */
  int32_t since_plain; /* clean steps with drafts since the last without */
  int32_t since_drafts; /* clean steps without drafts since the last with (capped: a stale estimate) */
} sched_spec_cost_t;

/* A sequence's side: one per sequence (zeroed when it is made). */
typedef struct {
  float p;         /* a draft token's acceptance probability (moving estimate) */
  int32_t skip;    /* decode steps left without speculating */
  int32_t backoff; /* the next pause's length, doubled after each (0: never speculated) */
  int32_t probe;   /* out of a pause: proposes at least one draft until one is verified
                    * (1: due, 2: this step's drafts are a probe the gain rule would not take) */
} sched_spec_adapt_t;

/* Before a step: 1 when it must carry no drafts (the cost model's
 * baseline is due), and then counts it as such. */
int sched_spec_cost_plain_due(sched_spec_cost_t *c);

/* After a clean step of decodes only (no prefill chunk) whose forward took
 * t_ns and carried `drafts` draft rows in all. */
void sched_spec_cost_timed(sched_spec_cost_t *c, int64_t t_ns, int32_t drafts);

/* The number of drafts (<= k_max) a sequence proposes this step; 0: none
 * (it is pausing, or none gains and it starts a pause). k_max is what its
 * max_tokens, the model length and the step's rows leave; can_draft is 0
 * when not even one draft would fit (then no pause starts: it is ending). */
int32_t sched_spec_adapt_k(const sched_spec_cost_t *c, sched_spec_adapt_t *a, int32_t k_max, int can_draft);

/* After a verification that kept `accepted` of `proposed` drafts. */
void sched_spec_adapt_verified(sched_spec_adapt_t *a, int32_t accepted, int32_t proposed);

#endif
