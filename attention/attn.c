/* attention/attn.c — the paged attention forward (see attn.h). */
#include "attention/attn.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

struct attn {
  kern_backend_t *be;  /* not owned */
  kv_cache_t *cache;   /* not owned */
  attn_config_t cfg;       /* cfg.layer_window points at layer_window below */
  int *layer_window;       /* [n_layers] owned copy, or NULL */
  const float **layer_sinks; /* [n_layers] owned copy of the pointers (not of the sinks), or NULL */
  int max_seq_len;        /* attn_seq_len_cap(cfg.max_seq_len) */
  int max_blocks_per_seq; /* block-table row capacity: ceil(max_seq_len / block_size) */
  int read_window;        /* > 0: every layer has a sliding window of at most this many keys and
                             the kernels read no key before its edge rounded down to
                             be->attn_window_granule: blocks wholly before that may be -1
                             (released, scheduler/); 0: every block of a row's keys is read */

  /* the step's metadata, one attn_meta_image_t of the live rows and width
   * (attn_meta.h), packed into host staging (be->host_alloc: pinned on CUDA;
   * two, used in turn, as the previous step's upload_async may still read
   * one) and uploaded in one asynchronous copy into a device buffer; all
   * sized at creation for the capacities */
  int32_t *image;             /* device: [image_cap] */
  int32_t *stage[2];          /* host staging: [image_cap] each */
  int stage_next;             /* the staging buffer the next step packs into */
  void *k_gather, *v_gather;  /* gather only: [max_kv_tokens, n_kv_heads, head_dim] kv_type */
  int32_t *host_slots;        /* [max_tokens] host staging for derived slots */

  /* the active step */
  attn_path_t path;
  int n_tokens;
  const int32_t *slots;  /* device: the step's slots (in image) */
  int max_q, max_k;      /* the step's longest q_len and k_len (check_batch) */
  kern_attn_args_t args; /* everything but q, out, the layer's cache and k/v */

  _Atomic uint64_t decode_steps, varlen_steps, decode_tokens, varlen_tokens;
};

static void *dev_alloc(attn_t *at, size_t bytes, int *failed) {
  void *p = at->be->alloc(at->be, bytes);
  if (!p) *failed = 1;
  return p;
}

int32_t attn_seq_len_cap(const kv_cache_t *cache, int64_t want) {
  const int64_t cache_slots = (int64_t)cache->num_blocks * cache->block_size; /* <= INT32_MAX (kv_cache) */
  return (int32_t)(want > 0 && want < cache_slots ? want : cache_slots);
}

attn_t *attn_create(kern_backend_t *be, kv_cache_t *cache, const attn_config_t *cfg) {
  const int64_t cache_slots = (int64_t)cache->num_blocks * cache->block_size;
  int bad_window = -1;
  for (int l = 0; cfg->layer_window && l < cache->n_layers && bad_window < 0; l++)
    if (cfg->layer_window[l] < 0) bad_window = l;
  if (bad_window >= 0) {
    log_error("attn_create: layer %d has a sliding window of %d (want >= 0)", bad_window, cfg->layer_window[bad_window]);
    return NULL;
  }
  if (cfg->n_heads < 1 || cfg->n_heads % cache->n_kv_heads != 0 || cfg->max_seqs < 1 || cfg->max_tokens < 1 ||
      cfg->max_seq_len < 0 || cfg->max_kv_tokens < 0 || !(cfg->scale >= 0.0f) || !(cfg->softcap >= 0.0f)) {
    log_error("attn_create: bad configuration: %d query heads for %d KV heads, %d sequences, %d tokens, "
              "max_seq_len %d, max_kv_tokens %lld, scale %g",
              cfg->n_heads, cache->n_kv_heads, cfg->max_seqs, cfg->max_tokens, cfg->max_seq_len,
              (long long)cfg->max_kv_tokens, cfg->scale);
    return NULL;
  }
  if (cfg->layer_sinks && !be->attn_sinks) {
    log_error("attn_create: the %s backend's attention has no learned sinks (gpt-oss): use --device cpu", be->name);
    return NULL;
  }
  attn_t *at = xcalloc(1, sizeof *at);
  at->be = be;
  at->cache = cache;
  at->cfg = *cfg;
  if (at->cfg.scale == 0.0f) at->cfg.scale = 1.0f / sqrtf((float)cache->head_dim);
  if (cfg->layer_sinks) {
    at->layer_sinks = xmalloc((size_t)cache->n_layers * sizeof *at->layer_sinks);
    memcpy(at->layer_sinks, cfg->layer_sinks, (size_t)cache->n_layers * sizeof *at->layer_sinks);
    at->cfg.layer_sinks = at->layer_sinks;
  }
  if (cfg->layer_window) {
    at->layer_window = xmalloc((size_t)cache->n_layers * sizeof *at->layer_window);
    memcpy(at->layer_window, cfg->layer_window, (size_t)cache->n_layers * sizeof *at->layer_window);
    at->cfg.layer_window = at->layer_window;
    for (int l = 0; l < cache->n_layers; l++) {
      if (cfg->layer_window[l] <= 0) {
        at->read_window = 0;
        break;
      }
      if (cfg->layer_window[l] > at->read_window) at->read_window = cfg->layer_window[l];
    }
    if (cfg->gather || be->attn_window_granule <= 0) at->read_window = 0; /* the gather reads every key */
  }
  at->max_seq_len = attn_seq_len_cap(cache, cfg->max_seq_len);
  at->cfg.max_seq_len = at->max_seq_len;
  at->max_blocks_per_seq = (int)(((int64_t)at->max_seq_len + cache->block_size - 1) / cache->block_size);
  if (at->cfg.max_kv_tokens == 0) at->cfg.max_kv_tokens = cache_slots;

  int failed = 0;
  attn_meta_image_t cap;
  attn_meta_image_layout(cfg->max_seqs, cfg->max_tokens, at->max_blocks_per_seq, &cap);
  const size_t image_bytes = (size_t)cap.n * sizeof(int32_t);
  at->image = dev_alloc(at, image_bytes, &failed);
  for (int i = 0; i < 2; i++) {
    at->stage[i] = be->host_alloc(be, image_bytes);
    if (!at->stage[i]) failed = 1;
  }
  if (cfg->gather) {
    size_t bytes = (size_t)at->cfg.max_kv_tokens * cache->kv_dim * cache->elem_bytes;
    at->k_gather = dev_alloc(at, bytes, &failed);
    at->v_gather = dev_alloc(at, bytes, &failed);
  }
  at->host_slots = xmalloc((size_t)cfg->max_tokens * sizeof(int32_t));
  if (failed) {
    log_error("attn_create: the %s backend is out of memory for the metadata buffers (%d sequences, "
              "%d tokens, %d blocks per sequence%s)",
              be->name, cfg->max_seqs, cfg->max_tokens, at->max_blocks_per_seq, cfg->gather ? ", gather" : "");
    attn_destroy(at);
    return NULL;
  }
  return at;
}

void attn_destroy(attn_t *at) {
  if (!at) return;
  kern_backend_t *be = at->be;
  be->free(be, at->image);
  be->host_free(be, at->stage[0]);
  be->host_free(be, at->stage[1]);
  be->free(be, at->k_gather);
  be->free(be, at->v_gather);
  free(at->host_slots);
  free(at->layer_window);
  free(at->layer_sinks);
  free(at);
}

/* Checks a batch against the capacities and the cache; fills host_slots
 * when the batch has none. Returns 0, -E2BIG or -EINVAL (logged). */
static int check_batch(attn_t *at, const attn_batch_t *bt) {
  const kv_cache_t *c = at->cache;
  const int bs = c->block_size;
  if (bt->n_seqs < 1 || bt->n_seqs > at->cfg.max_seqs || bt->n_tokens < 1 || bt->n_tokens > at->cfg.max_tokens ||
      bt->max_blocks_per_seq < 1 || bt->max_blocks_per_seq > at->max_blocks_per_seq) {
    log_error("attn_step_begin: %d sequences, %d tokens, %d blocks per sequence: outside 1..%d, 1..%d, 1..%d",
              bt->n_seqs, bt->n_tokens, bt->max_blocks_per_seq, at->cfg.max_seqs, at->cfg.max_tokens,
              at->max_blocks_per_seq);
    return -E2BIG;
  }
  const int32_t *cq = bt->cu_seq_lens_q, *ck = bt->cu_seq_lens_k;
  if (cq[0] != 0 || ck[0] != 0 || cq[bt->n_seqs] != bt->n_tokens) {
    log_error("attn_step_begin: cu_seq_lens must start at 0 and cu_seq_lens_q end at n_tokens (%d, %d, %d vs %d)",
              cq[0], ck[0], cq[bt->n_seqs], bt->n_tokens);
    return -EINVAL;
  }
  if (at->cfg.gather && ck[bt->n_seqs] > at->cfg.max_kv_tokens) {
    log_error("attn_step_begin: %d keys to gather, room for %lld", ck[bt->n_seqs], (long long)at->cfg.max_kv_tokens);
    return -E2BIG;
  }
  at->max_q = at->max_k = 0;
  for (int b = 0; b < bt->n_seqs; b++) {
    const int q_len = cq[b + 1] - cq[b], k_len = ck[b + 1] - ck[b], cached = bt->cache_seqlens[b];
    if (q_len < 0 || cached < 0 || (int64_t)k_len != (int64_t)cached + q_len || q_len > bt->max_seqlen_q || k_len > bt->max_seqlen_k) {
      log_error("attn_step_begin: sequence %d: q_len %d, k_len %d, %d cached (maxima %d, %d): want "
                "k_len = cached + q_len within the maxima",
                b, q_len, k_len, cached, bt->max_seqlen_q, bt->max_seqlen_k);
      return -EINVAL;
    }
    if (q_len > at->max_q) at->max_q = q_len;
    if (k_len > at->max_k) at->max_k = k_len;
    const int32_t *row = bt->block_table + (int64_t)b * bt->max_blocks_per_seq;
    const int64_t n_blocks = ((int64_t)k_len + bs - 1) / bs;
    if (n_blocks > bt->max_blocks_per_seq) {
      log_error("attn_step_begin: sequence %d needs %lld blocks, the table has %d per sequence", b,
                (long long)n_blocks, bt->max_blocks_per_seq);
      return -EINVAL;
    }
    /* blocks before what the step's first row reads may have been released */
    const int64_t edge = at->read_window ? (int64_t)cached + 1 - at->read_window : 0;
    const int64_t g = at->be->attn_window_granule, unread = edge > 0 ? edge / g * g / bs : 0;
    for (int64_t i = 0; i < n_blocks; i++) {
      if ((row[i] < 0 && i >= unread) || row[i] < -1 || row[i] >= c->num_blocks) {
        log_error("attn_step_begin: sequence %d, block %lld of its %d keys is %d (cache blocks 0..%d)", b,
                  (long long)i, k_len, row[i], c->num_blocks - 1);
        return -EINVAL;
      }
    }
    for (int i = 0; i < q_len; i++) {
      const int pos = cached + i;
      const int32_t slot = kv_table_slot(row, bs, pos); /* kv_seq_slot's arithmetic, asserted */
      if (!bt->slots) {
        at->host_slots[cq[b] + i] = slot;
      } else if (bt->slots[cq[b] + i] != slot) {
        log_error("attn_step_begin: sequence %d, token %d: slot %d, but its block table puts it at %d", b, pos,
                  bt->slots[cq[b] + i], slot);
        return -EINVAL;
      }
    }
  }
  return 0;
}

/* 1 when every sequence of bt adds one token (q_len >= 0 each, sum n: all 1). */
static int is_decode(const attn_batch_t *bt) {
  if (bt->n_tokens != bt->n_seqs) return 0;
  for (int b = 0; b < bt->n_seqs; b++)
    if (bt->cu_seq_lens_q[b + 1] - bt->cu_seq_lens_q[b] != 1) return 0;
  return 1;
}

/* Uploads the packed image (layout img, in the staging buffer `stage`) and
 * sets the step's path, args and counters for n_seqs sequences of n_tokens
 * rows (real n_real tokens), maxima max_q and max_k. */
static void step_start(attn_t *at, const attn_meta_image_t *img, int32_t *stage, attn_path_t path, int n_seqs,
                       int n_tokens, int n_real, int max_q, int max_k) {
  kern_backend_t *be = at->be;
  be->upload_async(be, at->image, stage, (size_t)img->n * sizeof(int32_t));
  at->slots = at->image + img->slots;
  at->path = path;
  at->n_tokens = n_tokens;
  const kv_cache_t *c = at->cache;
  at->args = (kern_attn_args_t){
      .n_seqs = n_seqs,
      .n_heads = at->cfg.n_heads,
      .n_kv_heads = c->n_kv_heads,
      .head_dim = c->head_dim,
      .scale = at->cfg.scale,
      .cu_seq_lens_q = at->image + img->cu_q,
      .cu_seq_lens_k = at->image + img->cu_k,
      .max_seqlen_q = max_q,
      .max_seqlen_k = max_k,
      .total_q = n_tokens,
      .softcap = at->cfg.softcap,
      .k = at->k_gather,
      .v = at->v_gather,
      .block_size = c->block_size,
      .block_table = at->image + img->block_table,
      .max_blocks_per_seq = img->width,
      .cache_seqlens = at->image + img->cache_seqlens,
  };
  if (path == ATTN_PATH_DECODE) {
    atomic_fetch_add_explicit(&at->decode_steps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&at->decode_tokens, (uint64_t)n_real, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&at->varlen_steps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&at->varlen_tokens, (uint64_t)n_real, memory_order_relaxed);
  }
}

/* The staging buffer the next step packs into (two, used in turn). */
static int32_t *next_stage(attn_t *at) {
  int32_t *stage = at->stage[at->stage_next];
  at->stage_next ^= 1;
  return stage;
}

int attn_step_begin(attn_t *at, const attn_batch_t *bt) {
  at->path = ATTN_PATH_NONE;
  int rc = check_batch(at, bt);
  if (rc != 0) return rc;
  /* only the live rows at the live width: checked above, every row's key
   * blocks lie within ceil(max k_len / block_size) <= bt->max_blocks_per_seq */
  attn_meta_image_t img;
  attn_meta_image_layout(bt->n_seqs, bt->n_tokens, attn_meta_live_width(at->max_k, at->cache->block_size), &img);
  int32_t *stage = next_stage(at);
  attn_meta_image_pack(bt, bt->slots ? bt->slots : at->host_slots, &img, stage);
  /* the exact maxima (bt's may be bounds): they size the grids */
  step_start(at, &img, stage, is_decode(bt) ? ATTN_PATH_DECODE : ATTN_PATH_VARLEN, bt->n_seqs, bt->n_tokens,
             bt->n_tokens, at->max_q, at->max_k);
  return 0;
}

int attn_step_begin_padded(attn_t *at, const attn_batch_t *bt, int rows, int width) {
  at->path = ATTN_PATH_NONE;
  int rc = check_batch(at, bt);
  if (rc != 0) return rc;
  const int bs = at->cache->block_size;
  if (!is_decode(bt) || rows < bt->n_seqs || rows > at->cfg.max_seqs || rows > at->cfg.max_tokens ||
      width < attn_meta_live_width(at->max_k, bs) || width > at->max_blocks_per_seq) {
    log_error("attn_step_begin_padded: %s step of %d sequences padded to %d (capacity %d), width %d (live %d, "
              "capacity %d)",
              is_decode(bt) ? "a decode" : "not a decode", bt->n_seqs, rows,
              at->cfg.max_seqs < at->cfg.max_tokens ? at->cfg.max_seqs : at->cfg.max_tokens, width,
              attn_meta_live_width(at->max_k, bs), at->max_blocks_per_seq);
    return -EINVAL;
  }
  attn_meta_image_t img;
  attn_meta_image_layout(rows, rows, width, &img);
  int32_t *stage = next_stage(at);
  attn_meta_image_pack_padded(bt, bt->slots ? bt->slots : at->host_slots, rows, &img, stage);
  const int64_t keys = (int64_t)width * bs;
  step_start(at, &img, stage, ATTN_PATH_DECODE, rows, rows, bt->n_tokens, 1,
             (int)(keys < at->max_seq_len ? keys : at->max_seq_len));
  return 0;
}

attn_path_t attn_step_path(const attn_t *at) { return at->path; }

int attn_max_seq_len(const attn_t *at) { return at->max_seq_len; }

int attn_max_blocks_per_seq(const attn_t *at) { return at->max_blocks_per_seq; }

int attn_layer_forward(attn_t *at, int layer, const float *q, const float *k, const float *v, float *out) {
  kv_cache_t *c = at->cache;
  if (at->path == ATTN_PATH_NONE || layer < 0 || layer >= c->n_layers) {
    log_error("attn_layer_forward: %s (layer %d of %d)", at->path == ATTN_PATH_NONE ? "no step begun" : "bad layer",
              layer, c->n_layers);
    return -EINVAL;
  }
  kern_backend_t *be = at->be;
  kern_attn_args_t a = at->args;
  a.q = q;
  a.out = out;
  a.k_cache = kv_cache_k(c, layer);
  a.v_cache = kv_cache_v(c, layer);
  a.sliding_window = at->layer_window ? at->layer_window[layer] : 0;
  a.sinks = at->layer_sinks ? at->layer_sinks[layer] : NULL;
  if (at->path == ATTN_PATH_DECODE) {
    a.k_new = k;
    a.v_new = v;
    be->attn_decode(be, &a);
    return 0;
  }
  kv_update_t u = {
      .k = k,
      .v = v,
      .slots = at->slots,
      .n_tokens = at->n_tokens,
      .k_out = at->cfg.gather ? at->k_gather : NULL,
      .v_out = at->v_gather,
      .gather = &a,
  };
  kv_cache_update(c, layer, &u);
  if (at->cfg.gather)
    be->attn_varlen(be, &a);
  else
    be->attn_varlen_paged(be, &a);
  return 0;
}

void attn_get_stats(const attn_t *at, attn_stats_t *out) {
  out->decode_steps = atomic_load_explicit(&at->decode_steps, memory_order_relaxed);
  out->varlen_steps = atomic_load_explicit(&at->varlen_steps, memory_order_relaxed);
  out->decode_tokens = atomic_load_explicit(&at->decode_tokens, memory_order_relaxed);
  out->varlen_tokens = atomic_load_explicit(&at->varlen_tokens, memory_order_relaxed);
}
