/* gguf/gguf.c — opening (mmap) and closing GGUF files, and lookups by
 * position and by name (see gguf.h). Parsing is in gguf_parse.c, the typed
 * getters in gguf_get.c. */
#include "gguf/gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/fault.h"
#include "gguf/gguf_internal.h"

/* --- name index -------------------------------------------------------- */

const char *gguf__kv_key(const void *ctx, int32_t i, size_t *len) {
  const gguf_str_t *k = &((const gguf_ctx_t *)ctx)->kv[i].key;
  *len = k->len;
  return k->ptr;
}

const char *gguf__tensor_name(const void *ctx, int32_t i, size_t *len) {
  const gguf_str_t *k = &((const gguf_ctx_t *)ctx)->tensors[i].name;
  *len = k->len;
  return k->ptr;
}

/* --- open and close ---------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t err_len, const char *fmt, ...) {
  if (!err || err_len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_len, fmt, ap);
  va_end(ap);
}

/* Parses ctx's image; on failure frees ctx, prefixes the message with
 * `label` (when not NULL) and returns NULL. */
static gguf_ctx_t *parse_or_close(gguf_ctx_t *ctx, const char *label, char *err, size_t err_len) {
  char msg[1024] = "";
  if (gguf__parse(ctx, msg, sizeof msg) == 0) return ctx;
  gguf_close(ctx);
  if (label)
    set_err(err, err_len, "%s: %s", label, msg);
  else
    set_err(err, err_len, "%s", msg);
  return NULL;
}

gguf_ctx_t *gguf_open_buffer(const void *data, size_t size, char *err, size_t err_len) {
  if (err && err_len > 0) err[0] = '\0';
  gguf_ctx_t *ctx = xcalloc(1, sizeof *ctx);
  ctx->base = data && size ? data : (const uint8_t *)"";
  ctx->size = data ? size : 0;
  return parse_or_close(ctx, NULL, err, err_len);
}

gguf_ctx_t *gguf_open(const char *path, char *err, size_t err_len) {
  if (err && err_len > 0) err[0] = '\0';
  if (fault_value("model_read_delay", 0) > 0) fault_stall_once("model_read_delay"); /* test builds: a slow disk */
  if (fault_hit("model_read")) { /* test builds: a disk that fails */
    set_err(err, err_len, "%s: cannot read: %s", path, strerror(EIO));
    return NULL;
  }
  const void *map;
  size_t size;
  char why[160];
  if (file_map(path, &map, &size, why, sizeof why) != 0) {
    set_err(err, err_len, "%s: %s", path, why);
    return NULL;
  }
  gguf_ctx_t *ctx = xcalloc(1, sizeof *ctx);
  ctx->map = map;
  ctx->map_len = size;
  ctx->base = map ? map : (const uint8_t *)"";
  ctx->size = size;
  return parse_or_close(ctx, path, err, err_len);
}

void gguf_close(gguf_ctx_t *ctx) {
  if (!ctx) return;
  gguf__free_parsed(ctx);
  gguf__free_built(ctx);
  file_unmap(ctx->map, ctx->map_len);
  free(ctx);
}

/* --- accessors --------------------------------------------------------- */

uint32_t gguf_version(const gguf_ctx_t *ctx) { return ctx->version; }
uint32_t gguf_alignment(const gguf_ctx_t *ctx) { return ctx->alignment; }
uint64_t gguf_data_offset(const gguf_ctx_t *ctx) { return ctx->data_offset; }
uint64_t gguf_file_size(const gguf_ctx_t *ctx) { return ctx->size; }

uint64_t gguf_kv_count(const gguf_ctx_t *ctx) { return ctx->n_kv; }

const gguf_kv_t *gguf_kv_at(const gguf_ctx_t *ctx, uint64_t i) { return i < ctx->n_kv ? &ctx->kv[i] : NULL; }

const gguf_kv_t *gguf_find_kv(const gguf_ctx_t *ctx, const char *key) {
  if (!key) return NULL;
  int64_t i = strmap_find(&ctx->kv_index, key, strlen(key));
  return i < 0 ? NULL : &ctx->kv[i];
}

uint64_t gguf_tensor_count(const gguf_ctx_t *ctx) { return ctx->n_tensors; }

const gguf_tensor_t *gguf_tensor_at(const gguf_ctx_t *ctx, uint64_t i) {
  return i < ctx->n_tensors ? &ctx->tensors[i] : NULL;
}

const gguf_tensor_t *gguf_find_tensor(const gguf_ctx_t *ctx, const char *name) {
  if (!name) return NULL;
  int64_t i = strmap_find(&ctx->tensor_index, name, strlen(name));
  return i < 0 ? NULL : &ctx->tensors[i];
}

int gguf_str_eq(gguf_str_t s, const char *cstr) {
  size_t n = strlen(cstr);
  return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

/* --- value types ------------------------------------------------------- */

static const struct {
  const char *name;
  uint64_t size; /* bytes of one value; 0 for string and array */
} value_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"uint8", 1},     [GGUF_TYPE_INT8] = {"int8", 1},     [GGUF_TYPE_UINT16] = {"uint16", 2},
    [GGUF_TYPE_INT16] = {"int16", 2},     [GGUF_TYPE_UINT32] = {"uint32", 4}, [GGUF_TYPE_INT32] = {"int32", 4},
    [GGUF_TYPE_FLOAT32] = {"float32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},     [GGUF_TYPE_STRING] = {"string", 0},
    [GGUF_TYPE_ARRAY] = {"array", 0},     [GGUF_TYPE_UINT64] = {"uint64", 8}, [GGUF_TYPE_INT64] = {"int64", 8},
    [GGUF_TYPE_FLOAT64] = {"float64", 8},
};

const char *gguf_type_name(uint32_t type) { return type < GGUF_TYPE_COUNT ? value_types[type].name : "?"; }

uint64_t gguf_type_size(uint32_t type) { return type < GGUF_TYPE_COUNT ? value_types[type].size : 0; }
