/* scheduler/sched_pace.c — the step-time budget for prompt tokens (see
 * sched_pace.h). */
#include "scheduler/sched_pace.h"

static double avg(double old, double v) { return old > 0 ? old + SCHED_PACE_ALPHA * (v - old) : v; }

int64_t sched_pace_target_ns(const sched_pace_t *p) {
  return p->target_ns > 0 ? p->target_ns : (int64_t)(SCHED_PACE_AUTO * p->base_ns);
}

int sched_pace_budget(const sched_pace_t *p, int max_tokens) {
  const int64_t target = sched_pace_target_ns(p);
  if (p->base_ns <= 0 || p->per_token_ns <= 0 || target <= 0) return max_tokens;
  const double room = ((double)target - p->base_ns) / p->per_token_ns;
  if (room < 1) return 1;
  return room >= max_tokens ? max_tokens : (int)room;
}

void sched_pace_observe(sched_pace_t *p, int decode_rows, int prompt_tokens, int64_t step_ns) {
  if (step_ns <= 0) return;
  if (prompt_tokens == 0) {
    if (decode_rows > 0) p->base_ns = avg(p->base_ns, (double)step_ns);
    return;
  }
  if (p->base_ns <= 0) return; /* no decode-only step yet to subtract */
  double extra = ((double)step_ns - p->base_ns) / prompt_tokens;
  if (extra < 0) extra = 0;
  p->per_token_ns = avg(p->per_token_ns, extra);
}
