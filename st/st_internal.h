/* st/st_internal.h — what the safetensors reader's files share (st_open.c
 * maps files and reads the sharded index; st_parse.c parses and checks one
 * file image). Not for use outside st/. */
#ifndef TRAM_ST_INTERNAL_H
#define TRAM_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/strmap.h"
#include "st/safetensors.h"

typedef struct st_map {
  const void *addr; /* base/file.h's file_map */
  size_t len;
} st_map_t;

struct st_ctx {
  st_tensor_t *t;   /* [n], in file order, shard after shard */
  size_t n, cap;
  st_map_t *maps;   /* [n_maps] owned mappings */
  size_t n_maps, maps_cap;
  strmap_t index;   /* name → position in t[] (built as tensors are added) */
};

/* Parses the safetensors image base[0, size) (file `label` in messages),
 * appending its tensors to ctx with shard id `shard`. Returns 0, or
 * -EINVAL after writing one line into err. */
int st__parse(st_ctx_t *ctx, const uint8_t *base, size_t size, int32_t shard, const char *label, char *err,
              size_t err_len);

/* Builds ctx->index over ctx->t[0, n); a name twice is an error. 0 or
 * -EINVAL with err written. */
int st__index(st_ctx_t *ctx, char *err, size_t err_len);

#endif
