/* attention/attn_meta.h — the metadata of one batch for the two attention
 * paths, built on the host from per-sequence lengths and block tables.
 *
 *   varlen path: cu_seq_lens_q, cu_seq_lens_k (cumulative lengths, first
 *                entry 0) and max_seqlen_q, max_seqlen_k; sequence b owns
 *                query rows [cu_q[b], cu_q[b+1]) and keys [cu_k[b], cu_k[b+1]).
 *   decode path: block_table [n_seqs, max_blocks_per_seq] (a sequence's block
 *                ids in token order, -1 for unallocated entries) and
 *                cache_seqlens (tokens cached before the step).
 *
 * The spec's examples: query lengths [10, 3, 1] with key lengths [0, 1, 7]
 * give cu_seq_lens_q [0, 10, 13, 14], cu_seq_lens_k [0, 0, 1, 8], maxima 10
 * and 7; cached lengths [30, 32, 70] in blocks of 32 give rows like
 * [2, -1, -1, -1], [0, 1, -1, -1], [3, 5, 6, -1].
 *
 * attn_meta_t bundles both, plus the slot of every new token, for one model
 * step (k_len = cached + q_len), in host arrays sized once at init. */
#ifndef TRAM_ATTN_META_H
#define TRAM_ATTN_META_H

#include <stdint.h>

#include "cache/kv_alloc.h"

/* Fills cu_seq_lens_q and cu_seq_lens_k ([n_seqs + 1] each) and the maxima
 * from q_lens and k_lens ([n_seqs]). Returns 0; -EINVAL for a negative
 * length or n_seqs < 0; -EOVERFLOW when a total passes INT32_MAX. Outputs
 * are unspecified on error. */
int attn_meta_varlen(int n_seqs, const int32_t *q_lens, const int32_t *k_lens, int32_t *cu_seq_lens_q,
                     int32_t *cu_seq_lens_k, int *max_seqlen_q, int *max_seqlen_k);

/* Fills block_table [n_seqs, max_blocks_per_seq] with each sequence's block
 * ids, -1 past its last block, and cache_seqlens [n_seqs] with each
 * sequence's n_tokens. Returns 0, or -E2BIG when a sequence holds more than
 * max_blocks_per_seq blocks. */
int attn_meta_paged(const kv_seq_t *const *seqs, int n_seqs, int max_blocks_per_seq, int32_t *block_table,
                    int32_t *cache_seqlens);

/* Everything the attention forward needs about one step, in host memory.
 * attn_step_begin() reads it and keeps nothing. */
typedef struct attn_batch {
  int n_seqs;
  int n_tokens;                 /* query tokens of the step: cu_seq_lens_q[n_seqs] */
  const int32_t *cu_seq_lens_q; /* [n_seqs + 1] */
  const int32_t *cu_seq_lens_k; /* [n_seqs + 1]; k_len = cache_seqlens + q_len */
  int max_seqlen_q, max_seqlen_k;
  const int32_t *block_table;   /* [n_seqs, max_blocks_per_seq], -1 = unallocated */
  int max_blocks_per_seq;       /* row stride of block_table */
  const int32_t *cache_seqlens; /* [n_seqs] tokens cached before the step */
  const int32_t *slots;         /* [n_tokens] slot of each query token's new K/V, or NULL:
                                   derived from the block table */
} attn_batch_t;

/* The block-table width a batch needs: the blocks of its longest key
 * range, ceil(max_seqlen_k / block_size) (0 for max_seqlen_k <= 0). What
 * the device table holds per row, whatever the host table's stride. */
int attn_meta_live_width(int max_seqlen_k, int block_size);

/* The device image of one batch: a single int32 buffer holding
 * cu_seq_lens_q, cu_seq_lens_k, cache_seqlens, slots and the block table of
 * the live rows at the live width (block_table 16-byte aligned), uploaded in
 * one copy. Offsets and the total n are in int32 elements. */
typedef struct attn_meta_image {
  int64_t cu_q, cu_k, cache_seqlens, slots, block_table, n;
  int width; /* block-table row stride of the image */
} attn_meta_image_t;

/* The layout of the image of n_seqs sequences, n_tokens tokens and rows of
 * `width` entries. */
void attn_meta_image_layout(int n_seqs, int n_tokens, int width, attn_meta_image_t *img);

/* Writes the image of bt (layout img, from bt's n_seqs, n_tokens and a width
 * of at least every row's blocks) into dst [img->n]: the first img->width
 * entries of each block-table row, and `slots` ([n_tokens]) as the slots. */
void attn_meta_image_pack(const attn_batch_t *bt, const int32_t *slots, const attn_meta_image_t *img, int32_t *dst);

/* The image of a decode batch (every sequence one query token) padded to
 * `rows` >= bt->n_seqs sequences (layout img of rows sequences, rows
 * tokens and any width): the live rows as attn_meta_image_pack writes them
 * (entries past a row's stride -1), then padding rows of one query token
 * that see no key: cu_seq_lens_k stays, cache_seqlens and slots -1, block
 * table rows -1 (kern.h: a padding row; model/model_graph.h). */
void attn_meta_image_pack_padded(const attn_batch_t *bt, const int32_t *slots, int rows, const attn_meta_image_t *img,
                                 int32_t *dst);

/* Host arrays for building a step's attn_batch_t from sequences. Fields are
 * read-only; `batch` views the arrays after attn_meta_build(). */
typedef struct attn_meta {
  attn_batch_t batch;
  int max_seqs, max_tokens, max_blocks_per_seq; /* capacities */
  int32_t *q_lens, *k_lens;                     /* [max_seqs] */
  int32_t *cu_seq_lens_q, *cu_seq_lens_k;       /* [max_seqs + 1] */
  int32_t *block_table;                         /* [max_seqs, max_blocks_per_seq] */
  int32_t *cache_seqlens;                       /* [max_seqs] */
  int32_t *slots;                               /* [max_tokens] */
} attn_meta_t;

/* Allocates the arrays (malloc; aborts when out of memory). Returns 0, or
 * -EINVAL for a non-positive capacity. */
int attn_meta_init(attn_meta_t *m, int max_seqs, int max_tokens, int max_blocks_per_seq);

/* Frees the arrays; a zeroed or freed attn_meta_t is a no-op. */
void attn_meta_free(attn_meta_t *m);

/* Builds m->batch for one step in which sequence b adds q_lens[b] tokens
 * after its seqs[b]->n_tokens cached ones (k_len = n_tokens + q_len), with
 * the slot of every new token. The block table is compact: its stride
 * (batch.max_blocks_per_seq) is the most blocks any of these sequences
 * holds, not the capacity. The sequences must have reserved those
 * tokens (kv_seq_reserve) and are not changed. Returns 0; -E2BIG when a
 * capacity is exceeded; -EINVAL for n_seqs < 1, a negative q_len or a token
 * without a reserved slot. */
int attn_meta_build(attn_meta_t *m, const kv_alloc_t *a, const kv_seq_t *const *seqs, const int32_t *q_lens,
                    int n_seqs);

#endif
