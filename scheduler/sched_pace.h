/* scheduler/sched_pace.h — how many prompt tokens a step may add to the
 * running decodes, so that a step stays under a target time.
 *
 * Why. A step that decodes running sequences and also computes a long
 * prompt chunk holds every one of those decodes for the chunk's time: at
 * 1-8B parameters on a CPU a prompt token costs about as much as a whole
 * decode step, so a 256-token chunk turns one inter-token gap into seconds
 * (docs/benchmarks/cpu-decode.md). With decodes running, the planner takes
 * at most budget() prompt tokens (sched_plan_t.prefill_budget); a step with
 * no decode takes max_batch_tokens, nothing then waits on it.
 *
 * The cost model is learned from the steps themselves: base, the time of a
 * step with decodes only (an exponential average), and per_token, the time
 * a prompt token adds to it ((step time - base) / prompt tokens, averaged
 * the same way). The target is the `step_target_ms` setting, or, at 0
 * (auto), SCHED_PACE_AUTO times base: a step with prompt tokens then takes
 * at most that multiple of a decode-only step, which keeps the 99th
 * percentile of inter-token latency within about that multiple of the
 * median while prompts arrive. Until both averages exist the budget is
 * unbounded (the first prompt teaches per_token).
 *
 * Pure arithmetic on the engine thread; tests in tests/unit/test_sched_plan.c. */
#ifndef TRAM_SCHED_PACE_H
#define TRAM_SCHED_PACE_H

#include <stdint.h>

#define SCHED_PACE_AUTO 2.5 /* auto target: this many decode-only steps */
#define SCHED_PACE_ALPHA 0.2 /* weight of a new measurement in the averages */

typedef struct sched_pace {
  int64_t target_ns;  /* the setting (0: auto) */
  double base_ns;     /* decode-only step time (0: none seen yet) */
  double per_token_ns; /* time a prompt token adds (0: none seen yet) */
} sched_pace_t;

/* The effective target in ns (0 while auto has no base yet). */
int64_t sched_pace_target_ns(const sched_pace_t *p);

/* Prompt tokens a step with running decodes may compute: at least 1 (every
 * prompt progresses), at most max_tokens; max_tokens while the model is
 * not learned. */
int sched_pace_budget(const sched_pace_t *p, int max_tokens);

/* Learns from a step that ran decode rows and prompt_tokens prompt rows in
 * step_ns. */
void sched_pace_observe(sched_pace_t *p, int decode_rows, int prompt_tokens, int64_t step_ns);

#endif
