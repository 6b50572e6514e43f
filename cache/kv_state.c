/* cache/kv_state.c — the recurrent-state pool (see kv_state.h). */
#include "cache/kv_state.h"

#include <errno.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/log.h"
#include "cache/kv_state_internal.h"

size_t kv_state_slot_bytes(const kv_state_config_t *cfg) {
  return (size_t)cfg->n_layers * cfg->layer_floats * sizeof(float);
}

size_t kv_state_pool_bytes(const kv_state_config_t *cfg) {
  return kv_state_slot_bytes(cfg) * ((size_t)cfg->n_slots + (size_t)cfg->n_keep + 1);
}

size_t kv_state_budget_rest(const kv_state_config_t *cfg, size_t budget, size_t min_kv) {
  const size_t states = kv_state_pool_bytes(cfg);
  if (states > budget || budget - states < min_kv || budget - states == 0) return 0;
  return budget - states;
}

kv_state_t *kv_state_create(kern_backend_t *be, const kv_state_config_t *cfg) {
  if (cfg->n_layers < 1 || cfg->layer_floats < 1 || cfg->n_slots < 1 || cfg->n_snaps < 0 || cfg->n_keep < 0 ||
      cfg->n_snaps > INT32_MAX / 2 || cfg->n_keep > INT32_MAX / 2 ||
      cfg->n_slots > INT32_MAX - 1 - cfg->n_snaps - cfg->n_keep || (cfg->n_snaps > 0 && cfg->n_blocks < 1) ||
      cfg->layer_floats > (SIZE_MAX / sizeof(float)) / (size_t)cfg->n_layers /
                              ((size_t)cfg->n_slots + (size_t)cfg->n_snaps + (size_t)cfg->n_keep + 1)) {
    log_error("kv_state_create: bad size: %d layers of %zu floats, %d slots, %d snapshots over %d blocks, %d kept",
              cfg->n_layers, cfg->layer_floats, cfg->n_slots, cfg->n_snaps, cfg->n_blocks, cfg->n_keep);
    return NULL;
  }
  kv_state_t *p = xcalloc(1, sizeof *p);
  p->be = be;
  p->n_layers = cfg->n_layers;
  p->n_slots = cfg->n_slots;
  p->n_snaps = cfg->n_snaps;
  p->n_keep = cfg->n_keep;
  p->layer_floats = cfg->layer_floats;
  p->slot_floats = (size_t)cfg->n_layers * cfg->layer_floats;
  const size_t slot_bytes = p->slot_floats * sizeof(float);
  p->arena = be->alloc(be, slot_bytes * ((size_t)cfg->n_slots + (size_t)cfg->n_snaps + (size_t)cfg->n_keep + 1));
  if (!p->arena) {
    log_error("kv_state_create: the %s backend is out of memory for %d recurrent states, %d snapshots and %d kept "
              "states of %.1f MB",
              be->name, cfg->n_slots, cfg->n_snaps, cfg->n_keep, (double)slot_bytes / 1e6);
    free(p);
    return NULL;
  }
  float *zeros = xcalloc(1, slot_bytes);
  be->upload(be, kv__state_slot(p, kv__state_zero(p)), zeros, slot_bytes);
  free(zeros);
  p->n_tokens = xcalloc((size_t)cfg->n_slots, sizeof *p->n_tokens);
  p->free_ids = xmalloc((size_t)cfg->n_slots * sizeof *p->free_ids);
  p->in_use = xcalloc((size_t)cfg->n_slots, 1);
  for (int32_t i = 0; i < cfg->n_slots; i++) p->free_ids[i] = cfg->n_slots - 1 - i; /* slot 0 on top */
  p->n_free = cfg->n_slots;
  kv__snap_init(p, cfg->n_snaps, cfg->n_blocks);
  return p;
}

void kv_state_destroy(kv_state_t *p) {
  if (!p) return;
  p->be->free(p->be, p->arena);
  free(p->n_tokens);
  free(p->free_ids);
  free(p->in_use);
  kv__snap_free(p);
  free(p);
}

int32_t kv_state_alloc(kv_state_t *p) {
  if (p->n_free == 0) return -ENOSPC;
  const int32_t slot = p->free_ids[--p->n_free];
  p->in_use[slot] = 1;
  kv_state_reset(p, slot);
  return slot;
}

float *kv__state_slot(const kv_state_t *p, int32_t i) { return p->arena + (size_t)i * p->slot_floats; }
int32_t kv__state_zero(const kv_state_t *p) { return p->n_slots + p->n_snaps + p->n_keep; }

void kv__state_check_slot(const kv_state_t *p, int32_t slot, const char *fn) {
  if (slot < 0 || slot >= p->n_slots || !p->in_use[slot]) {
    log_error("%s: slot %d is not in use (pool of %d)", fn, slot, p->n_slots);
    abort();
  }
}

void kv_state_free(kv_state_t *p, int32_t slot) {
  kv__state_check_slot(p, slot, "kv_state_free");
  p->in_use[slot] = 0;
  p->free_ids[p->n_free++] = slot;
}

int32_t kv_state_used(const kv_state_t *p) { return p->n_slots - p->n_free; }

void kv_state_reset(kv_state_t *p, int32_t slot) {
  kv__state_check_slot(p, slot, "kv_state_reset");
  p->be->copy(p->be, kv__state_slot(p, slot), kv__state_slot(p, kv__state_zero(p)), p->slot_floats * sizeof(float));
  p->n_tokens[slot] = 0;
}

void kv_state_copy(kv_state_t *p, int32_t dst, int32_t src) {
  kv__state_check_slot(p, dst, "kv_state_copy");
  kv__state_check_slot(p, src, "kv_state_copy");
  if (dst == src) return;
  p->be->copy(p->be, kv__state_slot(p, dst), kv__state_slot(p, src), p->slot_floats * sizeof(float));
  p->n_tokens[dst] = p->n_tokens[src];
}

float *kv_state_layer(const kv_state_t *p, int layer) { return p->arena + (size_t)layer * p->layer_floats; }

void kv_state_set_tokens(kv_state_t *p, int32_t slot, int64_t n) {
  kv__state_check_slot(p, slot, "kv_state_set_tokens");
  p->n_tokens[slot] = n;
}

int kv_state_in_use(const kv_state_t *p, int32_t slot) { return slot >= 0 && slot < p->n_slots && p->in_use[slot]; }

int32_t kv_state_kept(const kv_state_t *p, int32_t i) {
  if (i < 0 || i >= p->n_keep) {
    log_error("kv_state_kept: kept state %d out of [0, %d)", i, p->n_keep);
    abort();
  }
  return p->n_slots + p->n_snaps + i;
}

void kv_state_take_kept(kv_state_t *p, int32_t slot, int32_t i, int64_t n_tokens) {
  kv__state_check_slot(p, slot, "kv_state_take_kept");
  p->be->copy(p->be, kv__state_slot(p, slot), kv__state_slot(p, kv_state_kept(p, i)), p->slot_floats * sizeof(float));
  p->n_tokens[slot] = n_tokens;
}
