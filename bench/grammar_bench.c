/* bench/grammar_bench.c — the grammar engine's speed on the default model's
 * vocabulary: JSON Schema compile time and token-mask time per generated
 * token over the schema corpus (tests/grammar/schemas.json).
 *
 *   grammar_bench -m MODEL.gguf [-s SCHEMAS.json] [-w WALKS] [-k RANDOM_STEPS]
 *
 * For each schema: compile it (best and median of 5), then WALKS seeded walks
 * from a fresh matcher (a fresh, empty cache per schema): RANDOM_STEPS tokens
 * drawn uniformly from each mask, then the shortest completion one byte token
 * at a time, then end of generation. Every gram_matcher_fill_mask call is
 * timed. "cold" counts every mask, including those that fill cache entries;
 * "warm" replays the same walks with the cache filled (the steady state of a
 * schema served more than once). Prints a table and a JSON summary line.
 * Numbers: docs/benchmarks/grammar.md. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "tests/tools/gram_vocab_gguf.h"

static double now(void) { return bench_clock_s(CLOCK_THREAD_CPUTIME_ID); } /* CPU time: the machine is shared */

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

typedef struct times {
  double *v;
  size_t n, cap;
} times_t;

static void push(times_t *t, double x) {
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 4096;
    t->v = realloc(t->v, t->cap * sizeof *t->v);
    if (!t->v) abort();
  }
  t->v[t->n++] = x;
}

static void stats(times_t *t, double *mean, double *p50, double *p99, double *max) {
  qsort(t->v, t->n, sizeof *t->v, bench_cmp_double);
  double s = 0;
  for (size_t i = 0; i < t->n; i++) s += t->v[i];
  *mean = t->n ? s / (double)t->n : 0;
  *p50 = t->n ? t->v[t->n / 2] : 0;
  *p99 = t->n ? t->v[(size_t)((double)(t->n - 1) * 0.99)] : 0;
  *max = t->n ? t->v[t->n - 1] : 0;
}

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int32_t byte_token[256];

/* One walk; appends each mask's seconds to t. Returns tokens generated. */
static int walk(gram_matcher_t *m, uint32_t *mask, size_t words, uint64_t seed, int k, times_t *t) {
  gram_matcher_reset(m);
  int steps = 0;
  for (; steps < 4000; steps++) {
    double t0 = now();
    int32_t cnt = gram_matcher_fill_mask(m, mask);
    push(t, now() - t0);
    if (cnt <= 0 || gram_matcher_is_ended(m)) break;
    int32_t id = -1;
    if (steps < k) {
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
    } else {
      int c = gram_matcher_shortest_byte(m);
      if (c < 0) break; /* accepting: end of generation next */
      id = byte_token[c];
      if (id < 0) break;
    }
    if (gram_matcher_accept_token(m, id)) break;
  }
  return steps;
}

int main(int argc, char **argv) {
  const char *model = NULL, *path = "tests/grammar/schemas.json";
  int walks = 3, k = 40;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-m")) model = argv[i + 1];
    else if (!strcmp(argv[i], "-s")) path = argv[i + 1];
    else if (!strcmp(argv[i], "-w")) walks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-k")) k = atoi(argv[i + 1]);
  }
  if (!model) {
    fprintf(stderr, "usage: grammar_bench -m MODEL.gguf [-s SCHEMAS.json] [-w WALKS] [-k RANDOM_STEPS]\n");
    return 2;
  }
  tok_t *tok = NULL;
  gram_vocab_t *v = gram_vocab_from_gguf(model, &tok);
  char *text = read_file(path);
  cJSON *corpus = text ? cJSON_Parse(text) : NULL;
  if (!v || !corpus) {
    fprintf(stderr, "grammar_bench: cannot read the model or %s\n", path);
    return 1;
  }
  for (int c = 0; c < 256; c++) {
    byte_token[c] = -1;
    for (int32_t i = 0; i < tok_n_vocab(tok) && byte_token[c] < 0; i++) {
      size_t len;
      const char *p = tok_piece(tok, i, &len);
      if (len == 1 && (unsigned char)p[0] == c && tok_type(tok, i) != TOK_TYPE_CONTROL) byte_token[c] = i;
    }
  }
  size_t words = gram_mask_words(v);
  uint32_t *mask = malloc(words * sizeof *mask);
  times_t cold = {0}, warm = {0}, compile = {0};
  double compile_max_100 = 0, compile_wide = 0;
  long tokens = 0;
  size_t cache_bytes = 0;
  printf("%-24s %8s %8s %7s %9s %9s %9s\n", "schema", "rules", "comp_ms", "tokens", "cold_us", "warm_us", "cache_kB");
  const cJSON *e;
  cJSON_ArrayForEach(e, corpus) {
    const cJSON *schema = cJSON_GetObjectItem(e, "schema");
    const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
    double best = 1e9, ct[5];
    gram_t *g = NULL;
    for (int r = 0; r < 5; r++) {
      gram_err_t err;
      double t0 = now();
      gram_t *x = gram_compile_json_schema(schema, NULL, NULL, &err);
      ct[r] = now() - t0;
      if (!x) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
      }
      if (ct[r] < best) best = ct[r];
      if (g) gram_destroy(g);
      g = x;
    }
    qsort(ct, 5, sizeof *ct, bench_cmp_double);
    push(&compile, ct[2]);
    const cJSON *props = cJSON_GetObjectItem(schema, "properties");
    if (cJSON_GetArraySize(props) <= 100 && ct[2] > compile_max_100) compile_max_100 = ct[2];
    if (!strcmp(name, "api-wide-100")) compile_wide = ct[2];
    gram_cache_t *c = gram_cache_create(g, v);
    gram_matcher_t *m = gram_matcher_create(c, NULL);
    times_t tc = {0}, tw = {0};
    int n_tok = 0;
    for (int w = 0; w < walks; w++) n_tok += walk(m, mask, words, (uint64_t)w + 1, k, &tc);
    for (int w = 0; w < walks; w++) walk(m, mask, words, (uint64_t)w + 1, k, &tw);
    double sc = 0, sw = 0;
    for (size_t i = 0; i < tc.n; i++) sc += tc.v[i], push(&cold, tc.v[i]);
    for (size_t i = 0; i < tw.n; i++) sw += tw.v[i], push(&warm, tw.v[i]);
    tokens += n_tok;
    cache_bytes += gram_cache_bytes(c);
    printf("%-24s %8d %8.3f %7d %9.1f %9.1f %9.1f\n", name, gram_n_rules(g), ct[2] * 1e3, n_tok,
           tc.n ? sc / (double)tc.n * 1e6 : 0, tw.n ? sw / (double)tw.n * 1e6 : 0, (double)gram_cache_bytes(c) / 1024);
    free(tc.v), free(tw.v);
    gram_matcher_destroy(m), gram_cache_destroy(c), gram_destroy(g);
  }
  double cm, c50, c99, cmax, wm, w50, w99, wmax, km, k50, k99, kmax;
  stats(&cold, &cm, &c50, &c99, &cmax);
  stats(&warm, &wm, &w50, &w99, &wmax);
  stats(&compile, &km, &k50, &k99, &kmax);
  printf("\nmasks: %zu over %d schemas, vocabulary %d\n", cold.n, cJSON_GetArraySize(corpus), gram_vocab_size(v));
  printf("cold (cache filling included): mean %.1f us  p50 %.1f us  p99 %.1f us  max %.1f us\n", cm * 1e6, c50 * 1e6,
         c99 * 1e6, cmax * 1e6);
  printf("warm (cache filled):           mean %.1f us  p50 %.1f us  p99 %.1f us  max %.1f us\n", wm * 1e6, w50 * 1e6,
         w99 * 1e6, wmax * 1e6);
  printf("compile (median of 5 each):    mean %.3f ms  p50 %.3f ms  max %.3f ms; max for <= 100 properties %.3f ms; "
         "api-wide-100 %.3f ms\n", km * 1e3, k50 * 1e3, kmax * 1e3, compile_max_100 * 1e3, compile_wide * 1e3);
  printf("{\"masks\": %zu, \"tokens\": %ld, \"cold_mean_us\": %.2f, \"cold_p99_us\": %.2f, \"warm_mean_us\": %.2f, "
         "\"warm_p99_us\": %.2f, \"compile_mean_ms\": %.3f, \"compile_max_ms\": %.3f, \"cache_bytes_total\": %zu}\n",
         cold.n, tokens, cm * 1e6, c99 * 1e6, wm * 1e6, w99 * 1e6, km * 1e3, kmax * 1e3, cache_bytes);
  free(cold.v), free(warm.v), free(compile.v), free(mask), free(text);
  cJSON_Delete(corpus);
  gram_vocab_destroy(v);
  tok_destroy(tok);
  return 0;
}
