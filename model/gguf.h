/* model/gguf.h — a bounds-checked, memory-mapped GGUF reader.
 *
 * The GGUF file format (versions 2 and 3; little endian):
 *
 *   1. magic "GGUF" (4 bytes), version (u32), tensor_count (u64),
 *      kv_count (u64). (Version 1 used u32 counts and is rejected.)
 *   2. kv_count key/value pairs: key (string), value type (u32), value.
 *      A string is a u64 length followed by that many bytes (UTF-8, not
 *      NUL-terminated). Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32,
 *      6 f32, 7 bool (one byte, 0 or 1), 8 string, 9 array, 10 u64, 11 i64,
 *      12 f64. An array is an element type (u32), a count (u64), then the
 *      elements back to back (arrays of arrays are allowed by the format; tram
 *      rejects them).
 *   3. tensor_count tensor infos: name (string), n_dims (u32, 1..4), n_dims
 *      dims (u64 each, innermost first), GGML type (u32), offset (u64,
 *      relative to the data section, a multiple of the alignment).
 *   4. padding to `general.alignment` (u32 key; default 32; a power of two),
 *      then the data section to the end of the file.
 *
 * Every count, length, dimension, type, offset and size is checked against
 * the file's size and for overflow before use; a bad file gives one error
 * message naming what is wrong (the key, the tensor, the offset) and a NULL
 * context — never a crash or a read out of bounds. Tensors of a type tram
 * does not support (kern_type_name() == NULL) are rejected the same way,
 * naming the tensor and the type id.
 *
 * Lifetime: everything a context hands out (key and string views, tensor
 * data pointers) points into the mapping or the context and is valid until
 * gguf_close(). Views are NOT NUL-terminated. */
#ifndef TRAM_GGUF_H
#define TRAM_GGUF_H

#include <stddef.h>
#include <stdint.h>

typedef enum gguf_type {
  GGUF_TYPE_UINT8 = 0,
  GGUF_TYPE_INT8 = 1,
  GGUF_TYPE_UINT16 = 2,
  GGUF_TYPE_INT16 = 3,
  GGUF_TYPE_UINT32 = 4,
  GGUF_TYPE_INT32 = 5,
  GGUF_TYPE_FLOAT32 = 6,
  GGUF_TYPE_BOOL = 7,
  GGUF_TYPE_STRING = 8,
  GGUF_TYPE_ARRAY = 9,
  GGUF_TYPE_UINT64 = 10,
  GGUF_TYPE_INT64 = 11,
  GGUF_TYPE_FLOAT64 = 12,
  GGUF_TYPE_COUNT = 13,
} gguf_type_t;

/* A byte string inside the file: `len` bytes at `ptr`, no terminator. */
typedef struct gguf_str {
  const char *ptr;
  uint64_t len;
} gguf_str_t;

typedef struct gguf_kv {
  gguf_str_t key;
  gguf_type_t type;     /* the value's type */
  gguf_type_t arr_type; /* element type when type == GGUF_TYPE_ARRAY */
  uint64_t n;           /* element count when an array, else 1 */
  /* Scalar value, or the first element of a numeric array (elements back to
   * back, little endian, possibly unaligned: read with memcpy). NULL for
   * strings and string arrays. */
  const void *data;
  /* The string, or the n strings of a string array (owned by the context);
   * NULL otherwise. */
  const gguf_str_t *strs;
} gguf_kv_t;

typedef struct gguf_tensor {
  gguf_str_t name;
  uint32_t n_dims;  /* 1..4 */
  int64_t ne[4];    /* dims, innermost first; unused dims are 1 */
  uint32_t type;    /* GGML type id (a kern_type_t for supported types) */
  uint64_t offset;  /* from the start of the data section */
  uint64_t nbytes;  /* bytes of data */
  const void *data; /* into the mapping; nbytes readable bytes */
} gguf_tensor_t;

typedef struct gguf_ctx gguf_ctx_t;

/* Maps and parses `path`. On failure returns NULL and writes one line saying
 * what is wrong into err (err_len bytes, always terminated). */
gguf_ctx_t *gguf_open(const char *path, char *err, size_t err_len);

/* Parses a GGUF image already in memory (`size` bytes at `data`, not copied:
 * it must outlive the context). Same errors as gguf_open. */
gguf_ctx_t *gguf_open_buffer(const void *data, size_t size, char *err, size_t err_len);

/* Unmaps and frees. NULL is a no-op. */
void gguf_close(gguf_ctx_t *ctx);

uint32_t gguf_version(const gguf_ctx_t *ctx);
uint32_t gguf_alignment(const gguf_ctx_t *ctx);

/* Key/value pairs in file order, and lookup by key (NULL if absent). */
uint64_t gguf_kv_count(const gguf_ctx_t *ctx);
const gguf_kv_t *gguf_kv_at(const gguf_ctx_t *ctx, uint64_t i);
const gguf_kv_t *gguf_find_kv(const gguf_ctx_t *ctx, const char *key);

/* Tensors in file order, and lookup by name (NULL if absent). */
uint64_t gguf_tensor_count(const gguf_ctx_t *ctx);
const gguf_tensor_t *gguf_tensor_at(const gguf_ctx_t *ctx, uint64_t i);
const gguf_tensor_t *gguf_find_tensor(const gguf_ctx_t *ctx, const char *name);

/* Typed scalar getters. Each returns 0 and sets *out; -ENOENT if the key is
 * absent; -EINVAL if its value has another type or does not fit (an integer
 * getter accepts any integer type whose value is in range). */
int gguf_get_u32(const gguf_ctx_t *ctx, const char *key, uint32_t *out);
int gguf_get_u64(const gguf_ctx_t *ctx, const char *key, uint64_t *out);
int gguf_get_i64(const gguf_ctx_t *ctx, const char *key, int64_t *out);
int gguf_get_f32(const gguf_ctx_t *ctx, const char *key, float *out); /* f32 or f64 */
int gguf_get_bool(const gguf_ctx_t *ctx, const char *key, int *out);
int gguf_get_str(const gguf_ctx_t *ctx, const char *key, gguf_str_t *out);

/* Array getters: the array's element count (or -ENOENT / -EINVAL when absent,
 * not an array, or of another element type). */
int64_t gguf_get_arr_str(const gguf_ctx_t *ctx, const char *key, const gguf_str_t **out);
/* Numeric arrays: element i as the given type, with range checks (i < n). */
int64_t gguf_get_arr_n(const gguf_ctx_t *ctx, const char *key, gguf_type_t *elem_type);
int gguf_arr_i64(const gguf_kv_t *kv, uint64_t i, int64_t *out); /* any integer element type */
int gguf_arr_f32(const gguf_kv_t *kv, uint64_t i, float *out);   /* f32 or f64 elements */

/* The name of a value type ("uint32", "string", ...), or "?" */
const char *gguf_type_name(uint32_t type);

#endif
