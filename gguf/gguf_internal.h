/* gguf/gguf_internal.h — what the GGUF reader's files share (gguf.c opens,
 * indexes and answers lookups; gguf_parse.c parses and validates; gguf_get.c
 * holds the typed getters). Not for use outside gguf/gguf*.c. */
#ifndef TRAM_GGUF_INTERNAL_H
#define TRAM_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* An open-addressing hash index from names to positions in an array of
 * structs that each hold a gguf_str_t name at a fixed offset. */
typedef struct gguf__index {
  uint64_t *slots; /* position + 1, or 0 for an empty slot */
  uint64_t mask;   /* capacity - 1 (capacity a power of two >= 2 * n) */
  const char *base;  /* the array */
  size_t stride;     /* bytes per element */
  size_t name_off;   /* offset of the gguf_str_t name in an element */
} gguf__index_t;

struct gguf_ctx {
  const uint8_t *base; /* the file image: `size` bytes */
  uint64_t size;
  void *map;      /* the mapping when opened from a path (map_len bytes), else NULL */
  size_t map_len;

  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset; /* file offset of the data section */

  uint64_t n_kv;
  gguf_kv_t *kv;      /* [n_kv], file order */
  gguf_str_t *kv_str; /* [n_kv]: slot i holds kv i's value when it is a string */
  gguf__index_t kv_index;

  uint64_t n_tensors;
  gguf_tensor_t *tensors; /* [n_tensors], file order */
  gguf__index_t tensor_index;
};

/* Sizes the index for n names of the array described by base/stride/name_off
 * and clears it. Returns 0 or -ENOMEM. */
int gguf__index_init(gguf__index_t *ix, uint64_t n, const void *base, size_t stride, size_t name_off);
void gguf__index_free(gguf__index_t *ix);

/* Adds element i under its name. Returns -1 when added, or the position of
 * the element already holding that name (nothing is added then). */
int64_t gguf__index_add(gguf__index_t *ix, uint64_t i);

/* The position of the element named (name, len), or -1. */
int64_t gguf__index_find(const gguf__index_t *ix, const char *name, uint64_t len);

/* Parses ctx->base[0, ctx->size) into ctx (which the caller zeroed). Returns
 * 0, or -EINVAL / -ENOMEM after writing one line into err. On failure ctx may
 * hold partial allocations: gguf__free_parsed() releases them. */
int gguf__parse(gguf_ctx_t *ctx, char *err, size_t err_len);
void gguf__free_parsed(gguf_ctx_t *ctx);

#endif
