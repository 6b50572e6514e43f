/* text/tok_gguf.c — a tokenizer from a GGUF file's tokenizer.ggml.* keys:
 * reads them through gguf/gguf.h into a tok_spec_t and calls tok_create.
 * Strings are views into the file; tok_create copies what it keeps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "gguf/gguf.h"
#include "text/tok_internal.h"

/* An optional token id key: -1 when absent. 0, or -EINVAL with err written. */
static int get_id(const gguf_ctx_t *g, const char *key, int32_t *out, char *err, size_t err_len) {
  uint32_t v;
  int rc = gguf_get_u32(g, key, &v);
  if (rc == -ENOENT) {
    *out = -1;
    return 0;
  }
  if (rc != 0 || v > INT32_MAX) {
    snprintf(err, err_len, "tokenizer: %s is not a token id", key);
    return -EINVAL;
  }
  *out = (int32_t)v;
  return 0;
}

/* An optional bool key: -1 when absent. */
static int get_flag(const gguf_ctx_t *g, const char *key, int *out, char *err, size_t err_len) {
  int v;
  int rc = gguf_get_bool(g, key, &v);
  if (rc == -ENOENT) {
    *out = -1;
    return 0;
  }
  if (rc != 0) {
    snprintf(err, err_len, "tokenizer: %s is not a bool", key);
    return -EINVAL;
  }
  *out = v != 0;
  return 0;
}

/* A copy of a string key as a C string (NULL if absent); *bad on a type error. */
static char *get_cstr(const gguf_ctx_t *g, const char *key, int *bad) {
  gguf_str_t s;
  int rc = gguf_get_str(g, key, &s);
  if (rc != 0) {
    *bad = rc != -ENOENT;
    return NULL;
  }
  char *c = xmalloc((size_t)s.len + 1);
  memcpy(c, s.ptr, (size_t)s.len);
  c[s.len] = 0;
  return c;
}

tok_t *tok_create_from_gguf(const gguf_ctx_t *g, char *err, size_t err_len) {
  if (err && err_len) err[0] = 0;
  tok_spec_t spec = tok_spec_default();
  int32_t *types = NULL;
  float *scores = NULL;
  tok_t *tok = NULL;
  int bad = 0;
  char *model = get_cstr(g, "tokenizer.ggml.model", &bad);
  char *pre = get_cstr(g, "tokenizer.ggml.pre", &bad);
  if (bad || !model) {
    snprintf(err, err_len, "tokenizer: tokenizer.ggml.model %s",
             model ? "or tokenizer.ggml.pre is not a string" : "is missing or not a string");
    goto out;
  }
  if (strcmp(model, "gpt2") == 0) {
    spec.model = TOK_MODEL_BPE;
  } else if (strcmp(model, "llama") == 0) {
    spec.model = TOK_MODEL_SPM;
  } else if (strcmp(model, "gemma4") == 0) { /* llama.cpp's: SentencePiece-style BPE by merge rank */
    spec.model = TOK_MODEL_SPM;
    spec.newline_runs = 1;
  } else {
    snprintf(err, err_len, "tokenizer: tokenizer.ggml.model \"%s\" is not supported "
             "(gpt2, llama and gemma4 are)", model);
    goto out;
  }
  spec.pre = pre;
  if (spec.model == TOK_MODEL_BPE && !pre)
    log_warn("tokenizer: no tokenizer.ggml.pre; using llama.cpp's \"default\" pre-tokenizer");

  int64_t n = gguf_get_arr_str(g, "tokenizer.ggml.tokens", &spec.tokens);
  if (n < 1 || n > INT32_MAX) {
    snprintf(err, err_len, "tokenizer: tokenizer.ggml.tokens is missing or not a string array");
    goto out;
  }
  spec.n_tokens = (int32_t)n;

  const gguf_kv_t *kv = gguf_find_kv(g, "tokenizer.ggml.token_type");
  if (kv) {
    if (kv->type != GGUF_TYPE_ARRAY || kv->n != (uint64_t)n) {
      snprintf(err, err_len, "tokenizer: tokenizer.ggml.token_type is not an array of %lld",
               (long long)n);
      goto out;
    }
    types = xmalloc((size_t)n * sizeof *types);
    for (int64_t i = 0; i < n; i++) {
      int64_t v;
      if (gguf_arr_i64(kv, (uint64_t)i, &v) != 0 || v < INT32_MIN || v > INT32_MAX) {
        snprintf(err, err_len, "tokenizer: tokenizer.ggml.token_type[%lld] is not an integer",
                 (long long)i);
        goto out;
      }
      types[i] = (int32_t)v;
    }
    spec.types = types;
  }

  kv = gguf_find_kv(g, "tokenizer.ggml.scores");
  if (kv) {
    if (kv->type != GGUF_TYPE_ARRAY || kv->n != (uint64_t)n) {
      snprintf(err, err_len, "tokenizer: tokenizer.ggml.scores is not an array of %lld",
               (long long)n);
      goto out;
    }
    scores = xmalloc((size_t)n * sizeof *scores);
    for (int64_t i = 0; i < n; i++) {
      if (gguf_arr_f32(kv, (uint64_t)i, &scores[i]) != 0) {
        snprintf(err, err_len, "tokenizer: tokenizer.ggml.scores[%lld] is not a float",
                 (long long)i);
        goto out;
      }
    }
    spec.scores = scores;
  }

  if (spec.model == TOK_MODEL_BPE || spec.newline_runs || gguf_find_kv(g, "tokenizer.ggml.merges")) {
    /* "llama": optional */
    int64_t m = gguf_get_arr_str(g, "tokenizer.ggml.merges", &spec.merges);
    if (m < 0 || m > INT32_MAX) {
      snprintf(err, err_len, "tokenizer: tokenizer.ggml.merges is missing or not a string array");
      goto out;
    }
    spec.n_merges = (int32_t)m;
  }

  if (get_id(g, "tokenizer.ggml.bos_token_id", &spec.bos_id, err, err_len) ||
      get_id(g, "tokenizer.ggml.eos_token_id", &spec.eos_id, err, err_len) ||
      get_id(g, "tokenizer.ggml.eot_token_id", &spec.eot_id, err, err_len) ||
      get_id(g, "tokenizer.ggml.eom_token_id", &spec.eom_id, err, err_len) ||
      get_id(g, "tokenizer.ggml.unknown_token_id", &spec.unk_id, err, err_len) ||
      get_id(g, "tokenizer.ggml.padding_token_id", &spec.pad_id, err, err_len) ||
      get_flag(g, "tokenizer.ggml.add_bos_token", &spec.add_bos, err, err_len) ||
      get_flag(g, "tokenizer.ggml.add_eos_token", &spec.add_eos, err, err_len) ||
      get_flag(g, "tokenizer.ggml.add_space_prefix", &spec.add_space_prefix, err, err_len) ||
      get_flag(g, "tram.tokenizer.prefix_unless_space", &spec.prefix_unless_space, err, err_len))
    goto out;
  if (spec.newline_runs) { /* gemma4: no space prefix unless asked; BOS always (llama.cpp overrides a false) */
    if (spec.add_space_prefix < 0) spec.add_space_prefix = 0;
    spec.add_bos = 1;
  }
  int bad_norm = 0;
  char *norm = get_cstr(g, "tram.tokenizer.normalizer", &bad_norm);
  if (bad_norm || (norm && strcmp(norm, "nfc") != 0)) {
    snprintf(err, err_len, "tokenizer: tram.tokenizer.normalizer %s%.40s%s is not one tram runs (\"nfc\")",
             norm ? "\"" : "(not a string)", norm ? norm : "", norm ? "\"" : "");
    free(norm);
    goto out;
  }
  spec.nfc = norm != NULL;
  free(norm);
  char *pieces = get_cstr(g, "tram.tokenizer.prefix_pieces", &bad_norm);
  spec.prefix_pieces = !pieces ? 0 : !strcmp(pieces, "every") ? TOK_PREFIX_EVERY_PIECE
                                   : !strcmp(pieces, "first") ? TOK_PREFIX_FIRST_PIECE : -1;
  free(pieces);
  if (bad_norm || spec.prefix_pieces < 0) {
    snprintf(err, err_len, "tokenizer: tram.tokenizer.prefix_pieces is not \"every\" or \"first\"");
    goto out;
  }

  tok = tok_create(&spec, err, err_len);
out:
  free(model);
  free(pre);
  free(types);
  free(scores);
  return tok;
}
