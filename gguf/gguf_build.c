/* gguf/gguf_build.c — GGUF contexts assembled in memory (see gguf_build.h).
 * The context's tables are the ones a parsed file fills (gguf_internal.h),
 * so every getter and lookup works unchanged; its strings and values live
 * in blocks listed in ctx->owned. */
#include "gguf/gguf_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "gguf/gguf_internal.h"
#include "kernels/kern_types.h"

struct gguf_build {
  gguf_ctx_t *ctx;
  size_t kv_cap, t_cap;
  char err[256]; /* the first error, reported by the finish */
};

gguf_build_t *gguf_build_new(void) {
  gguf_build_t *b = xcalloc(1, sizeof *b);
  b->ctx = xcalloc(1, sizeof *b->ctx);
  b->ctx->base = (const uint8_t *)"";
  b->ctx->version = 3;
  b->ctx->alignment = 32;
  return b;
}

void gguf_build_keep(gguf_build_t *b, void *p) {
  gguf_ctx_t *c = b->ctx;
  xgrow(&c->owned, &c->owned_cap, c->n_owned + 1, sizeof *c->owned, 16);
  c->owned[c->n_owned++] = p;
}

/* n bytes the context owns, a copy of src (src may be NULL: zeros). */
static void *kept(gguf_build_t *b, const void *src, size_t n) {
  void *p = xcalloc(1, n ? n : 1);
  if (src && n) memcpy(p, src, n);
  gguf_build_keep(b, p);
  return p;
}

static gguf_str_t kept_str(gguf_build_t *b, const char *s, size_t len) {
  char *p = kept(b, NULL, len + 1);
  memcpy(p, s, len);
  return (gguf_str_t){p, len};
}

/* A new key/value slot (strs set at the finish for strings). */
static gguf_kv_t *add_kv(gguf_build_t *b, const char *key, gguf_type_t type) {
  gguf_ctx_t *c = b->ctx;
  size_t cap = b->kv_cap;
  xgrow(&c->kv, &b->kv_cap, c->n_kv + 1, sizeof *c->kv, 32);
  xgrow(&c->kv_str, &cap, c->n_kv + 1, sizeof *c->kv_str, 32);
  gguf_kv_t *kv = &c->kv[c->n_kv];
  memset(kv, 0, sizeof *kv);
  memset(&c->kv_str[c->n_kv], 0, sizeof *c->kv_str);
  c->n_kv++;
  kv->key = kept_str(b, key, strlen(key));
  kv->type = type;
  kv->n = 1;
  return kv;
}

void gguf_build_u32(gguf_build_t *b, const char *key, uint32_t v) {
  add_kv(b, key, GGUF_TYPE_UINT32)->data = kept(b, &v, sizeof v);
}

void gguf_build_f32(gguf_build_t *b, const char *key, float v) {
  add_kv(b, key, GGUF_TYPE_FLOAT32)->data = kept(b, &v, sizeof v);
}

void gguf_build_bool(gguf_build_t *b, const char *key, int v) {
  const uint8_t x = v != 0;
  add_kv(b, key, GGUF_TYPE_BOOL)->data = kept(b, &x, 1);
}

void gguf_build_str(gguf_build_t *b, const char *key, const char *s, size_t len) {
  add_kv(b, key, GGUF_TYPE_STRING);
  b->ctx->kv_str[b->ctx->n_kv - 1] = kept_str(b, s, len);
}

void gguf_build_arr_str(gguf_build_t *b, const char *key, const char *const *s, const size_t *lens, size_t n) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += lens[i] + 1;
  char *blob = kept(b, NULL, total);
  gguf_str_t *strs = xcalloc(n ? n : 1, sizeof *strs); /* freed with the kv (gguf__free_parsed) */
  for (size_t i = 0, at = 0; i < n; i++) {
    memcpy(blob + at, s[i], lens[i]);
    strs[i] = (gguf_str_t){blob + at, lens[i]};
    at += lens[i] + 1;
  }
  gguf_kv_t *kv = add_kv(b, key, GGUF_TYPE_ARRAY);
  kv->arr_type = GGUF_TYPE_STRING;
  kv->n = n;
  kv->strs = strs;
}

void gguf_build_arr_i32(gguf_build_t *b, const char *key, const int32_t *v, size_t n) {
  gguf_kv_t *kv = add_kv(b, key, GGUF_TYPE_ARRAY);
  kv->arr_type = GGUF_TYPE_INT32;
  kv->n = n;
  kv->data = kept(b, v, n * sizeof *v);
}

void gguf_build_arr_bool(gguf_build_t *b, const char *key, const uint8_t *v, size_t n) {
  gguf_kv_t *kv = add_kv(b, key, GGUF_TYPE_ARRAY);
  kv->arr_type = GGUF_TYPE_BOOL;
  kv->n = n;
  kv->data = kept(b, v, n);
}

int gguf_build_tensor(gguf_build_t *b, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                      const void *data, uint64_t nbytes) {
  gguf_ctx_t *c = b->ctx;
  int64_t dims[4] = {1, 1, 1, 1}, rows = 1;
  int ok = n_dims >= 1 && n_dims <= 4 && kern_type_is_weight(type);
  for (uint32_t d = 0; ok && d < n_dims; d++) {
    dims[d] = ne[d];
    ok = ne[d] >= 1 && (d == 0 || rows <= INT64_MAX / ne[d]);
    if (ok && d > 0) rows *= ne[d];
  }
  const int64_t row_bytes = ok ? kern_type_row_bytes(type, dims[0]) : -1;
  if (!ok || row_bytes < 0 || (uint64_t)row_bytes * (uint64_t)rows != nbytes) {
    if (!b->err[0]) snprintf(b->err, sizeof b->err, "tensor '%.80s': bad type, shape or size", name);
    return -EINVAL;
  }
  xgrow(&c->tensors, &b->t_cap, c->n_tensors + 1, sizeof *c->tensors, 64);
  gguf_tensor_t *t = &c->tensors[c->n_tensors++];
  memset(t, 0, sizeof *t);
  t->name = kept_str(b, name, strlen(name));
  t->n_dims = n_dims;
  memcpy(t->ne, dims, sizeof dims);
  t->type = type;
  t->nbytes = nbytes;
  t->data = data;
  return 0;
}

void gguf_build_on_close(gguf_build_t *b, void (*release)(void *), void *arg) {
  b->ctx->release = release;
  b->ctx->release_arg = arg;
}

void gguf__free_built(gguf_ctx_t *ctx) {
  for (size_t i = 0; i < ctx->n_owned; i++) free(ctx->owned[i]);
  free(ctx->owned);
  ctx->owned = NULL;
  ctx->n_owned = 0;
  if (ctx->release) ctx->release(ctx->release_arg);
  ctx->release = NULL;
}

gguf_ctx_t *gguf_build_finish(gguf_build_t *b, char *err, size_t err_len) {
  gguf_ctx_t *c = b->ctx;
  for (uint64_t i = 0; i < c->n_kv; i++)
    if (c->kv[i].type == GGUF_TYPE_STRING) c->kv[i].strs = &c->kv_str[i];
  if (!b->err[0] && (strmap_init(&c->kv_index, c->n_kv, gguf__kv_key, c) < 0 ||
                     strmap_init(&c->tensor_index, c->n_tensors, gguf__tensor_name, c) < 0))
    snprintf(b->err, sizeof b->err, "too many keys or tensors");
  for (uint64_t i = 0; !b->err[0] && i < c->n_kv; i++)
    if (strmap_add(&c->kv_index, (int32_t)i) >= 0)
      snprintf(b->err, sizeof b->err, "key '%.80s' given twice", c->kv[i].key.ptr);
  for (uint64_t i = 0; !b->err[0] && i < c->n_tensors; i++)
    if (strmap_add(&c->tensor_index, (int32_t)i) >= 0)
      snprintf(b->err, sizeof b->err, "tensor '%.80s' given twice", c->tensors[i].name.ptr);
  if (b->err[0]) {
    snprintf(err, err_len, "%s", b->err);
    gguf_build_abort(b);
    return NULL;
  }
  free(b);
  return c;
}

void gguf_build_abort(gguf_build_t *b) {
  if (!b) return;
  gguf_close(b->ctx);
  free(b);
}
