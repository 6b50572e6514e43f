/* gguf/gguf.h — a bounds-checked, memory-mapped GGUF reader.
 *
 * The GGUF file format (versions 2 and 3; little endian):
 *
 *   1. magic "GGUF" (4 bytes), version (u32), tensor_count (u64),
 *      kv_count (u64). (Version 1 used u32 counts and is rejected.)
 *   2. kv_count key/value pairs: key (string), value type (u32), value.
 *      A string is a u64 length followed by that many bytes (UTF-8 by the
 *      spec, not validated here; not NUL-terminated). Value types: 0 u8,
 *      1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (one byte, 0 or 1),
 *      8 string, 9 array, 10 u64, 11 i64, 12 f64. An array is an element type (u32), a count (u64), then the
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
 * line naming what is wrong (the key, the tensor, the byte offset in the
 * file) and a NULL context — never a crash or a read out of bounds. Counts
 * are checked against the bytes left before anything is allocated for them.
 * What tram requires beyond the format:
 *   - keys 1..65535 bytes, tensor names 1..64 bytes, both unique;
 *   - bool values 0 or 1; no arrays of arrays;
 *   - `general.alignment`, when present, a uint32 power of two;
 *   - tensors: 1..4 dims, each > 0, at most 2^48 elements; a weight type
 *     (kern_type_is_weight(): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 *     Q4_K, Q5_K, Q6_K, MXFP4; anything else is rejected naming the tensor and the
 *     type id); ne[0] a whole number of blocks; the offset a multiple of the
 *     alignment; the data inside the file. (Tensors may share or leave gaps
 *     between their data; tram does not require GGML's packed layout.)
 *
 * Lifetime: everything a context hands out (key and string views, tensor
 * data pointers) points into the mapping or the context and is valid until
 * gguf_close(). Views are NOT NUL-terminated. The mapping is read-only and
 * private; a file truncated by someone else while mapped raises SIGBUS (as
 * with any mmap reader). Contexts are immutable once open: any number of
 * threads may read one context at the same time. */
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
  int64_t ne[4];    /* dims, innermost first (ne[0] = row length); unused dims are 1 */
  uint32_t type;    /* GGML type id: always a kern_type_t weight type */
  uint64_t offset;  /* from the start of the data section; a multiple of the alignment */
  uint64_t nbytes;  /* bytes of data: ne[1] * ne[2] * ne[3] rows of kern_type_row_bytes(type, ne[0]) */
  /* Into the file image, nbytes readable bytes. Its offset from the image's
   * start is a multiple of the alignment (and a mapping starts on a page). */
  const void *data;
} gguf_tensor_t;

typedef struct gguf_ctx gguf_ctx_t;

/* Maps and parses `path`. On failure returns NULL and writes one line saying
 * what is wrong into err (err_len bytes, always terminated; the line starts
 * with the path). Nothing is logged: the caller decides. */
gguf_ctx_t *gguf_open(const char *path, char *err, size_t err_len);

/* Parses a GGUF image already in memory (`size` bytes at `data`, not copied:
 * it must outlive the context). Same errors as gguf_open, without the path.
 * Reads nothing outside data[0, size). */
gguf_ctx_t *gguf_open_buffer(const void *data, size_t size, char *err, size_t err_len);

/* Unmaps and frees. NULL is a no-op. */
void gguf_close(gguf_ctx_t *ctx);

uint32_t gguf_version(const gguf_ctx_t *ctx);   /* 2 or 3 */
uint32_t gguf_alignment(const gguf_ctx_t *ctx); /* general.alignment, or 32 */
/* File offset of the data section (tensor offsets count from here), and the
 * file's size in bytes. */
uint64_t gguf_data_offset(const gguf_ctx_t *ctx);
uint64_t gguf_file_size(const gguf_ctx_t *ctx);

/* Key/value pairs in file order (NULL when i is out of range), and lookup by
 * key (NULL if absent), by hash: O(1). */
uint64_t gguf_kv_count(const gguf_ctx_t *ctx);
const gguf_kv_t *gguf_kv_at(const gguf_ctx_t *ctx, uint64_t i);
const gguf_kv_t *gguf_find_kv(const gguf_ctx_t *ctx, const char *key);

/* Tensors in file order (NULL when i is out of range), and lookup by name
 * (NULL if absent), by hash: O(1). */
uint64_t gguf_tensor_count(const gguf_ctx_t *ctx);
const gguf_tensor_t *gguf_tensor_at(const gguf_ctx_t *ctx, uint64_t i);
const gguf_tensor_t *gguf_find_tensor(const gguf_ctx_t *ctx, const char *name);

/* 1 if the view holds exactly the bytes of the C string cstr, else 0. */
int gguf_str_eq(gguf_str_t s, const char *cstr);

/* Typed scalar getters. Each returns 0 and sets *out; -ENOENT if the key is
 * absent; -EINVAL (leaving *out alone) if its value is an array, has another
 * type or does not fit (an integer getter accepts any integer type whose
 * value is in range, never bool; gguf_get_f32 rejects a finite float64
 * beyond float's range). */
int gguf_get_u32(const gguf_ctx_t *ctx, const char *key, uint32_t *out);
int gguf_get_u64(const gguf_ctx_t *ctx, const char *key, uint64_t *out);
int gguf_get_i64(const gguf_ctx_t *ctx, const char *key, int64_t *out);
int gguf_get_f32(const gguf_ctx_t *ctx, const char *key, float *out); /* f32 or f64 */
int gguf_get_bool(const gguf_ctx_t *ctx, const char *key, int *out);
int gguf_get_str(const gguf_ctx_t *ctx, const char *key, gguf_str_t *out);

/* Array getters: the array's element count (or -ENOENT / -EINVAL when absent,
 * not an array, or of another element type).
 * gguf_get_arr_str: an array of strings; *out = its n views (NULL when n is
 * 0), owned by the context. */
int64_t gguf_get_arr_str(const gguf_ctx_t *ctx, const char *key, const gguf_str_t **out);
/* gguf_get_arr_n: an array of any type but string; *elem_type (when not
 * NULL) = its element type. */
int64_t gguf_get_arr_n(const gguf_ctx_t *ctx, const char *key, gguf_type_t *elem_type);
/* Numeric arrays: element i of kv (from gguf_find_kv) converted with the
 * scalar getters' range checks. 0, or -ENOENT when kv is NULL, or -EINVAL
 * when kv is not such an array, i >= n, or the value does not fit. */
int gguf_arr_i64(const gguf_kv_t *kv, uint64_t i, int64_t *out); /* any integer element type */
int gguf_arr_f32(const gguf_kv_t *kv, uint64_t i, float *out);   /* f32 or f64 elements */
int gguf_arr_bool(const gguf_kv_t *kv, uint64_t i, int *out);    /* bool elements: 0 or 1 */

/* The name of a value type ("uint32", "string", ...), or "?" */
const char *gguf_type_name(uint32_t type);
/* Bytes of one value of a numeric type (bool: 1); 0 for string, array and
 * unknown types. Numeric array element i is at (char *)kv->data + i * size. */
uint64_t gguf_type_size(uint32_t type);

#endif
