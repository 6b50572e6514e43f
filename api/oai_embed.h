/* api/oai_embed.h — POST /v1/embeddings in OpenAI's shape: the request
 * parser and the response writer. Pure functions, like oai_request.h and
 * oai_response.h.
 *
 * Request fields (anything else is ignored, as on the other routes):
 *   input            required: a string, an array of strings, an array of
 *                    token ids or an array of token-id arrays (1..
 *                    OAI_EMBED_MAX_INPUTS inputs, none empty), as OpenAI
 *   model            checked by the server like the other routes
 *   encoding_format  "float" (default) or "base64": the vector's float32
 *                    values little-endian, base64 encoded, as OpenAI
 *   dimensions       an integer >= 1; the server refuses any but the
 *                    model's own size (no model it serves is known to be
 *                    Matryoshka-trained)
 *   user             a string (OpenAI's end-user id): accepted, logged
 *   truncate_prompt_tokens  vLLM's: keep an input's last k tokens (k >= 1),
 *                    or -1: its last max_model_len tokens; absent: an input
 *                    longer than the context is refused
 *   add_special_tokens vLLM's: BOS/EOS as the tokenizer adds them (default
 *                    true; text inputs only)
 *   normalize        vLLM's: divide by the L2 norm (default: the server's
 *                    pooling_normalize setting)
 *   messages         vLLM's chat-embedding form: refused (400)
 * Every error names its field (oai_error_t, as oai_request.h). */
#ifndef TRAM_OAI_EMBED_H
#define TRAM_OAI_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/oai_request.h"
#include "base/arena.h"

#define OAI_EMBED_MAX_INPUTS 2048 /* OpenAI's limit of inputs per request */

typedef struct oai_embed_req {
  const char *model;             /* NULL: none given */
  oai_prompt_t *inputs;          /* [n_inputs] text or token ids */
  int32_t n_inputs;
  bool base64;                   /* encoding_format "base64" */
  int32_t dimensions;            /* 0: none given */
  const char *user;              /* NULL: none given */
  int32_t truncate_prompt_tokens; /* 0: off; -1: to the context; else keep the last this many */
  bool add_special_tokens;       /* default true */
  int normalize;                 /* -1: the server's default; 0 or 1 */
} oai_embed_req_t;

/* Parses body[0..len) (strict JSON, one object) into *out, its strings and
 * arrays in arena; lim (NULL: defaults) gives vocab_size for token ids.
 * Returns 0, or -EINVAL (-ENOMEM) with *err filled. */
int oai_parse_embeddings(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                         oai_embed_req_t *out, oai_error_t *err);

/* The response: {"object": "list", "data": [{"object": "embedding",
 * "index": i, "embedding": [floats] or "base64"}], "model", "usage":
 * {"prompt_tokens", "total_tokens"}}. vecs[i] holds dim floats (each
 * written with 9 significant digits: it reads back to the same float32).
 * Returns malloc'd JSON text; NULL when a value is not finite. */
char *oai_write_embeddings(const char *model, const float *const *vecs, int32_t n, int32_t dim, bool base64,
                           int64_t prompt_tokens);

/* The standard base64 (RFC 4648, padded) of src[n] into dst, which holds
 * 4 * ((n + 2) / 3) + 1 bytes; returns the length written (NUL added). */
size_t oai_base64(const void *src, size_t n, char *dst);

#endif
