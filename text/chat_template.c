/* text/chat_template.c — the chat template API over the Jinja interpreter:
 * compiling, turning the request's cJSON messages into interpreter values
 * (with content-part normalisation), and rendering. See chat_template.h. */
#include "text/chat_template.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "text/jinja/jinja.h"

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
  chat_tmpl_t *t = calloc(1, sizeof *t);
  if (!t) abort();
  jmp_buf jb;
  jinja_ctx_t *c = calloc(1, sizeof *c);
  if (!c) abort();
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
  t->src = malloc(len + 1);
  if (!t->src) abort();
  memcpy(t->src, src, len);
  t->src[len] = 0;
  t->arena = c->arena;
  free(c);
  return t;
}

chat_tmpl_t *chat_tmpl_from_model(const char *src, size_t len) {
  if (!src || len == 0) {
    log_info("model has no chat template (tokenizer.chat_template); using ChatML");
    return chat_tmpl_compile(CHAT_TMPL_CHATML, strlen(CHAT_TMPL_CHATML), NULL, 0);
  }
  chat_tmpl_t *t = chat_tmpl_compile(src, len, NULL, 0);
  if (!t) log_error("the model's chat template is not supported by tram's Jinja subset (see above)");
  return t;
}

const char *chat_tmpl_source(const chat_tmpl_t *t) { return t->src; }

void chat_tmpl_free(chat_tmpl_t *t) {
  if (!t) return;
  arena_free(&t->arena);
  free(t->src);
  free(t);
}

/* ---- JSON to values ---------------------------------------------------------- */

static jv_t from_json(jinja_ctx_t *c, const cJSON *j, int depth) {
  if (depth > MAX_JSON_DEPTH) jinja_fail(c, -EINVAL, "messages nested more than %d levels deep", MAX_JSON_DEPTH);
  if (cJSON_IsNull(j)) return jv_none();
  if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
    return jv_float(d);
  }
  if (cJSON_IsString(j)) return jv_strref(j->valuestring, strlen(j->valuestring));
  if (cJSON_IsArray(j)) {
    jinja_list_t *l = jinja_list_new(c, (uint32_t)cJSON_GetArraySize(j));
    for (const cJSON *e = j->child; e; e = e->next) jinja_list_push(c, l, from_json(c, e, depth + 1));
    return jv_list(l);
  }
  if (cJSON_IsObject(j)) {
    jinja_dict_t *d = jinja_dict_new(c, (uint32_t)cJSON_GetArraySize(j));
    for (const cJSON *e = j->child; e; e = e->next) {
      if (!e->string) jinja_fail(c, -EINVAL, "object member without a name");
      jinja_dict_set(c, d, jv_strref(e->string, strlen(e->string)), from_json(c, e, depth + 1));
    }
    return jv_dict(d);
  }
  jinja_fail(c, -EINVAL, "unsupported JSON value");
}

/* content: [{type: text, text}, ...] -> the texts joined with "\n". */
static jv_t join_text_parts(jinja_ctx_t *c, const cJSON *parts, int index) {
  jinja_buf_t b = {0};
  int k = 0;
  for (const cJSON *p = parts->child; p; p = p->next, k++) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
    if (!cJSON_IsObject(p) || !cJSON_IsString(type))
      jinja_fail(c, -EINVAL, "messages[%d].content[%d] is not a content part with a type", index, k);
    if (strcmp(type->valuestring, "text") != 0)
      jinja_fail(c, -EINVAL, "messages[%d].content[%d]: content type '%.40s' is not supported", index, k,
                 type->valuestring);
    if (!cJSON_IsString(text)) jinja_fail(c, -EINVAL, "messages[%d].content[%d] has no text", index, k);
    if (k) jinja_buf_putc(c, &b, '\n');
    jinja_buf_put(c, &b, text->valuestring, strlen(text->valuestring));
  }
  return jv_strref(b.p ? b.p : "", b.len);
}

static jv_t messages_value(jinja_ctx_t *c, const cJSON *messages) {
  if (!cJSON_IsArray(messages)) jinja_fail(c, -EINVAL, "messages must be an array");
  jinja_list_t *l = jinja_list_new(c, (uint32_t)cJSON_GetArraySize(messages));
  int i = 0;
  for (const cJSON *m = messages->child; m; m = m->next, i++) {
    if (!cJSON_IsObject(m)) jinja_fail(c, -EINVAL, "messages[%d] is not an object", i);
    jv_t v = from_json(c, m, 1);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsArray(content))
      jinja_dict_set(c, v.dict, jv_strref("content", 7), join_text_parts(c, content, i));
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
  jinja_ctx_t *c = calloc(1, sizeof *c);
  if (!c) abort();
  jinja_arena_init(&c->arena, in->max_memory ? in->max_memory : CHAT_TMPL_MAX_MEMORY);
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
    if (!cJSON_IsObject(in->extra)) jinja_fail(c, -EINVAL, "extra template variables must be a JSON object");
    for (const cJSON *e = in->extra->child; e; e = e->next)
      jinja_frame_set(c, g, e->string, strlen(e->string), from_json(c, e, 1));
  }
  jinja_frame_set(c, g, "messages", 8, messages_value(c, in->messages));
  jinja_frame_set(c, g, "add_generation_prompt", 21, jv_bool(in->add_generation_prompt));
  jinja_frame_set(c, g, "bos_token", 9, jv_cstr(in->bos_token ? in->bos_token : ""));
  jinja_frame_set(c, g, "eos_token", 9, jv_cstr(in->eos_token ? in->eos_token : ""));
  c->globals = g;
  jinja_buf_t buf = {0};
  c->out = &buf;
  jinja_render(c, t->root);
  char *s = malloc(buf.len + 1);
  if (!s) abort();
  if (buf.len) memcpy(s, buf.p, buf.len);
  s[buf.len] = 0;
  *out = s;
  if (out_len) *out_len = buf.len;
  arena_free(&c->arena);
  free(c);
  return 0;
}
