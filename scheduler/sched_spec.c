/* scheduler/sched_spec.c — speculative decoding in the engine: the n-gram
 * proposer (the draft-model one is sched_draft.c, called from here for all
 * speculating sequences at once), which running decodes speculate and with
 * how many drafts, and the verification of a
 * speculating sequence's logits rows with the cache rolled back past the
 * rejected drafts (a hybrid's recurrent state too: its slot takes the
 * state the kernels kept after the last accepted row, without recomputing:
 * sched_plan_verified).
 *
 * Verification samples row j with the request's own sampler (penalties,
 * logit bias, temperature, its counter-based random stream: one draw per
 * token that joins the output, exactly as plain decoding draws) and keeps
 * draft j when the sampled token equals it. For a proposer that puts all
 * its mass on one token (the n-gram lookup; a draft model decoding
 * greedily), this is the rejection rule of Leviathan et al. with q a point mass (accept x with probability p(x); on
 * rejection draw from p without x, renormalised), and it gives the very
 * tokens plain decoding gives for the same seed, greedy or not, as long as
 * every row's logits are bitwise those of a plain decode (the kernels are
 * batch-invariant and both attention paths agree).
 *
 * How many drafts each sequence takes (adaptive k: a measured cost per
 * draft row against the sequence's acceptance estimate, pauses, and the
 * probe out of a pause that keeps a noisy cost from turning speculation
 * off for good) is sched_spec_adapt.c. Nobody speculates while more than
 * spec.max_batch sequences run (a large batch reads the weights once for
 * many tokens already). The lead of an n > 1 request does not speculate
 * before its first token: that token forks the other sequences from its
 * logits row (sample_row), which verification does not do. */
#include "scheduler/sched_spec.h"

#include <string.h>

#include "scheduler/sched_internal.h"

int32_t sched_spec_ngram(const int32_t *tokens, int64_t len, int ngram_min, int ngram_max, int k, int32_t *out) {
  if (ngram_min < 1) ngram_min = 1;
  for (int n = ngram_max; n >= ngram_min; n--) {
    if (n >= len) continue;
    const int32_t *tail = tokens + len - n;
    /* most recent occurrence first: start positions len - n - 1 down to 0 */
    for (int64_t i = len - n - 1; i >= 0; i--) {
      if (tokens[i] != tail[0] || memcmp(tokens + i, tail, (size_t)n * sizeof *tokens) != 0) continue;
      int32_t m = 0;
      for (int64_t j = i + n; j < len && m < k; j++) out[m++] = tokens[j];
      return m;
    }
  }
  return 0;
}

static sched_eseq_t *eseq(sched_seq_t *s) { return (sched_eseq_t *)s; }

/* Drafts sequence q may take: its k, no more than its max_tokens and the
 * model length leave after the token this step decodes. */
static int32_t draft_room(const sched_engine_t *e, const sched_eseq_t *q, int32_t k) {
  const sched_req_t *r = q->req;
  int64_t room = (int64_t)e->max_len - q->s.len - 1;
  if (r->p.max_tokens > 0 && r->p.max_tokens - q->generated - 1 < room) room = r->p.max_tokens - q->generated - 1;
  return room < k ? (int32_t)(room > 0 ? room : 0) : k;
}

void sched__spec_propose(sched_engine_t *e) {
  const sched_spec_config_t *c = &e->cfg.spec;
  if (c->method == SCHED_SPEC_OFF || e->plan.running.n > c->max_batch) return;
  /* a step without drafts, now and then, times plain decoding (a draft
   * model proposes whenever it speculates: no other step would) */
  if (sched_spec_cost_plain_due(&e->spec_cost)) return;
  /* the plan's step 1 also checks the token budget; the logits rows are
   * bounded here */
  int32_t left = e->spec_rows, n = 0;
  for (sched_seq_t *s = e->plan.running.head; s && left > 0; s = s->next) {
    sched_eseq_t *q = eseq(s);
    if (s->spec != 0 || s->len - s->kv.n_tokens != 1 || !q->started) continue;
    if (s->pause && atomic_load(s->pause)) continue; /* the plan skips it: drafts would be dropped */
    if (q->req->p.no_spec) continue;                  /* the request asked for plain decoding */
    /* a prompt's last chunk of one token runs as a decode; when its token
     * forks the request's other sequences, it is sampled as any first
     * token (sample_row), not by verification, which forks nothing */
    if (sched__forks_next(q)) continue;
    int32_t k = sched_spec_adapt_k(&e->spec_cost, &q->spec, draft_room(e, q, c->k < left ? c->k : left),
                                   draft_room(e, q, 1) > 0);
    if (k <= 0) continue;
    if (c->method == SCHED_SPEC_NGRAM)
      k = sched_spec_ngram(s->tokens, s->len, c->ngram_min, c->ngram_max, k, e->spec_out[n]);
    e->spec_seqs[n] = q;
    e->spec_k[n++] = k;
    left -= k;
  }
  /* the draft model proposes for all of them at once */
  if (c->method == SCHED_SPEC_DRAFT && n > 0) sched__draft_propose(e, e->spec_seqs, e->spec_k, n, e->spec_out);
  for (int32_t i = 0; i < n; i++) {
    sched_seq_t *s = &e->spec_seqs[i]->s;
    for (int32_t j = 0; j < e->spec_k[i]; j++) sched_seq_push(s, e->spec_out[i][j]);
    s->spec = e->spec_k[i];
  }
}

void sched__spec_timed(sched_engine_t *e, int64_t t_ns) {
  int32_t drafts = 0;
  for (int32_t i = 0; i < e->plan.n_items; i++) {
    const sched_item_t *it = &e->plan.items[i];
    if (it->q_len != 1 + it->seq->spec) return; /* a prefill chunk: not a clean sample */
    drafts += it->seq->spec;
  }
  if (drafts > 0 && e->draft) { /* a draft costs the draft model's time too */
    int clean;
    const int64_t t_draft = sched__draft_last_ns(e, &clean);
    if (!clean) return; /* it caught up on a prefill */
    t_ns += t_draft;
  }
  sched_spec_cost_timed(&e->spec_cost, t_ns, drafts);
}

void sched__spec_unplanned(sched_engine_t *e) {
  for (sched_seq_t *s = e->plan.running.head; s; s = s->next)
    if (s->spec > 0 && s->planned != e->plan.step) sched_seq_drop_drafts(s);
  for (sched_seq_t *s = e->plan.waiting.head; s; s = s->next) sched_seq_drop_drafts(s);
  sched__draft_sync(e);
}

void sched__spec_verify(sched_engine_t *e, sched_eseq_t *q, const float *rows) {
  sched_seq_t *s = &q->s;
  const int32_t spec = s->spec;
  int32_t drafts[SCHED_SPEC_MAX_K];
  memcpy(drafts, s->tokens + s->len - spec, (size_t)spec * sizeof *drafts);
  const int64_t start = s->len - spec - 1; /* the position this step decoded */
  sched_seq_drop_drafts(s);
  int32_t accepted = 0;
  for (int32_t j = 0; j <= spec; j++) {
    samp_result_t res;
    const int rc = sched__sample(e, q, rows + (size_t)j * (size_t)e->n_vocab, &res); /* masks apply */
    if (rc != 0) {
      sched__fail_seq(e, q, sched__sample_error(q, rc));
      break;
    }
    const int kept = j < spec && res.token == drafts[j];
    accepted += kept;
    if (sched__accept_token(e, q, &res)) break; /* ended: its blocks are freed */
    if (!kept) {
      /* K/V kept: the decoded token and the accepted drafts */
      sched_plan_rollback(&e->plan, s, start + 1 + j);
      break;
    }
  }
  if (!q->finished) sched_plan_verified(&e->plan, s, start, spec, accepted); /* a hybrid's state */
  if (!q->finished) sched__draft_rollback(e, q, start + 1 + accepted);
  e->spec_drafts++;
  e->spec_draft_tokens += (uint64_t)spec;
  e->spec_accepted += (uint64_t)accepted;
  for (int32_t i = 0; i < accepted; i++) e->spec_per_pos[i]++;
  sched_spec_adapt_verified(&q->spec, accepted, spec);
}
