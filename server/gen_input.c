/* server/gen_input.c — `tram generate`'s prompts: plain lines or JSON lines
 * with per-prompt parameters, and their tokenization (see generate.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "api/oai_chat_val.h"
#include "api/oai_request.h"
#include "server/gen_internal.h"

/* An item owning copies of prompt, its stop strings and stop ids. */
static void item_init(gen_item_t *it, const char *prompt, int chat, const sched_req_params_t *p,
                      const char *const *stop, int32_t n_stop, const int32_t *stop_ids, int32_t n_stop_ids) {
  memset(it, 0, sizeof *it);
  it->prompt = xstrdup(prompt);
  it->chat = chat;
  it->p = *p;
  it->stop = n_stop ? xcalloc((size_t)n_stop, sizeof *it->stop) : NULL;
  for (int32_t i = 0; i < n_stop; i++) it->stop[i] = xstrdup(stop[i]);
  it->p.stop = (const char *const *)it->stop;
  it->p.n_stop = n_stop;
  if (n_stop_ids) it->stop_ids = xmallocarray((size_t)n_stop_ids, sizeof *it->stop_ids);
  if (n_stop_ids) memcpy(it->stop_ids, stop_ids, (size_t)n_stop_ids * sizeof *it->stop_ids);
  it->p.stop_ids = it->stop_ids;
  it->p.n_stop_ids = n_stop_ids;
}

void gen_item_from_text(gen_item_t *it, const char *prompt, const gen_defaults_t *d) {
  item_init(it, prompt, d->chat, &d->p, d->stop, d->n_stop, NULL, 0);
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

/* A number field of generate's own: absent leaves *out; returns 0, or -1
 * when it is not an integer within [lo, hi]. */
static int int_field(const cJSON *o, const char *key, double lo, double hi, double *out) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!x || cJSON_IsNull(x)) return 0;
  if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo || x->valuedouble > hi ||
      x->valuedouble != floor(x->valuedouble))
    return -1;
  *out = x->valuedouble;
  return 0;
}

/* Fills it from one JSON line: the generation fields through the OpenAI
 * parsers' table (oai_parse_gen_fields, with the engine's limits), then
 * generate's own (prompt, chat, arrive_step, cancel_after). Returns NULL or
 * what is wrong, written into buf[cap]. */
static const char *item_from_json(gen_item_t *it, const char *line, size_t len, const gen_defaults_t *d, char *buf,
                                  size_t cap) {
  oai_limits_t lim = oai_limits_default();
  lim.max_n = SCHED_MAX_N;
  lim.max_stop = SCHED_MAX_STOP;
  lim.max_stop_len = SCHED_MAX_STOP_LEN;
  lim.max_stop_token_ids = SCHED_MAX_STOP_IDS;
  lim.seed_string = true;
  oai_params_t g = {.samp = d->p.samp, .max_tokens = d->p.max_tokens, .n = d->p.n, .ignore_eos = d->p.ignore_eos,
                    .stop = d->stop, .n_stop = d->n_stop};
  arena_t arena;
  arena_init(&arena, 0, 0);
  cJSON *o;
  oai_error_t err;
  const char *why = NULL;
  if (oai_parse_gen_fields(line, len, &lim, &arena, &g, &o, &err) != 0) {
    if (err.param[0]) snprintf(buf, cap, "\"%s\": bad value (%s)", err.param, err.message);
    else snprintf(buf, cap, "%s", err.message);
    why = buf;
  }
  const cJSON *pr = why ? NULL : cJSON_GetObjectItemCaseSensitive(o, "prompt");
  if (!why && !cJSON_IsString(pr)) why = "\"prompt\" must be a string";
  if (!why) {
    sched_req_params_t p = d->p;
    p.samp = g.samp;
    p.max_tokens = g.max_tokens;
    p.n = g.n;
    p.ignore_eos = g.ignore_eos;
    item_init(it, pr->valuestring, d->chat, &p, g.stop, g.n_stop, g.stop_token_ids, g.n_stop_token_ids);
    const cJSON *chat = cJSON_GetObjectItemCaseSensitive(o, "chat");
    double v;
    if (chat && !cJSON_IsNull(chat) && !cJSON_IsBool(chat)) why = "\"chat\" must be a boolean";
    else if (cJSON_IsBool(chat)) it->chat = cJSON_IsTrue(chat);
    v = (double)it->arrive_step;
    if (!why && int_field(o, "arrive_step", 0, 1e12, &v)) why = "\"arrive_step\": bad value";
    it->arrive_step = (int64_t)v;
    v = it->cancel_after;
    if (!why && int_field(o, "cancel_after", 1, 1 << 24, &v)) why = "\"cancel_after\": bad value";
    it->cancel_after = (int32_t)v;
  }
  cJSON_Delete(o);
  arena_free(&arena);
  return why;
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
    memset(it, 0, sizeof *it);
    char buf[768];
    const char *why = item_from_json(it, line, (size_t)len, d, buf, sizeof buf);
    (*n)++; /* counted either way, so that it is freed */
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
