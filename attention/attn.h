/* attention/attn.h — the paged attention forward: one layer, one batch, over
 * the paged KV cache (cache/kv_cache.h), on any backend.
 *
 * Once per engine step, attn_step_begin() takes the batch's metadata (host
 * memory, see attention/attn_meta.h), checks it against the cache, packs
 * the live rows at the live block-table width into pinned host staging and
 * uploads that in one asynchronous copy into a device buffer allocated once
 * at creation (nothing is allocated per step), and picks the path:
 *
 *   decode  exactly when every sequence has one query token: attn_decode
 *           appends each new K/V in place at cache_seqlens[b] and attends
 *           over cache_seqlens[b] + 1 keys through the block table;
 *   varlen  otherwise: kv_cache_update() writes the new K/V at their slots,
 *           then attn_varlen_paged reads every sequence's keys through the
 *           block table (default), or, with `gather`, kv_cache_update() also
 *           packs them along cu_seq_lens_k and attn_varlen reads the copy
 *           (the spec's reference path).
 *
 * Then attn_layer_forward() runs once per layer. Both paths, and both
 * varlen variants, give the same bits for the same rows (kernels/kern.h).
 * Counters of steps and tokens per path are kept for /metrics.
 *
 * Semantics (flash_attn_varlen_func / flash_attn_with_kvcache): scale
 * 1/sqrt(head_dim) unless configured, causal aligned bottom-right, zeros for
 * a row that sees no key, query head h reads KV head h / (n_heads / n_kv_heads),
 * and per layer an optional sliding window W: window_size = (W - 1, 0).
 *
 * Threads: the engine thread drives an attn_t; attn_get_stats() may be
 * called from any thread. */
#ifndef TRAM_ATTN_H
#define TRAM_ATTN_H

#include <stdint.h>

#include "attention/attn_meta.h"
#include "cache/kv_cache.h"
#include "kernels/kern.h"

typedef struct attn_config {
  int n_heads;         /* query heads; a multiple of the cache's n_kv_heads */
  float scale;         /* score scale; 0: 1 / sqrt(head_dim) */
  float softcap;       /* > 0: scores soft-capped, softcap * tanh(score / softcap) (Gemma 2); 0: none */
  int max_seqs;        /* sequences per step */
  int max_tokens;      /* query tokens per step */
  int max_seq_len;     /* tokens one sequence may hold, clamped to the cache's slots; 0: every slot */
  int gather;          /* 1: the varlen path gathers K/V and runs attn_varlen (reference) */
  int64_t max_kv_tokens; /* gather only: keys per step (sum of k_len); 0: every slot of the cache */
  const int *layer_window; /* [cache n_layers] each layer's sliding window W (kern_attn_args_t.sliding_window:
                              keys a row sees, itself included; 0: all), copied; NULL: no layer has one */
  const float *const *layer_sinks; /* [cache n_layers] each layer's learned sinks, device [n_heads] or NULL
                                      (kern_attn_args_t.sinks), the pointers copied; NULL: none. A
                                      backend without attn_sinks is refused at attn_create */
} attn_config_t;

typedef enum attn_path {
  ATTN_PATH_NONE = 0, /* no step begun, or the last one was rejected */
  ATTN_PATH_DECODE,
  ATTN_PATH_VARLEN,
} attn_path_t;

typedef struct attn_stats {
  uint64_t decode_steps, varlen_steps;   /* steps that took each path */
  uint64_t decode_tokens, varlen_tokens; /* query tokens of those steps */
} attn_stats_t;

typedef struct attn attn_t;

/* The capacity arithmetic, owned here and nowhere else: the longest
 * sequence `cache` can hold when `want` tokens are asked for (want <= 0:
 * every slot of the cache), i.e. min(want, num_blocks * block_size). */
int32_t attn_seq_len_cap(const kv_cache_t *cache, int64_t want);

/* Creates the forward for `cache` (which it reads its geometry from and
 * must outlive it) on backend `be`, with its device buffers for the
 * configured capacities. Returns NULL after logging why (bad configuration,
 * out of device memory). */
attn_t *attn_create(kern_backend_t *be, kv_cache_t *cache, const attn_config_t *cfg);

/* Frees the forward and its device buffers. NULL is a no-op. */
void attn_destroy(attn_t *attn);

/* Starts a step: checks `batch` (capacities; cumulative lengths from 0,
 * non-decreasing, k_len = cache_seqlens + q_len; maxima; every block a key
 * needs allocated and in range; slots matching the block table), uploads
 * it, and picks the path. Returns 0; -E2BIG when a capacity is exceeded;
 * -EINVAL for inconsistent metadata (logged). On error no step is active
 * and attn_layer_forward() refuses to run. The batch is not kept. */
int attn_step_begin(attn_t *attn, const attn_batch_t *batch);

/* attn_step_begin() for a decode step (every sequence one token) padded
 * to `rows` sequences (bt->n_seqs <= rows <= the capacities of sequences
 * and tokens) with a block table `width` entries wide (at least the live
 * width, at most attn_max_blocks_per_seq): rows past bt->n_seqs are
 * padding (see attn_meta_image_pack_padded), and the kernels see n_seqs =
 * rows and max_seqlen_k = width * block_size (capped at the longest
 * sequence). Every pointer and scalar the layers then issue depends on
 * (rows, width) alone: what a captured step (model/model_graph.h) needs.
 * Returns attn_step_begin's errors; -EINVAL also for a step that is not
 * decode-only or a width out of range. */
int attn_step_begin_padded(attn_t *attn, const attn_batch_t *batch, int rows, int width);

/* The capacities attn_create() derived from its configuration: the longest
 * sequence (attn_seq_len_cap of cfg->max_seq_len) and the block-table row
 * that holds it (ceil(max_seq_len / block_size)); build attn_meta_t with
 * at most this row length. */
int attn_max_seq_len(const attn_t *attn);
int attn_max_blocks_per_seq(const attn_t *attn);

/* The path of the active step (ATTN_PATH_NONE when none is active). */
attn_path_t attn_step_path(const attn_t *attn);

/* Attention of layer `layer` for the active step, all device buffers:
 *   q    [n_tokens, n_heads, head_dim] f32, this step's queries (RoPE applied)
 *   k, v [n_tokens, n_kv_heads, head_dim] f32, this step's new keys/values
 *   out  [n_tokens, n_heads, head_dim] f32, written (may not alias q, k, v)
 * Writes k and v into the cache at the step's slots, then attends. Issued on
 * the backend's stream. Returns 0, or -EINVAL when no step is active or the
 * layer is out of range. */
int attn_layer_forward(attn_t *attn, int layer, const float *q, const float *k, const float *v, float *out);

/* A snapshot of the counters (thread-safe). */
void attn_get_stats(const attn_t *attn, attn_stats_t *out);

#endif
