/* server/srv_grammar.c — a request's structured-output form (oai_grammar_t)
 * to a compiled grammar: looked up by content in the stack's cache of
 * compiled grammars (grammar/gram_lru.h) on the worker that parses the
 * request, and on a miss compiled by threads of its own, so that compiles
 * never hold up the workers that parse and tokenize every other request.
 *
 * The compile threads (grammar_compile_threads) take work items in arrival
 * order from a queue of at most grammar_compile_queue waiting ones (beyond
 * that: 429). A compile works within the request's bounds (grammar/gram.h,
 * gram_limits_t, from the grammar_* settings): its size, nesting, literals,
 * its time (grammar_compile_timeout), and the token cache of its start
 * state, filled here (off the engine's step) within grammar_mask_fuel. Any
 * bound hit is a 400 naming it. A finished item goes back to the loop
 * (uv_async) for its done callback; one whose client left is not compiled.
 *
 * Threads: srv__grammar_find runs on a libuv worker, srv__grammar_stage's
 * compile on a compile thread, everything else on the loop. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/fault.h"
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

static gram_t *compile_choice(const oai_grammar_t *g, const gram_limits_t *lim, gram_err_t *err) {
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
    out = gram_compile_choice(s, len, (size_t)n, lim, err);
    free(s);
    free(len);
  } else {
    snprintf(err->msg, sizeof err->msg, "the choices must be a non-empty array of strings");
  }
  cJSON_Delete(a);
  return out;
}

static gram_t *compile(const oai_grammar_t *g, const gram_limits_t *lim, gram_err_t *err) {
  const gram_json_opts_t o = {.flexible_ws = g->flexible_ws, .additional_default = g->additional};
  switch (g->kind) {
  case OAI_GRAMMAR_JSON_SCHEMA: {
    cJSON *schema = cJSON_ParseWithLength(g->src, g->src_len);
    gram_t *out = schema ? gram_compile_json_schema(schema, &o, lim, err) : NULL;
    if (!schema) snprintf(err->msg, sizeof err->msg, "the schema is not valid JSON");
    cJSON_Delete(schema);
    return out;
  }
  case OAI_GRAMMAR_JSON_OBJECT: return gram_compile_json_object(&o, lim, err);
  case OAI_GRAMMAR_REGEX: return gram_compile_regex(g->src, g->src_len, lim, err);
  case OAI_GRAMMAR_CHOICE: return compile_choice(g, lim, err);
  case OAI_GRAMMAR_GBNF: return gram_compile_gbnf(g->src, g->src_len, lim, err);
  default: snprintf(err->msg, sizeof err->msg, "unknown structured-output form"); return NULL;
  }
}

/* Fills the token cache for the grammar's start here, on the compile
 * thread: the first mask of a new grammar walks the whole vocabulary from
 * the root's positions, the costliest walk, which the engine thread then
 * skips. A start that exceeds a bound (more stacks than max_stacks, more
 * work than mask_fuel, a cache over its bytes) is the request's 400, here,
 * rather than an error event later. 0, or -1 with err filled. */
static int warm(gram_entry_t *ent, gram_err_t *err) {
  const gram_cache_t *c = gram_entry_cache(ent);
  int rc = 0;
  gram_matcher_t *m = gram_matcher_create(c, &rc);
  uint32_t *mask = m ? malloc(gram_mask_words(gram_cache_vocab(c)) * sizeof *mask) : NULL;
  int32_t n = mask ? gram_matcher_fill_mask(m, mask) : GRAM_ENOMEM;
  if (!m) snprintf(err->msg, sizeof err->msg, "%s", rc == GRAM_ELIMIT ? "the grammar's start exceeds a bound of the parser"
                                                                      : "out of memory for the grammar's parser");
  else if (n < 0) snprintf(err->msg, sizeof err->msg, "%s", gram_matcher_error(m)[0] ? gram_matcher_error(m) : gram_strerror(n));
  else if (n == 0) snprintf(err->msg, sizeof err->msg, "the grammar allows no token of this model's vocabulary at its start");
  free(mask);
  gram_matcher_destroy(m);
  return m && n > 0 ? 0 : -1;
}

/* The 400 of a grammar that did not compile. */
static void compile_error(const oai_grammar_t *g, const gram_err_t *err, oai_error_t *e) {
  *e = (oai_error_t){.status = 400, .type = "invalid_request_error", .code = "invalid_value"};
  snprintf(e->param, sizeof e->param, "%s", g->field);
  if (err->pos >= 0 && !strstr(err->msg, "offset"))
    snprintf(e->message, sizeof e->message, "%s: %s (at byte %lld)", g->field, err->msg, (long long)err->pos);
  else
    snprintf(e->message, sizeof e->message, "%s: %s", g->field, err->msg);
}

int srv__grammar_find(srv_t *s, const oai_grammar_t *g, gram_entry_t **out) {
  *out = NULL;
  if (g->kind == OAI_GRAMMAR_NONE) return 0;
  size_t klen;
  char *key = make_key(g, &klen);
  *out = gram_lru_get(s->stack.grammars, key, klen);
  free(key);
  return *out ? 0 : 1;
}

int srv__grammar(srv_t *s, const oai_grammar_t *g, gram_entry_t **out, oai_error_t *e) {
  if (srv__grammar_find(s, g, out) == 0) return 0; /* (another request compiled it meanwhile) */
  size_t klen;
  char *key = make_key(g, &klen);
  gram_lru_t *lru = s->stack.grammars;
  gram_err_t err = {.pos = -1};
  gram_t *gr = compile(g, &s->glim, &err);
  gram_entry_t *ent = NULL;
  if (gr) {
    ent = gram_lru_put(lru, key, klen, gr);
    if (!ent) snprintf(err.msg, sizeof err.msg, "out of memory for the grammar's token cache");
    else if (warm(ent, &err)) { /* unusable: not kept for the next request */
      gram_lru_remove(lru, ent);
      gram_entry_unref(ent);
      ent = NULL;
    }
  }
  free(key);
  if (!ent) {
    compile_error(g, &err, e);
    return -EINVAL;
  }
  *out = ent;
  return 0;
}

/* ---- the compile threads --------------------------------------------------------- */

static void *compile_thread(void *arg) {
  srv_t *s = arg;
  /* below the workers that parse and tokenize (and the loop and the engine):
   * on a contended core, a compile is what waits */
  if (setpriority(PRIO_PROCESS, (id_t)gettid(), SRV_WORK_NICE + 5) != 0)
    log_debug("setpriority for a grammar compile thread: %s", strerror(errno));
  pthread_mutex_lock(&s->gc_mu);
  for (;;) {
    while (!s->gc_head && !s->gc_stop) pthread_cond_wait(&s->gc_cv, &s->gc_mu);
    if (!s->gc_head) break; /* stopping, and nothing waits */
    srv_work_t *w = s->gc_head;
    s->gc_head = w->stage_next;
    if (!s->gc_head) s->gc_tail = NULL;
    s->gc_queued--;
    pthread_mutex_unlock(&s->gc_mu);
    if (!atomic_load(&w->gone)) { /* a client that left costs no compile */
      if (fault_value("grammar_compile_delay", 0) > 0) /* test builds: a slow compile, on purpose */
        uv_sleep((unsigned)fault_value("grammar_compile_delay", 0));
      w->stage(w, 0);
    }
    pthread_mutex_lock(&s->gc_mu);
    w->stage_next = s->gc_done;
    s->gc_done = w;
    pthread_mutex_unlock(&s->gc_mu);
    uv_async_send(&s->gc_async);
    pthread_mutex_lock(&s->gc_mu);
  }
  pthread_mutex_unlock(&s->gc_mu);
  return NULL;
}

/* Loop: the items the threads finished go to their done callbacks. */
static void on_compiled(uv_async_t *a) {
  srv_t *s = a->data;
  pthread_mutex_lock(&s->gc_mu);
  srv_work_t *list = s->gc_done;
  s->gc_done = NULL;
  pthread_mutex_unlock(&s->gc_mu);
  /* (the list is newest first: reverse it, so items finish in order) */
  srv_work_t *rev = NULL;
  while (list) {
    srv_work_t *next = list->stage_next;
    list->stage_next = rev;
    rev = list;
    list = next;
  }
  while (rev) {
    srv_work_t *next = rev->stage_next;
    srv__work_finish(rev);
    rev = next;
  }
}

void srv__grammar_queue(srv_work_t *w) {
  srv_t *s = w->s;
  pthread_mutex_lock(&s->gc_mu);
  const bool full = s->gc_queued >= s->cfg->grammar_compile_queue;
  if (!full) {
    w->stage_next = NULL;
    if (s->gc_tail) s->gc_tail->stage_next = w;
    else s->gc_head = w;
    s->gc_tail = w;
    s->gc_queued++;
    pthread_cond_signal(&s->gc_cv);
  }
  pthread_mutex_unlock(&s->gc_mu);
  if (full) { /* refused at once, on the loop */
    w->stage(w, 1);
    srv__work_finish(w);
  }
}

void srv__grammar_start(srv_t *s) {
  const cfg_t *c = s->cfg;
  s->glim = (gram_limits_t){
      .max_size = c->grammar_max_size,
      .max_repeat = c->grammar_max_repeat,
      .max_depth = c->grammar_max_depth,
      .max_literal = (int32_t)c->grammar_max_literal,
      .compile_ns = c->grammar_compile_timeout_ms * INT64_C(1000000),
      .max_stacks = c->grammar_max_stacks,
      .mask_fuel = c->grammar_mask_fuel,
      .cache_bytes = c->grammar_cache_bytes_per_grammar,
  };
  s->glim = gram_limits_or_default(&s->glim);
  pthread_mutex_init(&s->gc_mu, NULL);
  pthread_cond_init(&s->gc_cv, NULL);
  uv_async_init(&s->loop, &s->gc_async, on_compiled);
  s->gc_async.data = s;
  s->gc_threads = xcalloc((size_t)c->grammar_compile_threads, sizeof *s->gc_threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)16 << 20); /* the schema walk nests up to grammar_max_depth */
  for (int i = 0; i < c->grammar_compile_threads; i++) {
    if (pthread_create(&s->gc_threads[i], &attr, compile_thread, s) != 0) {
      log_error("grammar compile thread %d: %s", i, strerror(errno));
      break;
    }
    s->gc_n++;
  }
  pthread_attr_destroy(&attr);
  if (s->gc_n == 0) { /* start-up only, and nothing would compile a grammar */
    log_error("no grammar compile thread could start");
    abort();
  }
}

static void on_closed(uv_handle_t *h) { (void)h; }

void srv__grammar_stop(srv_t *s) {
  pthread_mutex_lock(&s->gc_mu);
  s->gc_stop = true;
  pthread_cond_broadcast(&s->gc_cv);
  pthread_mutex_unlock(&s->gc_mu);
  for (int i = 0; i < s->gc_n; i++) pthread_join(s->gc_threads[i], NULL);
  free(s->gc_threads);
  s->gc_threads = NULL;
  s->gc_n = 0;
  uv_close((uv_handle_t *)&s->gc_async, on_closed);
  pthread_cond_destroy(&s->gc_cv);
  pthread_mutex_destroy(&s->gc_mu);
}
