/* tests/tools/chat_render.c — renders a chat template for the parity tests.
 *
 *   chat_render TEMPLATE_FILE INPUT_JSON_FILE
 *   chat_render --batch CASES_JSON_FILE
 *
 * INPUT_JSON_FILE holds {"messages": [...], "add_generation_prompt": bool,
 * "bos_token": str, "eos_token": str, ...}; every other member is passed to
 * the template as an extra variable (tools, date_string, ...).
 *
 * Prints the rendering to stdout, byte for byte, and exits 0. On failure
 * prints one line to stderr and exits: 3 the template does not compile
 * ("compile: MSG"), 2 it called raise_exception ("raise: MSG"), 1 any other
 * render error ("error: MSG").
 *
 * --batch: CASES_JSON_FILE holds [{"template": SOURCE, "input": INPUT}, ...];
 * prints a JSON array with one {"status": "ok" | "raise" | "error" |
 * "compile", "text": RENDERING or MESSAGE} per case (one process for many
 * cases keeps the test suite fast). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_chat_val.h"
#include "text/chat_template.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(4);
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}

/* Renders src with `in` ({messages, add_generation_prompt, bos_token,
 * eos_token, ...extra}; consumed). Returns 0 ok, 2 raise, 1 error, 3 compile;
 * *text is the rendering or the message (malloc'd), *text_len its length. */
static int render_one(const char *src, size_t len, cJSON *in, char **text, size_t *text_len) {
  char err[1024];
  chat_tmpl_t *t = chat_tmpl_compile(src, len, err, sizeof err);
  if (!t) {
    *text = strdup(err);
    *text_len = strlen(err);
    return 3;
  }
  cJSON *messages = cJSON_DetachItemFromObjectCaseSensitive(in, "messages");
  cJSON *agp = cJSON_DetachItemFromObjectCaseSensitive(in, "add_generation_prompt");
  cJSON *bos = cJSON_DetachItemFromObjectCaseSensitive(in, "bos_token");
  cJSON *eos = cJSON_DetachItemFromObjectCaseSensitive(in, "eos_token");
  arena_t a;
  arena_init(&a, 0, 0);
  chat_tmpl_input_t ti = {
      .messages = oai_chat_val(&a, messages),
      .add_generation_prompt = cJSON_IsTrue(agp),
      .bos_token = cJSON_IsString(bos) ? bos->valuestring : "",
      .eos_token = cJSON_IsString(eos) ? eos->valuestring : "",
      .extra = oai_chat_val(&a, in),
  };
  int rc = chat_tmpl_render(t, &ti, text, text_len, err, sizeof err);
  int status = rc == 0 ? 0 : rc == -EBADMSG ? 2 : 1;
  if (rc != 0) {
    *text = strdup(err);
    *text_len = strlen(err);
  }
  chat_tmpl_free(t);
  arena_free(&a);
  cJSON_Delete(messages);
  cJSON_Delete(agp);
  cJSON_Delete(bos);
  cJSON_Delete(eos);
  return status;
}

static int batch(const char *path) {
  size_t len;
  char *json = read_file(path, &len);
  cJSON *cases = cJSON_ParseWithLength(json, len);
  if (!cJSON_IsArray(cases)) {
    fprintf(stderr, "%s is not a JSON array\n", path);
    return 4;
  }
  static const char *const names[] = {"ok", "error", "raise", "compile"};
  cJSON *results = cJSON_CreateArray();
  for (cJSON *c = cases->child; c; c = c->next) {
    cJSON *src = cJSON_GetObjectItemCaseSensitive(c, "template");
    cJSON *in = cJSON_DetachItemFromObjectCaseSensitive(c, "input");
    if (!cJSON_IsString(src) || !cJSON_IsObject(in)) {
      fprintf(stderr, "case without template or input\n");
      return 4;
    }
    char *text;
    size_t n;
    int status = render_one(src->valuestring, strlen(src->valuestring), in, &text, &n);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "status", names[status]);
    cJSON_AddStringToObject(r, "text", text);
    cJSON_AddItemToArray(results, r);
    free(text);
    cJSON_Delete(in);
  }
  char *out = cJSON_PrintUnformatted(results);
  fputs(out, stdout);
  free(out);
  cJSON_Delete(results);
  cJSON_Delete(cases);
  free(json);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--batch") == 0) return batch(argv[2]);
  if (argc != 3) {
    fprintf(stderr, "usage: %s TEMPLATE_FILE INPUT_JSON_FILE | --batch CASES_JSON_FILE\n", argv[0]);
    return 4;
  }
  size_t tlen, jlen;
  char *src = read_file(argv[1], &tlen), *json = read_file(argv[2], &jlen);
  cJSON *in = cJSON_ParseWithLength(json, jlen);
  if (!cJSON_IsObject(in)) {
    fprintf(stderr, "input is not a JSON object\n");
    return 4;
  }
  char *text;
  size_t n;
  int status = render_one(src, tlen, in, &text, &n);
  if (status == 0) fwrite(text, 1, n, stdout);
  else fprintf(stderr, "%s: %s\n", status == 2 ? "raise" : status == 3 ? "compile" : "error", text);
  free(text);
  cJSON_Delete(in);
  free(src);
  free(json);
  return status;
}
