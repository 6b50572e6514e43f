/* api/oai_embed.c — POST /v1/embeddings: the request parser and the
 * response writer (see oai_embed.h). */
#include "api/oai_embed.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_fields.h"
#include "api/oai_json.h"
#include "base/alloc.h"
#include "base/buf.h"

/* ---- the request ------------------------------------------------------------------ */

static int parse_fields(oai__ctx_t *c, const cJSON *root, oai_embed_req_t *out) {
  if (oai__get_string(c, root, "model", &out->model, NULL, NULL)) return -EINVAL;
  if (oai__prompts(c, root, "input", OAI_EMBED_MAX_INPUTS, &out->inputs, &out->n_inputs)) return -EINVAL;
  const char *fmt = NULL;
  if (oai__get_string(c, root, "encoding_format", &fmt, NULL, NULL)) return -EINVAL;
  if (fmt && strcmp(fmt, "float") != 0 && strcmp(fmt, "base64") != 0)
    return oai__fail(c, "invalid_value", "encoding_format", "encoding_format must be \"float\" or \"base64\"");
  out->base64 = fmt && strcmp(fmt, "base64") == 0;
  int64_t v;
  bool given;
  if (oai__get_int(c, root, "dimensions", 1, INT32_MAX, &v, &given)) return -EINVAL;
  out->dimensions = given ? (int32_t)v : 0;
  if (oai__get_string(c, root, "user", &out->user, NULL, NULL)) return -EINVAL;
  if (oai__get_int(c, root, "truncate_prompt_tokens", -1, INT32_MAX, &v, &given)) return -EINVAL;
  if (given && v == 0)
    return oai__fail(c, "invalid_value", "truncate_prompt_tokens",
                     "truncate_prompt_tokens must be -1 (the context) or at least 1");
  out->truncate_prompt_tokens = given ? (int32_t)v : 0;
  if (oai__get_bool(c, root, "add_special_tokens", &out->add_special_tokens, NULL)) return -EINVAL;
  bool norm;
  if (oai__get_bool(c, root, "normalize", &norm, &given)) return -EINVAL;
  out->normalize = given ? norm : -1;
  if (oai__get(root, "messages"))
    return oai__fail(c, "unsupported_parameter", "messages",
                     "messages is not supported: embed text or token ids given as input");
  return 0;
}

int oai_parse_embeddings(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                         oai_embed_req_t *out, oai_error_t *err) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  memset(out, 0, sizeof *out);
  out->add_special_tokens = true;
  out->normalize = -1;
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  const int r = parse_fields(&c, root, out);
  cJSON_Delete(root);
  return oai__end(&c, r ? -EINVAL : 0);
}

/* ---- the response ------------------------------------------------------------------ */

size_t oai_base64(const void *src, size_t n, char *dst) {
  static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *s = src;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
    dst[o++] = A[b >> 18 & 63];
    dst[o++] = A[b >> 12 & 63];
    dst[o++] = i + 1 < n ? A[b >> 6 & 63] : '=';
    dst[o++] = i + 2 < n ? A[b & 63] : '=';
  }
  dst[o] = 0;
  return o;
}

/* vec[dim] as the JSON text of the "embedding" value (malloc'd): an array
 * of numbers, or a base64 string of its little-endian float32 bytes. */
static char *vector_text(const float *vec, int32_t dim, bool base64) {
  buf_t b = {0};
  if (base64) {
    unsigned char *bytes = xmalloc((size_t)dim * 4);
    char *enc = xmalloc(4 * (((size_t)dim * 4 + 2) / 3) + 1);
    for (int32_t i = 0; i < dim; i++) {
      uint32_t u;
      memcpy(&u, &vec[i], 4);
      for (int k = 0; k < 4; k++) bytes[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    const size_t n = oai_base64(bytes, (size_t)dim * 4, enc);
    if (buf_putc(&b, '"') || buf_put(&b, enc, n) || buf_putc(&b, '"')) abort();
    free(bytes);
    free(enc);
  } else {
    if (buf_putc(&b, '[')) abort();
    for (int32_t i = 0; i < dim; i++)
      if (buf_printf(&b, i ? ",%.9g" : "%.9g", (double)vec[i])) abort();
    if (buf_putc(&b, ']')) abort();
  }
  return buf_take(&b, NULL);
}

char *oai_write_embeddings(const char *model, const float *const *vecs, int32_t n, int32_t dim, bool base64,
                           int64_t prompt_tokens) {
  for (int32_t i = 0; i < n; i++)
    for (int32_t k = 0; k < dim; k++)
      if (!isfinite(vecs[i][k])) return NULL;
  cJSON *root = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(root, "object", "list"));
  cJSON *data = oai__must(cJSON_AddArrayToObject(root, "data"));
  for (int32_t i = 0; i < n; i++) {
    cJSON *d = oai__must(cJSON_CreateObject());
    cJSON_AddItemToArray(data, d);
    oai__must(cJSON_AddStringToObject(d, "object", "embedding"));
    oai__must(cJSON_AddNumberToObject(d, "index", i));
    char *text = vector_text(vecs[i], dim, base64);
    oai__must(cJSON_AddRawToObject(d, "embedding", text));
    free(text);
  }
  oai__must(cJSON_AddStringToObject(root, "model", model));
  cJSON *u = oai__must(cJSON_AddObjectToObject(root, "usage"));
  oai__must(cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt_tokens));
  oai__must(cJSON_AddNumberToObject(u, "total_tokens", (double)prompt_tokens));
  return oai__print(root);
}
