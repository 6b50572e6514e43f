/* tests/unit/gguf_writer.h — builds GGUF images in memory for tests: small
 * synthetic model files, and deliberately broken ones.
 *
 * Usage: gw_new(), add key/values and tensors in file order, then
 * gw_finish() (an image in memory) or gw_write_file(). The writer emits
 * exactly what it is told: it does not add `general.alignment` (call
 * gw_kv_u32(w, "general.alignment", a) as well as gw_set_align(w, a)), and
 * the raw calls write whatever bytes or values they are given, so tests can
 * build lying counts, bad offsets, unknown types and the like.
 *
 * Layout of the image: header (magic, version, tensor count, kv count), the
 * key/value section, the tensor infos, zero padding to the alignment, then
 * the data section: each gw_tensor()'s data at the next multiple of the
 * alignment (zero padding between), with no padding after the last one.
 *
 * Test support: every allocation failure aborts. */
#ifndef TRAM_TESTS_GGUF_WRITER_H
#define TRAM_TESTS_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct gw gw_t;

/* A writer for GGUF version 3, alignment 32, nothing added yet. */
gw_t *gw_new(void);
void gw_free(gw_t *w); /* NULL is a no-op */

void gw_set_version(gw_t *w, uint32_t version);
/* The alignment used for the padding and gw_tensor() offsets (default 32). */
void gw_set_align(gw_t *w, uint32_t align);
/* Header counts to write instead of the real ones (for lying files). */
void gw_set_counts(gw_t *w, uint64_t n_tensors, uint64_t n_kv);

/* Key/value pairs, one call each, in file order. */
void gw_kv_u8(gw_t *w, const char *key, uint8_t v);
void gw_kv_i8(gw_t *w, const char *key, int8_t v);
void gw_kv_u16(gw_t *w, const char *key, uint16_t v);
void gw_kv_i16(gw_t *w, const char *key, int16_t v);
void gw_kv_u32(gw_t *w, const char *key, uint32_t v);
void gw_kv_i32(gw_t *w, const char *key, int32_t v);
void gw_kv_f32(gw_t *w, const char *key, float v);
void gw_kv_bool(gw_t *w, const char *key, int v); /* writes v != 0 */
void gw_kv_u64(gw_t *w, const char *key, uint64_t v);
void gw_kv_i64(gw_t *w, const char *key, int64_t v);
void gw_kv_f64(gw_t *w, const char *key, double v);
void gw_kv_str(gw_t *w, const char *key, const char *s);
/* The same with an explicit byte length (strings with NULs, empty keys). */
void gw_kv_strn(gw_t *w, const char *key, size_t key_len, const char *s, size_t len);
/* An array of n numeric values of elem_type, elems[] in host (little-endian)
 * layout, gguf_type_size(elem_type) bytes each. */
void gw_kv_arr(gw_t *w, const char *key, gguf_type_t elem_type, uint64_t n, const void *elems);
void gw_kv_arr_str(gw_t *w, const char *key, uint64_t n, const char *const *strs);
/* A key, the type id `type` (any u32), then `len` raw bytes as the value. */
void gw_kv_raw(gw_t *w, const char *key, uint32_t type, const void *value, size_t len);
/* Raw bytes appended to the key/value section. */
void gw_raw_kv_bytes(gw_t *w, const void *bytes, size_t len);

/* A tensor: its info, and nbytes of data at the next aligned offset of the
 * data section. ne[0..n_dims) innermost first. Returns the data offset. */
uint64_t gw_tensor(gw_t *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne, const void *data,
                   size_t nbytes);
/* A tensor info exactly as given (any values), with no data. */
void gw_tensor_info(gw_t *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset);
/* Raw bytes appended to the tensor info section (they count as no tensor). */
void gw_raw_info_bytes(gw_t *w, const void *bytes, size_t len);
/* Raw bytes appended to the data section (no padding). */
void gw_data(gw_t *w, const void *bytes, size_t len);

/* The image (malloc'd, the caller frees it) and its size. The writer may be
 * finished again or freed. */
uint8_t *gw_finish(const gw_t *w, size_t *size);
/* Writes the image to path; 0 or -errno. */
int gw_write_file(const gw_t *w, const char *path);

/* Byte offset in the image of the key/value section's end and of the tensor
 * info section's end, as gw_finish would lay them out now. */
uint64_t gw_kv_end(const gw_t *w);
uint64_t gw_info_end(const gw_t *w);

/* ---- reading back -------------------------------------------------------- */

struct gguf_ctx;

/* Opens a copy of img[0, size) made in a malloc'd buffer of exactly that
 * size (*copy; the caller frees it after gguf_close), so ASan sees any read
 * past the end. NULL with the reader's message in err when it is refused. */
struct gguf_ctx *gw_open_exact(const uint8_t *img, size_t size, char *err, size_t err_len, uint8_t **copy);

/* The writer's image (the caller frees it; *size its bytes); frees w. */
uint8_t *gw_finish_free(gw_t *w, size_t *size);

/* gw_finish_free, then gw_open_exact into *img: w's file read back. */
struct gguf_ctx *gw_open_written(gw_t *w, uint8_t **img, size_t *size, char *err, size_t err_len);

#endif
