/* st/st_parse.c — one safetensors image parsed and checked (see
 * safetensors.h for the rules). The header's JSON is read with cJSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/alloc.h"
#include "st/st_internal.h"

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */

static const char *key_of(const void *vctx, int32_t i, size_t *len) {
  const st_ctx_t *ctx = vctx;
  *len = strlen(ctx->t[i].name);
  return ctx->t[i].name;
}

/* A JSON number that is a whole number in [0, 2^53]: its value, or -1. */
static int64_t whole(const cJSON *v) {
  if (!cJSON_IsNumber(v)) return -1;
  const double d = v->valuedouble;
  if (!(d >= 0) || d > 9007199254740992.0 || floor(d) != d) return -1;
  return (int64_t)d;
}

/* The element type of a dtype string, or -1 with *size 0. */
static int dtype_of(const char *s, int *size) {
  if (strcmp(s, "F32") == 0) return *size = 4, KERN_F32;
  if (strcmp(s, "F16") == 0) return *size = 2, KERN_F16;
  if (strcmp(s, "BF16") == 0) return *size = 2, KERN_BF16;
  *size = 0;
  return -1;
}

/* Fills t from the header entry e of `name`; begin/end its offsets. */
static int parse_entry(const cJSON *e, const char *name, uint64_t data_size, st_tensor_t *t, uint64_t *begin,
                       uint64_t *end, char *err, size_t err_len) {
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsObject(e) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
      cJSON_GetArraySize(offs) != 2) {
    snprintf(err, err_len, "tensor '%.80s': want an object with a dtype string, a shape array and two data_offsets",
             name);
    return -EINVAL;
  }
  int size;
  const int type = dtype_of(dtype->valuestring, &size);
  if (type < 0) {
    snprintf(err, err_len, "tensor '%.80s' has dtype %.16s: tram reads F32, F16 and BF16", name, dtype->valuestring);
    return -EINVAL;
  }
  const int n_dims = cJSON_GetArraySize(shape);
  if (n_dims > ST_MAX_DIMS) {
    snprintf(err, err_len, "tensor '%.80s' has %d dimensions: tram reads at most %d", name, n_dims, ST_MAX_DIMS);
    return -EINVAL;
  }
  memset(t, 0, sizeof *t);
  t->type = (kern_type_t)type;
  t->n_dims = n_dims;
  int64_t n = 1;
  for (int d = 0; d < ST_MAX_DIMS; d++) t->shape[d] = 1;
  for (int d = 0; d < n_dims; d++) {
    const int64_t v = whole(cJSON_GetArrayItem(shape, d));
    if (v < 0 || (v > 0 && n > INT64_MAX / 8 / v)) {
      snprintf(err, err_len, "tensor '%.80s': shape dimension %d is not a size tram can hold", name, d);
      return -EINVAL;
    }
    t->shape[d] = v;
    n *= v;
  }
  const int64_t b = whole(cJSON_GetArrayItem(offs, 0)), en = whole(cJSON_GetArrayItem(offs, 1));
  if (b < 0 || en < b || (uint64_t)en > data_size) {
    snprintf(err, err_len, "tensor '%.80s': data_offsets [%lld, %lld] are not inside the %llu-byte data section",
             name, (long long)b, (long long)en, (unsigned long long)data_size);
    return -EINVAL;
  }
  if ((uint64_t)(en - b) != (uint64_t)n * (uint64_t)size) {
    snprintf(err, err_len, "tensor '%.80s': data_offsets span %lld bytes, its shape and dtype need %lld", name,
             (long long)(en - b), (long long)(n * size));
    return -EINVAL;
  }
  t->n_elems = n;
  t->nbytes = (uint64_t)(en - b);
  *begin = (uint64_t)b;
  *end = (uint64_t)en;
  return 0;
}

typedef struct span {
  uint64_t begin, end;
  size_t i;
} span_t;

static int by_begin(const void *x, const void *y) {
  const span_t *a = x, *b = y;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  if (a->end != b->end) return a->end < b->end ? -1 : 1;
  return 0;
}

/* The tensors [first, ctx->n) must tile the data section exactly. */
static int check_tiling(const st_ctx_t *ctx, size_t first, const span_t *spans, size_t n, uint64_t data_size,
                        char *err, size_t err_len) {
  uint64_t at = 0;
  for (size_t k = 0; k < n; k++) {
    if (spans[k].begin != at) {
      snprintf(err, err_len, "tensor '%.80s' starts at byte %llu of the data section, where %s", 
               ctx->t[first + spans[k].i].name, (unsigned long long)spans[k].begin,
               spans[k].begin < at ? "the previous tensor still runs (overlap)" : "a gap begins (unindexed bytes)");
      return -EINVAL;
    }
    at = spans[k].end;
  }
  if (at != data_size) {
    snprintf(err, err_len, "the data section has %llu bytes after the last tensor", (unsigned long long)(data_size - at));
    return -EINVAL;
  }
  return 0;
}

int st__parse(st_ctx_t *ctx, const uint8_t *base, size_t size, int32_t shard, const char *label, char *err,
              size_t err_len) {
  char msg[512] = "";
  int rc = -EINVAL;
  cJSON *root = NULL;
  span_t *spans = NULL;
  const size_t first = ctx->n;
  uint64_t hlen = 0;
  if (size < 8) {
    snprintf(msg, sizeof msg, "%zu bytes: shorter than the 8-byte header length", size);
    goto out;
  }
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | base[i];
  if (hlen > size - 8 || hlen > ST_MAX_HEADER || hlen < 2) {
    snprintf(msg, sizeof msg, "header length %llu does not fit the file (%zu bytes; at most %u)",
             (unsigned long long)hlen, size, ST_MAX_HEADER);
    goto out;
  }
  const char *json = (const char *)base + 8, *end = NULL;
  root = cJSON_ParseWithLengthOpts(json, (size_t)hlen, &end, 0);
  if (!cJSON_IsObject(root)) {
    snprintf(msg, sizeof msg, "the header is not a JSON object");
    goto out;
  }
  for (const char *p = end; p && p < json + hlen; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
      snprintf(msg, sizeof msg, "bytes after the header's JSON object (at %lld)", (long long)(p - json));
      goto out;
    }
  const uint64_t data_size = size - 8 - hlen;
  const uint8_t *data = base + 8 + hlen;
  const size_t n_entries = (size_t)cJSON_GetArraySize(root);
  spans = xmalloc((n_entries ? n_entries : 1) * sizeof *spans);
  size_t n = 0;
  for (const cJSON *e = root->child; e; e = e->next) {
    if (!e->string) continue;
    if (strcmp(e->string, "__metadata__") == 0) {
      if (!cJSON_IsObject(e)) {
        snprintf(msg, sizeof msg, "__metadata__ is not an object");
        goto out;
      }
      continue;
    }
    st_tensor_t t;
    if (parse_entry(e, e->string, data_size, &t, &spans[n].begin, &spans[n].end, msg, sizeof msg) != 0) goto out;
    t.data = data + spans[n].begin;
    const size_t len = strlen(e->string);
    char *name = xmalloc(len + 1);
    memcpy(name, e->string, len + 1);
    t.name = name;
    t.shard = shard;
    xgrow(&ctx->t, &ctx->cap, ctx->n + 1, sizeof *ctx->t, 64);
    ctx->t[ctx->n] = t;
    spans[n].i = n;
    n++;
    ctx->n++;
  }
  qsort(spans, n, sizeof *spans, by_begin);
  if (check_tiling(ctx, first, spans, n, data_size, msg, sizeof msg) != 0) goto out;
  rc = 0;
out:
  if (rc != 0) snprintf(err, err_len, "%s: %s", label, msg);
  cJSON_Delete(root);
  free(spans);
  return rc;
}

/* The name index over every tensor added so far; a name twice is an error. */
int st__index(st_ctx_t *ctx, char *err, size_t err_len) {
  if (strmap_init(&ctx->index, ctx->n, key_of, ctx) != 0) {
    snprintf(err, err_len, "%zu tensors: too many", ctx->n);
    return -EINVAL;
  }
  for (size_t i = 0; i < ctx->n; i++)
    if (strmap_add(&ctx->index, (int32_t)i) >= 0) {
      snprintf(err, err_len, "tensor '%.80s' appears twice", ctx->t[i].name);
      return -EINVAL;
    }
  return 0;
}
