/* cache/kv_state_internal.h — what kv_state.c (the slots) and kv_snap.c
 * (the snapshots) share of the recurrent-state pool. Not for use outside
 * cache/. */
#ifndef TRAM_KV_STATE_INTERNAL_H
#define TRAM_KV_STATE_INTERNAL_H

#include "cache/kv_state.h"

/* Entry i of the arena (device): a running slot (i < n_slots), snapshot
 * i - n_slots, a kept state (kv_state_kept), or the zero state
 * (kv__state_zero). */
float *kv__state_slot(const kv_state_t *p, int32_t i);
int32_t kv__state_zero(const kv_state_t *p);
/* Aborts, naming fn, when slot is not a running slot in use. */
void kv__state_check_slot(const kv_state_t *p, int32_t slot, const char *fn);

/* The snapshot index (n_snaps free snapshots over n_blocks blocks), and its
 * release. */
void kv__snap_init(kv_state_t *p, int n_snaps, int32_t n_blocks);
void kv__snap_free(kv_state_t *p);

#endif
