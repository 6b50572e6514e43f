/* scheduler/sched_spec_adapt.c — adaptive k: how many drafts a speculating
 * sequence proposes, and when it pauses.
 *
 * A draft row is not free: the engine measures what it costs, c (a draft
 * row's forward time, plus the draft model's time when it proposes, over a
 * plain decode step's, a moving average over the clean steps of decodes
 * only that carry drafts; 0.5 until measured). Each sequence keeps p, its
 * estimated probability that a draft token is accepted (a moving average
 * over the drafts verified). With k drafts it expects p + p^2 + ... + p^k
 * extra tokens for k·c decode steps' worth of work, so it takes the k that
 * maximises the difference, and when none gains it pauses: no drafts for 8
 * decode steps, doubling after each pause up to 512. The baseline is
 * measured on steps without drafts; when 32 steps in a row had drafts (or
 * none was ever measured), the next one proposes none.
 *
 * Out of a pause a sequence probes: p goes back to its optimistic start
 * and, should even that gain nothing at the current c, it proposes one
 * draft anyway, until one draft has been verified. Without the probe, c
 * could lock speculation off for good: c is measured only on steps that
 * carry drafts, so once noise pushed it past ~0.8 (where no k gains even
 * at p = 0.8) every sequence paused, no step carried a draft again and c
 * was never re-measured. The probe re-measures it with the cheapest step
 * that can (one draft row), once a pause. When no step carried drafts for
 * 64 steps, that measurement replaces the estimate rather than joining its
 * average: an estimate from before the pause says less about the machine
 * now than one step does (averaged in, a cost pushed to 2 would need
 * several pauses of up to 512 steps to come back under 0.8).
 *
 * The pause keeps its intent (no waste where speculation does not pay): it
 * doubles after each, and only a fully accepted round that the gain rule
 * chose brings it back to 8 steps, not a probe. Where draft rows cost more
 * than they gain, each pause costs one draft row (24 steps with drafts in
 * 8,000 in test_sched_spec.c's simulation); where drafts are rejected, the
 * few rounds it takes p to fall from its optimistic start (143 in 8,000).
 * Letting c decay toward its prior on steps without drafts was the other
 * way; it would invent a cost nobody measured, and probe at a rate set by
 * the decay rather than by the backoff. */
#include "scheduler/sched_spec_adapt.h"

#define SPEC_P_START 0.8     /* a sequence's acceptance estimate, at first and after a pause (optimistic: it probes) */
#define SPEC_P_GAIN 0.15     /* weight of each verified draft token in the estimate */
#define SPEC_ROW_COST 0.5    /* a draft row's cost in decode steps, until measured */
#define SPEC_PAUSE_FIRST 8   /* decode steps of the first pause */
#define SPEC_PAUSE_MAX 512   /* and of the longest */
#define SPEC_PLAIN_EVERY 32  /* steps with drafts at most between two without (the cost model's baseline) */
#define SPEC_COST_STALE 64   /* steps without drafts after which the cost estimate is stale */

int sched_spec_cost_plain_due(sched_spec_cost_t *c) {
  if (c->since_plain < (c->t_decode > 0 ? SPEC_PLAIN_EVERY : 1)) return 0;
  c->since_plain = 0;
  return 1;
}

void sched_spec_cost_timed(sched_spec_cost_t *c, int64_t t_ns, int32_t drafts) {
  if (c->row_cost == 0) c->row_cost = SPEC_ROW_COST;
  c->since_plain = drafts > 0 ? c->since_plain + 1 : 0;
  if (drafts == 0) {
    c->t_decode = c->t_decode ? 0.9 * c->t_decode + 0.1 * (double)t_ns : (double)t_ns;
    if (c->since_drafts < SPEC_COST_STALE) c->since_drafts++;
  } else if (c->t_decode > 0) {
    double r = ((double)t_ns - c->t_decode) / ((double)drafts * c->t_decode);
    r = r < 0.05 ? 0.05 : r > 2 ? 2 : r;
    /* an estimate from before a long pause says less than this step */
    c->row_cost = c->since_drafts >= SPEC_COST_STALE ? r : 0.8 * c->row_cost + 0.2 * r;
    c->since_drafts = 0;
  }
}

/* The draft count (<= k) that maximises the expected gain at p and cost
 * c, 0 when no count gains anything. */
static int32_t best_k(double p, double c, int32_t k) {
  double pi = 1, sum = 0, best = 0;
  int32_t best_k = 0;
  for (int32_t i = 1; i <= k; i++) {
    pi *= p;
    sum += pi;
    const double gain = sum - c * i;
    if (gain > best) best = gain, best_k = i;
  }
  return best_k;
}

static void pause_seq(sched_spec_adapt_t *a) {
  a->skip = a->backoff;
  if (a->backoff < SPEC_PAUSE_MAX) a->backoff *= 2;
  a->p = SPEC_P_START;
  a->probe = 1;
}

int32_t sched_spec_adapt_k(const sched_spec_cost_t *c, sched_spec_adapt_t *a, int32_t k_max, int can_draft) {
  if (a->skip > 0) {
    a->skip--;
    return 0;
  }
  if (a->backoff == 0) {
    a->backoff = SPEC_PAUSE_FIRST;
    a->p = SPEC_P_START;
  }
  int32_t k = best_k(a->p, c->row_cost > 0 ? c->row_cost : SPEC_ROW_COST, k_max);
  if (a->probe) a->probe = k == 0 && k_max > 0 ? 2 : 1; /* 2: this round is a forced probe */
  if (a->probe == 2) k = 1;
  if (k <= 0 && can_draft) pause_seq(a);
  return k;
}

void sched_spec_adapt_verified(sched_spec_adapt_t *a, int32_t accepted, int32_t proposed) {
  for (int32_t i = 0; i < accepted; i++) a->p += (float)(SPEC_P_GAIN * (1 - a->p));
  if (accepted < proposed) a->p -= (float)(SPEC_P_GAIN * a->p);
  /* it pays again: short pauses (a forced probe says nothing about paying,
   * its acceptance alone: its row's cost measured, the gain rule decides) */
  if (accepted == proposed && a->probe != 2) a->backoff = SPEC_PAUSE_FIRST;
  if (proposed > 0) a->probe = 0;
}
