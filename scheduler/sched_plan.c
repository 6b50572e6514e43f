/* scheduler/sched_plan.c — the planner: lists, the step plan,
 * reservation, preemption, prefix-cache lookup, fork (see sched_plan.h). */
#include "scheduler/sched_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

/* --- lists ------------------------------------------------------------------ */

static void list_push_back(sched_list_t *l, sched_seq_t *s) {
  s->prev = l->tail;
  s->next = NULL;
  if (l->tail)
    l->tail->next = s;
  else
    l->head = s;
  l->tail = s;
  l->n++;
}

static void list_push_front(sched_list_t *l, sched_seq_t *s) {
  s->prev = NULL;
  s->next = l->head;
  if (l->head)
    l->head->prev = s;
  else
    l->tail = s;
  l->head = s;
  l->n++;
}

static void list_unlink(sched_list_t *l, sched_seq_t *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    l->head = s->next;
  if (s->next)
    s->next->prev = s->prev;
  else
    l->tail = s->prev;
  s->prev = s->next = NULL;
  l->n--;
}

/* --- sequences ---------------------------------------------------------------- */

void sched_seq_init(sched_seq_t *s, const int32_t *prompt, int32_t n_prompt, int32_t places) {
  memset(s, 0, sizeof *s);
  s->cap = n_prompt + 16;
  s->tokens = xcalloc((size_t)s->cap, sizeof *s->tokens);
  memcpy(s->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
  s->len = n_prompt;
  s->n_prompt = n_prompt;
  s->places = places;
  s->state_slot = -1;
  s->snap_block = -1;
  s->state_kept = -1;
  kv_seq_init(&s->kv);
}

void sched_seq_push(sched_seq_t *s, int32_t token) {
  size_t cap = (size_t)s->cap;
  xgrow(&s->tokens, &cap, (size_t)s->len + 1, sizeof *s->tokens, 16);
  s->cap = (int64_t)cap;
  s->tokens[s->len++] = token;
}

void sched_seq_drop_drafts(sched_seq_t *s) {
  s->len -= s->spec;
  s->spec = 0;
}

void sched_seq_free(sched_seq_t *s) {
  if (s->where != SCHED_SEQ_NONE || s->kv.n_blocks != 0) {
    log_error("sched_seq_free: the sequence is still listed or holds blocks");
    abort();
  }
  free(s->tokens);
  s->tokens = NULL;
  s->len = s->cap = 0;
}

/* --- the planner ---------------------------------------------------------------- */

int sched_plan_init(sched_plan_t *c, kv_alloc_t *a, int max_batch_tokens, int max_seqs, int prefix_caching) {
  memset(c, 0, sizeof *c);
  if (max_seqs < 1 || max_batch_tokens < max_seqs) return -EINVAL;
  c->alloc = a;
  c->max_batch_tokens = max_batch_tokens;
  c->max_seqs = max_seqs;
  c->prefix_caching = prefix_caching;
  c->items = xcalloc((size_t)max_seqs, sizeof *c->items);
  return 0;
}

void sched_plan_free(sched_plan_t *c) {
  free(c->items);
  c->items = NULL;
}

void sched_plan_add(sched_plan_t *c, sched_seq_t *s) {
  list_push_back(&c->waiting, s);
  s->where = SCHED_SEQ_WAITING;
}

void sched_plan_add_front(sched_plan_t *c, sched_seq_t *s) {
  list_push_front(&c->waiting, s);
  s->where = SCHED_SEQ_WAITING;
}

static void leave_running(sched_plan_t *c, sched_seq_t *s) {
  list_unlink(&c->running, s);
  c->running_places -= s->places;
  if (s->state_slot >= 0) { /* a recomputation starts from position 0: a fresh state */
    kv_state_free(c->state, s->state_slot);
    s->state_slot = -1;
  }
  s->snap_block = -1; /* its blocks go back to the cache: what they hold later is not its own */
}

void sched_plan_remove(sched_plan_t *c, sched_seq_t *s) {
  if (s->where == SCHED_SEQ_RUNNING) leave_running(c, s);
  else if (s->where == SCHED_SEQ_WAITING) list_unlink(&c->waiting, s);
  s->where = SCHED_SEQ_NONE;
  kv_seq_free(c->alloc, &s->kv);
}

static void preempt(sched_plan_t *c, sched_seq_t *s) {
  leave_running(c, s);
  sched_seq_drop_drafts(s);
  kv_seq_free(c->alloc, &s->kv);
  sched_plan_add_front(c, s);
  c->stats.preemptions++;
  log_debug("sched: preempted a sequence of %lld tokens (%d running)", (long long)s->len, c->running.n);
}

/* The most recently admitted paused running sequence (never planned), or
 * NULL. */
static sched_seq_t *paused_victim(const sched_plan_t *c) {
  for (sched_seq_t *v = c->running.tail; v; v = v->prev)
    if (v->paused) return v;
  return NULL;
}

/* A paused running sequence, else the most recently admitted running
 * sequence not planned this step. */
static sched_seq_t *victim(const sched_plan_t *c) {
  sched_seq_t *p = paused_victim(c);
  if (p) return p;
  for (sched_seq_t *v = c->running.tail; v; v = v->prev)
    if (v->planned != c->step) return v;
  return NULL;
}

/* Reads every listed sequence's pause flag once for this step. */
static void read_pauses(sched_plan_t *c) {
  c->n_paused = 0;
  const sched_list_t *lists[2] = {&c->running, &c->waiting};
  for (int l = 0; l < 2; l++)
    for (sched_seq_t *s = lists[l]->head; s; s = s->next) {
      s->paused = s->pause && atomic_load_explicit(s->pause, memory_order_relaxed);
      c->n_paused += s->paused;
    }
}

static void plan_item(sched_plan_t *c, sched_seq_t *s, int64_t q) {
  c->items[c->n_items++] = (sched_item_t){s, (int32_t)q, s->kv.n_tokens + q == s->len};
  c->n_tokens += (int32_t)q;
  s->planned = c->step;
}

/* Tokens s can add without preempting anyone: room in its last block plus
 * every free block. */
static int64_t room(const sched_plan_t *c, const sched_seq_t *s) {
  const int64_t bs = kv_alloc_block_size(c->alloc);
  return (int64_t)s->kv.n_blocks * bs - s->kv.n_tokens + (int64_t)kv_alloc_free_blocks(c->alloc) * bs;
}

/* Makes room for q tokens of running sequence s (q <= pending), preempting
 * later ones while none is left; a prefill chunk (shrink = 1) takes what
 * room there is instead. Returns the tokens reserved, or 0 when s itself
 * had to be preempted. */
static int64_t make_room(sched_plan_t *c, sched_seq_t *s, int64_t q, int shrink) {
  for (;;) {
    const int64_t r = room(c, s);
    if (r >= q || (shrink && r > 0)) {
      if (r < q) q = r;
      if (kv_seq_reserve(c->alloc, &s->kv, q) != 0) abort(); /* room() said it fits */
      return q;
    }
    sched_seq_t *v = victim(c); /* s at least */
    preempt(c, v);
    if (v == s) return 0;
  }
}

/* --- hybrid models: recurrent-state snapshots ----------------------------------- */

/* 1 when the planner keeps snapshots (a hybrid with prefix caching). */
static int snapshots(const sched_plan_t *c) { return c->state && c->state->n_snaps > 0 && c->prefix_caching; }

/* Where s's prompt snapshot is taken: the end of the last full block
 * before its prompt's last token (0: none), the deepest point the same
 * prompt again (which leaves its last token to compute) and every prompt
 * that extends it can both match. */
static int64_t prompt_point(const sched_plan_t *c, const sched_seq_t *s) {
  const int64_t bs = kv_alloc_block_size(c->alloc);
  return s->n_prompt > 0 ? ((int64_t)s->n_prompt - 1) / bs * bs : 0;
}

/* A chunk of q tokens of s, cut to end at its prompt point when it would
 * cross it, so the state there can be kept. */
static int64_t snap_cut(const sched_plan_t *c, const sched_seq_t *s, int64_t q) {
  const int64_t p = prompt_point(c, s);
  if (snapshots(c) && s->kv.n_tokens < p && s->kv.n_tokens + q > p) return p - s->kv.n_tokens;
  return q;
}

/* The blocks of s's fresh prefix-cache match (hit blocks) to keep: up to
 * the last one with a snapshot, whose state s's slot then restores. */
static int32_t snap_match(sched_plan_t *c, sched_seq_t *s, int32_t hit) {
  if (!c->state || hit == 0) return hit;
  int32_t keep = hit;
  while (keep > 0 && !kv_snap_has(c->state, s->kv.blocks[keep - 1])) keep--;
  if (keep < hit) kv_seq_unmatch(c->alloc, &s->kv, keep);
  return keep;
}

/* Keeps s's state at the end of its last published block (s's slot, or
 * kept state `kept` when >= 0) as that block's snapshot; past its prompt
 * (past) it keeps one, dropping the one it took before. */
static void snap_save(sched_plan_t *c, sched_seq_t *s, int past, int32_t kept) {
  const int32_t b = kv_seq_tail_block(c->alloc, &s->kv);
  if (b < 0) return;
  uint64_t h = 0;
  if (past && s->snap_block >= 0 && s->snap_block != b && kv_block_published(c->alloc, s->snap_block, &h) &&
      h == s->snap_hash)
    kv_snap_drop(c->state, s->snap_block);
  if (past && kv_block_published(c->alloc, b, &s->snap_hash)) s->snap_block = b;
  if (kept >= 0) kv_snap_save_kept(c->state, b, kept);
  else kv_snap_save(c->state, b, s->state_slot);
}

/* After s's step: keeps its state when it sits at the end of its prompt's
 * last full block or of a block past its prompt (then dropping the one
 * it took before there). */
static void snap_take(sched_plan_t *c, sched_seq_t *s) {
  const int64_t n = s->kv.n_tokens, bs = kv_alloc_block_size(c->alloc);
  if (!snapshots(c) || s->state_slot < 0 || n == 0 || n % bs != 0 || (int64_t)s->kv.n_hashed * bs != n) return;
  const int past = n > s->n_prompt;
  if (!past && n != prompt_point(c, s)) return;
  snap_save(c, s, past, -1);
}

void sched_plan_verified(sched_plan_t *c, sched_seq_t *s, int64_t start, int32_t spec, int32_t accepted) {
  const int32_t kept = s->state_kept;
  s->state_kept = -1;
  if (!c->state || s->state_slot < 0 || kept < 0) return;
  const int64_t n = start + 1 + accepted, bs = kv_alloc_block_size(c->alloc);
  if (accepted < spec) kv_state_take_kept(c->state, s->state_slot, kept + accepted, n);
  const int64_t end = n / bs * bs; /* the last block end among the verified tokens, if one is */
  if (!snapshots(c) || end <= start || end <= s->n_prompt || s->kv.n_tokens != n) return;
  kv_seq_publish(c->alloc, &s->kv, s->tokens);
  if ((int64_t)s->kv.n_hashed * bs != end) return;
  snap_save(c, s, 1, end == n ? -1 : kept + (int32_t)(end - start - 1)); /* row end - start - 1 ends there */
}

/* Admits waiting sequence s if the running list has room for its places and
 * the cache for all its pending tokens (after the prefix-cache lookup).
 * Returns the tokens planned, or 0 when it cannot be admitted now. */
static int64_t admit(sched_plan_t *c, sched_seq_t *s, int64_t budget) {
  if (c->running_places + s->places > c->max_seqs) return 0;
  if (c->state && c->state->n_free == 0) return 0;
  int32_t hit = 0;
  if (c->prefix_caching && !s->no_prefix && s->kv.n_blocks == 0)
    hit = snap_match(c, s, kv_seq_match_prefix(c->alloc, &s->kv, s->tokens, s->len - 1));
  const int64_t pending = s->len - s->kv.n_tokens;
  if (kv_seq_blocks_needed(c->alloc, &s->kv, pending) > kv_alloc_free_blocks(c->alloc)) {
    kv_seq_free(c->alloc, &s->kv); /* hits go back to the free list, still cached */
    return 0;
  }
  const int64_t q = snap_cut(c, s, pending < budget ? pending : budget);
  if (kv_seq_reserve(c->alloc, &s->kv, q) != 0) abort(); /* checked above */
  if (c->state && (s->state_slot = kv_state_alloc(c->state)) < 0) abort(); /* checked above */
  if (c->state && hit > 0) kv_snap_load(c->state, s->state_slot, s->kv.blocks[hit - 1], s->kv.n_tokens);
  list_unlink(&c->waiting, s);
  list_push_back(&c->running, s);
  s->where = SCHED_SEQ_RUNNING;
  c->running_places += s->places;
  s->admissions++;
  s->cached_tokens = s->kv.n_tokens;
  if (c->prefix_caching) {
    const int32_t bs = kv_alloc_block_size(c->alloc);
    c->stats.prefix_query_tokens += (uint64_t)s->len;
    c->stats.prefix_hit_tokens += (uint64_t)s->kv.n_tokens;
    c->stats.prefix_query_blocks += (uint64_t)((s->len - 1) / bs);
    c->stats.prefix_hit_blocks += (uint64_t)hit;
  }
  plan_item(c, s, q);
  return q;
}

int sched_plan_step(sched_plan_t *c) {
  c->step++;
  c->n_items = 0;
  c->n_tokens = 0;
  int64_t budget = c->max_batch_tokens;
  read_pauses(c);

  /* 1. decodes, in admission order; a preemption takes a paused sequence or
   * from the tail, so s->next stays valid, and s is preempted only as the
   * tail itself */
  for (sched_seq_t *s = c->running.head; s; s = s->next) {
    if (s->paused || s->len - s->kv.n_tokens != 1 + s->spec) continue;
    if (s->spec > 0 && (room(c, s) < 1 + s->spec || budget < 1 + s->spec + (c->running.n - c->n_items - 1)))
      sched_seq_drop_drafts(s); /* drafts never preempt anyone nor crowd out a decode */
    if (make_room(c, s, 1 + s->spec, 0) == 0) break;
    plan_item(c, s, 1 + s->spec);
    budget -= 1 + s->spec;
  }
  /* the prompt tokens of a step that holds decodes are paced */
  if (c->prefill_budget > 0 && c->n_items > 0 && budget > c->prefill_budget) budget = c->prefill_budget;
  /* 2. the next chunk of each partially computed sequence */
  for (sched_seq_t *s = c->running.head; s && budget > 0; s = s->next) {
    if (s->planned == c->step || s->paused) continue;
    const int64_t pending = s->len - s->kv.n_tokens;
    const int64_t q = make_room(c, s, snap_cut(c, s, pending < budget ? pending : budget), 1);
    if (q == 0) break; /* s was the last unplanned one */
    plan_item(c, s, q);
    budget -= q;
  }
  /* 3. admissions, first come first served, paused ones passed over; paused
   * running sequences make room (preempted: they go to the waiting head,
   * before s, and are passed over there) */
  for (sched_seq_t *s = c->waiting.head; s && budget > 0;) {
    if (s->paused) {
      s = s->next;
      continue;
    }
    sched_seq_t *next = s->next;
    const int64_t q = admit(c, s, budget);
    if (q == 0) {
      sched_seq_t *v = paused_victim(c);
      if (!v) break;
      preempt(c, v);
      continue; /* s again */
    }
    budget -= q;
    s = next;
  }
  return c->n_items;
}

/* Releases the blocks of s that no later row can see: a row at position
 * p >= n_tokens sees keys from p + 1 - window on, and the attention reads
 * from that edge rounded down to window_granule. */
static void release_outside_window(sched_plan_t *c, sched_seq_t *s) {
  const int64_t edge = s->kv.n_tokens + 1 - c->window;
  if (c->window > 0 && edge > 0) kv_seq_release_before(c->alloc, &s->kv, edge / c->window_granule * c->window_granule);
}

void sched_plan_commit(sched_plan_t *c) {
  for (int32_t i = 0; i < c->n_items; i++) {
    sched_seq_t *s = c->items[i].seq;
    kv_seq_commit(c->alloc, &s->kv, c->items[i].q_len);
    if (c->prefix_caching && s->spec == 0) kv_seq_publish(c->alloc, &s->kv, s->tokens);
    if (s->spec == 0) release_outside_window(c, s); /* drafts: after their rollback */
    if (s->spec == 0) snap_take(c, s);
  }
}

void sched_plan_rollback(sched_plan_t *c, sched_seq_t *s, int64_t keep) {
  kv_seq_truncate(c->alloc, &s->kv, keep);
  if (c->prefix_caching) kv_seq_publish(c->alloc, &s->kv, s->tokens);
  release_outside_window(c, s);
}

void sched_plan_release_places(sched_plan_t *c, sched_seq_t *s) {
  if (s->where == SCHED_SEQ_RUNNING) c->running_places -= s->places - 1;
  s->places = 1;
}

int sched_plan_fork(sched_plan_t *c, sched_seq_t *parent, sched_seq_t *child, int32_t *copy_src, int32_t *copy_dst) {
  child->places = 1;
  child->pause = parent->pause;
  child->paused = parent->paused;
  c->n_paused += child->paused;
  const int rc = kv_seq_fork(c->alloc, &child->kv, &parent->kv, copy_src, copy_dst);
  if (rc < 0) {
    sched_plan_add_front(c, child);
    return rc;
  }
  if (c->state && parent->state_slot >= 0) { /* the child continues the parent's recurrent state */
    child->state_slot = kv_state_alloc(c->state); /* the child's place frees one (max_seqs slots) */
    if (child->state_slot < 0) abort();
    kv_state_copy(c->state, child->state_slot, parent->state_slot);
  }
  child->snap_block = -1;
  list_push_back(&c->running, child);
  child->where = SCHED_SEQ_RUNNING;
  child->planned = c->step;
  child->admissions = 1;
  c->running_places++;
  return rc;
}
