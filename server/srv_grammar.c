/* server/srv_grammar.c — a request's structured-output form (oai_grammar_t)
 * to a compiled grammar: looked up by content in the stack's cache of
 * compiled grammars (grammar/gram_lru.h), compiled on a miss. Runs on a
 * worker thread (srv_work.c), never on the loop, so a slow compile delays
 * only its own request (and the token cache of the start state is filled
 * there too, off the engine's step); every compiler works within fixed bounds
 * (grammar/gram.h), so a hostile schema gets its 400 in bounded time. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "grammar/gram.h"
#include "server/srv_internal.h"

/* The cache key: the kind, the options, then the source text. */
static char *make_key(const oai_grammar_t *g, size_t *klen) {
  *klen = 3 + g->src_len;
  char *k = xmalloc(*klen);
  k[0] = (char)g->kind;
  k[1] = (char)g->flexible_ws;
  k[2] = (char)g->additional;
  memcpy(k + 3, g->src, g->src_len);
  return k;
}

static gram_t *compile_choice(const oai_grammar_t *g, gram_err_t *err) {
  cJSON *a = cJSON_ParseWithLength(g->src, g->src_len);
  const int n = a ? cJSON_GetArraySize(a) : 0;
  gram_t *out = NULL;
  if (n > 0) {
    const char **s = xmalloc((size_t)n * sizeof *s);
    size_t *len = xmalloc((size_t)n * sizeof *len);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
      s[i] = e->valuestring;
      len[i++] = strlen(e->valuestring);
    }
    out = gram_compile_choice(s, len, (size_t)n, err);
    free(s);
    free(len);
  } else {
    snprintf(err->msg, sizeof err->msg, "the choices must be a non-empty array of strings");
  }
  cJSON_Delete(a);
  return out;
}

static gram_t *compile(const oai_grammar_t *g, gram_err_t *err) {
  const gram_json_opts_t o = {.flexible_ws = g->flexible_ws, .additional_default = g->additional};
  switch (g->kind) {
  case OAI_GRAMMAR_JSON_SCHEMA: {
    cJSON *schema = cJSON_ParseWithLength(g->src, g->src_len);
    gram_t *out = schema ? gram_compile_json_schema(schema, &o, err) : NULL;
    if (!schema) snprintf(err->msg, sizeof err->msg, "the schema is not valid JSON");
    cJSON_Delete(schema);
    return out;
  }
  case OAI_GRAMMAR_JSON_OBJECT: return gram_compile_json_object(&o, err);
  case OAI_GRAMMAR_REGEX: return gram_compile_regex(g->src, g->src_len, err);
  case OAI_GRAMMAR_CHOICE: return compile_choice(g, err);
  case OAI_GRAMMAR_GBNF: return gram_compile_gbnf(g->src, g->src_len, err);
  default: snprintf(err->msg, sizeof err->msg, "unknown structured-output form"); return NULL;
  }
}

/* Fills the token cache for the grammar's start here, on the worker: the
 * first mask of a new grammar walks the whole vocabulary from the root's
 * positions, the costliest walk, which the engine thread then skips. */
static void warm(gram_entry_t *ent) {
  const gram_cache_t *c = gram_entry_cache(ent);
  gram_matcher_t *m = gram_matcher_create(c);
  uint32_t *mask = m ? xmallocarray(gram_mask_words(gram_cache_vocab(c)), sizeof *mask) : NULL;
  if (mask) (void)gram_matcher_fill_mask(m, mask);
  free(mask);
  gram_matcher_destroy(m);
}

int srv__grammar(srv_t *s, const oai_grammar_t *g, gram_entry_t **out, oai_error_t *e) {
  *out = NULL;
  if (g->kind == OAI_GRAMMAR_NONE) return 0;
  size_t klen;
  char *key = make_key(g, &klen);
  gram_lru_t *lru = s->stack.grammars;
  gram_entry_t *ent = gram_lru_get(lru, key, klen);
  if (!ent) {
    gram_err_t err = {.pos = -1};
    gram_t *gr = compile(g, &err);
    if (gr) {
      ent = gram_lru_put(lru, key, klen, gr);
      if (!ent) snprintf(err.msg, sizeof err.msg, "out of memory for the grammar's token cache");
      else warm(ent);
    }
    if (!ent) {
      free(key);
      *e = (oai_error_t){.status = 400, .type = "invalid_request_error", .code = "invalid_value"};
      snprintf(e->param, sizeof e->param, "%s", g->field);
      if (err.pos >= 0 && !strstr(err.msg, "offset"))
        snprintf(e->message, sizeof e->message, "%s: %s (at byte %lld)", g->field, err.msg, (long long)err.pos);
      else
        snprintf(e->message, sizeof e->message, "%s: %s", g->field, err.msg);
      return -EINVAL;
    }
  }
  free(key);
  *out = ent;
  return 0;
}
