/* tests/tools/grammar_mask.c — the grammar engine on the command line, for the
 * pytest suites (tests/integration/test_grammar_*.py): compiles grammars,
 * computes token masks over the model's vocabulary, walks random paths.
 *
 *   grammar_mask -m MODEL.gguf        then one JSON command per stdin line:
 *
 *   {"vocab":1}                 -> {"n":N,"eog":[..],"tokens":[hex,..]} (control tokens: "")
 *   {"compile":{"regex":S} | {"gbnf":S} | {"choice":[S..]} | {"json_schema":{..}}
 *              | {"json_object":1}, "flexible_ws":0|1}
 *                               -> {"ok":1,"rules":R} or {"error":MSG,"pos":P}
 *   {"mask":1}                  -> {"count":C,"accepting":0|1,"mask":HEX} (little-endian words)
 *   {"accept":ID}               -> {"ok":0|1}
 *   {"reset":1}                 -> {"ok":1}
 *   {"sample":{"seed":S,"random_steps":K,"max_tokens":M}}
 *       from the start: K tokens drawn uniformly from each mask, then the
 *       shortest way to a complete output (one byte token at a time), then
 *       end of generation; -> {"tokens":[..],"text":HEX,"complete":0|1}
 * A command that fails prints {"error":MSG}. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tools/gram_vocab_gguf.h"

static gram_vocab_t *vocab;
static tok_t *tok;
static gram_t *gram;
static gram_cache_t *cache;
static gram_matcher_t *matcher;
static int32_t byte_token[256]; /* the token that is exactly that byte, or -1 */

static void put_hex(cJSON *o, const char *key, const void *p, size_t n) {
  char *h = malloc(n * 2 + 1);
  for (size_t i = 0; i < n; i++) sprintf(h + 2 * i, "%02x", ((const unsigned char *)p)[i]);
  h[2 * n] = 0;
  cJSON_AddStringToObject(o, key, h);
  free(h);
}

static void drop(void) {
  gram_matcher_destroy(matcher), gram_cache_destroy(cache), gram_destroy(gram);
  matcher = NULL, cache = NULL, gram = NULL;
}

static void compile(const cJSON *spec, int flexible, cJSON *out) {
  drop();
  gram_err_t err = {.pos = -1};
  gram_json_opts_t o = {.flexible_ws = flexible};
  const cJSON *x;
  if ((x = cJSON_GetObjectItem(spec, "regex"))) gram = gram_compile_regex(x->valuestring, strlen(x->valuestring), NULL, &err);
  else if ((x = cJSON_GetObjectItem(spec, "gbnf"))) gram = gram_compile_gbnf(x->valuestring, strlen(x->valuestring), NULL, &err);
  else if ((x = cJSON_GetObjectItem(spec, "json_schema"))) gram = gram_compile_json_schema(x, &o, NULL, &err);
  else if ((x = cJSON_GetObjectItem(spec, "json_object"))) gram = gram_compile_json_object(&o, NULL, &err);
  else if ((x = cJSON_GetObjectItem(spec, "choice"))) {
    int n = cJSON_GetArraySize(x);
    const char **s = calloc((size_t)n + 1, sizeof *s);
    size_t *l = calloc((size_t)n + 1, sizeof *l);
    for (int i = 0; i < n; i++) s[i] = cJSON_GetArrayItem(x, i)->valuestring, l[i] = strlen(s[i]);
    gram = gram_compile_choice(s, l, (size_t)n, NULL, &err);
    free(s), free(l);
  } else snprintf(err.msg, sizeof err.msg, "unknown grammar kind");
  if (gram) {
    cache = gram_cache_create(gram, vocab);
    matcher = cache ? gram_matcher_create(cache, NULL) : NULL;
  }
  if (!matcher) {
    cJSON_AddStringToObject(out, "error", err.msg);
    cJSON_AddNumberToObject(out, "pos", (double)err.pos);
    drop();
    return;
  }
  cJSON_AddNumberToObject(out, "ok", 1);
  cJSON_AddNumberToObject(out, "rules", gram_n_rules(gram));
}

static uint64_t rng(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void sample(const cJSON *spec, uint32_t *mask, cJSON *out) {
  uint64_t seed = (uint64_t)cJSON_GetObjectItem(spec, "seed")->valuedouble;
  int k = cJSON_GetObjectItem(spec, "random_steps")->valueint;
  int max = cJSON_GetObjectItem(spec, "max_tokens")->valueint;
  gram_matcher_reset(matcher);
  cJSON *ids = cJSON_AddArrayToObject(out, "tokens");
  char *text = malloc(1 << 20);
  size_t tl = 0;
  int complete = 0;
  size_t words = gram_mask_words(vocab);
  for (int step = 0; step < max && !complete; step++) {
    int32_t id = -1;
    if (step < k) {
      int32_t cnt = gram_matcher_fill_mask(matcher, mask);
      if (cnt <= 0) break;
      int32_t pick = (int32_t)(rng(&seed) % (uint64_t)cnt);
      for (size_t w = 0; w < words && id < 0; w++) {
        int pc = __builtin_popcount(mask[w]);
        if (pick >= pc) {
          pick -= pc;
          continue;
        }
        for (int b = 0; b < 32; b++)
          if ((mask[w] >> b & 1) && pick-- == 0) {
            id = (int32_t)(w * 32 + (size_t)b);
            break;
          }
      }
    } else if (gram_matcher_is_accepting(matcher)) {
      complete = 1;
      break;
    } else {
      int c = gram_matcher_shortest_byte(matcher);
      if (c < 0 || byte_token[c] < 0) break;
      id = byte_token[c];
    }
    size_t len;
    const char *p = tok_piece(tok, id, &len);
    if (gram_matcher_accept_token(matcher, id)) break;
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(id));
    if (gram_matcher_is_ended(matcher) && tok_is_eog(tok, id)) {
      complete = 1;
      break;
    }
    if (tl + len < (1 << 20)) memcpy(text + tl, p, len), tl += len;
  }
  if (!complete && gram_matcher_is_accepting(matcher)) complete = 1;
  put_hex(out, "text", text, tl);
  cJSON_AddNumberToObject(out, "complete", complete);
  free(text);
}

int main(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[1], "-m")) {
    fprintf(stderr, "usage: grammar_mask -m MODEL.gguf < commands\n");
    return 2;
  }
  vocab = gram_vocab_from_gguf(argv[2], &tok);
  if (!vocab) return 1;
  for (int c = 0; c < 256; c++) {
    char b = (char)c;
    byte_token[c] = -1;
    for (int32_t i = 0; i < tok_n_vocab(tok) && byte_token[c] < 0; i++) {
      size_t len;
      const char *p = tok_piece(tok, i, &len);
      if (len == 1 && p[0] == b && tok_type(tok, i) != TOK_TYPE_CONTROL) byte_token[c] = i;
    }
  }
  size_t words = gram_mask_words(vocab);
  uint32_t *mask = malloc(words * sizeof *mask);
  size_t cap = 1 << 16;
  char *line = malloc(cap);
  ssize_t n;
  while ((n = getline(&line, &cap, stdin)) > 0) {
    cJSON *cmd = cJSON_Parse(line), *out = cJSON_CreateObject(), *x;
    if (!cmd) cJSON_AddStringToObject(out, "error", "bad JSON command");
    else if (cJSON_GetObjectItem(cmd, "vocab")) {
      cJSON_AddNumberToObject(out, "n", tok_n_vocab(tok));
      const int32_t *eog;
      int32_t ne = tok_eog_ids(tok, &eog);
      cJSON_AddItemToObject(out, "eog", cJSON_CreateIntArray(eog, ne));
      cJSON *arr = cJSON_AddArrayToObject(out, "tokens");
      for (int32_t i = 0; i < tok_n_vocab(tok); i++) {
        size_t len;
        const char *p = tok_piece(tok, i, &len);
        cJSON *o = cJSON_CreateObject();
        put_hex(o, "h", p, tok_type(tok, i) == TOK_TYPE_CONTROL ? 0 : len);
        cJSON_AddItemToArray(arr, cJSON_CreateString(cJSON_GetObjectItem(o, "h")->valuestring));
        cJSON_Delete(o);
      }
    } else if ((x = cJSON_GetObjectItem(cmd, "compile"))) {
      compile(x, cJSON_IsTrue(cJSON_GetObjectItem(cmd, "flexible_ws")), out);
    } else if (!matcher) cJSON_AddStringToObject(out, "error", "nothing compiled");
    else if (cJSON_GetObjectItem(cmd, "mask")) {
      int32_t cnt = gram_matcher_fill_mask(matcher, mask);
      if (cnt < 0) cJSON_AddStringToObject(out, "error", gram_strerror(cnt));
      cJSON_AddNumberToObject(out, "count", cnt);
      cJSON_AddNumberToObject(out, "accepting", gram_matcher_is_accepting(matcher));
      put_hex(out, "mask", mask, words * sizeof *mask);
    } else if ((x = cJSON_GetObjectItem(cmd, "accept"))) {
      cJSON_AddNumberToObject(out, "ok", gram_matcher_accept_token(matcher, x->valueint) == 0);
    } else if (cJSON_GetObjectItem(cmd, "reset")) {
      gram_matcher_reset(matcher);
      cJSON_AddNumberToObject(out, "ok", 1);
    } else if ((x = cJSON_GetObjectItem(cmd, "sample"))) {
      sample(x, mask, out);
    } else cJSON_AddStringToObject(out, "error", "unknown command");
    char *s = cJSON_PrintUnformatted(out);
    puts(s);
    fflush(stdout);
    free(s);
    cJSON_Delete(out), cJSON_Delete(cmd);
  }
  drop();
  free(mask), free(line);
  gram_vocab_destroy(vocab);
  tok_destroy(tok);
  return 0;
}
