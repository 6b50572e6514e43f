/* cache/kv_snap.c — snapshots of recurrent states kept with prefix-cache
 * blocks (see kv_state.h): which block each snapshot belongs to, the
 * least-recently-used order of the held ones, and the device copies
 * between running slots and snapshots.
 *
 * The index is two arrays that point at each other (snapshot -> block,
 * block -> snapshot) and a doubly linked list of the held snapshots,
 * least recently used first; free snapshots are those whose block is -1,
 * found by a stack. Every operation is O(1). */
#include <errno.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/log.h"
#include "cache/kv_state_internal.h"

#define NONE (-1)

void kv__snap_init(kv_state_t *p, int n_snaps, int32_t n_blocks) {
  p->n_snaps = n_snaps;
  p->snap_head = p->snap_tail = NONE;
  if (n_snaps == 0) return;
  p->n_blocks = n_blocks;
  p->snap_block = xmallocarray((size_t)n_snaps, sizeof *p->snap_block);
  p->snap_prev = xmallocarray((size_t)n_snaps, sizeof *p->snap_prev);
  p->snap_next = xmallocarray((size_t)n_snaps, sizeof *p->snap_next);
  p->block_snap = xmallocarray((size_t)n_blocks, sizeof *p->block_snap);
  for (int i = 0; i < n_snaps; i++) p->snap_block[i] = NONE;
  for (int32_t b = 0; b < n_blocks; b++) p->block_snap[b] = NONE;
}

void kv__snap_free(kv_state_t *p) {
  free(p->snap_block);
  free(p->snap_prev);
  free(p->snap_next);
  free(p->block_snap);
}

static void check_block(const kv_state_t *p, int32_t block, const char *fn) {
  if (block < 0 || block >= p->n_blocks) {
    log_error("%s: block %d out of [0, %d)", fn, block, p->n_blocks);
    abort();
  }
}

static void lru_unlink(kv_state_t *p, int32_t i) {
  const int32_t pv = p->snap_prev[i], nx = p->snap_next[i];
  if (pv != NONE) p->snap_next[pv] = nx;
  else p->snap_head = nx;
  if (nx != NONE) p->snap_prev[nx] = pv;
  else p->snap_tail = pv;
}

static void lru_push_tail(kv_state_t *p, int32_t i) {
  p->snap_prev[i] = p->snap_tail;
  p->snap_next[i] = NONE;
  if (p->snap_tail != NONE) p->snap_next[p->snap_tail] = i;
  else p->snap_head = i;
  p->snap_tail = i;
}

/* Frees snapshot i (held). */
static void release(kv_state_t *p, int32_t i) {
  lru_unlink(p, i);
  p->block_snap[p->snap_block[i]] = NONE;
  p->snap_block[i] = NONE;
  p->n_snaps_used--;
}

/* A free snapshot index: the first free one (n_snaps is small), or the
 * least recently used one released. */
static int32_t take(kv_state_t *p) {
  if (p->n_snaps_used == p->n_snaps) {
    const int32_t i = p->snap_head;
    release(p, i);
    p->snaps_dropped++;
    return i;
  }
  for (int32_t i = 0; i < p->n_snaps; i++)
    if (p->snap_block[i] == NONE) return i;
  abort(); /* n_snaps_used counts the held ones */
}

/* kv_snap_save from arena entry src. */
static int save(kv_state_t *p, int32_t block, int32_t src) {
  if (p->n_snaps == 0) return -ENOSPC;
  check_block(p, block, "kv_snap_save");
  int32_t i = p->block_snap[block];
  if (i != NONE) {
    lru_unlink(p, i);
  } else {
    i = take(p);
    p->snap_block[i] = block;
    p->block_snap[block] = i;
    p->n_snaps_used++;
  }
  lru_push_tail(p, i);
  p->be->copy(p->be, kv__state_slot(p, p->n_slots + i), kv__state_slot(p, src), p->slot_floats * sizeof(float));
  p->snaps_taken++;
  return 0;
}

int kv_snap_save(kv_state_t *p, int32_t block, int32_t slot) {
  kv__state_check_slot(p, slot, "kv_snap_save");
  return save(p, block, slot);
}

int kv_snap_save_kept(kv_state_t *p, int32_t block, int32_t i) { return save(p, block, kv_state_kept(p, i)); }

int kv_snap_has(const kv_state_t *p, int32_t block) {
  return p->n_snaps > 0 && block >= 0 && block < p->n_blocks && p->block_snap[block] != NONE;
}

void kv_snap_load(kv_state_t *p, int32_t slot, int32_t block, int64_t n_tokens) {
  kv__state_check_slot(p, slot, "kv_snap_load");
  if (!kv_snap_has(p, block)) {
    log_error("kv_snap_load: block %d has no snapshot", block);
    abort();
  }
  const int32_t i = p->block_snap[block];
  lru_unlink(p, i);
  lru_push_tail(p, i);
  p->be->copy(p->be, kv__state_slot(p, slot), kv__state_slot(p, p->n_slots + i), p->slot_floats * sizeof(float));
  p->n_tokens[slot] = n_tokens;
  p->snaps_restored++;
}

void kv_snap_drop(kv_state_t *p, int32_t block) {
  if (kv_snap_has(p, block)) release(p, p->block_snap[block]);
}

void kv_snap_evicted(void *arg, int32_t block) { kv_snap_drop(arg, block); }
