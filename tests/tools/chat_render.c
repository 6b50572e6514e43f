/* tests/tools/chat_render.c — renders a chat template for the parity tests.
 *
 *   chat_render TEMPLATE_FILE INPUT_JSON_FILE
 *
 * INPUT_JSON_FILE holds {"messages": [...], "add_generation_prompt": bool,
 * "bos_token": str, "eos_token": str, ...}; every other member is passed to
 * the template as an extra variable (tools, date_string, ...).
 *
 * Prints the rendering to stdout, byte for byte, and exits 0. On failure
 * prints one line to stderr and exits: 3 the template does not compile
 * ("compile: MSG"), 2 it called raise_exception ("raise: MSG"), 1 any other
 * render error ("error: MSG"). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/chat_template.h"

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

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s TEMPLATE_FILE INPUT_JSON_FILE\n", argv[0]);
    return 4;
  }
  size_t tlen, jlen;
  char *src = read_file(argv[1], &tlen), *json = read_file(argv[2], &jlen);
  cJSON *in = cJSON_ParseWithLength(json, jlen);
  if (!cJSON_IsObject(in)) {
    fprintf(stderr, "input is not a JSON object\n");
    return 4;
  }
  char err[1024];
  chat_tmpl_t *t = chat_tmpl_compile(src, tlen, err, sizeof err);
  if (!t) {
    fprintf(stderr, "compile: %s\n", err);
    return 3;
  }
  cJSON *messages = cJSON_DetachItemFromObjectCaseSensitive(in, "messages");
  cJSON *agp = cJSON_DetachItemFromObjectCaseSensitive(in, "add_generation_prompt");
  cJSON *bos = cJSON_DetachItemFromObjectCaseSensitive(in, "bos_token");
  cJSON *eos = cJSON_DetachItemFromObjectCaseSensitive(in, "eos_token");
  chat_tmpl_input_t ti = {
      .messages = messages,
      .add_generation_prompt = cJSON_IsTrue(agp),
      .bos_token = cJSON_IsString(bos) ? bos->valuestring : "",
      .eos_token = cJSON_IsString(eos) ? eos->valuestring : "",
      .extra = in,
  };
  char *out;
  size_t n;
  int rc = chat_tmpl_render(t, &ti, &out, &n, err, sizeof err);
  int status = 0;
  if (rc == 0) {
    fwrite(out, 1, n, stdout);
    free(out);
  } else if (rc == -EBADMSG) {
    fprintf(stderr, "raise: %s\n", err);
    status = 2;
  } else {
    fprintf(stderr, "error: %s\n", err);
    status = 1;
  }
  chat_tmpl_free(t);
  cJSON_Delete(messages);
  cJSON_Delete(agp);
  cJSON_Delete(bos);
  cJSON_Delete(eos);
  cJSON_Delete(in);
  free(src);
  free(json);
  return status;
}
