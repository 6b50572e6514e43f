/* tests/gpu/model_lane.h — one model on one backend, stepped by hand, for
 * the full-model check (model_check.c): the backend, the model, a KV cache,
 * a runner and the block tables of a fixed set of sequences.
 *
 * A step is the scheduler's path without the scheduler: each sequence in
 * the step reserves its new tokens (kv_seq_reserve), the attention
 * metadata is built (attn_meta_build), model_forward runs, the tokens are
 * committed (kv_seq_commit). The caller owns the token arrays; the lane
 * keeps only how many tokens of each sequence are in its cache.
 *
 * A hybrid model (Gated DeltaNet layers beside attention: qwen35,
 * qwen35moe, qwen3next) also gets a recurrent-state pool of one slot per
 * sequence (cache/kv_state.h), as the engine's hybrid_setup makes it
 * (without prefix-cache snapshots or kept states): sequence s holds slot
 * slots[s] for the lane's life; a step starting a sequence at position 0
 * resets its state (model_forward does), so ml_reset needs nothing more. */
#ifndef TRAM_TESTS_GPU_MODEL_LANE_H
#define TRAM_TESTS_GPU_MODEL_LANE_H

#include <stdint.h>

#include "model/model.h"

typedef struct ml_lane {
  kern_backend_t *be;         /* owned */
  model_t *model;             /* owned */
  const model_hparams_t *hp;  /* the model's */
  kv_cache_t *cache;          /* owned */
  kv_state_t *state;          /* owned; NULL unless the model is hybrid */
  int32_t *slots;             /* [max_seqs] sequence s's state slot (hybrid) */
  model_runner_t *run;        /* owned */
  attn_meta_t meta;
  int max_seqs, max_tokens;   /* capacities: sequences, tokens per step */
  kv_seq_t *seqs;             /* [max_seqs] block tables */
  /* step scratch */
  const kv_seq_t **step_seqs; /* [max_seqs] */
  int32_t *q_lens;            /* [max_seqs] */
  int32_t *step_slots;        /* [max_seqs] the step's sequences' state slots (hybrid) */
  int32_t *ids, *pos, *rows;  /* [max_tokens] */
  int paths[3];               /* steps run per attn_path_t */
} ml_lane_t;

/* Loads the GGUF file at `path` on backend `device` ("cpu" or "cuda"; CPU
 * threads: `threads`, 0 = one per CPU) with room for max_seqs sequences of
 * up to max_len tokens and steps of up to max_tokens tokens. Returns 0, or
 * -1 after printing why to stderr (the lane is then closed). */
int ml_open(ml_lane_t *l, const char *device, const char *path, int threads, int max_seqs, int max_tokens,
            int max_len);

/* ml_open with the runner's decode-step graphs in mode `graphs`
 * (model_graphs_mode_t, model/model_graph.h; ml_open: off). */
int ml_open_graphs(ml_lane_t *l, const char *device, const char *path, int threads, int max_seqs, int max_tokens,
                   int max_len, int graphs);

/* Frees everything; a zeroed lane is a no-op. */
void ml_close(ml_lane_t *l);

/* Frees every sequence's blocks: all sequences start again from 0 tokens. */
void ml_reset(ml_lane_t *l);

/* Tokens of sequence `seq` in the cache. */
int ml_cached(const ml_lane_t *l, int seq);

/* Runs one step: for i < n, sequence seq[i] (distinct, < max_seqs) adds
 * q[i] tokens, toks[seq[i]][cached .. cached + q[i]). Writes logits
 * [sum q, n_vocab] (every row, in the order of seq[]) when all_rows, else
 * [n, n_vocab] (each sequence's last row). Returns 0, or the negative error
 * of the call that failed (printed). */
int ml_step(ml_lane_t *l, int n, const int *seq, const int *q, int32_t *const *toks, int all_rows, float *logits);

#endif
