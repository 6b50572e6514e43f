/* st/safetensors.h — the safetensors reader: Hugging Face checkpoint files
 * (one `.safetensors` file, or a sharded set named by
 * `model.safetensors.index.json`) mapped read-only, every tensor checked.
 *
 * Format (huggingface/safetensors): an 8-byte little-endian header length
 * N, N bytes of JSON — an object mapping each tensor name to {"dtype",
 * "shape", "data_offsets": [begin, end]}, plus an optional "__metadata__"
 * object of strings — then the data section; offsets are relative to its
 * start. What the reader checks, naming the tensor at fault:
 *   - N fits the file (and is at most 100 MB), the JSON is one object;
 *   - each entry: dtype F32, F16 or BF16 (others are refused: tram computes
 *     with no integer or F64 weights), a shape of 0..4 non-negative
 *     dimensions, offsets begin <= end inside the data section with
 *     end - begin = elements × element size (no overflow);
 *   - no name twice; the tensors tile the data section without gaps or
 *     overlaps (the format's rule against polyglot files);
 *   - a sharded index: a "weight_map" object of plain file names (no path
 *     separators) in the index's folder; every name it lists found in its
 *     shard, and every shard's tensors listed under that shard.
 *
 * A context owns its mappings; tensor data pointers stay valid until
 * st_close. Thread-safe for lookups after opening. */
#ifndef TRAM_ST_SAFETENSORS_H
#define TRAM_ST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern_types.h"

#define ST_MAX_DIMS 4

typedef struct st_tensor {
  const char *name;  /* NUL-terminated, owned by the context */
  kern_type_t type;  /* KERN_F32, KERN_F16 or KERN_BF16 */
  int n_dims;        /* 0..ST_MAX_DIMS */
  int64_t shape[ST_MAX_DIMS]; /* outermost first, as safetensors writes it (unused: 1) */
  int64_t n_elems;
  const void *data;  /* n_elems elements, little endian, possibly unaligned */
  uint64_t nbytes;
  int shard;         /* the file it came from: 0, or its shard's position in the index's file list */
} st_tensor_t;

typedef struct st_ctx st_ctx_t;

/* Opens `path`: a .safetensors file, a model.safetensors.index.json, or a
 * folder holding model.safetensors or model.safetensors.index.json. NULL
 * on failure, with one line naming the file (and tensor) at fault in err
 * (err_len bytes, always terminated). */
st_ctx_t *st_open(const char *path, char *err, size_t err_len);

/* Parses one safetensors image held in memory (borrowed: it must outlive
 * the context). For tests and the fuzzer. */
st_ctx_t *st_open_buffer(const void *data, size_t size, char *err, size_t err_len);

/* Unmaps and frees. NULL is a no-op. */
void st_close(st_ctx_t *ctx);

size_t st_tensor_count(const st_ctx_t *ctx);
const st_tensor_t *st_tensor_at(const st_ctx_t *ctx, size_t i);
/* The tensor called name (NUL-terminated), or NULL. */
const st_tensor_t *st_find(const st_ctx_t *ctx, const char *name);

#endif
