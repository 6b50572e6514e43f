/* bench/tok_bench.c — tokenizer throughput on a few MB of mixed text with
 * the default model's tokenizer (byte-level BPE, pre "smollm").
 *
 *   build/bench/tok_bench [-m MODEL.gguf] [-s MB] [-r REPEATS] [-o OUT] [FILE...]
 *
 * The text is FILEs, or by default the repository's own docs, sources and
 * the multilingual tokenizer corpus (English, code, CJK, emoji, RTL, ...),
 * repeated up to MB megabytes (default 4). Prints, best of REPEATS (default
 * 5), single-threaded:
 *   - encode of the whole text in one call (MB/s, tokens/s, bytes/token),
 *   - encode in 4 KiB prompts (per-call costs included),
 *   - decode, and the streaming detokenizer one token at a time.
 * -o OUT writes the text benchmarked, for running other tokenizers on it. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench/bench_util.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct buf {
  char *p;
  size_t n, cap;
} buf_t;

static void append(buf_t *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    while (b->n + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 1 << 20;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static void add_file(buf_t *b, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  char chunk[1 << 16];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) append(b, chunk, k);
  fclose(f);
  append(b, "\n", 1);
}

static int wanted(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".md") ||
                 !strcmp(dot, ".json") || !strcmp(dot, ".py"));
}

/* The files of dir (not recursive), sorted by name so runs are comparable. */
static void add_dir(buf_t *b, const char *dir) {
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort);
  for (int i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
    struct stat st;
    if (wanted(list[i]->d_name) && stat(path, &st) == 0 && S_ISREG(st.st_mode)) add_file(b, path);
    free(list[i]);
  }
  if (n >= 0) free(list);
}

/* Best and median of r timings. */
static void report(const char *what, double *t, int r, double bytes, double tokens) {
  qsort(t, (size_t)r, sizeof *t, bench_cmp_double);
  printf("%-28s best %8.2f MB/s %10.0f tok/s   median %8.2f MB/s\n", what, bytes / t[0] / 1e6,
         tokens / t[0], bytes / t[r / 2] / 1e6);
}

int main(int argc, char **argv) {
  const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *dump = NULL;
  double mb = 4;
  int reps = 5;
  buf_t src = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) mb = atof(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-o") && i + 1 < argc) dump = argv[++i];
    else add_file(&src, argv[i]);
  }
  if (reps < 1 || reps > 100 || mb <= 0 || mb > 1024) {
    fprintf(stderr, "tok_bench: -r 1..100, -s 0..1024\n");
    return 2;
  }
  if (src.n == 0) {
    const char *dirs[] = {"docs", "model", "server", "scheduler", "kernels/cpu",
                          "tests/integration", "tests/integration/data"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) add_dir(&src, dirs[i]);
  }
  if (src.n == 0) {
    fprintf(stderr, "tok_bench: no text (run from the repository root or name files)\n");
    return 1;
  }
  size_t size = (size_t)(mb * 1024 * 1024);
  buf_t text = {0};
  while (text.n < size) append(&text, src.p, src.n < size - text.n ? src.n : size - text.n);
  if (dump) {
    FILE *f = fopen(dump, "wb");
    if (!f || fwrite(text.p, 1, text.n, f) != text.n || fclose(f) != 0) {
      fprintf(stderr, "tok_bench: cannot write %s\n", dump);
      return 1;
    }
  }

  char err[512];
  gguf_ctx_t *g = gguf_open(model, err, sizeof err);
  tok_t *tok = g ? tok_create_from_gguf(g, err, sizeof err) : NULL;
  gguf_close(g);
  if (!tok) {
    fprintf(stderr, "tok_bench: %s\n", err);
    return 1;
  }

  size_t cap = text.n + 16;
  int32_t *ids = malloc(cap * sizeof *ids);
  double *t = calloc((size_t)reps, sizeof *t);
  int64_t n = 0;
  printf("text: %.2f MB (%zu bytes of sources, repeated), model %s\n",
         (double)text.n / 1e6, src.n, model);

  for (int r = 0; r < reps; r++) {
    double t0 = now();
    n = tok_encode(tok, text.p, text.n, TOK_ENC_PARSE_SPECIAL, ids, cap);
    t[r] = now() - t0;
  }
  if (n < 0 || n > (int64_t)cap) {
    fprintf(stderr, "tok_bench: encode failed (%lld)\n", (long long)n);
    return 1;
  }
  printf("tokens: %lld (%.2f bytes/token)\n", (long long)n, (double)text.n / (double)n);
  report("encode, one call", t, reps, (double)text.n, (double)n);

  const size_t chunk = 4096;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    for (size_t off = 0; off < text.n; off += chunk) {
      size_t len = text.n - off < chunk ? text.n - off : chunk;
      tok_encode(tok, text.p + off, len, TOK_ENC_PARSE_SPECIAL, ids, cap);
    }
    t[r] = now() - t0;
  }
  report("encode, 4 KiB prompts", t, reps, (double)text.n, (double)n);
  n = tok_encode(tok, text.p, text.n, TOK_ENC_PARSE_SPECIAL, ids, cap);

  char *out = malloc(3 * text.n + 16);
  int64_t len = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    len = tok_decode(tok, ids, (size_t)n, 0, out, 3 * text.n + 16);
    t[r] = now() - t0;
  }
  report("decode", t, reps, (double)len, (double)n);

  size_t step = tok_stream_max_out(tok);
  char *piece = malloc(step);
  for (int r = 0; r < reps; r++) {
    tok_stream_t st;
    tok_stream_init(&st, tok, 0);
    double t0 = now();
    for (int64_t i = 0; i < n; i++) tok_stream_push(&st, ids[i], piece, step);
    tok_stream_flush(&st, piece, step);
    t[r] = now() - t0;
  }
  report("stream, one token a call", t, reps, (double)len, (double)n);

  free(piece);
  free(out);
  free(t);
  free(ids);
  free(text.p);
  free(src.p);
  tok_destroy(tok);
  return 0;
}
