/* cache/kv_cache.h — the paged KV storage of every layer, and its block
 * allocator.
 *
 * One arena, allocated once through the backend (be->alloc), holds for each
 * layer a K and a V tensor of [num_blocks, block_size, n_kv_heads, head_dim]
 * elements of be->kv_type (f32 on CPU). A layer's geometry may be its own
 * (Gemma 4: the full-attention layers have wider heads and fewer of them):
 * each layer's tensors then take their own bytes, at their own offset. Block b of every layer belongs to
 * whoever holds block id b in the allocator (cache/kv_alloc.h), which the
 * cache owns: the scheduler reserves a sequence's blocks there, the model
 * writes and reads them through kv_cache_update() and the attention kernels.
 *
 * Sizing: num_blocks is given directly, or derived from a byte budget for the
 * whole arena (K and V of all layers).
 *
 * Threads: the engine thread owns the cache. */
#ifndef TRAM_KV_CACHE_H
#define TRAM_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cache/kv_alloc.h"
#include "kernels/kern.h"

#define KV_DEFAULT_BLOCK_SIZE 32

typedef struct kv_cache_config {
  int n_layers;
  int n_kv_heads;
  int head_dim;
  const int *layer_kv_heads; /* [n_layers] each layer's KV heads (copied); NULL: n_kv_heads on every layer */
  const int *layer_head_dim; /* [n_layers] each layer's head_dim (copied); NULL: head_dim on every layer */
  int block_size;      /* tokens per block; 0: KV_DEFAULT_BLOCK_SIZE */
  int64_t num_blocks;  /* > 0: exactly this many blocks; 0: as many as budget_bytes holds */
  size_t budget_bytes; /* arena bytes (K and V of all layers), used when num_blocks is 0 */
} kv_cache_config_t;

/* Fields are read-only to callers. */
typedef struct kv_cache {
  kern_backend_t *be; /* not owned; outlives the cache */
  int n_layers, n_kv_heads, head_dim; /* n_kv_heads, head_dim: layer 0's (every layer's unless per layer) */
  int kv_dim;         /* n_kv_heads * head_dim (layer 0's) */
  int *layer_kv_heads, *layer_head_dim; /* [n_layers] each layer's geometry (owned) */
  size_t *layer_off;    /* [n_layers] byte offset of each layer's K in the arena; its V follows it */
  int block_size;     /* tokens per block */
  int32_t num_blocks;
  kern_type_t kv_type;  /* be->kv_type */
  size_t elem_bytes;    /* bytes of one kv_type element */
  size_t arena_bytes;   /* the whole arena: K and V of every layer */
  void *arena;          /* device: [n_layers][K, V][num_blocks, block_size, n_kv_heads, head_dim] (owned) */
  kv_alloc_t *alloc;    /* the block allocator (owned) */
} kv_cache_t;

/* Bytes one block takes in the arena: K and V of every layer. */
size_t kv_cache_block_bytes(const kv_cache_config_t *cfg, kern_type_t kv_type);

/* Creates the cache on backend `be`, every block free. Returns NULL after
 * logging why: a non-positive size, a budget that holds no block, more than
 * INT32_MAX slots, or device memory the backend cannot give. */
kv_cache_t *kv_cache_create(kern_backend_t *be, const kv_cache_config_t *cfg);

/* Frees the arena and the allocator; the sequences' block arrays are their
 * owners' (kv_seq_free them first, or just drop them). NULL is a no-op. */
void kv_cache_destroy(kv_cache_t *c);

/* Layer `layer`'s K and V tensors (device pointers into the arena):
 * [num_blocks, block_size, n_kv_heads, head_dim] of kv_type, the layer's
 * own n_kv_heads and head_dim (layer_kv_heads, layer_head_dim). */
void *kv_cache_k(const kv_cache_t *c, int layer);
void *kv_cache_v(const kv_cache_t *c, int layer);

/* Copies block src's K/V into block dst in every layer, on the device
 * (be->copy, ordered with the operations): a forked sequence's own copy of
 * a partial block. Both must be allocated and distinct. */
void kv_cache_copy_block(kv_cache_t *c, int32_t dst, int32_t src);

/* One layer's `update`, all pointers device buffers. */
typedef struct kv_update {
  /* the step's new K/V, written at their slots */
  const float *k;           /* [n_tokens, n_kv_heads, head_dim] f32 */
  const float *v;           /* same */
  const int32_t *slots;     /* [n_tokens] slot = block * block_size + offset; -1 skips a token */
  int n_tokens;
  /* optional gather (the reference varlen path): when k_out is not NULL,
   * every sequence's whole K/V, read through its block-table row, packed
   * along cu_seq_lens_k */
  void *k_out;              /* [cu_seq_lens_k[n_seqs], n_kv_heads, head_dim] kv_type */
  void *v_out;              /* same */
  /* the step's attention arguments, passed to be->kv_gather as they are:
   * n_seqs, cu_seq_lens_k, max_seqlen_k (the longest k_len), block_table,
   * max_blocks_per_seq, and this layer's k_cache/v_cache with the cache's
   * geometry (checked) */
  const kern_attn_args_t *gather;
} kv_update_t;

/* The spec's `update` for `layer`: be->kv_write of the new K/V at their
 * slots, then, if u->k_out, be->kv_gather into k_out/v_out. Every slot and
 * every block a sequence's keys need must be allocated (the caller reserved
 * them). Issued on the backend's stream; nothing is allocated. */
void kv_cache_update(kv_cache_t *c, int layer, const kv_update_t *u);

#endif
