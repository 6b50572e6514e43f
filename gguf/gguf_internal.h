/* gguf/gguf_internal.h — what the GGUF reader's files share (gguf.c opens,
 * indexes and answers lookups; gguf_parse.c parses and validates; gguf_get.c
 * holds the typed getters). Not for use outside gguf/gguf*.c. */
#ifndef TRAM_GGUF_INTERNAL_H
#define TRAM_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

#include "base/strmap.h"

struct gguf_ctx {
  const uint8_t *base; /* the file image: `size` bytes */
  uint64_t size;
  const void *map; /* the mapping when opened from a path (map_len bytes), else NULL */
  size_t map_len;

  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset; /* file offset of the data section */

  uint64_t n_kv;
  gguf_kv_t *kv;      /* [n_kv], file order */
  gguf_str_t *kv_str; /* [n_kv]: slot i holds kv i's value when it is a string */
  strmap_t kv_index;      /* key → position in kv[] */

  uint64_t n_tensors;
  gguf_tensor_t *tensors; /* [n_tensors], file order */
  strmap_t tensor_index;  /* name → position in tensors[] */

  /* built contexts (gguf_build.c): memory freed at close, and the owner of
   * what the tensors borrow */
  void **owned;
  size_t n_owned, owned_cap;
  void (*release)(void *);
  void *release_arg;
};

/* Frees what a built context owns (no-op for a parsed one). */
void gguf__free_built(gguf_ctx_t *ctx);

/* The keys of the two name indexes (base/strmap.h): kv i's key, tensor i's
 * name. */
const char *gguf__kv_key(const void *ctx, int32_t i, size_t *len);
const char *gguf__tensor_name(const void *ctx, int32_t i, size_t *len);

/* Parses ctx->base[0, ctx->size) into ctx (which the caller zeroed). Returns
 * 0, or -EINVAL / -ENOMEM after writing one line into err. On failure ctx may
 * hold partial allocations: gguf__free_parsed() releases them. */
int gguf__parse(gguf_ctx_t *ctx, char *err, size_t err_len);
void gguf__free_parsed(gguf_ctx_t *ctx);

#endif
