/* tests/unit/gguf_writer.c — builds GGUF images for tests (see gguf_writer.h). */
#include "tests/unit/gguf_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf_t;

struct gw {
  uint32_t version, align;
  int counts_set;
  uint64_t n_tensors_hdr, n_kv_hdr; /* written when counts_set */
  uint64_t n_tensors, n_kv;         /* what was added */
  buf_t kv, info, data;
};

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) abort();
  return p;
}

static void put(buf_t *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = xrealloc(b->p, b->cap);
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
}

static void put_u32(buf_t *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf_t *b, uint64_t v) { put(b, &v, 8); }
static void put_strn(buf_t *b, const char *s, size_t n) {
  put_u64(b, n);
  put(b, s, n);
}
static void put_str(buf_t *b, const char *s) { put_strn(b, s, strlen(s)); }

static void pad(buf_t *b, uint32_t align) {
  static const uint8_t zeros[64];
  while (b->n % align) put(b, zeros, align - b->n % align < sizeof zeros ? align - b->n % align : sizeof zeros);
}

gw_t *gw_new(void) {
  gw_t *w = calloc(1, sizeof *w);
  if (!w) abort();
  w->version = 3;
  w->align = 32;
  return w;
}

void gw_free(gw_t *w) {
  if (!w) return;
  free(w->kv.p);
  free(w->info.p);
  free(w->data.p);
  free(w);
}

void gw_set_version(gw_t *w, uint32_t version) { w->version = version; }
void gw_set_align(gw_t *w, uint32_t align) { w->align = align ? align : 1; }

void gw_set_counts(gw_t *w, uint64_t n_tensors, uint64_t n_kv) {
  w->counts_set = 1;
  w->n_tensors_hdr = n_tensors;
  w->n_kv_hdr = n_kv;
}

void gw_kv_raw(gw_t *w, const char *key, uint32_t type, const void *value, size_t len) {
  put_str(&w->kv, key);
  put_u32(&w->kv, type);
  put(&w->kv, value, len);
  w->n_kv++;
}

#define SCALAR(fn, ctype, gtype) \
  void fn(gw_t *w, const char *key, ctype v) { gw_kv_raw(w, key, gtype, &v, sizeof v); }
SCALAR(gw_kv_u8, uint8_t, GGUF_TYPE_UINT8)
SCALAR(gw_kv_i8, int8_t, GGUF_TYPE_INT8)
SCALAR(gw_kv_u16, uint16_t, GGUF_TYPE_UINT16)
SCALAR(gw_kv_i16, int16_t, GGUF_TYPE_INT16)
SCALAR(gw_kv_u32, uint32_t, GGUF_TYPE_UINT32)
SCALAR(gw_kv_i32, int32_t, GGUF_TYPE_INT32)
SCALAR(gw_kv_f32, float, GGUF_TYPE_FLOAT32)
SCALAR(gw_kv_u64, uint64_t, GGUF_TYPE_UINT64)
SCALAR(gw_kv_i64, int64_t, GGUF_TYPE_INT64)
SCALAR(gw_kv_f64, double, GGUF_TYPE_FLOAT64)
#undef SCALAR

void gw_kv_bool(gw_t *w, const char *key, int v) {
  uint8_t b = v != 0;
  gw_kv_raw(w, key, GGUF_TYPE_BOOL, &b, 1);
}

void gw_kv_strn(gw_t *w, const char *key, size_t key_len, const char *s, size_t len) {
  put_strn(&w->kv, key, key_len);
  put_u32(&w->kv, GGUF_TYPE_STRING);
  put_strn(&w->kv, s, len);
  w->n_kv++;
}

void gw_kv_str(gw_t *w, const char *key, const char *s) { gw_kv_strn(w, key, strlen(key), s, strlen(s)); }

static size_t elem_size(gguf_type_t t) {
  static const size_t sizes[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return (unsigned)t < GGUF_TYPE_COUNT ? sizes[t] : 0;
}

void gw_kv_arr(gw_t *w, const char *key, gguf_type_t elem_type, uint64_t n, const void *elems) {
  put_str(&w->kv, key);
  put_u32(&w->kv, GGUF_TYPE_ARRAY);
  put_u32(&w->kv, elem_type);
  put_u64(&w->kv, n);
  put(&w->kv, elems, (size_t)n * elem_size(elem_type));
  w->n_kv++;
}

void gw_kv_arr_str(gw_t *w, const char *key, uint64_t n, const char *const *strs) {
  put_str(&w->kv, key);
  put_u32(&w->kv, GGUF_TYPE_ARRAY);
  put_u32(&w->kv, GGUF_TYPE_STRING);
  put_u64(&w->kv, n);
  for (uint64_t i = 0; i < n; i++) put_str(&w->kv, strs[i]);
  w->n_kv++;
}

void gw_raw_kv_bytes(gw_t *w, const void *bytes, size_t len) { put(&w->kv, bytes, len); }

void gw_tensor_info(gw_t *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
  put_str(&w->info, name);
  put_u32(&w->info, n_dims);
  for (uint32_t d = 0; d < n_dims; d++) put_u64(&w->info, ne[d]);
  put_u32(&w->info, type);
  put_u64(&w->info, offset);
  w->n_tensors++;
}

uint64_t gw_tensor(gw_t *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne, const void *data,
                   size_t nbytes) {
  pad(&w->data, w->align);
  uint64_t offset = w->data.n;
  uint64_t dims[4] = {1, 1, 1, 1};
  for (uint32_t d = 0; d < n_dims && d < 4; d++) dims[d] = (uint64_t)ne[d];
  gw_tensor_info(w, name, n_dims, dims, type, offset);
  put(&w->data, data, nbytes);
  return offset;
}

void gw_raw_info_bytes(gw_t *w, const void *bytes, size_t len) { put(&w->info, bytes, len); }

void gw_data(gw_t *w, const void *bytes, size_t len) { put(&w->data, bytes, len); }

uint64_t gw_kv_end(const gw_t *w) { return 24 + w->kv.n; }
uint64_t gw_info_end(const gw_t *w) { return 24 + w->kv.n + w->info.n; }

uint8_t *gw_finish(const gw_t *w, size_t *size) {
  buf_t out = {0};
  put(&out, "GGUF", 4);
  put_u32(&out, w->version);
  put_u64(&out, w->counts_set ? w->n_tensors_hdr : w->n_tensors);
  put_u64(&out, w->counts_set ? w->n_kv_hdr : w->n_kv);
  put(&out, w->kv.p, w->kv.n);
  put(&out, w->info.p, w->info.n);
  if (w->n_tensors > 0 || w->data.n > 0) {
    pad(&out, w->align);
    put(&out, w->data.p, w->data.n);
  }
  *size = out.n;
  return out.p ? out.p : xrealloc(NULL, 1);
}

int gw_write_file(const gw_t *w, const char *path) {
  size_t size;
  uint8_t *img = gw_finish(w, &size);
  FILE *f = fopen(path, "wb");
  int rc = 0;
  if (!f || fwrite(img, 1, size, f) != size) rc = -(errno ? errno : EIO);
  if (f && fclose(f) != 0 && rc == 0) rc = -(errno ? errno : EIO);
  free(img);
  return rc;
}

/* ---- reading back ------------------------------------------------------------ */

gguf_ctx_t *gw_open_exact(const uint8_t *img, size_t size, char *err, size_t err_len, uint8_t **copy) {
  *copy = malloc(size ? size : 1);
  if (!*copy) abort();
  if (size) memcpy(*copy, img, size);
  return gguf_open_buffer(*copy, size, err, err_len);
}

uint8_t *gw_finish_free(gw_t *w, size_t *size) {
  uint8_t *img = gw_finish(w, size);
  gw_free(w);
  return img;
}

gguf_ctx_t *gw_open_written(gw_t *w, uint8_t **img, size_t *size, char *err, size_t err_len) {
  uint8_t *full = gw_finish_free(w, size);
  gguf_ctx_t *ctx = gw_open_exact(full, *size, err, err_len, img);
  free(full);
  return ctx;
}
