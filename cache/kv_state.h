/* cache/kv_state.h — the recurrent-state pool of hybrid models (Qwen3.5's
 * Gated DeltaNet layers), beside the paged KV cache (cache/kv_cache.h),
 * which then holds only the full-attention layers.
 *
 * A linear-attention layer keeps, per sequence, a state of fixed size
 * whatever the sequence's length: the convolution's last K - 1 inputs and
 * the delta rule's matrix per value head (the layout is the kernels',
 * kern_gdn_args_t). The pool holds n_slots such states for every
 * recurrent layer, n_snaps snapshots and n_keep kept states (both below),
 * in one device arena allocated once:
 *   [n_slots + n_snaps + n_keep + 1][n_layers][layer_floats] f32
 * the running slots first, then the snapshots, the kept states, the last
 * slot all zeros: the start state a reset copies.
 *
 * A running sequence holds one slot (the scheduler takes it at admission,
 * frees it at preemption or the end, copies it into a fork). The pool
 * also keeps, on the host, how many tokens each slot's state has consumed,
 * so the forward can check that a step continues the state it holds
 * (a sequence's chunk starting at position p needs a state of p tokens;
 * position 0 resets it) — never a silently wrong forward.
 *
 * Snapshots (prefix caching for hybrids, cache/kv_snap.c): a copy of a
 * slot's state taken when its sequence has consumed exactly the tokens up
 * to the end of a published prefix-cache block (cache/kv_alloc.h), kept
 * with that block: a later sequence whose prompt matches the block's chain
 * restores it instead of recomputing the prefix. Snapshots live while
 * their block stays published (the allocator's evict hook drops them with
 * it) and while the n_snaps slots last: taking one when all are held drops
 * the least recently used (its block stays cached, without a state).
 *
 * Kept states (speculative decoding, vLLM's way for Mamba-style layers): a
 * verification step runs a sequence's decoded token and its k drafts as
 * k + 1 rows and the kernels leave the state after each of the first k
 * rows in k kept states of the step's scratch (kern_gdn_args_t.keep); when
 * j < k drafts are accepted the slot takes the state after row j
 * (kv_state_take_kept), the very state j + 1 plain decodes leave, without
 * recomputing; all accepted, the slot already holds the state after row k.
 * n_keep bounds the drafts of one step (the scheduler's spec rows).
 *
 * Threads: the engine thread owns the pool. */
#ifndef TRAM_KV_STATE_H
#define TRAM_KV_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern.h"

typedef struct kv_state_config {
  int n_layers;        /* recurrent layers (>= 1) */
  size_t layer_floats; /* one layer's state per slot (>= 1) */
  int n_slots;         /* sequences that can hold a state at once (>= 1) */
  int n_snaps;         /* snapshots kept at prefix-cache blocks (>= 0; 0: none) */
  int32_t n_blocks;    /* the prefix cache's blocks (>= 1 when n_snaps > 0) */
  int n_keep;          /* kept states of a verification step (>= 0; 0: no speculation) */
} kv_state_config_t;

/* Fields are read-only to callers. */
typedef struct kv_state {
  kern_backend_t *be;  /* not owned */
  int n_layers, n_slots, n_keep;
  size_t layer_floats, slot_floats; /* slot_floats = n_layers * layer_floats */
  float *arena;        /* device [n_slots + n_snaps + n_keep + 1][n_layers][layer_floats] (owned) */
  int64_t *n_tokens;   /* host [n_slots]: tokens each slot's state has consumed */
  int32_t *free_ids;   /* host [n_slots]: a stack of the free slots */
  int32_t n_free;
  uint8_t *in_use;     /* host [n_slots] */
  /* snapshots (kv_snap.c; all NULL when n_snaps is 0) */
  int n_snaps;
  int32_t n_blocks;
  int32_t *snap_block; /* host [n_snaps]: the block snapshot i belongs to; -1: free */
  int32_t *block_snap; /* host [n_blocks]: block b's snapshot; -1: none */
  int32_t *snap_prev, *snap_next; /* host [n_snaps]: the held ones, least recently used first */
  int32_t snap_head, snap_tail;   /* -1 when none is held */
  int32_t n_snaps_used;
  uint64_t snaps_taken, snaps_restored, snaps_dropped; /* dropped: for room (LRU), not with a block */
} kv_state_t;

/* Bytes of one slot (every layer's state); a snapshot is as large. */
size_t kv_state_slot_bytes(const kv_state_config_t *cfg);

/* Bytes of the pool but its snapshots: the n_slots states, the n_keep
 * kept states and the scratch state (the arena's last). */
size_t kv_state_pool_bytes(const kv_state_config_t *cfg);

/* One memory budget for the paged KV cache and the pool, as vLLM counts
 * Mamba states in its KV budget: the pool (kv_state_pool_bytes; the
 * snapshots have a budget of their own) comes out of `budget` first and
 * the KV cache gets the rest. Returns the rest, or 0 when it would be less
 * than min_kv (one KV block: then not even one sequence runs). */
size_t kv_state_budget_rest(const kv_state_config_t *cfg, size_t budget, size_t min_kv);

/* Creates the pool on be, every slot free, no snapshot held. NULL after
 * logging why (a bad size, device memory the backend cannot give). */
kv_state_t *kv_state_create(kern_backend_t *be, const kv_state_config_t *cfg);
/* Frees the arena. NULL is a no-op. */
void kv_state_destroy(kv_state_t *p);

/* A free slot, its state reset (0 tokens); -ENOSPC when none is free. */
int32_t kv_state_alloc(kv_state_t *p);
/* Gives slot back. Freeing a free slot is a programmer error (abort). */
void kv_state_free(kv_state_t *p, int32_t slot);
int32_t kv_state_used(const kv_state_t *p);

/* Resets slot to the start state (zeros, 0 tokens); a device copy ordered
 * with the operations. */
void kv_state_reset(kv_state_t *p, int32_t slot);
/* Copies src's state (and token count) into dst (a fork). */
void kv_state_copy(kv_state_t *p, int32_t dst, int32_t src);

/* Records that slot's state has consumed n tokens (the forward, after a
 * step). */
void kv_state_set_tokens(kv_state_t *p, int32_t slot, int64_t n);
/* 1 when slot is a slot of the pool in use. */
int kv_state_in_use(const kv_state_t *p, int32_t slot);

/* Recurrent layer `layer`'s state in slot 0 (device); slot s's is
 * slot_floats further per slot. */
float *kv_state_layer(const kv_state_t *p, int layer);

/* --- kept states of a verification step ------------------------------------ */

/* The slot number (from the arena's start, as kern_gdn_args_t.keep takes it)
 * of kept state i, 0 <= i < n_keep (abort otherwise: a programmer error). */
int32_t kv_state_kept(const kv_state_t *p, int32_t i);
/* Copies kept state i into slot, which then holds n_tokens. */
void kv_state_take_kept(kv_state_t *p, int32_t slot, int32_t i, int64_t n_tokens);

/* --- snapshots (cache/kv_snap.c) ------------------------------------------- */

/* Keeps slot's state as the snapshot of published block `block` (replacing
 * the one it has): a free snapshot, or the least recently used one dropped.
 * Returns 0, or -ENOSPC when the pool has no snapshots (n_snaps 0). */
int kv_snap_save(kv_state_t *p, int32_t block, int32_t slot);
/* kv_snap_save from kept state i (a block that ends inside a verified step). */
int kv_snap_save_kept(kv_state_t *p, int32_t block, int32_t i);
/* 1 when block has a snapshot. */
int kv_snap_has(const kv_state_t *p, int32_t block);
/* Copies block's snapshot (it must have one) into slot, which then holds
 * n_tokens (the tokens up to the block's end); the snapshot becomes the
 * most recently used. */
void kv_snap_load(kv_state_t *p, int32_t slot, int32_t block, int64_t n_tokens);
/* Frees block's snapshot, if it has one. */
void kv_snap_drop(kv_state_t *p, int32_t block);
/* kv_snap_drop as the allocator's evict hook (kv_alloc_set_evict_hook; arg:
 * the pool): a block leaving the prefix cache takes its snapshot along. */
void kv_snap_evicted(void *arg, int32_t block);

#endif
