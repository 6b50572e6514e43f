/* cache/kv_cache.c — the KV arena and `update` (see kv_cache.h). */
#include "cache/kv_cache.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/log.h"

static int config_block_size(const kv_cache_config_t *cfg) {
  return cfg->block_size ? cfg->block_size : KV_DEFAULT_BLOCK_SIZE;
}

/* Bytes of one element of kv_type (0 for a type the cache cannot hold). */
static size_t elem_bytes(kern_type_t t) {
  return kern_type_block_elems(t) == 1 ? (size_t)kern_type_block_bytes(t) : 0;
}

static int layer_heads(const kv_cache_config_t *cfg, int l) {
  return cfg->layer_kv_heads ? cfg->layer_kv_heads[l] : cfg->n_kv_heads;
}

static int layer_dim(const kv_cache_config_t *cfg, int l) {
  return cfg->layer_head_dim ? cfg->layer_head_dim[l] : cfg->head_dim;
}

size_t kv_cache_block_bytes(const kv_cache_config_t *cfg, kern_type_t kv_type) {
  size_t per_token = 0; /* elements of one token's K and V over the layers */
  for (int l = 0; l < cfg->n_layers; l++) per_token += 2 * (size_t)layer_heads(cfg, l) * (size_t)layer_dim(cfg, l);
  return per_token * (size_t)config_block_size(cfg) * elem_bytes(kv_type);
}

/* The first layer (>= 0) whose geometry is not positive or is too large
 * (every product below then stays far from overflow), or -1. */
static int bad_layer(const kv_cache_config_t *cfg) {
  for (int l = 0; l < cfg->n_layers; l++) {
    const int h = layer_heads(cfg, l), d = layer_dim(cfg, l);
    if (h <= 0 || d <= 0 || h > 4096 || d > 4096) return l;
  }
  return -1;
}

kv_cache_t *kv_cache_create(kern_backend_t *be, const kv_cache_config_t *cfg) {
  const int bs = config_block_size(cfg);
  const size_t eb = elem_bytes(be->kv_type);
  if (cfg->n_layers <= 0 || bs <= 0 || cfg->num_blocks < 0 || eb == 0) {
    log_error("kv_cache_create: bad geometry: %d layers, block size %d, %lld blocks, KV type %s", cfg->n_layers, bs,
              (long long)cfg->num_blocks, kern_type_name(be->kv_type) ? kern_type_name(be->kv_type) : "?");
    return NULL;
  }
  /* every product below stays far from overflow once these hold */
  const int bad = cfg->n_layers > 4096 || bs > 65536 ? 0 : bad_layer(cfg);
  if (cfg->n_layers > 4096 || bs > 65536 || bad >= 0) {
    log_error("kv_cache_create: bad geometry: %d layers, block size %d, layer %d: %d KV heads of %d (want 1..4096 "
              "each, at most 4096 layers, blocks of at most 65536)",
              cfg->n_layers, bs, bad, bad >= 0 ? layer_heads(cfg, bad) : 0, bad >= 0 ? layer_dim(cfg, bad) : 0);
    return NULL;
  }
  const size_t block_bytes = kv_cache_block_bytes(cfg, be->kv_type);
  int64_t n = cfg->num_blocks;
  const int64_t max_blocks = INT32_MAX / bs; /* slots are int32 */
  if (n == 0) {
    n = (int64_t)(cfg->budget_bytes / block_bytes);
    if (n < 1) {
      log_error("kv_cache_create: a budget of %zu bytes holds no block (one block is %zu bytes: "
                "%d layers x K,V x %d tokens x their heads x dims x %zu bytes)",
                cfg->budget_bytes, block_bytes, cfg->n_layers, bs, eb);
      return NULL;
    }
    if (n > max_blocks) {
      log_info("kv_cache_create: the budget holds %lld blocks; using %lld (int32 slots)", (long long)n,
               (long long)max_blocks);
      n = max_blocks;
    }
  } else if (n > max_blocks) {
    log_error("kv_cache_create: %lld blocks of %d tokens exceed %d slots", (long long)n, bs, INT32_MAX);
    return NULL;
  }
  if ((size_t)n > SIZE_MAX / block_bytes) {
    log_error("kv_cache_create: %lld blocks of %zu bytes overflow the address space", (long long)n, block_bytes);
    return NULL;
  }

  kv_cache_t *c = xcalloc(1, sizeof *c);
  c->be = be;
  c->n_layers = cfg->n_layers;
  c->n_kv_heads = layer_heads(cfg, 0);
  c->head_dim = layer_dim(cfg, 0);
  c->kv_dim = c->n_kv_heads * c->head_dim;
  c->block_size = bs;
  c->num_blocks = (int32_t)n;
  c->kv_type = be->kv_type;
  c->elem_bytes = eb;
  c->layer_kv_heads = xmalloc((size_t)cfg->n_layers * sizeof *c->layer_kv_heads);
  c->layer_head_dim = xmalloc((size_t)cfg->n_layers * sizeof *c->layer_head_dim);
  c->layer_off = xmalloc((size_t)cfg->n_layers * sizeof *c->layer_off);
  size_t off = 0;
  for (int l = 0; l < cfg->n_layers; l++) {
    c->layer_kv_heads[l] = layer_heads(cfg, l);
    c->layer_head_dim[l] = layer_dim(cfg, l);
    c->layer_off[l] = off;
    off += 2 * (size_t)n * (size_t)bs * (size_t)c->layer_kv_heads[l] * (size_t)c->layer_head_dim[l] * eb;
  }
  c->arena_bytes = off; /* = n * block_bytes */
  c->alloc = kv_alloc_create(c->num_blocks, bs);
  c->arena = c->alloc ? be->alloc(be, c->arena_bytes) : NULL;
  if (!c->arena) {
    if (c->alloc)
      log_error("kv_cache_create: the %s backend cannot allocate %zu bytes for %lld blocks", be->name,
                c->arena_bytes, (long long)n);
    kv_cache_destroy(c);
    return NULL;
  }
  log_debug("kv cache: %d blocks x %d tokens, %d layers, %zu bytes", c->num_blocks, bs, c->n_layers,
            (size_t)n * block_bytes);
  return c;
}

void kv_cache_destroy(kv_cache_t *c) {
  if (!c) return;
  c->be->free(c->be, c->arena);
  kv_alloc_destroy(c->alloc);
  free(c->layer_kv_heads);
  free(c->layer_head_dim);
  free(c->layer_off);
  free(c);
}

/* Elements of one token's K (or V) in `layer`. */
static size_t layer_kv_dim(const kv_cache_t *c, int layer) {
  return (size_t)c->layer_kv_heads[layer] * (size_t)c->layer_head_dim[layer];
}

void *kv_cache_k(const kv_cache_t *c, int layer) { return (char *)c->arena + c->layer_off[layer]; }

void *kv_cache_v(const kv_cache_t *c, int layer) {
  return (char *)kv_cache_k(c, layer) + (size_t)c->num_blocks * (size_t)c->block_size * layer_kv_dim(c, layer) *
                                            c->elem_bytes;
}

void kv_cache_copy_block(kv_cache_t *c, int32_t dst, int32_t src) {
  for (int layer = 0; layer < c->n_layers; layer++) {
    const size_t bytes = (size_t)c->block_size * layer_kv_dim(c, layer) * c->elem_bytes;
    char *k = kv_cache_k(c, layer), *v = kv_cache_v(c, layer);
    c->be->copy(c->be, k + (size_t)dst * bytes, k + (size_t)src * bytes, bytes);
    c->be->copy(c->be, v + (size_t)dst * bytes, v + (size_t)src * bytes, bytes);
  }
}

void kv_cache_update(kv_cache_t *c, int layer, const kv_update_t *u) {
  kern_backend_t *be = c->be;
  void *kc = kv_cache_k(c, layer), *vc = kv_cache_v(c, layer);
  if (u->n_tokens > 0) be->kv_write(be, kc, vc, u->k, u->v, u->slots, u->n_tokens, (int)layer_kv_dim(c, layer));
  if (!u->k_out) return;
  const kern_attn_args_t *a = u->gather;
  if (!a || a->k_cache != kc || a->v_cache != vc || a->n_kv_heads != c->layer_kv_heads[layer] ||
      a->head_dim != c->layer_head_dim[layer] ||
      a->block_size != c->block_size || (a->n_seqs > 0 && a->max_seqlen_k <= 0)) {
    log_error("kv_cache_update: the gather's arguments are not layer %d's of this cache (programmer error)", layer);
    abort();
  }
  be->kv_gather(be, u->k_out, u->v_out, a);
}
