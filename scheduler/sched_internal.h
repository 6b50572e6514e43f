/* scheduler/sched_internal.h — the engine's private state, shared by the
 * files of scheduler/ (sched_req.c, sched_events.c, sched_engine.c,
 * sched_step.c). Not for use outside scheduler/. */
#ifndef TRAM_SCHED_INTERNAL_H
#define TRAM_SCHED_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "attention/attn_meta.h"
#include "grammar/gram.h"
#include "grammar/gram_lru.h"
#include "cache/kv_cache.h"
#include "kernels/kern.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "text/tokenizer.h"
#include "scheduler/sched.h"
#include "scheduler/sched_pace.h"
#include "scheduler/sched_plan.h"
#include "scheduler/sched_spec_adapt.h"
#include "scheduler/sched_stop.h"

typedef struct sched_snap_state sched_snap_state_t;
typedef struct sched_draft sched_draft_t;

/* One of a request's n sequences, as the engine keeps it. */
typedef struct sched_eseq {
  sched_seq_t s;           /* first: the planner's sequence (tokens, block table) */
  sched_req_t *req;
  int32_t index;           /* 0..n-1 */
  int started;             /* s holds its tokens (the lead from submit, a child from its fork) */
  int finished;            /* its FINISHED/ERROR event is queued */
  samp_state_t *samp;      /* its sampler (created at submit) */
  tok_stream_t detok;      /* its streaming detokenizer */
  gram_matcher_t *gm;      /* structured output: its parser state (NULL: unconstrained) */
  sched_stop_state_t stop; /* its stop-string matcher */
  int32_t generated;       /* tokens sampled */
  int32_t prompt_lp_next;  /* prompt_logprobs: the next prompt position to post (recomputation
                            * after a preemption posts nothing twice) */
  sched_spec_adapt_t spec; /* speculation: its acceptance estimate, pauses and probes (sched_spec_adapt.c) */
  int32_t pool_next;       /* pooling: the next prompt position whose hidden state is to be taken
                            * (recomputation after a preemption takes nothing twice) */
  double *pool;            /* pooling: [dim] the running sum (MEAN) or the row (CLS, LAST) */
  kv_seq_t dkv;            /* speculation with a draft model: its block table in the draft's cache,
                            * which holds the K/V of tokens[0, dkv.n_tokens) (sched_draft.c) */
  reason_split_t think;    /* a thinking model: where its output is (sched_think.c) */
  int32_t think_tokens;    /* tokens sampled inside the reasoning */
  int32_t think_force;     /* the next index of think_close to force; -1: not forcing; -2: forced */
  int32_t think_led;       /* how many of think_lead were forced */
} sched_eseq_t;

struct sched_req {
  /* what the submitter gave (copies) */
  int32_t *prompt; /* [n_prompt] */
  int32_t n_prompt;
  sched_req_params_t p;       /* p.stop, p.stop_ids, p.samp.logit_bias point at the copies below */
  samp_logit_bias_t *bias;    /* [p.samp.n_logit_bias] */
  gram_entry_t *grammar;      /* = p.grammar, referenced (NULL: none) */
  int32_t *stop_ids;          /* [p.n_stop_ids] */
  int32_t *think_close;       /* [p.n_think_close] */
  int32_t *think_lead;        /* [p.n_think_lead] */
  sched_stops_t stops;
  void *user;
  /* shared with other threads */
  atomic_int cancelled;
  atomic_int paused;          /* sched_req_pause: its sequences are not planned */
  sched_engine_t *engine;     /* set at submit */
  /* the engine's, from submit to the final event */
  uint64_t id;
  sched_eseq_t *seqs;         /* [p.n] (allocated at submit) */
  int32_t n_live;             /* sequences not finished */
  int forked;                 /* the lead's children exist */
  int admitted;               /* counted out of the waiting requests */
  int64_t completion_tokens;
  int64_t cached_tokens;
  float *embedding;           /* pooling: the vector, once made, until the final event takes it */
  sched_times_t times;
  sched_req_t *inbox_next;
};

struct sched_engine {
  const model_t *m;
  kern_backend_t *be;
  const tok_t *tok;
  int32_t n_vocab;
  sched_config_t cfg;         /* resolved: no zeros left */
  int32_t max_len;            /* effective max_model_len */
  int32_t max_len_model;      /* the configured/model limit before the cache clamp */
  kv_cache_t *cache;          /* owned */
  kv_state_t *state;          /* owned: a hybrid model's recurrent-state pool (max_seqs slots), or NULL */
  int32_t *state_slots;       /* [max_seqs] with state: the step's sequences' slots (model_batch_t) */
  int32_t *state_keep;        /* [max_seqs] with state and speculation: where their kept states go (same) */
  model_runner_t *runner;     /* owned */
  samp_ws_t *ws;              /* owned */
  attn_meta_t meta;
  sched_plan_t plan;
  sched_pace_t pace;          /* the prompt-token budget of steps with decodes */
  double weight_bytes;        /* weights one forward reads (model_step_weight_bytes) */
  double read_gbps;           /* memory read bandwidth measured at creation (0: unknown) */
  uint64_t step_no;           /* steps that ran a forward */
  uint64_t generated;         /* tokens sampled */
  uint64_t n_finished;        /* requests whose final event was posted */

  /* per-step buffers, sized at creation */
  const kv_seq_t **seqs;      /* [max_seqs] */
  int32_t *q_lens;            /* [max_seqs] */
  int32_t *tokens, *positions; /* [max_batch_tokens] */
  int32_t *logit_rows;        /* [max_batch_tokens]: any row may need logits (prompt_logprobs) */
  sched_eseq_t **logit_seqs;  /* [max_batch_tokens] */
  int32_t *logit_pos;         /* [max_batch_tokens] a prompt row's next position (prompt_logprobs), or -1:
                               * a row to sample from */
  int32_t *hidden_rows;       /* [max_batch_tokens] pooling: rows whose hidden state a step takes */
  sched_eseq_t **hidden_seqs; /* [max_batch_tokens] their sequences */
  int32_t *hidden_pos;        /* [max_batch_tokens] their prompt positions */
  float *hidden;              /* [max_batch_tokens, dim] their final-normed hidden states */
  int32_t dim;                /* the model's embedding length */
  float *logits;              /* [max_batch_tokens, n_vocab] (pages touched only as rows are used) */
  float *masked;              /* [n_vocab]: a row with the stop tokens masked (min_tokens) or the
                               * tokens a grammar refuses */
  uint32_t *gmask;            /* [(n_vocab + 31) / 32] a grammar's allowed tokens */
  struct kern_sample_row *sample_rows; /* [max_batch_tokens] when the backend samples (be->sample), else NULL */
  struct kern_sample_op *sample_ops;   /* [sample_ops_cap] their penalty ops */
  int32_t sample_ops_cap, n_sample_ops;
  struct kern_sample_out *sampled; /* [max_batch_tokens] the device's tokens (and logprobs) */
  char *piece;                /* [tok_stream_max_out] */
  size_t piece_cap;

  /* the inbox and the thread's wake-up (mu) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sched_req_t *inbox_head, *inbox_tail;
  int32_t n_inbox;            /* submitted and not yet in the statistics snapshot */
  int32_t inbox_taken;        /* of which the engine took this step (engine thread) */
  int wake;                   /* a cancel or abort is pending */
  int draining, aborting, stopping;
  int32_t n_waiting_reqs;     /* submitted and not yet admitted (for max_waiting) */
  uint64_t n_submitted;       /* requests accepted by sched_submit */
  uint64_t next_id;
  pthread_t thread;
  int thread_started;
  int sync_init;              /* the mutexes and the condition exist */

  /* the event queue (ev_mu): a ring */
  pthread_mutex_t ev_mu;
  pthread_cond_t ev_cv;       /* signalled when events are queued (sched_wait_events) */
  sched_event_t *ev;
  size_t ev_head, ev_n, ev_cap;
  sched_event_t *step_ev;     /* [n_step_ev] this step's events, not yet published (engine thread) */
  size_t n_step_ev, cap_step_ev;
  void (*notify)(void *arg);
  void *notify_arg;

  /* statistics (st_mu; taken after mu when both are held) */
  pthread_mutex_t st_mu;
  sched_stats_t stats;

  sched_snap_state_t *snap;   /* the dashboard's snapshots (sched_snapshot.c; owned) */
  /* speculative decoding (sched_spec.c): drafts proposed per step at most,
   * and the counters behind sched_stats_t's spec_* (engine thread) */
  int32_t spec_rows;
  sched_spec_cost_t spec_cost; /* what a draft row costs in decode steps (sched_spec_adapt.c) */
  uint64_t spec_drafts, spec_draft_tokens, spec_accepted;
  uint64_t spec_per_pos[SCHED_SPEC_MAX_K];
  sched_eseq_t **spec_seqs;   /* [max_seqs] this step's speculating sequences (sched__spec_propose) */
  int32_t *spec_k;            /* [max_seqs] their draft counts */
  int32_t (*spec_out)[SCHED_SPEC_MAX_K]; /* [max_seqs] their drafts */
  sched_draft_t *draft;       /* the draft model's runner and cache (SCHED_SPEC_DRAFT; owned) */
};

/* sched_snapshot.c: its state (created with the engine, freed with it);
 * after each plan, the step's prefill/decode split; at the end of each step
 * (ran: a forward ran), its record and, when asked for, a snapshot. */
sched_snap_state_t *sched__snap_create(void);
void sched__snap_destroy(sched_snap_state_t *st);
void sched__snap_plan(sched_engine_t *e);
void sched__snap_step(sched_engine_t *e, int ran);

/* sched_step.c: appends a sampled token to q (stops, events); returns 1
 * when q ended. Fails q with msg (an ERROR event). */
int sched__accept_token(sched_engine_t *e, sched_eseq_t *q, const samp_result_t *res);
void sched__fail_seq(sched_engine_t *e, sched_eseq_t *q, const char *msg);
/* 1 when q's next token forks its request's other n - 1 sequences from
 * the same logits row (q is an n > 1 request's lead, not forked yet). */
static inline int sched__forks_next(const sched_eseq_t *q) {
  return q->index == 0 && q->req->p.n > 1 && !q->req->forked;
}
/* Samples q's next token from row (logits [n_vocab]); before q has
 * min_tokens tokens, from a copy where its stop tokens are -inf; with a
 * grammar (outside a reasoning, sched_think.c), from a copy where the tokens
 * it refuses are -inf; a spent thinking budget, from a copy masked to the
 * close tag's next token. 0, samp_sample's
 * -EDOM or a grammar's error (GRAM_*); sched__sample_error names it. */
int sched__sample(sched_engine_t *e, sched_eseq_t *q, const float *row, samp_result_t *res);
const char *sched__sample_error(const sched_eseq_t *q, int rc);

/* sched_gram.c: q's parser state at submit (0, or -EINVAL with err when
 * the grammar is not for this vocabulary); the grammar's mask on row (0,
 * or a GRAM_* error: GRAM_EREJECT when it allows nothing). */
int sched__gram_start(sched_engine_t *e, sched_eseq_t *q, char *err, size_t err_len);
int sched__gram_mask(sched_engine_t *e, sched_eseq_t *q, float *row);

/* sched_think.c: a thinking model's sequence (sched_req_params_t.reasoning).
 * sched__think_init starts q's splitter (at submit). sched__think_forced:
 * the token q must take next because its thinking budget is spent, or -1.
 * sched__think_grammar: whether q's grammar masks its next token
 * (SCHED_THINK_*). sched__think_force_row: out = row masked to token.
 * sched__think_accept: q took token (its text piece[n]): counts, follows
 * the splitter, moves the forcing on. */
enum { SCHED_THINK_FREE = 0, SCHED_THINK_GRAMMAR, SCHED_THINK_GRAMMAR_OPEN /* and think_open */ };
void sched__think_init(sched_eseq_t *q);
int32_t sched__think_forced(sched_eseq_t *q);
int sched__think_grammar(const sched_eseq_t *q);
void sched__think_force_row(const sched_engine_t *e, int32_t token, const float *row, float *out);
void sched__think_accept(sched_eseq_t *q, int32_t token, const char *piece, size_t n);

/* sched_spec.c: before the plan, appends drafts to the running decodes
 * that speculate; after the plan, drops the drafts of any not planned;
 * after the forward and commit, verifies q's 1 + q->s.spec logits rows
 * (rows[(1 + spec) * n_vocab]): samples each in turn exactly as plain
 * decoding would, keeps the drafts up to the first that differs from the
 * sampled token, and rolls the cache back past them. */
void sched__spec_propose(sched_engine_t *e);
void sched__spec_unplanned(sched_engine_t *e);
void sched__spec_verify(sched_engine_t *e, sched_eseq_t *q, const float *rows);
/* After a forward of t_ns over the plan (before verification): updates the
 * cost model behind the choice of k. */
void sched__spec_timed(sched_engine_t *e, int64_t t_ns);

/* sched_draft.c: the draft-model proposer. Created with the engine (after
 * its cache: NULL after logging why); destroyed with it. */
sched_draft_t *sched__draft_create(sched_engine_t *e);
void sched__draft_destroy(sched_draft_t *d);
/* Proposes drafts for qs[n] (running decodes, one pending token each):
 * the draft model first computes the tokens of each it has not seen
 * (chunked prefill in its own cache), then decodes greedily, batched, up
 * to ks[i] tokens for qs[i]; writes them to drafts[i][0, ks[i]) and
 * lowers ks[i] to the count proposed (0 when its cache has no room). */
void sched__draft_propose(sched_engine_t *e, sched_eseq_t **qs, int32_t *ks, int32_t n,
                          int32_t (*drafts)[SCHED_SPEC_MAX_K]);
/* After the plan: the draft cache of a running sequence keeps only tokens
 * it still has (drafts the planner dropped are forgotten); a waiting
 * (preempted) sequence's draft blocks (and a hybrid draft's state) are
 * freed. */
void sched__draft_sync(sched_engine_t *e);
/* After verification: q's first `keep` tokens are verified; the draft
 * cache forgets what it holds past them. */
void sched__draft_rollback(sched_engine_t *e, sched_eseq_t *q, int64_t keep);
/* q ended: its draft blocks (and state) are freed. A no-op without a draft model. */
void sched__draft_forget(sched_engine_t *e, sched_eseq_t *q);
/* The draft cache's blocks in all and in use (0, 0 without one), and the
 * time of the last proposal (ns, with whether it was only decodes and
 * short catch-ups: a clean sample for the cost model). */
void sched__draft_blocks(const sched_engine_t *e, int32_t *total, int32_t *used);
int64_t sched__draft_last_ns(const sched_engine_t *e, int *clean);
/* A hybrid draft: q's recurrent state (every layer's, slot_floats floats
 * on the device) and how many tokens it has consumed; NULL when q holds no
 * slot (or the draft is a transformer). */
const float *sched__draft_state(const sched_engine_t *e, const sched_eseq_t *q, int64_t *n_tokens);

/* Frees r's per-sequence state (samplers, matchers, token arrays). */
void sched__req_free_seqs(sched_req_t *r);

/* Adds one event to this step's (the engine thread); ownership of its
 * payload moves with it. */
void sched__post(sched_engine_t *e, const sched_event_t *ev);

/* Publishes this step's events to the queue, wakes sched_wait_events and
 * calls the notify hook (the engine thread, at the end of a step). */
void sched__publish(sched_engine_t *e);

/* Releases every queued event (destroy). */
void sched__events_clear(sched_engine_t *e);

/* One engine step: takes the inbox, handles cancellations, plans, runs the
 * forward, samples, posts events. Returns 1 when it did any work, 0 when
 * there was nothing to run. */
int sched__step(sched_engine_t *e);

/* sched_pool.c: pooling requests. sched__pool_rows adds the rows of q's
 * chunk (its first row is batch row `row`, prompt position `start`,
 * q_len rows) whose hidden state q's pooling takes to e->hidden_rows from
 * index n, returning the new count; sched__pool_take folds the step's
 * n_hidden states into their sequences, in row order, and finishes each
 * request whose vector is complete. */
int32_t sched__pool_rows(sched_engine_t *e, sched_eseq_t *q, int32_t row, int64_t start, int32_t q_len, int32_t n);
void sched__pool_take(sched_engine_t *e, int32_t n_hidden);

/* Ends every unfinished sequence of r with `finish` (ABORT or ERROR with
 * `error`), posting its event; the last one is final. */
void sched__finish_req(sched_engine_t *e, sched_req_t *r, sched_finish_t finish, const char *error);

#endif
