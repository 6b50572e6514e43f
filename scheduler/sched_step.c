/* scheduler/sched_step.c — one engine step: the inbox, cancellations, the
 * plan (sched_plan.c), the batch and the forward, then per logits row the
 * sampling, n > 1 forks, detokenizing, stop conditions and events. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "kernels/kern_sample.h"
#include "scheduler/sched_internal.h"

static sched_eseq_t *eseq(sched_seq_t *s) { return (sched_eseq_t *)s; }

/* --- events ------------------------------------------------------------------- */

/* An event of sequence q with its text (moved in) and, when the request
 * asked for them, the sampled token's logprobs. */
static sched_event_t make_event(sched_engine_t *e, sched_eseq_t *q, sched_event_kind_t kind, const samp_result_t *res,
                                char *text, size_t text_len) {
  sched_req_t *r = q->req;
  sched_event_t ev = {
      .kind = kind,
      .req = r,
      .user = r->user,
      .index = q->index,
      .token = res ? res->token : -1,
      .text = text_len ? text : NULL,
      .text_len = text_len,
      .time = clock_now_ns(),
      .step = e->step_no,
      .stop_token = -1,
      .stop_id = -1,
  };
  if (!text_len) free(text);
  if (res && (r->p.samp.logprobs || r->p.samp.top_logprobs > 0)) {
    ev.logprob = res->logprob;
    ev.n_top = res->n_top;
    if (res->n_top > 0) {
      ev.top = xmalloc((size_t)res->n_top * sizeof *ev.top);
      memcpy(ev.top, res->top, (size_t)res->n_top * sizeof *ev.top);
    }
  }
  return ev;
}

/* Counts a request out of the waiting ones (for max_waiting), once. */
static void mark_admitted(sched_engine_t *e, sched_req_t *r) {
  if (r->admitted) return;
  r->admitted = 1;
  pthread_mutex_lock(&e->mu);
  e->n_waiting_reqs--;
  pthread_mutex_unlock(&e->mu);
}

/* Ends sequence q: frees its blocks, completes ev (FINISHED or ERROR) and
 * posts it, final when it was the request's last sequence. */
static void finish_seq(sched_engine_t *e, sched_eseq_t *q, sched_event_t *ev, sched_finish_t finish) {
  sched_req_t *r = q->req;
  sched_plan_remove(&e->plan, &q->s);
  sched__draft_forget(e, q);
  q->finished = 1;
  r->n_live--;
  ev->kind = finish == SCHED_FINISH_ERROR ? SCHED_EV_ERROR : SCHED_EV_FINISHED;
  ev->finish = finish;
  ev->completion_tokens = q->generated;
  if (r->n_live == 0) {
    mark_admitted(e, r);
    r->times.finished = ev->time;
    ev->final = 1;
    if (finish == SCHED_FINISH_STOP && r->embedding) { /* pooling: the vector goes with the final event */
      ev->embedding = r->embedding;
      ev->n_embedding = e->dim;
      r->embedding = NULL;
    }
    ev->usage = (sched_usage_t){r->n_prompt, r->completion_tokens, r->cached_tokens};
    ev->times = r->times;
    e->n_finished++;
  }
  sched__post(e, ev);
}

/* What q still holds back (an undecided stop-string prefix, an incomplete
 * UTF-8 character), released because q ends for another reason. */
static void flush_text(sched_engine_t *e, sched_eseq_t *q, buf_t *text) {
  if (!q->started) return;
  const int n = tok_stream_flush(&q->detok, e->piece, e->piece_cap);
  if (n > 0) sched_stop_push(&q->stop, &q->req->stops, e->piece, (size_t)n, text);
  sched_stop_flush(&q->stop, text);
}

void sched__finish_req(sched_engine_t *e, sched_req_t *r, sched_finish_t finish, const char *error) {
  for (int32_t i = 0; i < r->p.n; i++) {
    sched_eseq_t *q = &r->seqs[i];
    if (q->finished) continue;
    buf_t text = {0};
    flush_text(e, q, &text);
    sched_event_t ev = make_event(e, q, SCHED_EV_FINISHED, NULL, text.p, text.len);
    if (error) {
      ev.error = xstrdup(error);
    }
    finish_seq(e, q, &ev, finish);
  }
}

/* --- tokens ------------------------------------------------------------------- */

static int is_stop_id(const sched_req_t *r, int32_t token) {
  for (int32_t i = 0; i < r->p.n_stop_ids; i++)
    if (r->stop_ids[i] == token) return 1;
  return 0;
}

/* Appends the sampled token to q, detokenizes it, checks the stop
 * conditions and posts its TOKEN or FINISHED event. Returns 1 when q ended. */
int sched__accept_token(sched_engine_t *e, sched_eseq_t *q, const samp_result_t *res) {
  sched_req_t *r = q->req;
  const int32_t t = res->token;
  const int gate = sched__think_grammar(q); /* whether the grammar sees t: not inside the reasoning */
  const int grc =
      gate && !(gate == SCHED_THINK_GRAMMAR_OPEN && t == r->p.think_open) ? gram_matcher_accept_token(q->gm, t) : 0;
  if (grc != 0) { /* a refusal: never (the mask allowed it); else a bound of the step, the request's grammar's */
    sched__fail_seq(e, q, grc == GRAM_EREJECT ? "internal error: the grammar refused a token its mask allowed"
                                              : sched__sample_error(q, grc));
    return 1;
  }
  samp_state_accept(q->samp, t);
  sched_seq_push(&q->s, t);
  q->generated++;
  r->completion_tokens++;
  e->generated++;
  if (!r->times.first_token) r->times.first_token = clock_now_ns();

  sched_finish_t finish = SCHED_FINISH_NONE;
  int32_t stop_token = -1, stop_idx = -1;
  buf_t text = {0}; /* the event's text: its malloc'd bytes go to the event */
  const int stop_id = is_stop_id(r, t);
  if ((!r->p.ignore_eos && tok_is_eog(e->tok, t)) || stop_id) {
    finish = SCHED_FINISH_STOP; /* the stop token's own text is not output */
    stop_token = t;
    sched__think_accept(q, t, NULL, 0);
  } else {
    const int n = tok_stream_push(&q->detok, t, e->piece, e->piece_cap);
    sched__think_accept(q, t, e->piece, n > 0 ? (size_t)n : 0);
    if (n > 0 && q->generated < r->p.min_tokens) { /* stop strings match only from min_tokens on */
      if (buf_put(&text, e->piece, (size_t)n) != 0) abort();
    }
    else if (n > 0)
      stop_idx = sched_stop_push(&q->stop, &r->stops, e->piece, (size_t)n, &text);
    if (stop_idx >= 0) finish = SCHED_FINISH_STOP;
    else if (sched__think_grammar(q) == SCHED_THINK_GRAMMAR && gram_matcher_is_ended(q->gm))
      finish = SCHED_FINISH_STOP; /* the grammar is complete */
  }
  if (finish == SCHED_FINISH_NONE &&
      ((r->p.max_tokens > 0 && q->generated >= r->p.max_tokens) || q->s.len >= e->max_len))
    finish = SCHED_FINISH_LENGTH;
  if (finish != SCHED_FINISH_NONE && stop_idx < 0) flush_text(e, q, &text);

  sched_event_t ev = make_event(e, q, SCHED_EV_TOKEN, res, text.p, text.len);
  if (finish == SCHED_FINISH_NONE) {
    sched__post(e, &ev);
    return 0;
  }
  ev.stop_token = stop_token;
  ev.stop_id = stop_id ? t : -1;
  ev.stop_str = stop_idx >= 0 ? r->stops.str[stop_idx] : NULL;
  finish_seq(e, q, &ev, finish);
  return 1;
}

/* Samples q's next token from row; with a grammar (not inside a
 * reasoning), from a copy of row where the tokens it refuses are -inf;
 * before q has min_tokens tokens, where its stop tokens (end-of-generation
 * unless ignore_eos, and stop_ids) are -inf too; when its thinking budget is
 * spent, from a copy masked to the close tag's next token (sched_think.c). */
int sched__sample(sched_engine_t *e, sched_eseq_t *q, const float *row, samp_result_t *res) {
  const sched_req_t *r = q->req;
  const int32_t forced = sched__think_forced(q); /* a spent thinking budget: the close tag's next token */
  if (forced >= 0) {
    sched__think_force_row(e, forced, row, e->masked);
    return samp_sample(q->samp, e->ws, e->masked, res);
  }
  const int min = q->generated < r->p.min_tokens, gate = sched__think_grammar(q);
  const float *raw = row;
  if (min || gate) {
    memcpy(e->masked, row, (size_t)e->n_vocab * sizeof *row);
    row = e->masked;
  }
  if (gate) {
    const int rc = sched__gram_mask(e, q, e->masked);
    if (rc != 0) return rc;
    if (gate == SCHED_THINK_GRAMMAR_OPEN && r->p.think_open >= 0) e->masked[r->p.think_open] = raw[r->p.think_open];
  }
  if (min) {
    const int32_t *eog;
    const int32_t n_eog = r->p.ignore_eos ? 0 : tok_eog_ids(e->tok, &eog);
    for (int32_t i = 0; i < n_eog; i++) e->masked[eog[i]] = -INFINITY;
    for (int32_t i = 0; i < r->p.n_stop_ids; i++) e->masked[r->stop_ids[i]] = -INFINITY;
  }
  return samp_sample(q->samp, e->ws, row, res);
}

void sched__fail_seq(sched_engine_t *e, sched_eseq_t *q, const char *msg) {
  log_error("engine: request %llu, sequence %d: %s", (unsigned long long)q->req->id, q->index, msg);
  sched_event_t ev = make_event(e, q, SCHED_EV_ERROR, NULL, NULL, 0);
  ev.error = xstrdup(msg);
  finish_seq(e, q, &ev, SCHED_FINISH_ERROR);
}

/* The lead's prompt is computed: sequences 1..n-1 sample their first token
 * from the same logits row and fork from the lead's blocks. */
static void fork_children(sched_engine_t *e, sched_eseq_t *lead, const float *row) {
  sched_req_t *r = lead->req;
  r->forked = 1;
  sched_plan_release_places(&e->plan, &lead->s);
  for (int32_t i = 1; i < r->p.n; i++) {
    sched_eseq_t *q = &r->seqs[i];
    if (q->finished) continue;
    sched_seq_init(&q->s, r->prompt, r->n_prompt, 1);
    q->started = 1;
    samp_result_t res;
    const int rc = sched__sample(e, q, row, &res);
    if (rc != 0) {
      sched__fail_seq(e, q, sched__sample_error(q, rc));
      continue;
    }
    if (sched__accept_token(e, q, &res)) continue;
    int32_t src = -1, dst = -1;
    if (sched_plan_fork(&e->plan, &lead->s, &q->s, &src, &dst) == 1) kv_cache_copy_block(e->cache, dst, src);
  }
}

/* prompt_logprobs: posts the PROMPT event of the prompt token at pos from
 * the row that predicts it. */
static void prompt_row(sched_engine_t *e, sched_eseq_t *q, int32_t pos, const float *row) {
  const int32_t t = q->s.tokens[pos];
  samp_result_t res = {.token = t, .n_top = q->req->p.prompt_top_logprobs};
  samp_logprobs(row, e->n_vocab, t, res.n_top, &res.logprob, res.top);
  int32_t above = 0;
  for (int32_t v = 0; v < e->n_vocab; v++) above += row[v] > row[t];
  sched_event_t ev = make_event(e, q, SCHED_EV_PROMPT, &res, NULL, 0);
  ev.logprob = res.logprob; /* make_event copies them only for the output's logprobs */
  ev.n_top = res.n_top;
  if (res.n_top > 0 && !ev.top) {
    ev.top = xmalloc((size_t)res.n_top * sizeof *ev.top);
    memcpy(ev.top, res.top, (size_t)res.n_top * sizeof *ev.top);
  }
  ev.position = pos;
  ev.rank = above + 1;
  q->prompt_lp_next = pos + 1;
  sched__post(e, &ev);
}

static void sample_row(sched_engine_t *e, sched_eseq_t *q, const float *row) {
  sched_req_t *r = q->req;
  if (r->p.score_only) { /* prompt scoring: nothing is sampled */
    sched__finish_req(e, r, SCHED_FINISH_LENGTH, NULL);
    return;
  }
  const int fork = sched__forks_next(q);
  samp_result_t res;
  const int rc = sched__sample(e, q, row, &res);
  if (rc != 0) {
    if (fork) /* the other sequences have not started: they end too */
      sched__finish_req(e, r, SCHED_FINISH_ERROR, sched__sample_error(q, rc));
    else
      sched__fail_seq(e, q, sched__sample_error(q, rc));
    return;
  }
  if (fork) fork_children(e, q, row);
  sched__accept_token(e, q, &res);
}

/* The token the device picked for q's row (its draw taken from q's stream),
 * with the logprobs its row asked for. */
static void take_device_token(sched_engine_t *e, sched_eseq_t *q, const kern_sample_row_t *row,
                              const kern_sample_out_t *out) {
  if (out->token < 0) {
    sched__fail_seq(e, q, "the model produced no finite logit");
    return;
  }
  samp_state_take_draw(q->samp);
  samp_result_t res = {.token = out->token};
  if (row->logprobs) {
    res.logprob = out->logprob;
    res.n_top = row->n_top;
    for (int32_t i = 0; i < row->n_top; i++) res.top[i] = (samp_logprob_t){out->top_id[i], out->top_logprob[i]};
  }
  sched__accept_token(e, q, &res);
}

/* Which logit rows pick their token on the device (e->sample_rows): those
 * whose request qualifies (samp_state_device_row), but not the first row
 * of an n > 1 request, whose children sample the same logits. Returns how
 * many. */
static int plan_device_rows(sched_engine_t *e, int n_logits) {
  int n = 0;
  e->n_sample_ops = 0;
  for (int k = 0; k < n_logits; k++) {
    sched_eseq_t *q = e->logit_seqs[k];
    const int fork = sched__forks_next(q);
    /* on the host: prompt rows (prompt_logprobs), rows still masked by
     * min_tokens or by a grammar, prompt scoring, a reasoning's forced close */
    const int host = e->logit_pos[k] >= 0 || q->generated < q->req->p.min_tokens || q->gm || q->req->p.score_only ||
                     sched__think_forced(q) >= 0 ||
                     q->s.spec > 0; /* a speculating decode is verified on the host */
    kern_sample_row_t *row = &e->sample_rows[k];
    if (!fork && !host && samp_state_device_row(q->samp, row, e->sample_ops, e->n_sample_ops, e->sample_ops_cap)) {
      e->n_sample_ops = row->op_begin + row->n_bias + row->n_count;
      n++;
    } else {
      memset(row, 0, sizeof *row);
    }
  }
  return n;
}

/* --- the step ----------------------------------------------------------------- */

/* Moves submitted requests into the waiting list; marks everything
 * cancelled when an abort was asked. */
static void take_inbox(sched_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  sched_req_t *list = e->inbox_head;
  e->inbox_head = e->inbox_tail = NULL;
  e->inbox_taken = e->n_inbox; /* counted out at the end of the step, with the snapshot */
  const int abort_all = e->aborting;
  if (!e->stopping) e->aborting = 0;
  e->wake = 0;
  pthread_mutex_unlock(&e->mu);
  for (sched_req_t *r = list, *next; r; r = next) {
    next = r->inbox_next;
    sched_plan_add(&e->plan, &r->seqs[0].s);
  }
  if (!abort_all) return;
  for (sched_seq_t *s = e->plan.running.head; s; s = s->next) atomic_store(&eseq(s)->req->cancelled, 1);
  for (sched_seq_t *s = e->plan.waiting.head; s; s = s->next) atomic_store(&eseq(s)->req->cancelled, 1);
}

static sched_req_t *find_cancelled(const sched_list_t *l) {
  for (sched_seq_t *s = l->head; s; s = s->next)
    if (atomic_load(&eseq(s)->req->cancelled)) return eseq(s)->req;
  return NULL;
}

static void reap_cancelled(sched_engine_t *e) {
  sched_req_t *r;
  while ((r = find_cancelled(&e->plan.running)) || (r = find_cancelled(&e->plan.waiting)))
    sched__finish_req(e, r, SCHED_FINISH_ABORT, NULL);
}

/* Fills the batch from the plan; returns the number of rows that need
 * logits. */
static int build_batch(sched_engine_t *e, int64_t now, int32_t *n_rows, uint64_t *prompt_tokens, int32_t *n_hidden) {
  int32_t row = 0, n_logits = 0, n_kept = 0;
  *n_hidden = 0;
  for (int32_t i = 0; i < e->plan.n_items; i++) {
    const sched_item_t *it = &e->plan.items[i];
    sched_seq_t *s = it->seq;
    sched_req_t *r = eseq(s)->req;
    if (!r->times.first_scheduled) {
      r->times.first_scheduled = now;
      r->times.first_step = e->step_no;
      r->cached_tokens = s->cached_tokens;
      mark_admitted(e, r);
    }
    e->seqs[i] = &s->kv;
    e->q_lens[i] = it->q_len;
    if (e->state_slots) e->state_slots[i] = s->state_slot;
    if (e->state_keep) { /* a hybrid verifying drafts keeps its state after each row (sched_plan_verified) */
      s->state_kept = s->spec > 0 ? n_kept : -1;
      e->state_keep[i] = s->spec > 0 ? kv_state_kept(e->state, n_kept) : -1;
      n_kept += s->spec;
    }
    const int64_t start = s->kv.n_tokens;
    for (int32_t j = 0; j < it->q_len; j++, row++) {
      e->tokens[row] = s->tokens[start + j];
      e->positions[row] = (int32_t)(start + j);
    }
    if (start < s->n_prompt) *prompt_tokens += (uint64_t)((start + it->q_len < s->n_prompt ? start + it->q_len : s->n_prompt) - start);
    sched_eseq_t *q = eseq(s);
    if (r->p.prompt_logprobs && q->index == 0) /* rows that predict a prompt token not yet posted */
      for (int32_t j = 0; j < it->q_len; j++) {
        const int64_t next = start + j + 1;
        if (next < s->n_prompt && next >= q->prompt_lp_next) {
          e->logit_rows[n_logits] = row - it->q_len + j;
          e->logit_pos[n_logits] = (int32_t)next;
          e->logit_seqs[n_logits++] = q;
        }
      }
    if (r->p.pooling) { /* an embedding: hidden states, no logits */
      *n_hidden = sched__pool_rows(e, q, row - it->q_len, start, it->q_len, *n_hidden);
      continue;
    }
    if (it->logits) /* the row for its next token, and one for each speculative draft */
      for (int32_t j = s->spec; j >= 0; j--) {
        e->logit_rows[n_logits] = row - 1 - j;
        e->logit_pos[n_logits] = -1;
        e->logit_seqs[n_logits++] = q;
      }
  }
  *n_rows = row;
  return n_logits;
}

/* Ends every planned sequence's request with an error (a failed forward:
 * a bug, logged, never the request's fault). */
static void fail_step(sched_engine_t *e, int rc) {
  log_error("engine: the forward of step %llu failed (%d): failing its %d sequences' requests",
            (unsigned long long)e->step_no, rc, e->plan.n_items);
  for (int32_t i = 0; i < e->plan.n_items; i++) {
    sched_req_t *r = eseq(e->plan.items[i].seq)->req;
    if (r->n_live > 0) sched__finish_req(e, r, SCHED_FINISH_ERROR, "internal error: the model forward failed");
  }
}

/* The step_tokens_log2 bucket of a step of t tokens (see sched_stats_t). */
static int log2_bucket(uint64_t t) {
  int k = 0;
  while (k < SCHED_STEP_TOKEN_BUCKETS - 1 && t > ((uint64_t)1 << k)) k++;
  return k;
}

int sched__step(sched_engine_t *e) {
  const int64_t t0 = clock_now_ns();
  take_inbox(e);
  reap_cancelled(e);
  sched__spec_propose(e);
  e->plan.prefill_budget = sched_pace_budget(&e->pace, e->cfg.max_batch_tokens);
  const int n = sched_plan_step(&e->plan);
  sched__spec_unplanned(e);
  sched__snap_plan(e);
  int64_t t_fwd = 0, t1 = t0, t2 = t0;
  uint64_t prompt_tokens = 0;
  const uint64_t generated0 = e->generated;
  if (n > 0) {
    e->step_no++;
    int32_t n_rows = 0, n_hidden = 0;
    const int n_logits = build_batch(e, t0, &n_rows, &prompt_tokens, &n_hidden);
    int rc = attn_meta_build(&e->meta, e->cache->alloc, e->seqs, e->q_lens, n);
    const int on_device = rc == 0 && e->sample_rows && plan_device_rows(e, n_logits) > 0;
    if (rc == 0) {
      const model_batch_t b = {
          .n_tokens = n_rows,
          .tokens = e->tokens,
          .positions = e->positions,
          .attn = &e->meta.batch,
          .n_logits = n_logits,
          .logit_rows = e->logit_rows,
          .sample = on_device ? e->sample_rows : NULL,
          .sample_ops = e->sample_ops,
          .n_sample_ops = on_device ? e->n_sample_ops : 0,
          .sampled = e->sampled,
          .state_slots = e->state_slots,
          .state_keep = e->state_keep,
          .n_hidden = n_hidden,
          .hidden_rows = e->hidden_rows,
          .hidden = e->hidden,
      };
      t1 = clock_now_ns();
      rc = model_forward(e->runner, &b, e->logits);
      t2 = clock_now_ns();
      t_fwd = t2 - t1;
      if (rc == 0) sched__spec_timed(e, t_fwd);
    }
    if (rc != 0) {
      fail_step(e, rc);
    } else {
      sched_plan_commit(&e->plan);
      sched__pool_take(e, n_hidden);
      for (int k = 0; k < n_logits; k++) {
        sched_eseq_t *q = e->logit_seqs[k];
        const float *row = e->logits + (size_t)k * (size_t)e->n_vocab;
        if (e->logit_pos[k] >= 0) {
          prompt_row(e, q, e->logit_pos[k], row);
        } else if (q->s.spec > 0) {
          const int32_t spec = q->s.spec;
          sched__spec_verify(e, q, row);
          k += spec; /* its rows are consecutive */
        } else if (on_device && e->sample_rows[k].on_device) {
          take_device_token(e, q, &e->sample_rows[k], &e->sampled[k]);
        } else {
          sample_row(e, q, row);
        }
      }
    }
  }
  const int64_t t_end = clock_now_ns();
  if (n > 0) sched_pace_observe(&e->pace, e->plan.n_tokens - (int)prompt_tokens, (int)prompt_tokens, t_end - t0);

  attn_stats_t as;
  attn_get_stats(model_runner_attn(e->runner), &as);
  const kv_alloc_t *a = e->cache->alloc;
  pthread_mutex_lock(&e->mu);
  pthread_mutex_lock(&e->st_mu);
  e->n_inbox -= e->inbox_taken; /* now counted in the snapshot */
  e->inbox_taken = 0;
  sched_stats_t *st = &e->stats;
  st->running = e->plan.running.n;
  st->waiting = e->plan.waiting.n; /* sched_get_stats adds the inbox */
  st->paused = e->plan.n_paused;
  st->kv_blocks_used = kv_alloc_used_blocks(a);
  st->kv_blocks_free = kv_alloc_free_blocks(a);
  if (e->state) {
    st->state_slots_used = kv_state_used(e->state);
    st->state_snaps_used = e->state->n_snaps_used;
    st->state_snaps_taken = e->state->snaps_taken;
    st->state_snaps_restored = e->state->snaps_restored;
    st->state_snaps_dropped = e->state->snaps_dropped;
  }
  st->kv_blocks_cached = kv_alloc_published_blocks(a);
  sched__draft_blocks(e, &st->draft_kv_blocks_total, &st->draft_kv_blocks_used);
  st->preemptions = e->plan.stats.preemptions;
  st->generated_tokens = e->generated;
  st->requests_finished = e->n_finished;
  st->prefix_query_tokens = e->plan.stats.prefix_query_tokens;
  st->prefix_hit_tokens = e->plan.stats.prefix_hit_tokens;
  st->prefix_query_blocks = e->plan.stats.prefix_query_blocks;
  st->prefix_hit_blocks = e->plan.stats.prefix_hit_blocks;
  st->spec_drafts = e->spec_drafts;
  st->spec_draft_tokens = e->spec_draft_tokens;
  st->spec_accepted_tokens = e->spec_accepted;
  memcpy(st->spec_accepted_per_pos, e->spec_per_pos, sizeof e->spec_per_pos);
  st->decode_steps = as.decode_steps;
  st->step_target_ns = sched_pace_target_ns(&e->pace);
  st->prefill_budget = sched_pace_budget(&e->pace, e->cfg.max_batch_tokens);
  st->memory_read_gbps = e->read_gbps;
  st->varlen_steps = as.varlen_steps;
  if (n > 0) {
    st->steps = e->step_no;
    st->step_tokens += (uint64_t)e->plan.n_tokens;
    st->step_seqs += (uint64_t)n;
    st->prompt_tokens += prompt_tokens;
    st->step_tokens_log2[log2_bucket(prompt_tokens + (e->generated - generated0))]++;
    st->last_step_tokens = e->plan.n_tokens;
    st->last_step_seqs = n;
    st->last_step_ns = t_end - t0;
    st->last_forward_ns = t_fwd;
    if (t_fwd > 0) st->weight_gbps = e->weight_bytes / (double)t_fwd; /* bytes per ns = GB/s */
    st->busy_ns += (uint64_t)(t_end - t0);
    st->forward_ns += (uint64_t)t_fwd;
    st->plan_ns += (uint64_t)(t1 - t0);
    st->output_ns += (uint64_t)(t_end - t2);
    st->last_progress = t_end;
  }
  pthread_mutex_unlock(&e->st_mu);
  pthread_mutex_unlock(&e->mu);
  const int posted = e->n_step_ev > 0;
  sched__snap_step(e, n > 0);
  sched__publish(e);
  const kv_observer_t *o = &e->cfg.kv_observer;
  if (o->flush) o->flush(o->arg); /* the step's prefix-cache changes as one batch */
  return n > 0 || posted;
}
