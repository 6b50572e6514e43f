/* scheduler/sched_think.c — a thinking model's sequences in the engine
 * (sched_req_params_t.reasoning): each follows its output with the
 * reasoning splitter (text/reasoning.h, fed the detokenized pieces), so
 * that
 *   - the grammar (structured output, a forced tool call) constrains the
 *     answer only: it sees no token sampled inside the reasoning, nor the
 *     one that ends it, as vLLM's reasoning parsers gate theirs; while the
 *     output has not shown whether it thinks, the grammar's tokens and the
 *     single token that opens the reasoning are allowed;
 *   - a thinking budget ends the reasoning: once a sequence has sampled
 *     think_budget tokens inside it, the tokens that close it are forced,
 *     one a step (the row masked to that token: its logprob is that of the
 *     masked row, as a grammar's), and the model goes on with its answer;
 *   - think_lead (gpt_oss with a forced tool_choice): tokens forced first,
 *     one a step as the close's, before anything else is sampled;
 *   - gpt_oss with grammar_in_calls (a named tool_choice): the grammar also
 *     constrains a tool call's arguments (REASON_CALL), and the server's
 *     close text opens that call (srv_completions.c): forced once the
 *     budget is spent, and its rest forced once the model ends its
 *     reasoning itself (its first token, <|end|>), whatever the budget: the call's recipient is always the named one.
 * All on the engine thread; the state is the sequence's. */
#include <math.h>
#include <string.h>

#include "scheduler/sched_internal.h"

void sched__think_init(sched_eseq_t *q) {
  q->think = q->req->p.reasoning;
  q->think_tokens = 0;
  q->think_force = -1;
  q->think_led = 0;
}

static bool thinking_model(const sched_eseq_t *q) { return q->req->p.reasoning.fmt != REASON_NONE; }

int32_t sched__think_forced(sched_eseq_t *q) {
  const sched_req_t *r = q->req;
  if (thinking_model(q) && q->think_led < r->p.n_think_lead) return r->think_lead[q->think_led];
  if (!thinking_model(q) || q->think_force == -2 || r->p.n_think_close <= 0) return -1;
  const reason_phase_t ph = reason_split_phase(&q->think);
  if (q->think_force == -1) {
    if (r->p.think_budget < 0 || ph != REASON_THINK || q->think_tokens < r->p.think_budget) return -1;
    q->think_force = 0; /* the budget is spent */
  } else if (ph == REASON_ANSWER) { /* the close tag is out (its trailing whitespace is the model's) */
    q->think_force = -2;
    return -1;
  }
  return r->think_close[q->think_force];
}

int sched__think_grammar(const sched_eseq_t *q) {
  if (!q->gm) return SCHED_THINK_FREE;
  if (!thinking_model(q)) return SCHED_THINK_GRAMMAR;
  switch (reason_split_phase(&q->think)) {
  case REASON_ANSWER: return SCHED_THINK_GRAMMAR;
  case REASON_CALL: return q->req->p.grammar_in_calls ? SCHED_THINK_GRAMMAR : SCHED_THINK_FREE;
  case REASON_START: return q->think.fmt == REASON_QWEN3 ? SCHED_THINK_GRAMMAR_OPEN : SCHED_THINK_FREE;
  default: return SCHED_THINK_FREE;
  }
}

void sched__think_force_row(const sched_engine_t *e, int32_t token, const float *row, float *out) {
  const float keep = isfinite(row[token]) ? row[token] : 0.0f;
  for (int32_t v = 0; v < e->n_vocab; v++) out[v] = -INFINITY;
  out[token] = keep;
}

void sched__think_accept(sched_eseq_t *q, int32_t token, const char *piece, size_t n) {
  if (!thinking_model(q)) return;
  if (q->think_led < q->req->p.n_think_lead) {
    q->think_led++; /* a lead token: not the reasoning's */
  } else {
    const sched_req_t *r = q->req;
    const bool thinking = reason_split_phase(&q->think) == REASON_THINK;
    if (thinking) q->think_tokens++;
    if (q->think_force >= 0 && ++q->think_force >= r->p.n_think_close) q->think_force = -2;
    else if (q->think_force == -1 && thinking && r->p.grammar_in_calls && r->p.n_think_close > 1 &&
             token == r->think_close[0])
      q->think_force = 1; /* a named harmony call: the model ended its reasoning itself (<|end|>, the one
                           * tag that ends a harmony body and goes on): the rest of the call's header is
                           * forced, so no other recipient can be written */
  }
  if (n) reason_split_feed(&q->think, piece, n, NULL, NULL);
}
