/* server/gen_input.c — `tram generate`'s prompts: plain lines or JSON lines
 * with per-prompt parameters, and their tokenization (see generate.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/oai_chat_val.h"
#include "server/gen_internal.h"

static void set_stops(gen_item_t *it, const char *const *stop, int32_t n) {
  it->stop = n ? xcalloc((size_t)n, sizeof *it->stop) : NULL;
  for (int32_t i = 0; i < n; i++) it->stop[i] = xstrdup(stop[i]);
  it->p.stop = (const char *const *)it->stop;
  it->p.n_stop = n;
}

void gen_item_from_text(gen_item_t *it, const char *prompt, const gen_defaults_t *d) {
  memset(it, 0, sizeof *it);
  it->prompt = xstrdup(prompt);
  it->chat = d->chat;
  it->p = d->p;
  set_stops(it, d->stop, d->n_stop);
}

void gen_item_free(gen_item_t *it) {
  sched_req_destroy(it->req);
  for (int32_t i = 0; i < it->p.n_stop; i++) free(it->stop[i]);
  free(it->stop);
  free(it->stop_ids);
  free(it->ids);
  free(it->prompt);
  free(it->error);
  for (int32_t k = 0; it->choices && k < it->p.n; k++) {
    gen_choice_t *c = &it->choices[k];
    free(c->text);
    free(c->ids);
    free(c->steps);
    free(c->stop_str);
    free(c->error);
  }
  free(it->choices);
  memset(it, 0, sizeof *it);
}

/* --- JSON lines --------------------------------------------------------------- */

/* A number field: absent leaves *out; returns 0, or -1 when it is not a
 * number within [lo, hi] (integers: integral too). */
static int num_field(const cJSON *o, const char *key, double lo, double hi, int integral, double *out) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!x || cJSON_IsNull(x)) return 0;
  if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo || x->valuedouble > hi ||
      (integral && x->valuedouble != floor(x->valuedouble)))
    return -1;
  *out = x->valuedouble;
  return 1;
}

static int bool_field(const cJSON *o, const char *key, int *out) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!x || cJSON_IsNull(x)) return 0;
  if (!cJSON_IsBool(x)) return -1;
  *out = cJSON_IsTrue(x);
  return 1;
}

/* Fills it from one JSON object; returns NULL or what is wrong (a constant,
 * or written into buf[cap]). */
static const char *item_from_json(gen_item_t *it, const cJSON *o, const gen_defaults_t *d, char *buf, size_t cap) {
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "prompt");
  if (!cJSON_IsString(pr)) return "\"prompt\" must be a string";
  gen_item_from_text(it, pr->valuestring, d);
  double v;
  int rc;
  sched_req_params_t *p = &it->p;
  samp_params_t *s = &p->samp;
#define NUM(key, lo, hi, integral, dst)                                         \
  if ((rc = num_field(o, key, lo, hi, integral, &v)) < 0) return "\"" key "\": bad value"; \
  if (rc > 0) dst = v
  NUM("max_tokens", 0, 1 << 24, 1, p->max_tokens); /* 0: up to the context length */
  NUM("n", 1, SCHED_MAX_N, 1, p->n);
  NUM("arrive_step", 0, 1e12, 1, it->arrive_step);
  NUM("cancel_after", 1, 1 << 24, 1, it->cancel_after);
#undef NUM
  for (int i = 0; i < samp_n_fields; i++) { /* the sampling fields, with the API's limits */
    const samp_field_t *f = &samp_fields[i];
    if ((rc = num_field(o, f->name, -HUGE_VAL, HUGE_VAL, 0, &v)) < 0 || (rc > 0 && !samp_field_accepts(f, v))) {
      char range[64];
      snprintf(buf, cap, "\"%s\": bad value (%s in %s)", f->name, f->integral ? "an integer" : "a number",
               samp_field_range(f, range, sizeof range));
      return buf;
    }
    if (rc > 0) samp_field_set(s, f, v);
  }
  /* seed: an integer (exact up to 2^53), or a decimal string for all 64 bits */
  const cJSON *sd = cJSON_GetObjectItemCaseSensitive(o, "seed");
  if (cJSON_IsString(sd)) {
    char *end;
    errno = 0;
    s->seed = strtoull(sd->valuestring, &end, 10);
    if (errno || end == sd->valuestring || *end || sd->valuestring[0] == '-') return "\"seed\": bad value";
    s->has_seed = 1;
  } else if ((rc = num_field(o, "seed", 0, 9007199254740992.0, 1, &v)) < 0) {
    return "\"seed\": an integer up to 2^53, or a decimal string";
  } else if (rc > 0) {
    s->seed = (uint64_t)v;
    s->has_seed = 1;
  }
  if (bool_field(o, "ignore_eos", &p->ignore_eos) < 0) return "\"ignore_eos\" must be a boolean";
  if (bool_field(o, "chat", &it->chat) < 0) return "\"chat\" must be a boolean";
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop");
  if (st && !cJSON_IsNull(st)) {
    for (int32_t i = 0; i < p->n_stop; i++) free(it->stop[i]);
    free(it->stop);
    it->stop = NULL;
    p->n_stop = 0;
    const int n = cJSON_IsString(st) ? 1 : cJSON_IsArray(st) ? cJSON_GetArraySize(st) : -1;
    if (n < 0 || n > SCHED_MAX_STOP) return "\"stop\" must be a string or an array of strings";
    it->stop = xcalloc((size_t)n + 1, sizeof *it->stop);
    for (int i = 0; i < n; i++) {
      const cJSON *x = cJSON_IsString(st) ? st : cJSON_GetArrayItem(st, i);
      if (!cJSON_IsString(x)) return "\"stop\" must be a string or an array of strings";
      it->stop[p->n_stop++] = xstrdup(x->valuestring);
    }
    p->stop = (const char *const *)it->stop;
  }
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "stop_token_ids");
  if (ids && !cJSON_IsNull(ids)) {
    const int n = cJSON_IsArray(ids) ? cJSON_GetArraySize(ids) : -1;
    if (n < 0 || n > SCHED_MAX_STOP_IDS) return "\"stop_token_ids\" must be an array of token ids";
    it->stop_ids = xcalloc((size_t)n + 1, sizeof *it->stop_ids);
    for (int i = 0; i < n; i++) {
      const cJSON *x = cJSON_GetArrayItem(ids, i);
      if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > INT32_MAX)
        return "\"stop_token_ids\" must be an array of token ids";
      it->stop_ids[i] = (int32_t)x->valuedouble;
    }
    p->stop_ids = it->stop_ids;
    p->n_stop_ids = n;
  }
  return NULL;
}

int gen_read_prompts(const char *path, const gen_defaults_t *d, gen_item_t **items, int *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "tram generate: cannot open %s: %s\n", path, strerror(errno));
    return -EINVAL;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int cap_items = 0, lineno = 0, rc = 0;
  *items = NULL;
  *n = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (len == 0) continue;
    if (*n == cap_items) {
      cap_items = cap_items ? 2 * cap_items : 16;
      *items = xreallocarray(*items, (size_t)cap_items, sizeof **items);
    }
    gen_item_t *it = &(*items)[*n];
    if (line[0] != '{') {
      gen_item_from_text(it, line, d);
      (*n)++;
      continue;
    }
    cJSON *o = cJSON_ParseWithLength(line, (size_t)len);
    const char *why = !o || !cJSON_IsObject(o) ? "not a JSON object" : NULL;
    memset(it, 0, sizeof *it);
    char buf[160];
    if (!why) why = item_from_json(it, o, d, buf, sizeof buf);
    (*n)++; /* counted either way, so that it is freed */
    cJSON_Delete(o);
    if (why) {
      fprintf(stderr, "tram generate: %s:%d: %s\n", path, lineno, why);
      rc = -EINVAL;
      break;
    }
  }
  free(line);
  fclose(f);
  if (rc == 0 && *n == 0) {
    fprintf(stderr, "tram generate: %s holds no prompt\n", path);
    rc = -EINVAL;
  }
  return rc;
}

/* --- tokens ------------------------------------------------------------------- */

static const char *token_text(const tok_t *tok, int32_t id, char *buf, size_t cap) {
  size_t len = 0;
  const char *t = id >= 0 ? tok_text(tok, id, &len) : NULL;
  snprintf(buf, cap, "%.*s", t ? (int)len : 0, t ? t : "");
  return buf;
}

int gen_tokenize(gen_item_t *it, const tok_t *tok, const chat_tmpl_t *tmpl, char *err, size_t err_len) {
  char *text = it->prompt;
  size_t len = strlen(text);
  int flags = TOK_ENC_ADD_SPECIAL;
  char *rendered = NULL;
  if (it->chat) {
    const oai_message_t user = {.role = "user", .content = it->prompt, .content_len = len};
    arena_t arena;
    arena_init(&arena, 0, 0);
    char bos[256], eos[256];
    const chat_tmpl_input_t in = {
        .messages = oai_chat_messages(&arena, &user, 1),
        .add_generation_prompt = 1,
        .bos_token = token_text(tok, tok_bos(tok), bos, sizeof bos),
        .eos_token = token_text(tok, tok_eos(tok), eos, sizeof eos),
    };
    const int rc = chat_tmpl_render(tmpl, &in, &rendered, &len, err, err_len);
    arena_free(&arena);
    if (rc != 0) return rc == -ENOMEM ? -ENOMEM : -EINVAL;
    text = rendered;
    flags = TOK_ENC_PARSE_SPECIAL; /* the template wrote the special tokens */
  }
  int64_t n = tok_encode(tok, text, len, flags, NULL, 0);
  if (n > 0) {
    it->ids = xmalloc((size_t)n * sizeof *it->ids);
    n = tok_encode(tok, text, len, flags, it->ids, (size_t)n);
  }
  free(rendered);
  if (n <= 0) {
    snprintf(err, err_len, n == 0 ? "the prompt has no tokens" : "the prompt cannot be tokenized (%lld)", (long long)n);
    return -EINVAL;
  }
  it->n_ids = (int32_t)n;
  return 0;
}
