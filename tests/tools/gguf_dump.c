/* tests/tools/gguf_dump.c — prints what tram's GGUF reader sees in a file, as
 * JSON on stdout, for tests/integration/test_gguf_reader.py to compare with
 * the `gguf` Python package's reader:
 *
 *   {"version": 3, "alignment": 32, "data_offset": N, "file_size": N,
 *    "kv": [{"key": K, "type": "uint32", "value": 30},
 *           {"key": K, "type": "array", "elem_type": "string", "value": [...]}, ...],
 *    "tensors": [{"name": N, "type": "Q4_1", "type_id": 3, "dims": [576, 576],
 *                 "offset": 0, "nbytes": N, "crc32": N}, ...]}
 *
 * Keys and tensors in file order; every array in full; integers exact
 * (64-bit values are not rounded through double); floats as the exact double
 * of their value (NaN and infinities as Python's json reads them); strings
 * byte for byte (NULs escaped). crc32 is zlib's, over the tensor's data.
 *
 * Usage: gguf_dump FILE. Exit status 1, with the reader's message on stderr,
 * when the file does not open. */
#include <cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_types.h"
#include "gguf/gguf.h"

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "gguf_dump: out of memory\n");
    exit(1);
  }
  return p;
}

/* JSON item for raw JSON text (a number, a literal, an escaped string). */
static cJSON *raw(const char *text) {
  cJSON *item = cJSON_CreateRaw(text);
  if (!item) {
    fprintf(stderr, "gguf_dump: out of memory\n");
    exit(1);
  }
  return item;
}

static cJSON *u64_item(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  return raw(buf);
}

static cJSON *i64_item(int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, v);
  return raw(buf);
}

static cJSON *f64_item(double v) {
  char buf[40];
  if (isnan(v))
    snprintf(buf, sizeof buf, "NaN");
  else if (isinf(v))
    snprintf(buf, sizeof buf, "%sInfinity", v < 0 ? "-" : "");
  else
    snprintf(buf, sizeof buf, "%.17g", v);
  return raw(buf);
}

/* A JSON string of exactly the view's bytes (valid UTF-8 passes through). */
static cJSON *str_item(gguf_str_t s) {
  char *out = xmalloc(s.len * 6 + 3);
  size_t o = 0;
  out[o++] = '"';
  for (uint64_t i = 0; i < s.len; i++) {
    unsigned char ch = (unsigned char)s.ptr[i];
    if (ch == '"' || ch == '\\') {
      out[o++] = '\\';
      out[o++] = (char)ch;
    } else if (ch < 0x20) {
      o += (size_t)sprintf(out + o, "\\u%04x", ch);
    } else {
      out[o++] = (char)ch;
    }
  }
  out[o++] = '"';
  out[o] = '\0';
  cJSON *item = raw(out);
  free(out);
  return item;
}

/* One numeric value of `type` at p (unaligned, little endian). */
static cJSON *number_item(gguf_type_t type, const uint8_t *p) {
  switch (type) {
    case GGUF_TYPE_UINT8: return u64_item(p[0]);
    case GGUF_TYPE_INT8: return i64_item((int8_t)p[0]);
    case GGUF_TYPE_BOOL: return raw(p[0] ? "true" : "false");
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); return u64_item(v); }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); return i64_item(v); }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); return u64_item(v); }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); return i64_item(v); }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); return u64_item(v); }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); return i64_item(v); }
    case GGUF_TYPE_FLOAT32: { float v; memcpy(&v, p, 4); return f64_item(v); }
    case GGUF_TYPE_FLOAT64: { double v; memcpy(&v, p, 8); return f64_item(v); }
    default: return raw("null"); /* strings and arrays never get here */
  }
}

static cJSON *kv_item(const gguf_kv_t *kv) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "key", str_item(kv->key));
  cJSON_AddStringToObject(o, "type", gguf_type_name(kv->type));
  if (kv->type == GGUF_TYPE_STRING) {
    cJSON_AddItemToObject(o, "value", str_item(kv->strs[0]));
  } else if (kv->type != GGUF_TYPE_ARRAY) {
    cJSON_AddItemToObject(o, "value", number_item(kv->type, kv->data));
  } else {
    cJSON_AddStringToObject(o, "elem_type", gguf_type_name(kv->arr_type));
    cJSON *arr = cJSON_AddArrayToObject(o, "value");
    for (uint64_t i = 0; i < kv->n; i++) {
      if (kv->arr_type == GGUF_TYPE_STRING)
        cJSON_AddItemToArray(arr, str_item(kv->strs[i]));
      else
        cJSON_AddItemToArray(arr, number_item(kv->arr_type, (const uint8_t *)kv->data + i * gguf_type_size(kv->arr_type)));
    }
  }
  return o;
}

/* zlib's CRC-32 (reflected polynomial 0xEDB88320). */
static uint32_t crc32_of(const uint8_t *p, uint64_t n) {
  static uint32_t table[256];
  if (table[1] == 0) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  }
  uint32_t c = 0xFFFFFFFFu;
  for (uint64_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

static cJSON *tensor_item(const gguf_tensor_t *t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "name", str_item(t->name));
  cJSON_AddStringToObject(o, "type", kern_type_name(t->type));
  cJSON_AddItemToObject(o, "type_id", u64_item(t->type));
  cJSON *dims = cJSON_AddArrayToObject(o, "dims");
  for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(dims, i64_item(t->ne[d]));
  cJSON_AddItemToObject(o, "offset", u64_item(t->offset));
  cJSON_AddItemToObject(o, "nbytes", u64_item(t->nbytes));
  cJSON_AddItemToObject(o, "crc32", u64_item(crc32_of(t->data, t->nbytes)));
  return o;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gguf_dump FILE\n");
    return 2;
  }
  char err[1024];
  gguf_ctx_t *ctx = gguf_open(argv[1], err, sizeof err);
  if (!ctx) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddItemToObject(root, "version", u64_item(gguf_version(ctx)));
  cJSON_AddItemToObject(root, "alignment", u64_item(gguf_alignment(ctx)));
  cJSON_AddItemToObject(root, "data_offset", u64_item(gguf_data_offset(ctx)));
  cJSON_AddItemToObject(root, "file_size", u64_item(gguf_file_size(ctx)));
  cJSON *kvs = cJSON_AddArrayToObject(root, "kv");
  for (uint64_t i = 0; i < gguf_kv_count(ctx); i++) cJSON_AddItemToArray(kvs, kv_item(gguf_kv_at(ctx, i)));
  cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
  for (uint64_t i = 0; i < gguf_tensor_count(ctx); i++)
    cJSON_AddItemToArray(tensors, tensor_item(gguf_tensor_at(ctx, i)));
  char *text = cJSON_PrintUnformatted(root);
  if (!text) {
    fprintf(stderr, "gguf_dump: out of memory\n");
    return 1;
  }
  fputs(text, stdout);
  fputc('\n', stdout);
  cJSON_free(text);
  cJSON_Delete(root);
  gguf_close(ctx);
  return 0;
}
