/* text/chat_template.c — the chat template API over the Jinja interpreter:
 * compiling, turning the input values into interpreter values (with
 * content-part normalisation), and rendering. See chat_template.h. */
#include "text/chat_template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "gguf/gguf.h"
#include "text/jinja/jinja.h"
#include "text/tokenizer.h"

const char CHAT_TMPL_CHATML[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

enum { MAX_SOURCE = 1 << 20, MAX_JSON_DEPTH = 64, MAX_EVAL_DEPTH = 256 };

struct chat_tmpl {
  arena_t arena;        /* the tree, tokens and literals */
  jinja_node_t *root;
  char *src;
};

static void put_err(char *err, size_t size, const char *msg) {
  if (err && size) snprintf(err, size, "%s", msg);
}

chat_tmpl_t *chat_tmpl_compile(const char *src, size_t len, char *err, size_t err_size) {
  if (!src || len > MAX_SOURCE) {
    log_error("chat template: source %s", src ? "larger than 1 MiB" : "missing");
    put_err(err, err_size, src ? "template larger than 1 MiB" : "no template source");
    return NULL;
  }
  chat_tmpl_t *t = xcalloc(1, sizeof *t);
  jmp_buf jb;
  jinja_ctx_t *c = xcalloc(1, sizeof *c);
  jinja_arena_init(&c->arena, (size_t)64 * MAX_SOURCE);
  c->jb = &jb;
  if (setjmp(jb)) {
    if (err) log_debug("chat template: %s", c->msg); /* the caller has the message */
    else log_error("chat template: %s", c->msg);
    put_err(err, err_size, c->msg);
    arena_free(&c->arena);
    free(c);
    free(t);
    return NULL;
  }
  t->root = jinja_parse(c, src, len);
  t->src = xmalloc(len + 1);
  memcpy(t->src, src, len);
  t->src[len] = 0;
  t->arena = c->arena;
  free(c);
  return t;
}

chat_tmpl_t *chat_tmpl_from_model(const char *src, size_t len, int add_bos, int add_eos) {
  if (!src || len == 0) {
    log_info("model has no chat template (tokenizer.chat_template); using ChatML%s%s",
             add_bos ? ", BOS first (add_bos_token)" : "", add_eos ? ", EOS last (add_eos_token)" : "");
    char fallback[sizeof CHAT_TMPL_CHATML + 64];
    const int n = snprintf(fallback, sizeof fallback, "%s%s%s", add_bos ? "{{ bos_token }}" : "", CHAT_TMPL_CHATML,
                           add_eos ? "{{ eos_token }}" : "");
    return chat_tmpl_compile(fallback, (size_t)n, NULL, 0);
  }
  chat_tmpl_t *t = chat_tmpl_compile(src, len, NULL, 0);
  if (!t) log_error("the model's chat template is not supported by tram's Jinja subset (see above)");
  return t;
}

chat_tmpl_t *chat_tmpl_from_gguf(const gguf_ctx_t *g, const tok_t *tok) {
  gguf_str_t t;
  const int rc = gguf_get_str(g, "tokenizer.chat_template", &t);
  if (rc == -EINVAL) {
    log_error("the model's key 'tokenizer.chat_template' is not a string");
    return NULL;
  }
  return chat_tmpl_from_model(rc == 0 ? t.ptr : NULL, rc == 0 ? (size_t)t.len : 0, tok_adds_bos(tok),
                              tok_adds_eos(tok));
}

const char *chat_tmpl_source(const chat_tmpl_t *t) { return t->src; }

void chat_tmpl_free(chat_tmpl_t *t) {
  if (!t) return;
  arena_free(&t->arena);
  free(t->src);
  free(t);
}

/* ---- input values to interpreter values ----------------------------------------- */

static jv_t from_val(jinja_ctx_t *c, const chat_val_t *v, int depth) {
  if (depth > MAX_JSON_DEPTH) jinja_fail(c, -EINVAL, "messages nested more than %d levels deep", MAX_JSON_DEPTH);
  switch (v->kind) {
  case CHAT_VAL_NONE: return jv_none();
  case CHAT_VAL_BOOL: return jv_bool(v->i != 0);
  case CHAT_VAL_INT: return jv_int(v->i);
  case CHAT_VAL_FLOAT: return jv_float(v->f);
  case CHAT_VAL_STR: return jv_strref(v->s ? v->s : "", v->n);
  case CHAT_VAL_LIST: {
    jinja_list_t *l = jinja_list_new(c, (uint32_t)v->n);
    for (size_t i = 0; i < v->n; i++) jinja_list_push(c, l, from_val(c, &v->items[i], depth + 1));
    return jv_list(l);
  }
  case CHAT_VAL_DICT: {
    jinja_dict_t *d = jinja_dict_new(c, (uint32_t)v->n);
    for (size_t i = 0; i < v->n; i++) {
      if (v->keys[i].kind != CHAT_VAL_STR) jinja_fail(c, -EINVAL, "a dict key that is not a string");
      jinja_dict_set(c, d, jv_strref(v->keys[i].s, v->keys[i].n), from_val(c, &v->items[i], depth + 1));
    }
    return jv_dict(d);
  }
  }
  jinja_fail(c, -EINVAL, "unsupported input value");
}

/* The entry of dict d under the NUL-terminated key, or NULL. */
static const chat_val_t *dict_get(const chat_val_t *d, const char *key) {
  if (d->kind != CHAT_VAL_DICT) return NULL;
  const size_t n = strlen(key);
  for (size_t i = 0; i < d->n; i++)
    if (d->keys[i].n == n && memcmp(d->keys[i].s, key, n) == 0) return &d->items[i];
  return NULL;
}

static int is_str(const chat_val_t *v) { return v && v->kind == CHAT_VAL_STR; }

/* content: [{type: text, text}, ...] -> the texts joined with "\n". */
static jv_t join_text_parts(jinja_ctx_t *c, const chat_val_t *parts, int index) {
  jinja_buf_t b = {0};
  for (size_t k = 0; k < parts->n; k++) {
    const chat_val_t *p = &parts->items[k];
    const chat_val_t *type = dict_get(p, "type"), *text = dict_get(p, "text");
    if (p->kind != CHAT_VAL_DICT || !is_str(type))
      jinja_fail(c, -EINVAL, "messages[%d].content[%zu] is not a content part with a type", index, k);
    if (type->n != 4 || memcmp(type->s, "text", 4) != 0)
      jinja_fail(c, -EINVAL, "messages[%d].content[%zu]: content type '%.*s' is not supported", index, k,
                 (int)(type->n > 40 ? 40 : type->n), type->s);
    if (!is_str(text)) jinja_fail(c, -EINVAL, "messages[%d].content[%zu] has no text", index, k);
    if (k) jinja_buf_putc(c, &b, '\n');
    jinja_buf_put(c, &b, text->s, text->n);
  }
  return jv_strref(b.p ? b.p : "", b.len);
}

static jv_t messages_value(jinja_ctx_t *c, const chat_val_t *messages) {
  if (!messages || messages->kind != CHAT_VAL_LIST) jinja_fail(c, -EINVAL, "messages must be an array");
  jinja_list_t *l = jinja_list_new(c, (uint32_t)messages->n);
  for (size_t i = 0; i < messages->n; i++) {
    const chat_val_t *m = &messages->items[i];
    if (m->kind != CHAT_VAL_DICT) jinja_fail(c, -EINVAL, "messages[%zu] is not an object", i);
    jv_t v = from_val(c, m, 1);
    const chat_val_t *content = dict_get(m, "content");
    if (content && content->kind == CHAT_VAL_LIST)
      jinja_dict_set(c, v.dict, jv_strref("content", 7), join_text_parts(c, content, (int)i));
    jinja_list_push(c, l, v);
  }
  return jv_list(l);
}

int chat_tmpl_render(const chat_tmpl_t *t, const chat_tmpl_input_t *in, char **out, size_t *out_len, char *err,
                     size_t err_size) {
  *out = NULL;
  if (out_len) *out_len = 0;
  jmp_buf jb;
  /* on the heap: the context is read after a longjmp */
  jinja_ctx_t *c = xcalloc(1, sizeof *c);
  jinja_arena_init(&c->arena, in->max_memory ? in->max_memory : CHAT_TMPL_MAX_MEMORY);
  arena_fallible(&c->arena, true); /* capped, so memory running out is an error already; this lets
                                      test builds inject it (alloc_fail): the caller answers 503 */
  c->jb = &jb;
  c->max_output = in->max_output ? in->max_output : CHAT_TMPL_MAX_OUTPUT;
  c->max_steps = in->max_steps ? in->max_steps : CHAT_TMPL_MAX_STEPS;
  c->max_depth = MAX_EVAL_DEPTH;
  if (setjmp(jb)) {
    put_err(err, err_size, c->msg);
    int rc = c->code ? c->code : -EINVAL;
    arena_free(&c->arena);
    free(c);
    return rc;
  }
  jinja_frame_t *g = jinja_frame_new(c, NULL);
  jinja_frame_set(c, g, "tools", 5, jv_none());
  jinja_frame_set(c, g, "documents", 9, jv_none());
  if (in->extra) {
    if (in->extra->kind != CHAT_VAL_DICT) jinja_fail(c, -EINVAL, "extra template variables must be a JSON object");
    for (size_t i = 0; i < in->extra->n; i++) {
      const chat_val_t *k = &in->extra->keys[i];
      if (k->kind != CHAT_VAL_STR) jinja_fail(c, -EINVAL, "a dict key that is not a string");
      jinja_frame_set(c, g, k->s, k->n, from_val(c, &in->extra->items[i], 1));
    }
  }
  jinja_frame_set(c, g, "messages", 8, messages_value(c, in->messages));
  jinja_frame_set(c, g, "add_generation_prompt", 21, jv_bool(in->add_generation_prompt));
  jinja_frame_set(c, g, "bos_token", 9, jv_cstr(in->bos_token ? in->bos_token : ""));
  jinja_frame_set(c, g, "eos_token", 9, jv_cstr(in->eos_token ? in->eos_token : ""));
  c->globals = g;
  jinja_buf_t buf = {0};
  c->out = &buf;
  jinja_render(c, t->root);
  char *s = xmalloc(buf.len + 1);
  if (buf.len) memcpy(s, buf.p, buf.len);
  s[buf.len] = 0;
  *out = s;
  if (out_len) *out_len = buf.len;
  arena_free(&c->arena);
  free(c);
  return 0;
}
