/* scheduler/sched_snapshot.c — the engine side of the dashboard's snapshots
 * (sched_snapshot.h): the per-step records kept while someone subscribes,
 * the build at the end of a step when a snapshot was asked for, and the
 * published copy readers take.
 *
 * The engine thread owns `build` and the step ring; `pub` is the published
 * snapshot, copied in and out under pub_mu, which the engine only try-locks
 * (a reader copying at that moment costs one snapshot, never a wait). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched_internal.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "scheduler/sched_snapshot.h"

struct sched_snap_state {
  atomic_int subscribers;
  atomic_int want;          /* a snapshot was asked for */
  pthread_mutex_t pub_mu;
  sched_snap_t *pub;        /* the published snapshot (pub_mu); NULL until the first */
  /* the engine thread's */
  sched_snap_t *build;      /* where the next one is built */
  uint64_t seq;             /* snapshots published */
  uint64_t builds, build_ns_total;
  int64_t last_end, last_ns; /* when the last build ended, and what it cost */
  sched_snap_step_t ring[SCHED_SNAP_MAX_STEPS]; /* the last steps, ring[i % MAX] = the i-th recorded */
  uint64_t n_recorded;      /* steps recorded so far */
  uint64_t n_taken;         /* steps already put into a snapshot */
  sched_snap_step_t cur;    /* this step's plan (sched__snap_plan) */
  int cur_valid;            /* cur belongs to the step now ending */
  uint64_t preemptions, prefix_hit_blocks, decode_steps; /* the counters at the previous step */
};

const char *sched_blk_state_name(sched_blk_state_t s) {
  static const char *const names[] = {"free", "cached", "owned", "shared"};
  return s >= 0 && s < SCHED_BLK_N_STATES ? names[s] : "?";
}

const char *sched_seq_state_name(sched_seq_state_t s) {
  static const char *const names[] = {"waiting", "preempted", "prefill", "decode"};
  return s >= 0 && s <= SCHED_SEQ_ST_DECODE ? names[s] : "?";
}

sched_snap_state_t *sched__snap_create(void) {
  sched_snap_state_t *st = xcalloc(1, sizeof *st);
  pthread_mutex_init(&st->pub_mu, NULL);
  return st;
}

void sched__snap_destroy(sched_snap_state_t *st) {
  if (!st) return;
  pthread_mutex_destroy(&st->pub_mu);
  free(st->pub);
  free(st->build);
  free(st);
}

void sched_snap_subscribe(sched_engine_t *e, int delta) { atomic_fetch_add(&e->snap->subscribers, delta); }

void sched_snap_request(sched_engine_t *e) {
  if (atomic_load(&e->snap->subscribers) <= 0) return;
  atomic_store(&e->snap->want, 1);
  pthread_mutex_lock(&e->mu);
  e->wake = 1; /* an idle engine runs an empty step, whose end builds it */
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

/* Copies the used part of src into dst. */
static void copy_snap(sched_snap_t *dst, const sched_snap_t *src) {
  memcpy(dst, src, offsetof(sched_snap_t, cells));
  memcpy(dst->cells, src->cells, (size_t)src->n_cells * sizeof *src->cells);
  dst->n_steps = src->n_steps;
  dst->steps_dropped = src->steps_dropped;
  memcpy(dst->steps, src->steps, (size_t)src->n_steps * sizeof *src->steps);
  dst->n_seqs = src->n_seqs;
  dst->n_seqs_total = src->n_seqs_total;
  memcpy(dst->seqs, src->seqs, (size_t)src->n_seqs * sizeof *src->seqs);
}

int sched_snap_get(sched_engine_t *e, sched_snap_t *out, uint64_t after) {
  sched_snap_state_t *st = e->snap;
  int got = 0;
  pthread_mutex_lock(&st->pub_mu);
  if (st->pub && st->pub->seq > after) {
    copy_snap(out, st->pub);
    got = 1;
  }
  pthread_mutex_unlock(&st->pub_mu);
  return got;
}

/* --- the engine thread ---------------------------------------------------------- */

void sched__snap_plan(sched_engine_t *e) {
  sched_snap_state_t *st = e->snap;
  if (atomic_load_explicit(&st->subscribers, memory_order_relaxed) <= 0) return;
  sched_snap_step_t *c = &st->cur;
  memset(c, 0, sizeof *c);
  for (int32_t i = 0; i < e->plan.n_items; i++) {
    const sched_item_t *it = &e->plan.items[i];
    const sched_seq_t *s = it->seq;
    /* a decode computes the one generated token a sequence has pending */
    if (it->q_len == 1 && s->len - s->kv.n_tokens == 1 && s->kv.n_tokens >= s->n_prompt) c->decode_tokens++;
    else c->prefill_tokens += it->q_len;
  }
  c->seqs = e->plan.n_items;
  c->preemptions = (int32_t)(e->plan.stats.preemptions - st->preemptions);
  c->prefix_hit_blocks = (int32_t)(e->plan.stats.prefix_hit_blocks - st->prefix_hit_blocks);
  st->cur_valid = 1;
}

/* The state of block b. */
static sched_blk_state_t blk_state(const kv_alloc_t *a, int32_t b, int32_t *refs) {
  *refs = kv_block_refs(a, b);
  if (*refs == 0) return kv_block_published(a, b, NULL) ? SCHED_BLK_CACHED : SCHED_BLK_FREE;
  return *refs == 1 ? SCHED_BLK_OWNED : SCHED_BLK_SHARED;
}

static void build_blocks(sched_engine_t *e, sched_snap_t *sn) {
  const kv_alloc_t *a = e->cache->alloc;
  const int32_t nb = kv_alloc_num_blocks(a);
  const int32_t per = (nb + SCHED_SNAP_MAX_CELLS - 1) / SCHED_SNAP_MAX_CELLS;
  sn->num_blocks = nb;
  sn->blocks_per_cell = per;
  sn->n_cells = (nb + per - 1) / per;
  memset(sn->blocks, 0, sizeof sn->blocks);
  memset(sn->cells, 0, (size_t)sn->n_cells * sizeof *sn->cells);
  for (int32_t b = 0; b < nb; b++) {
    int32_t refs;
    const sched_blk_state_t s = blk_state(a, b, &refs);
    sched_snap_cell_t *c = &sn->cells[b / per];
    c->n[s]++;
    if (refs > c->max_refs) c->max_refs = refs;
    sn->blocks[s]++;
  }
  /* owners: only running sequences hold blocks (a preempted one freed its own) */
  for (const sched_seq_t *s = e->plan.running.head; s; s = s->next) {
    const sched_eseq_t *q = (const sched_eseq_t *)s;
    for (int32_t i = s->kv.n_released; i < s->kv.n_blocks; i++) {
      sched_snap_cell_t *c = &sn->cells[s->kv.blocks[i] / per];
      if (c->owner) continue;
      c->owner = q->req->id;
      c->owner_index = q->index;
    }
  }
}

/* Lists sequence s in state `state` (while there is room) and counts it. */
static void add_seq(sched_snap_t *sn, const sched_seq_t *s, sched_seq_state_t state) {
  sn->n_seqs_total++;
  if (sn->n_seqs >= SCHED_SNAP_MAX_SEQS) return;
  const sched_eseq_t *q = (const sched_eseq_t *)s;
  sn->seqs[sn->n_seqs++] = (sched_snap_seq_t){
      .id = q->req->id,
      .index = q->index,
      .state = state,
      .prompt_tokens = s->n_prompt,
      .cached_tokens = (int32_t)s->cached_tokens,
      .generated = q->generated,
      .blocks = s->kv.n_blocks,
      .admissions = s->admissions,
      .arrival_ns = q->req->times.arrival,
      .first_token_ns = q->req->times.first_token,
  };
}

static void build_seqs(sched_engine_t *e, sched_snap_t *sn) {
  sn->n_seqs = sn->n_seqs_total = 0;
  sn->running = sn->waiting_new = sn->preempted = 0;
  for (const sched_seq_t *s = e->plan.running.head; s; s = s->next) {
    const int prefill = s->len - s->kv.n_tokens > 1 || ((const sched_eseq_t *)s)->generated == 0;
    add_seq(sn, s, prefill ? SCHED_SEQ_ST_PREFILL : SCHED_SEQ_ST_DECODE);
    sn->running++;
  }
  for (const sched_seq_t *s = e->plan.waiting.head; s; s = s->next) {
    const int preempted = s->admissions > 0;
    add_seq(sn, s, preempted ? SCHED_SEQ_ST_PREEMPTED : SCHED_SEQ_ST_WAITING);
    if (preempted) sn->preempted++;
    else sn->waiting_new++;
  }
}

/* Moves the steps recorded since the last snapshot into sn. */
static void take_steps(sched_snap_state_t *st, sched_snap_t *sn) {
  uint64_t from = st->n_taken;
  sn->steps_dropped = 0;
  if (st->n_recorded - from > SCHED_SNAP_MAX_STEPS) {
    sn->steps_dropped = st->n_recorded - from - SCHED_SNAP_MAX_STEPS;
    from = st->n_recorded - SCHED_SNAP_MAX_STEPS;
  }
  sn->n_steps = 0;
  for (uint64_t i = from; i < st->n_recorded; i++) sn->steps[sn->n_steps++] = st->ring[i % SCHED_SNAP_MAX_STEPS];
  st->n_taken = st->n_recorded;
}

static void build(sched_engine_t *e, sched_snap_state_t *st) {
  const int64_t t0 = clock_now_ns();
  if (!st->build) st->build = xcalloc(1, sizeof *st->build);
  sched_snap_t *sn = st->build;
  sn->stats = e->stats; /* the engine thread writes it: its own copy is current */
  pthread_mutex_lock(&e->mu);
  sn->inbox = e->n_inbox;
  sn->stats.requests_submitted = e->n_submitted;
  pthread_mutex_unlock(&e->mu);
  sn->stats.waiting += sn->inbox; /* as sched_get_stats */
  sn->max_batch_tokens = e->cfg.max_batch_tokens;
  sn->max_seqs = e->cfg.max_seqs;
  build_blocks(e, sn);
  build_seqs(e, sn);
  take_steps(st, sn);
  const int64_t t1 = clock_now_ns();
  sn->time_ns = t1;
  sn->build_ns = t1 - t0;
  st->last_end = t1;
  st->last_ns = t1 - t0;
  st->builds++;
  st->build_ns_total += (uint64_t)sn->build_ns;
  sn->builds = st->builds;
  sn->build_ns_total = st->build_ns_total;
  if (pthread_mutex_trylock(&st->pub_mu) != 0) return; /* a reader is copying: the next ask gets one */
  if (!st->pub) st->pub = xcalloc(1, sizeof *st->pub);
  sn->seq = ++st->seq;
  copy_snap(st->pub, sn);
  pthread_mutex_unlock(&st->pub_mu);
  atomic_store(&st->want, 0);
}

void sched__snap_step(sched_engine_t *e, int ran) {
  sched_snap_state_t *st = e->snap;
  const sched_stats_t *ss = &e->stats;
  if (atomic_load_explicit(&st->subscribers, memory_order_relaxed) <= 0) {
    st->n_taken = st->n_recorded; /* a later subscriber sees only its own steps */
  } else {
    if (ran && st->cur_valid) {
      sched_snap_step_t r = st->cur;
      r.step = ss->steps;
      r.end_ns = ss->last_progress;
      r.step_ns = ss->last_step_ns;
      r.decode_path = ss->decode_steps != st->decode_steps;
      st->ring[st->n_recorded++ % SCHED_SNAP_MAX_STEPS] = r;
    }
    /* at most SCHED_SNAP_MAX_SHARE of the engine's time: a build waits until
     * 1/share times its predecessor's cost has passed since it ended */
    if (atomic_load(&st->want) && clock_now_ns() - st->last_end >= st->last_ns * (int64_t)(1 / SCHED_SNAP_MAX_SHARE))
      build(e, st);
  }
  st->cur_valid = 0;
  st->preemptions = e->plan.stats.preemptions;
  st->prefix_hit_blocks = e->plan.stats.prefix_hit_blocks;
  st->decode_steps = ss->decode_steps;
}
