/* kernels/cpu/attn_kv.c — the CPU backend's KV cache copies: kv_write (new
 * K/V rows to their slots) and kv_gather (each sequence's K/V, read through
 * its block table, packed along cu_seq_lens_k). Both are plain row copies;
 * large ones are spread over the pool. The cache holds f32 on CPU. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/cpu/attn_cpu.h"
#include "kernels/cpu/cpu_backend.h"

/* Copies below this many floats run on the calling thread. */
#define KV_PARALLEL_FLOATS (1 << 16)

typedef struct {
  float *k_cache, *v_cache;
  const float *k, *v;
  const int32_t *slots;
  int kv_dim;
} write_job_t;

static void write_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  const write_job_t *w = ctx;
  const size_t bytes = (size_t)w->kv_dim * sizeof(float);
  for (int64_t i = begin; i < end; i++) {
    if (w->slots[i] < 0) continue;
    const int64_t dst = (int64_t)w->slots[i] * w->kv_dim, src = i * w->kv_dim;
    memcpy(w->k_cache + dst, w->k + src, bytes);
    memcpy(w->v_cache + dst, w->v + src, bytes);
  }
}

void kern_cpu_kv_write(kern_backend_t *be, void *k_cache, void *v_cache, const float *k,
                       const float *v, const int32_t *slots, int n, int kv_dim) {
  write_job_t w = {k_cache, v_cache, k, v, slots, kv_dim};
  if ((int64_t)n * kv_dim < KV_PARALLEL_FLOATS)
    write_fn(&w, 0, n, 0);
  else
    kern_pool_for(kern_cpu(be)->pool, n, 0, write_fn, &w);
}

/* One item of the gather: block `blk` (index into the sequence's row of the
 * block table) of sequence `seq`. */
typedef struct {
  int seq, blk;
} gather_item_t;

typedef struct {
  const kern_attn_args_t *a;
  float *k_out, *v_out;
  const gather_item_t *items;
} gather_job_t;

static void gather_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  const gather_job_t *g = ctx;
  const kern_attn_args_t *a = g->a;
  const int64_t kv_dim = (int64_t)a->n_kv_heads * a->head_dim, bs = a->block_size;
  for (int64_t i = begin; i < end; i++) {
    const int b = g->items[i].seq, blk = g->items[i].blk;
    const int k_len = a->cu_seq_lens_k[b + 1] - a->cu_seq_lens_k[b];
    const int64_t n = k_len - blk * bs < bs ? k_len - blk * bs : bs; /* keys in this block */
    const int64_t src = (int64_t)a->block_table[(int64_t)b * a->max_blocks_per_seq + blk] * bs * kv_dim;
    const int64_t dst = ((int64_t)a->cu_seq_lens_k[b] + blk * bs) * kv_dim;
    memcpy(g->k_out + dst, (const float *)a->k_cache + src, (size_t)(n * kv_dim) * sizeof(float));
    memcpy(g->v_out + dst, (const float *)a->v_cache + src, (size_t)(n * kv_dim) * sizeof(float));
  }
}

void kern_cpu_kv_gather(kern_backend_t *be, void *k_out, void *v_out, const kern_attn_args_t *a) {
  int64_t n_items = 0;
  for (int b = 0; b < a->n_seqs; b++)
    n_items += (a->cu_seq_lens_k[b + 1] - a->cu_seq_lens_k[b] + a->block_size - 1) / a->block_size;
  if (n_items == 0) return;
  gather_item_t *items = xmalloc((size_t)n_items * sizeof *items);
  int64_t i = 0;
  for (int b = 0; b < a->n_seqs; b++) {
    const int nb = (a->cu_seq_lens_k[b + 1] - a->cu_seq_lens_k[b] + a->block_size - 1) / a->block_size;
    for (int blk = 0; blk < nb; blk++) items[i++] = (gather_item_t){b, blk};
  }
  gather_job_t g = {a, k_out, v_out, items};
  const int64_t floats = (int64_t)a->cu_seq_lens_k[a->n_seqs] * a->n_kv_heads * a->head_dim;
  if (floats < KV_PARALLEL_FLOATS)
    gather_fn(&g, 0, n_items, 0);
  else
    kern_pool_for(kern_cpu(be)->pool, n_items, 0, gather_fn, &g);
  free(items);
}
