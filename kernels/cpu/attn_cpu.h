/* kernels/cpu/attn_cpu.h — the CPU backend's KV cache and attention kernels
 * (the kv_write, kv_gather, attn_varlen, attn_varlen_paged and attn_decode
 * entries of kern_backend_t; semantics in kernels/kern.h), and the one inner
 * routine the three attention kernels share.
 *
 * How a query row is computed (the same arithmetic in all three kernels, which
 * is what makes them agree bit for bit). A row that sees n keys (keys
 * 0..n-1 of its sequence) walks them in tiles of KERN_ATTN_TILE keys at fixed
 * absolute positions [t*TILE, (t+1)*TILE). Each tile gives a *partial*: the
 * tile's max score m, l = sum exp(s - m) and acc = sum exp(s - m) * v, computed
 * from scratch by kern_cpu__attn_tile(). Tiles fold, in order, into a
 * *segment* state (KERN_ATTN_SEG_TILES tiles, again at fixed absolute
 * positions) with kern_cpu__attn_merge(); segments fold, in order, into the
 * row state; the output is acc / l (zeros for a row that sees no key).
 *
 * A sliding window only masks keys: tiles stay at the same absolute
 * positions, the tile holding the window's edge masks the keys before it,
 * and tiles and segments wholly before the edge are skipped (an empty state
 * folds as a no-op), so windowed rows keep every property below.
 *
 * Because tile and segment boundaries depend only on key positions, a row's
 * bits depend only on its query vector and its keys: not on the kernel, the
 * other rows of the batch, how a prompt was split into chunks, or the thread
 * count. Work may be split along keys at segment boundaries (long contexts
 * with few sequences): the segment states then go to scratch memory and a
 * second pass folds them, doing exactly the merges the unsplit path does. */
#ifndef TRAM_KERN_CPU_ATTN_H
#define TRAM_KERN_CPU_ATTN_H

#include <stdint.h>

#include "kernels/kern.h"

#define KERN_ATTN_TILE 64      /* keys per tile */
#define KERN_ATTN_SEG_TILES 16 /* tiles per segment (1,024 keys): the unit of a split */

/* --- the kern_backend_t entries (see kernels/kern.h) ----------------------- */
void kern_cpu_kv_write(kern_backend_t *be, void *k_cache, void *v_cache, const float *k,
                       const float *v, const int32_t *slots, int n, int kv_dim);
void kern_cpu_kv_gather(kern_backend_t *be, void *k_out, void *v_out, const kern_attn_args_t *a);
void kern_cpu_attn_varlen(kern_backend_t *be, const kern_attn_args_t *a);
void kern_cpu_attn_varlen_paged(kern_backend_t *be, const kern_attn_args_t *a);
void kern_cpu_attn_decode(kern_backend_t *be, const kern_attn_args_t *a);

/* --- shared inside kernels/cpu/attn_*.c ------------------------------------ */

/* A partial (or folded) softmax state of one query vector: acc [head_dim]
 * then, at index head_dim, m (the max score; -INFINITY when empty) and l (sum
 * of exp(score - m); 0 when empty). Stored in KERN_ATTN_PART(head_dim) floats
 * so that acc stays 32-byte aligned in arrays of states. */
#define KERN_ATTN_PART(head_dim) ((head_dim) + 8)

/* Sets a state to empty (no key seen). */
void kern_cpu__attn_empty(float *st, int head_dim);

/* A tile's keys: key j is krows[j] + g * head_dim and value j is
 * vrows[j] + g * head_dim for KV head g (rows of [n_kv_heads, head_dim]
 * f32). The arrays hold at least n rounded up to a multiple of 8 pointers;
 * those past n must be readable (computed, then ignored). */
typedef struct kern_cpu__attn_keys {
  const float *const *krows;
  const float *const *vrows;
  int n;     /* 0..KERN_ATTN_TILE */
  int first; /* keys before it are masked (a sliding window's edge); 0..n-1 */
} kern_cpu__attn_keys_t;

/* The partials of one query row, q [n_heads, head_dim], over keys
 * [first, n) of one tile (1 <= n): head h reads KV head h / group. Writes
 * part [n_heads, KERN_ATTN_PART(head_dim)]. Scores are q·k * scale, then,
 * when softcap > 0, softcap * tanh(score / softcap). A head's partial
 * depends only on its query vector and the n keys, never on the other
 * heads. */
void kern_cpu__attn_tile(const float *q, int n_heads, int group, int head_dim, float scale, float softcap,
                         const kern_cpu__attn_keys_t *keys, float *part);

/* Folds state src into dst (dst := dst ∘ src, in that order); an empty src
 * leaves dst alone, an empty dst becomes a copy of src. */
void kern_cpu__attn_merge(float *dst, const float *src, int head_dim);

/* out [head_dim] = acc / (l + exp(sink - m)), or zeros for an empty state;
 * sink = -INFINITY: no sink (acc / l). The sink is a learned logit that
 * joins the denominator with no value (gpt-oss); added once, at the end, so
 * every kernel and split gives the same bits. */
void kern_cpu__attn_finish(float *out, const float *st, int head_dim, float sink);

#endif
