/* gguf/gguf_build.h — a GGUF context assembled in memory instead of parsed
 * from a file: keys and values, and tensors whose data lives elsewhere (a
 * Hugging Face checkpoint's safetensors mappings, or converted copies the
 * context owns). Everything that reads a gguf_ctx_t (the model loader, the
 * tokenizer) then reads the checkpoint as it reads a GGUF file. */
#ifndef TRAM_GGUF_BUILD_H
#define TRAM_GGUF_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct gguf_build gguf_build_t;

/* A new, empty builder. */
gguf_build_t *gguf_build_new(void);

/* Values (keys and strings are copied). A key given twice: the finish fails. */
void gguf_build_u32(gguf_build_t *b, const char *key, uint32_t v);
void gguf_build_f32(gguf_build_t *b, const char *key, float v);
void gguf_build_bool(gguf_build_t *b, const char *key, int v);
void gguf_build_str(gguf_build_t *b, const char *key, const char *s, size_t len);
/* n strings: s[i], lens[i] bytes each. */
void gguf_build_arr_str(gguf_build_t *b, const char *key, const char *const *s, const size_t *lens, size_t n);
void gguf_build_arr_i32(gguf_build_t *b, const char *key, const int32_t *v, size_t n);
/* n booleans, each v[i] 0 or 1 (llama.cpp's per-layer flags). */
void gguf_build_arr_bool(gguf_build_t *b, const char *key, const uint8_t *v, size_t n);

/* A tensor (name copied; data borrowed unless kept with gguf_build_keep):
 * n_dims 1..4 dims ne[] innermost first, GGUF-style, of a kern weight type;
 * nbytes must be what the type and dims need. 0, or -EINVAL (the finish
 * then fails too). */
int gguf_build_tensor(gguf_build_t *b, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                      const void *data, uint64_t nbytes);

/* Hands malloc'd memory p to the context, freed at gguf_close. */
void gguf_build_keep(gguf_build_t *b, void *p);

/* Calls release(arg) at gguf_close (after the context's own frees): the
 * owner of the memory the tensors borrow. Once per builder. */
void gguf_build_on_close(gguf_build_t *b, void (*release)(void *), void *arg);

/* The context (the builder is consumed): indexes built, a key or tensor
 * name given twice is an error. NULL with one line in err on failure (what
 * gguf_build_on_close registered is released). */
gguf_ctx_t *gguf_build_finish(gguf_build_t *b, char *err, size_t err_len);

/* Drops a builder without finishing (releasing what it holds). NULL is a no-op. */
void gguf_build_abort(gguf_build_t *b);

#endif
