/* tests/gpu/model_lane.c — one model on one backend, stepped by hand (see
 * model_lane.h). */
#include "tests/gpu/model_lane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) abort();
  return p;
}

/* A hybrid model's recurrent-state pool: one slot per sequence, held for
 * the lane's life (the engine's hybrid_setup without snapshots or kept
 * states). 0, also for a model without recurrent layers; -1 when the pool
 * cannot be made. */
static int open_states(ml_lane_t *l) {
  kv_state_config_t sc = {.n_slots = l->max_seqs};
  if (model_state_config(l->model, &sc) != 0) return 0;
  if (!(l->state = kv_state_create(l->be, &sc))) return -1;
  l->slots = xcalloc((size_t)l->max_seqs, sizeof *l->slots);
  l->step_slots = xcalloc((size_t)l->max_seqs, sizeof *l->step_slots);
  for (int s = 0; s < l->max_seqs; s++)
    if ((l->slots[s] = kv_state_alloc(l->state)) < 0) return -1;
  return 0;
}

int ml_open(ml_lane_t *l, const char *device, const char *path, int threads, int max_seqs, int max_tokens,
            int max_len) {
  return ml_open_graphs(l, device, path, threads, max_seqs, max_tokens, max_len, 0);
}

int ml_open_graphs(ml_lane_t *l, const char *device, const char *path, int threads, int max_seqs, int max_tokens,
                   int max_len, int graphs) {
  memset(l, 0, sizeof *l);
  l->max_seqs = max_seqs;
  l->max_tokens = max_tokens;
  char err[512] = "";
  l->be = kern_backend_create(device, threads);
  if (!l->be) {
    fprintf(stderr, "model_check: no %s backend (see the log)\n", device);
    return -1;
  }
  l->model = model_load(path, l->be, err, sizeof err);
  if (!l->model) {
    fprintf(stderr, "model_check: %s: %s\n", device, err);
    ml_close(l);
    return -1;
  }
  l->hp = model_hparams(l->model);
  kv_cache_config_t kc = {.block_size = 16};
  kc.num_blocks = (int64_t)max_seqs * ((max_len + kc.block_size - 1) / kc.block_size) + 1;
  model_kv_config(l->model, &kc);
  l->cache = kv_cache_create(l->be, &kc);
  if (l->cache && open_states(l) != 0) {
    fprintf(stderr, "model_check: %s: cannot create the recurrent-state pool (see the log)\n", device);
    ml_close(l);
    return -1;
  }
  const model_runner_config_t rc = {
      .max_tokens = max_tokens, .max_seqs = max_seqs, .max_logits = max_tokens, .max_seq_len = max_len,
      .graphs = graphs, .state = l->state};
  l->run = l->cache ? model_runner_create(l->model, l->cache, &rc) : NULL;
  if (!l->run || attn_meta_init(&l->meta, max_seqs, max_tokens, model_runner_max_blocks_per_seq(l->run)) != 0) {
    fprintf(stderr, "model_check: %s: cannot create the KV cache or the runner (see the log)\n", device);
    ml_close(l);
    return -1;
  }
  l->seqs = xcalloc((size_t)max_seqs, sizeof *l->seqs);
  for (int s = 0; s < max_seqs; s++) kv_seq_init(&l->seqs[s]);
  l->step_seqs = xcalloc((size_t)max_seqs, sizeof *l->step_seqs);
  l->q_lens = xcalloc((size_t)max_seqs, sizeof *l->q_lens);
  l->ids = xcalloc((size_t)max_tokens, sizeof *l->ids);
  l->pos = xcalloc((size_t)max_tokens, sizeof *l->pos);
  l->rows = xcalloc((size_t)max_tokens, sizeof *l->rows);
  return 0;
}

void ml_reset(ml_lane_t *l) {
  for (int s = 0; s < l->max_seqs && l->seqs; s++) {
    kv_seq_free(l->cache->alloc, &l->seqs[s]);
    kv_seq_init(&l->seqs[s]);
  }
}

void ml_close(ml_lane_t *l) {
  if (l->seqs) ml_reset(l);
  free(l->seqs), free(l->step_seqs), free(l->q_lens), free(l->ids), free(l->pos), free(l->rows);
  attn_meta_free(&l->meta);
  model_runner_destroy(l->run);
  free(l->slots), free(l->step_slots);
  kv_state_destroy(l->state); /* every slot with it */
  kv_cache_destroy(l->cache);
  model_destroy(l->model);
  kern_backend_destroy(l->be);
  memset(l, 0, sizeof *l);
}

int ml_cached(const ml_lane_t *l, int seq) { return (int)l->seqs[seq].n_tokens; }

int ml_step(ml_lane_t *l, int n, const int *seq, const int *q, int32_t *const *toks, int all_rows, float *logits) {
  int t = 0, rc;
  for (int i = 0; i < n; i++) {
    kv_seq_t *s = &l->seqs[seq[i]];
    if (t + q[i] > l->max_tokens || (rc = kv_seq_reserve(l->cache->alloc, s, q[i])) != 0) {
      fprintf(stderr, "model_check: step of %d+ tokens does not fit the lane\n", t + q[i]);
      return -1;
    }
    for (int j = 0; j < q[i]; j++, t++) {
      l->pos[t] = (int32_t)s->n_tokens + j;
      l->ids[t] = toks[seq[i]][l->pos[t]];
    }
    if (!all_rows) l->rows[i] = t - 1; /* the sequence's last row */
    l->step_seqs[i] = s;
    l->q_lens[i] = q[i];
    if (l->state) l->step_slots[i] = l->slots[seq[i]];
  }
  if (all_rows)
    for (int r = 0; r < t; r++) l->rows[r] = r;
  if ((rc = attn_meta_build(&l->meta, l->cache->alloc, l->step_seqs, l->q_lens, n)) != 0) {
    fprintf(stderr, "model_check: attn_meta_build: %d\n", rc);
    return rc;
  }
  const model_batch_t b = {.n_tokens = t,
                           .tokens = l->ids,
                           .positions = l->pos,
                           .attn = &l->meta.batch,
                           .n_logits = all_rows ? t : n,
                           .logit_rows = l->rows,
                           .state_slots = l->state ? l->step_slots : NULL};
  if ((rc = model_forward(l->run, &b, logits)) != 0) {
    fprintf(stderr, "model_check: model_forward: %d\n", rc);
    return rc;
  }
  l->paths[attn_step_path(model_runner_attn(l->run))]++;
  for (int i = 0; i < n; i++) kv_seq_commit(l->cache->alloc, &l->seqs[seq[i]], q[i]);
  return 0;
}
