/* scheduler/sched_step.c — one engine step: the inbox, cancellations, the
 * plan (sched_plan.c), the batch and the forward, then per logits row the
 * sampling, n > 1 forks, detokenizing, stop conditions and events. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/clock.h"
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
      ev.top = malloc((size_t)res->n_top * sizeof *ev.top);
      if (!ev.top) abort();
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
  q->finished = 1;
  r->n_live--;
  ev->kind = finish == SCHED_FINISH_ERROR ? SCHED_EV_ERROR : SCHED_EV_FINISHED;
  ev->finish = finish;
  ev->completion_tokens = q->generated;
  if (r->n_live == 0) {
    mark_admitted(e, r);
    r->times.finished = ev->time;
    ev->final = 1;
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
      ev.error = strdup(error);
      if (!ev.error) abort();
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
  } else {
    const int n = tok_stream_push(&q->detok, t, e->piece, e->piece_cap);
    if (n > 0) stop_idx = sched_stop_push(&q->stop, &r->stops, e->piece, (size_t)n, &text);
    if (stop_idx >= 0) finish = SCHED_FINISH_STOP;
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

void sched__fail_seq(sched_engine_t *e, sched_eseq_t *q, const char *msg) {
  log_error("engine: request %llu, sequence %d: %s", (unsigned long long)q->req->id, q->index, msg);
  sched_event_t ev = make_event(e, q, SCHED_EV_ERROR, NULL, NULL, 0);
  ev.error = strdup(msg);
  if (!ev.error) abort();
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
    if (samp_sample(q->samp, e->ws, row, &res) != 0) {
      sched__fail_seq(e, q, "the model produced no finite logit");
      continue;
    }
    if (sched__accept_token(e, q, &res)) continue;
    int32_t src = -1, dst = -1;
    if (sched_plan_fork(&e->plan, &lead->s, &q->s, &src, &dst) == 1) kv_cache_copy_block(e->cache, dst, src);
  }
}

static void sample_row(sched_engine_t *e, sched_eseq_t *q, const float *row) {
  sched_req_t *r = q->req;
  const int fork = q->index == 0 && r->p.n > 1 && !r->forked;
  samp_result_t res;
  if (samp_sample(q->samp, e->ws, row, &res) != 0) {
    if (fork) /* the other sequences have not started: they end too */
      sched__finish_req(e, r, SCHED_FINISH_ERROR, "the model produced no finite logit");
    else
      sched__fail_seq(e, q, "the model produced no finite logit");
    return;
  }
  if (fork) fork_children(e, q, row);
  sched__accept_token(e, q, &res);
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
static int build_batch(sched_engine_t *e, int64_t now, int32_t *n_rows, uint64_t *prompt_tokens) {
  int32_t row = 0, n_logits = 0;
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
    const int64_t start = s->kv.n_tokens;
    for (int32_t j = 0; j < it->q_len; j++, row++) {
      e->tokens[row] = s->tokens[start + j];
      e->positions[row] = (int32_t)(start + j);
    }
    if (start < s->n_prompt) *prompt_tokens += (uint64_t)((start + it->q_len < s->n_prompt ? start + it->q_len : s->n_prompt) - start);
    if (it->logits) /* a speculating decode: a row for its token and each draft */
      for (int32_t j = s->spec; j >= 0; j--) {
        e->logit_rows[n_logits] = row - 1 - j;
        e->logit_seqs[n_logits++] = eseq(s);
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
  const int n = sched_plan_step(&e->plan);
  sched__spec_unplanned(e);
  sched__snap_plan(e);
  int64_t t_fwd = 0, t1 = t0, t2 = t0;
  uint64_t prompt_tokens = 0;
  const uint64_t generated0 = e->generated;
  if (n > 0) {
    e->step_no++;
    int32_t n_rows = 0;
    const int n_logits = build_batch(e, t0, &n_rows, &prompt_tokens);
    int rc = attn_meta_build(&e->meta, e->cache->alloc, e->seqs, e->q_lens, n);
    if (rc == 0) {
      const model_batch_t b = {
          .n_tokens = n_rows,
          .tokens = e->tokens,
          .positions = e->positions,
          .attn = &e->meta.batch,
          .n_logits = n_logits,
          .logit_rows = e->logit_rows,
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
      for (int k = 0; k < n_logits; k++) {
        sched_eseq_t *q = e->logit_seqs[k];
        const float *row = e->logits + (size_t)k * (size_t)e->n_vocab;
        if (q->s.spec == 0) {
          sample_row(e, q, row);
          continue;
        }
        k += q->s.spec; /* its rows are consecutive */
        sched__spec_verify(e, q, row);
      }
    }
  }
  const int64_t t_end = clock_now_ns();

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
  st->kv_blocks_used = kv_alloc_used_blocks(a);
  st->kv_blocks_free = kv_alloc_free_blocks(a);
  st->kv_blocks_cached = kv_alloc_published_blocks(a);
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
