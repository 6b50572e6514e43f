/* scheduler/sched_plan.h — the planner: the waiting and running
 * lists of sequences, the per-step plan (who computes how many tokens),
 * block reservation, preemption, prefix-cache lookup, and the bookkeeping
 * after the forward. It knows sequences as token arrays with a block table
 * and nothing of the model, sampler or detokenizer, so it is tested on the
 * block allocator alone (tests/unit/test_sched_plan.c).
 *
 * A sequence holds tokens[len]: the prompt, then what was sampled so far.
 * Its block table (kv) has the K/V of the first kv.n_tokens of them; the
 * rest are pending. A step computes a chunk of a sequence's pending tokens;
 * when the chunk reaches the last token, that row's logits give the next
 * token (the engine samples and appends it). One pending token is a decode;
 * more is a prefill (a prompt, or the recomputation of a preempted
 * sequence: prompt plus generated tokens).
 *
 * sched_plan_step(), in order, under max_batch_tokens tokens:
 *   1. running sequences with one pending token, in admission order (the
 *      running list never holds more than max_seqs, so all fit);
 *   2. running sequences with more pending tokens, a chunk each while the
 *      budget lasts (with decodes in the step, a budget of at most
 *      prefill_budget prompt tokens for 2 and 3);
 *   3. waiting sequences from the head (arrival order; preempted ones are
 *      put back at the head), while the budget lasts, the running list has
 *      room for the places they stand for (n for a prompt not yet forked into
 *      its n completions) and the cache has free blocks for all their
 *      pending tokens. With prefix caching, an admitted sequence first
 *      takes the cached full blocks that match its tokens, always leaving at
 *      least one token to compute. Strict FIFO: the first that cannot be
 *      admitted stops admission.
 * Hybrid models (state set): a prefix-cache hit needs the recurrent state
 * at the hit's end too, so the match is kept only up to the last matched
 * block that has a snapshot (cache/kv_state.h), which the sequence's slot
 * restores. Snapshots are taken after the step (sched_plan_commit) where a
 * sequence's state sits at the end of a published block, at two kinds of
 * points: the last full block before its prompt's last token (a prefill
 * chunk is cut to end there), and each block boundary past its prompt (its output; a
 * sequence keeps only its latest one, so a finished conversation turn
 * leaves the state at the end of its last full block, which the next turn's
 * prompt extends).
 * A decode may carry speculative drafts (spec > 0: its last spec tokens,
 * proposed by the engine): it is planned in step 1 with q_len = 1 + spec
 * when its blocks have room for them without preempting anyone, otherwise
 * its drafts are dropped and it decodes one token. A preempted sequence
 * loses its drafts. Its newly full blocks are published only once the
 * engine has verified the drafts (sched_plan_rollback).
 * A paused sequence (its pause flag set: a client not reading) is skipped
 * by all three: it keeps its blocks and places while running; a waiting one
 * is passed over by admission (FIFO among the others). When a waiting
 * sequence cannot be admitted for want of places or blocks, paused running
 * sequences are preempted first, most recent first, to make room; and a
 * reservation's victim is a paused sequence when there is one.
 * Every planned sequence reserves the blocks for its chunk before the step
 * runs. When a reservation fails, the most recently admitted running
 * sequence not yet planned this step is preempted (blocks freed, put back
 * at the head of the waiting list, tokens kept) and the reservation
 * retried; a prefill chunk first shrinks to the room the free blocks give.
 *
 * Not thread-safe: the engine thread owns the planner. */
#ifndef TRAM_SCHED_PLAN_H
#define TRAM_SCHED_PLAN_H

#include <stdatomic.h>
#include <stdint.h>

#include "cache/kv_alloc.h"
#include "cache/kv_state.h"

typedef struct sched_seq sched_seq_t;

typedef enum sched_seq_where {
  SCHED_SEQ_NONE = 0, /* in no list (new, or finished) */
  SCHED_SEQ_WAITING,
  SCHED_SEQ_RUNNING,
} sched_seq_where_t;

/* One sequence, as the planner sees it. The engine embeds it in its own
 * per-sequence state (scheduler/sched_internal.h); tests use it alone. */
struct sched_seq {
  int32_t *tokens;  /* [cap] prompt then sampled tokens (owned) */
  int64_t len, cap; /* tokens known; entries allocated */
  int32_t n_prompt; /* the first n_prompt tokens are the prompt */
  int32_t places;   /* running places it takes at admission (>= 1) */
  int32_t spec;     /* the last spec tokens are speculative drafts, not yet verified (0: none) */
  kv_seq_t kv;      /* its block table */
  int32_t state_slot; /* a hybrid model's recurrent-state slot (plan->state), held while running; -1: none */
  int32_t snap_block; /* hybrid: the block of the last snapshot it took past its prompt (-1: none), dropped
                       * when it takes the next (a decode keeps one snapshot, not one per block) */
  uint64_t snap_hash; /* the hash snap_block was published under then: a block evicted and published again
                       * since holds someone else's snapshot, which is not dropped */
  int32_t state_kept; /* hybrid, in a verification step: its first kept state (kv_state_kept's i; it keeps
                       * spec of them); -1: none */
  /* the planner's (private) */
  sched_seq_where_t where;
  sched_seq_t *prev, *next; /* neighbours in its list */
  uint64_t planned;         /* the step it was last planned in */
  int64_t cached_tokens;    /* tokens the prefix cache gave at its last admission */
  int32_t admissions;       /* times admitted */
  int no_prefix;            /* 1: never take prefix-cache hits (every prompt row is computed) */
  const atomic_int *pause;  /* its owner's pause flag, read once per step (NULL: never paused; a
                             * fork shares its parent's) */
  int paused;               /* the flag as this step read it */
};

typedef struct sched_list {
  sched_seq_t *head, *tail;
  int32_t n;
} sched_list_t;

/* One planned sequence of a step. */
typedef struct sched_item {
  sched_seq_t *seq;
  int32_t q_len;  /* tokens it computes: tokens[kv.n_tokens, kv.n_tokens + q_len) */
  int32_t logits; /* 1: the chunk ends at its last token; its row gives the next token */
} sched_item_t;

typedef struct sched_plan_stats {
  uint64_t preemptions;
  uint64_t prefix_query_tokens, prefix_hit_tokens;
  uint64_t prefix_query_blocks, prefix_hit_blocks;
} sched_plan_stats_t;

typedef struct sched_plan {
  kv_alloc_t *alloc;  /* not owned */
  int max_batch_tokens, max_seqs;
  /* > 0: a step that has decodes computes at most this many prompt tokens
   * (steps 2 and 3 below; the engine's pacing, sched_pace.h); 0: up to
   * max_batch_tokens */
  int prefill_budget;
  int prefix_caching;
  /* a hybrid model's recurrent-state pool (not owned; NULL otherwise): a
   * running sequence holds a slot (taken at admission, given back at
   * preemption or removal, copied into a fork), so admission also needs a
   * free slot; max_seqs slots always suffice */
  kv_state_t *state;
  /* > 0: every layer has a sliding window of at most this many keys and
   * the attention reads none before the window's edge rounded down to
   * window_granule: after each step, the blocks that no later row can see
   * are released (kv_seq_release_before); 0: blocks are kept */
  int window, window_granule;
  sched_list_t waiting, running;
  int32_t running_places; /* sum of the running sequences' places (<= max_seqs) */
  int32_t n_paused;   /* running and waiting sequences paused at the last plan */
  uint64_t step;      /* steps planned so far */
  /* the current plan: items[n_items], n_tokens in all, in planning order */
  sched_item_t *items; /* [max_seqs] */
  int32_t n_items, n_tokens;
  sched_plan_stats_t stats;
} sched_plan_t;

/* Sets up a planner over allocator a. Returns 0, or -EINVAL when a budget is
 * not positive or max_batch_tokens < max_seqs. */
int sched_plan_init(sched_plan_t *c, kv_alloc_t *a, int max_batch_tokens, int max_seqs, int prefix_caching);

/* Frees the plan array. The sequences are their owners' (remove them
 * first, or their blocks stay referenced). */
void sched_plan_free(sched_plan_t *c);

/* Initialises s with prompt[n_prompt] (copied), standing for `places`
 * running places at its first admission. */
void sched_seq_init(sched_seq_t *s, const int32_t *prompt, int32_t n_prompt, int32_t places);

/* Appends a sampled token. */
void sched_seq_push(sched_seq_t *s, int32_t token);

/* Frees s's token array (s must be in no list and hold no block). */
void sched_seq_free(sched_seq_t *s);

/* Adds s (in no list) at the tail of the waiting list, or at its head. */
void sched_plan_add(sched_plan_t *c, sched_seq_t *s);
void sched_plan_add_front(sched_plan_t *c, sched_seq_t *s);

/* Takes s out of whichever list holds it and frees its blocks (finished or
 * cancelled). */
void sched_plan_remove(sched_plan_t *c, sched_seq_t *s);

/* Plans the next step (see above) and reserves its blocks. Returns the
 * number of items (0: nothing can run). */
int sched_plan_step(sched_plan_t *c);

/* After the forward of the planned step: commits each item's tokens to its
 * block table and, with prefix caching, publishes its newly full blocks. */
void sched_plan_commit(sched_plan_t *c);

/* Drops s's unverified drafts (s->spec = 0). */
void sched_seq_drop_drafts(sched_seq_t *s);

/* After the verification of a speculating item's drafts (the step is
 * committed): s keeps the K/V of its first `keep` tokens (the decoded one
 * and the accepted drafts); the rejected drafts' slots are forgotten, the
 * blocks that only they used are released, and then s's newly full blocks
 * are published. */
void sched_plan_rollback(sched_plan_t *c, sched_seq_t *s, int64_t keep);

/* A hybrid's recurrent state after the verification of s's `spec` drafts
 * (decoded at position start) kept `accepted` of them, its K/V rolled back:
 * its slot takes the kept state after row `accepted` (none to take when all
 * were accepted), and a block that ends among the verified tokens, past
 * the prompt, keeps the state at exactly its end as its snapshot (the
 * kept state of that row). A no-op for other models. */
void sched_plan_verified(sched_plan_t *c, sched_seq_t *s, int64_t start, int32_t spec, int32_t accepted);

/* Drops s's places to 1: its prompt is computed and its other completions
 * are about to be forked (or ended at their first token). */
void sched_plan_release_places(sched_plan_t *c, sched_seq_t *s);

/* Forks child from parent, at the step where parent's prompt was computed
 * and its first token sampled: child (in no list, places 1) holds the same
 * prompt and its own first token; it shares parent's committed full
 * blocks, gets its own copy of a partial last block, and joins the running
 * list's tail. Returns 1 with *copy_src and *copy_dst set when the caller
 * must copy that block's K/V on the device, 0 when nothing is to copy, or
 * -ENOSPC when no block is free: the child then goes to the head of the
 * waiting list and is computed at its admission. */
int sched_plan_fork(sched_plan_t *c, sched_seq_t *parent, sched_seq_t *child, int32_t *copy_src, int32_t *copy_dst);

#endif
