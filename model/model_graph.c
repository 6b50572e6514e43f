/* model/model_graph.c — the host decisions of captured decode steps (see
 * model_graph.h). */
#include "model/model_graph.h"

#include <errno.h>
#include <string.h>

int model_graph_plan_init(model_graph_plan_t *p, int max_rows, int max_seq_len, int block_size) {
  memset(p, 0, sizeof *p);
  if (max_rows < 1 || max_seq_len < 1 || block_size < 1) return -EINVAL;
  p->max_rows = max_rows;
  p->max_seq_len = max_seq_len;
  p->block_size = block_size;
  /* buckets: each power of two below the cap, then the cap */
  for (int64_t r = 1; r < max_rows; r *= 2) p->n_rows++;
  p->n_rows++;
  for (int64_t k = MODEL_GRAPH_MIN_KEYS; k < max_seq_len; k *= 2) p->n_keys++;
  p->n_keys++;
  return 0;
}

/* The smallest v = base · 2^i >= n, capped at cap (index i, or the count of
 * such powers below cap for the cap itself). */
static int bucket(int64_t base, int n, int cap, int *index) {
  int i = 0;
  int64_t v = base;
  while (v < n && v < cap) {
    v *= 2;
    i++;
  }
  if (index) *index = i;
  return v < cap ? (int)v : cap;
}

int model_graph_rows(const model_graph_plan_t *p, int n, int *index) {
  if (n < 1 || n > p->max_rows) return 0;
  return bucket(1, n, p->max_rows, index);
}

int model_graph_keys(const model_graph_plan_t *p, int max_k, int *width, int *index) {
  if (max_k < 1 || max_k > p->max_seq_len) return 0;
  const int keys = bucket(MODEL_GRAPH_MIN_KEYS, max_k, p->max_seq_len, index);
  if (width) *width = (int)(((int64_t)keys + p->block_size - 1) / p->block_size);
  return keys;
}

model_graph_why_t model_graph_eligible(const model_graph_plan_t *p, const model_graph_step_t *s,
                                       model_graph_key_t *key) {
  if (s->n_seqs < 1 || s->n_tokens != s->n_seqs) return MODEL_GRAPH_NOT_DECODE;
  for (int b = 0; b < s->n_seqs; b++)
    if (s->cu_seq_lens_q[b + 1] - s->cu_seq_lens_q[b] != 1) return MODEL_GRAPH_NOT_DECODE;
  int ri = 0, ki = 0, width = 0;
  const int rows = model_graph_rows(p, s->n_seqs, &ri);
  if (!rows) return MODEL_GRAPH_TOO_MANY;
  const int keys = model_graph_keys(p, s->max_seqlen_k, &width, &ki);
  if (!keys) return MODEL_GRAPH_TOO_LONG;
  *key = (model_graph_key_t){.rows = rows, .keys = keys, .width = width, .slot = ri * p->n_keys + ki};
  return MODEL_GRAPH_OK;
}

const char *model_graph_why_name(model_graph_why_t why) {
  switch (why) {
  case MODEL_GRAPH_OK: return "ok";
  case MODEL_GRAPH_NOT_DECODE: return "not a decode step";
  case MODEL_GRAPH_TOO_MANY: return "more sequences than the largest bucket";
  case MODEL_GRAPH_TOO_LONG: return "a context past the largest bucket";
  }
  return "?";
}

model_graph_action_t model_graph_action(model_graphs_mode_t mode, int backend_captures, model_graph_state_t state) {
  if (mode != MODEL_GRAPHS_ON || !backend_captures) return MODEL_GRAPH_EAGER;
  switch (state) {
  case MODEL_GRAPH_EMPTY: return MODEL_GRAPH_WARM_UP;
  case MODEL_GRAPH_WARM: return MODEL_GRAPH_CAPTURE;
  case MODEL_GRAPH_READY: return MODEL_GRAPH_REPLAY;
  case MODEL_GRAPH_FAILED: return MODEL_GRAPH_EAGER;
  }
  return MODEL_GRAPH_EAGER;
}

void model_graph_pad_inputs(int n, int rows, const int32_t *tokens, const int32_t *positions, int n_logits,
                            const int32_t *logit_rows, int32_t *ids, int32_t *pos, int32_t *logit_rows_out) {
  memcpy(ids, tokens, (size_t)n * sizeof *ids);
  memcpy(pos, positions, (size_t)n * sizeof *pos);
  for (int i = n; i < rows; i++) ids[i] = pos[i] = 0;
  memcpy(logit_rows_out, logit_rows, (size_t)n_logits * sizeof *logit_rows_out);
  for (int i = n_logits; i < rows; i++) logit_rows_out[i] = i;
}
