/* attention/attn_meta.c — batch metadata builders (see attn_meta.h). */
#include "attention/attn_meta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

int attn_meta_varlen(int n_seqs, const int32_t *q_lens, const int32_t *k_lens, int32_t *cu_seq_lens_q,
                     int32_t *cu_seq_lens_k, int *max_seqlen_q, int *max_seqlen_k) {
  if (n_seqs < 0) return -EINVAL;
  int64_t tq = 0, tk = 0;
  int mq = 0, mk = 0;
  cu_seq_lens_q[0] = cu_seq_lens_k[0] = 0;
  for (int b = 0; b < n_seqs; b++) {
    if (q_lens[b] < 0 || k_lens[b] < 0) return -EINVAL;
    tq += q_lens[b];
    tk += k_lens[b];
    if (tq > INT32_MAX || tk > INT32_MAX) return -EOVERFLOW;
    cu_seq_lens_q[b + 1] = (int32_t)tq;
    cu_seq_lens_k[b + 1] = (int32_t)tk;
    if (q_lens[b] > mq) mq = q_lens[b];
    if (k_lens[b] > mk) mk = k_lens[b];
  }
  *max_seqlen_q = mq;
  *max_seqlen_k = mk;
  return 0;
}

int attn_meta_paged(const kv_seq_t *const *seqs, int n_seqs, int max_blocks_per_seq, int32_t *block_table,
                    int32_t *cache_seqlens) {
  for (int b = 0; b < n_seqs; b++) {
    const kv_seq_t *s = seqs[b];
    if (s->n_blocks > max_blocks_per_seq) return -E2BIG;
    int32_t *row = block_table + (int64_t)b * max_blocks_per_seq;
    memcpy(row, s->blocks, (size_t)s->n_blocks * sizeof *row);
    for (int i = s->n_blocks; i < max_blocks_per_seq; i++) row[i] = -1;
    cache_seqlens[b] = (int32_t)s->n_tokens;
  }
  return 0;
}

int attn_meta_live_width(int max_seqlen_k, int block_size) {
  return max_seqlen_k > 0 ? (int)(((int64_t)max_seqlen_k + block_size - 1) / block_size) : 0;
}

void attn_meta_image_layout(int n_seqs, int n_tokens, int width, attn_meta_image_t *img) {
  img->width = width;
  img->cu_q = 0;
  img->cu_k = img->cu_q + n_seqs + 1;
  img->cache_seqlens = img->cu_k + n_seqs + 1;
  img->slots = img->cache_seqlens + n_seqs;
  img->block_table = (img->slots + n_tokens + 3) & ~(int64_t)3; /* 16-byte aligned rows start */
  img->n = img->block_table + (int64_t)n_seqs * width;
}

void attn_meta_image_pack(const attn_batch_t *bt, const int32_t *slots, const attn_meta_image_t *img, int32_t *dst) {
  const size_t i32 = sizeof(int32_t), n = (size_t)bt->n_seqs;
  memcpy(dst + img->cu_q, bt->cu_seq_lens_q, (n + 1) * i32);
  memcpy(dst + img->cu_k, bt->cu_seq_lens_k, (n + 1) * i32);
  memcpy(dst + img->cache_seqlens, bt->cache_seqlens, n * i32);
  memcpy(dst + img->slots, slots, (size_t)bt->n_tokens * i32);
  for (int64_t i = img->slots + bt->n_tokens; i < img->block_table; i++) dst[i] = 0; /* padding: defined bytes */
  for (size_t b = 0; b < n; b++)
    memcpy(dst + img->block_table + (int64_t)b * img->width, bt->block_table + (int64_t)b * bt->max_blocks_per_seq,
           (size_t)img->width * i32);
}

void attn_meta_image_pack_padded(const attn_batch_t *bt, const int32_t *slots, int rows, const attn_meta_image_t *img,
                                 int32_t *dst) {
  const int n = bt->n_seqs;
  const int copy = img->width < bt->max_blocks_per_seq ? img->width : bt->max_blocks_per_seq;
  for (int b = 0; b <= rows; b++) {
    dst[img->cu_q + b] = b <= n ? bt->cu_seq_lens_q[b] : bt->cu_seq_lens_q[n] + (b - n);
    dst[img->cu_k + b] = bt->cu_seq_lens_k[b <= n ? b : n];
  }
  for (int b = 0; b < rows; b++) {
    dst[img->cache_seqlens + b] = b < n ? bt->cache_seqlens[b] : -1;
    dst[img->slots + b] = b < n ? slots[b] : -1;
    int32_t *row = dst + img->block_table + (int64_t)b * img->width;
    int i = 0;
    if (b < n) {
      memcpy(row, bt->block_table + (int64_t)b * bt->max_blocks_per_seq, (size_t)copy * sizeof *row);
      i = copy;
    }
    for (; i < img->width; i++) row[i] = -1;
  }
  for (int64_t i = img->slots + rows; i < img->block_table; i++) dst[i] = 0; /* padding: defined bytes */
}

static int32_t *alloc_i32(int64_t n) {
  int32_t *p = xmalloc((size_t)n * sizeof *p);
  return p;
}

int attn_meta_init(attn_meta_t *m, int max_seqs, int max_tokens, int max_blocks_per_seq) {
  memset(m, 0, sizeof *m);
  if (max_seqs < 1 || max_tokens < 1 || max_blocks_per_seq < 1) return -EINVAL;
  m->max_seqs = max_seqs;
  m->max_tokens = max_tokens;
  m->max_blocks_per_seq = max_blocks_per_seq;
  m->q_lens = alloc_i32(max_seqs);
  m->k_lens = alloc_i32(max_seqs);
  m->cu_seq_lens_q = alloc_i32((int64_t)max_seqs + 1);
  m->cu_seq_lens_k = alloc_i32((int64_t)max_seqs + 1);
  m->block_table = alloc_i32((int64_t)max_seqs * max_blocks_per_seq);
  m->cache_seqlens = alloc_i32(max_seqs);
  m->slots = alloc_i32(max_tokens);
  return 0;
}

void attn_meta_free(attn_meta_t *m) {
  free(m->q_lens);
  free(m->k_lens);
  free(m->cu_seq_lens_q);
  free(m->cu_seq_lens_k);
  free(m->block_table);
  free(m->cache_seqlens);
  free(m->slots);
  memset(m, 0, sizeof *m);
}

int attn_meta_build(attn_meta_t *m, const kv_alloc_t *a, const kv_seq_t *const *seqs, const int32_t *q_lens,
                    int n_seqs) {
  if (n_seqs < 1) return -EINVAL;
  if (n_seqs > m->max_seqs) return -E2BIG;
  int64_t n_tokens = 0;
  int width = 1; /* the compact table's stride: the most blocks a sequence of the batch holds */
  for (int b = 0; b < n_seqs; b++) {
    if (q_lens[b] < 0) return -EINVAL;
    n_tokens += q_lens[b];
    m->q_lens[b] = q_lens[b];
    m->k_lens[b] = (int32_t)(seqs[b]->n_tokens + q_lens[b]);
    if (seqs[b]->n_blocks > width) width = seqs[b]->n_blocks;
  }
  if (n_tokens > m->max_tokens || width > m->max_blocks_per_seq) return -E2BIG;
  attn_batch_t *bt = &m->batch;
  int rc = attn_meta_varlen(n_seqs, m->q_lens, m->k_lens, m->cu_seq_lens_q, m->cu_seq_lens_k, &bt->max_seqlen_q,
                            &bt->max_seqlen_k);
  if (rc == 0) rc = attn_meta_paged(seqs, n_seqs, width, m->block_table, m->cache_seqlens);
  if (rc != 0) return rc;
  for (int b = 0; b < n_seqs; b++) {
    for (int i = 0; i < q_lens[b]; i++) {
      int32_t slot = kv_seq_slot(a, seqs[b], seqs[b]->n_tokens + i);
      if (slot < 0) return -EINVAL; /* not reserved */
      m->slots[m->cu_seq_lens_q[b] + i] = slot;
    }
  }
  bt->n_seqs = n_seqs;
  bt->n_tokens = (int)n_tokens;
  bt->cu_seq_lens_q = m->cu_seq_lens_q;
  bt->cu_seq_lens_k = m->cu_seq_lens_k;
  bt->block_table = m->block_table;
  bt->max_blocks_per_seq = width;
  bt->cache_seqlens = m->cache_seqlens;
  bt->slots = m->slots;
  return 0;
}
