/* gguf/gguf_get.c — typed getters over a parsed GGUF context (see gguf.h):
 * values are read with memcpy (they may be unaligned) and range-checked
 * against the type asked for. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"

/* Reads the integer of `type` at p: returns 1 and sets *sv for a signed
 * type, 0 and sets *uv for an unsigned one, -1 for a non-integer type. */
static int read_int(uint32_t type, const void *p, int64_t *sv, uint64_t *uv) {
  switch (type) {
    case GGUF_TYPE_UINT8: { uint8_t v; memcpy(&v, p, 1); *uv = v; return 0; }
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *uv = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *uv = v; return 0; }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); *uv = v; return 0; }
    case GGUF_TYPE_INT8: { int8_t v; memcpy(&v, p, 1); *sv = v; return 1; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *sv = v; return 1; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *sv = v; return 1; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *sv = v; return 1; }
    default: return -1;
  }
}

/* The integer at p as an unsigned value no larger than max. */
static int int_as_u64(uint32_t type, const void *p, uint64_t max, uint64_t *out) {
  int64_t sv = 0;
  uint64_t uv = 0;
  int kind = read_int(type, p, &sv, &uv);
  if (kind < 0) return -EINVAL;
  if (kind == 1) {
    if (sv < 0) return -EINVAL;
    uv = (uint64_t)sv;
  }
  if (uv > max) return -EINVAL;
  *out = uv;
  return 0;
}

static int int_as_i64(uint32_t type, const void *p, int64_t *out) {
  int64_t sv = 0;
  uint64_t uv = 0;
  int kind = read_int(type, p, &sv, &uv);
  if (kind < 0) return -EINVAL;
  if (kind == 0) {
    if (uv > (uint64_t)INT64_MAX) return -EINVAL;
    sv = (int64_t)uv;
  }
  *out = sv;
  return 0;
}

static int float_as_f32(uint32_t type, const void *p, float *out) {
  if (type == GGUF_TYPE_FLOAT32) {
    memcpy(out, p, 4);
    return 0;
  }
  if (type != GGUF_TYPE_FLOAT64) return -EINVAL;
  double d;
  memcpy(&d, p, 8);
  if (isfinite(d) && fabs(d) > FLT_MAX) return -EINVAL;
  *out = (float)d;
  return 0;
}

/* The scalar (non-array) kv under key, or NULL with *rc set. */
static const gguf_kv_t *scalar(const gguf_ctx_t *ctx, const char *key, int *rc) {
  const gguf_kv_t *kv = gguf_find_kv(ctx, key);
  *rc = !kv ? -ENOENT : kv->type == GGUF_TYPE_ARRAY ? -EINVAL : 0;
  return *rc ? NULL : kv;
}

int gguf_get_u32(const gguf_ctx_t *ctx, const char *key, uint32_t *out) {
  int rc;
  const gguf_kv_t *kv = scalar(ctx, key, &rc);
  uint64_t v;
  if (kv && (rc = int_as_u64(kv->type, kv->data, UINT32_MAX, &v)) == 0) *out = (uint32_t)v;
  return rc;
}

int gguf_get_u64(const gguf_ctx_t *ctx, const char *key, uint64_t *out) {
  int rc;
  const gguf_kv_t *kv = scalar(ctx, key, &rc);
  return kv ? int_as_u64(kv->type, kv->data, UINT64_MAX, out) : rc;
}

int gguf_get_i64(const gguf_ctx_t *ctx, const char *key, int64_t *out) {
  int rc;
  const gguf_kv_t *kv = scalar(ctx, key, &rc);
  return kv ? int_as_i64(kv->type, kv->data, out) : rc;
}

int gguf_get_f32(const gguf_ctx_t *ctx, const char *key, float *out) {
  int rc;
  const gguf_kv_t *kv = scalar(ctx, key, &rc);
  return kv ? float_as_f32(kv->type, kv->data, out) : rc;
}

int gguf_get_bool(const gguf_ctx_t *ctx, const char *key, int *out) {
  int rc;
  const gguf_kv_t *kv = scalar(ctx, key, &rc);
  if (!kv) return rc;
  if (kv->type != GGUF_TYPE_BOOL) return -EINVAL;
  *out = *(const uint8_t *)kv->data; /* 0 or 1: checked by the parser */
  return 0;
}

int gguf_get_str(const gguf_ctx_t *ctx, const char *key, gguf_str_t *out) {
  int rc;
  const gguf_kv_t *kv = scalar(ctx, key, &rc);
  if (!kv) return rc;
  if (kv->type != GGUF_TYPE_STRING) return -EINVAL;
  *out = kv->strs[0];
  return 0;
}

int64_t gguf_get_arr_str(const gguf_ctx_t *ctx, const char *key, const gguf_str_t **out) {
  const gguf_kv_t *kv = gguf_find_kv(ctx, key);
  if (!kv) return -ENOENT;
  if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING) return -EINVAL;
  *out = kv->strs;
  return (int64_t)kv->n; /* bounded by the file size */
}

int64_t gguf_get_arr_n(const gguf_ctx_t *ctx, const char *key, gguf_type_t *elem_type) {
  const gguf_kv_t *kv = gguf_find_kv(ctx, key);
  if (!kv) return -ENOENT;
  if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type == GGUF_TYPE_STRING) return -EINVAL;
  if (elem_type) *elem_type = kv->arr_type;
  return (int64_t)kv->n;
}

/* Element i of a numeric array, or NULL with *rc set. */
static const void *element(const gguf_kv_t *kv, uint64_t i, int *rc) {
  *rc = !kv ? -ENOENT : kv->type != GGUF_TYPE_ARRAY || kv->arr_type == GGUF_TYPE_STRING || i >= kv->n ? -EINVAL : 0;
  return *rc ? NULL : (const uint8_t *)kv->data + i * gguf_type_size(kv->arr_type);
}

int gguf_arr_i64(const gguf_kv_t *kv, uint64_t i, int64_t *out) {
  int rc;
  const void *p = element(kv, i, &rc);
  return p ? int_as_i64(kv->arr_type, p, out) : rc;
}

int gguf_arr_bool(const gguf_kv_t *kv, uint64_t i, int *out) {
  int rc;
  const uint8_t *p = element(kv, i, &rc);
  if (!p) return rc;
  if (kv->arr_type != GGUF_TYPE_BOOL || *p > 1) return -EINVAL;
  *out = *p;
  return 0;
}

int gguf_arr_f32(const gguf_kv_t *kv, uint64_t i, float *out) {
  int rc;
  const void *p = element(kv, i, &rc);
  return p ? float_as_f32(kv->arr_type, p, out) : rc;
}
