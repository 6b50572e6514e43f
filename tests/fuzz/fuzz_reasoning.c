/* tests/fuzz/fuzz_reasoning.c — libFuzzer target for the reasoning splitter
 * (text/reasoning.h): model output follows what users put in prompts, so it
 * is outside input too.
 *
 * The first byte picks the format, whether the prompt opens or closes the
 * reasoning, a chunk size and (its top bit) whether harmony's calls are
 * kept (reason_split_t.calls); the rest is the output. Promises checked: it
 * never fails; fed in chunks it splits as fed whole; the reasoning comes
 * before the answer (think tags: one switch at most); nothing comes out
 * that was not in the output (think tags: no more bytes than fed).
 *
 *   make fuzz
 *   build/fuzz/fuzz_reasoning -max_total_time=180 tests/fuzz/corpus/fuzz_reasoning */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/reasoning.h"

typedef struct sides {
  char *think, *answer;
  size_t n_think, n_answer, cap;
  int last, switches;
} sides_t;

static void collect(void *ctx, bool thinking, const char *s, size_t n) {
  sides_t *o = ctx;
  if (n == 0) abort();
  char *dst = thinking ? o->think : o->answer;
  size_t *len = thinking ? &o->n_think : &o->n_answer;
  if (*len + n > o->cap) abort(); /* more out than in */
  memcpy(dst + *len, s, n);
  *len += n;
  const int side = thinking ? 1 : 2;
  if (o->last && o->last != side) o->switches++;
  o->last = side;
}

static void run(reason_fmt_t f, const char *prompt, bool calls, const uint8_t *out, size_t n, size_t chunk,
                sides_t *o) {
  o->cap = n * 2 + 64;
  o->think = malloc(o->cap);
  o->answer = malloc(o->cap);
  reason_split_t r;
  reason_split_init(&r, f, prompt, strlen(prompt));
  r.calls = calls;
  for (size_t i = 0; i < n; i += chunk)
    reason_split_feed(&r, (const char *)out + i, n - i < chunk ? n - i : chunk, collect, o);
  (void)reason_split_phase(&r);
  if (calls) reason_split_stopped(&r, collect, o); /* as the server calls it at an end-of-generation token */
  reason_split_end(&r, collect, o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const reason_fmt_t f = (reason_fmt_t)(data[0] % 4);
  const char *prompt = (data[0] >> 2) % 3 == 0 ? "" : (data[0] >> 2) % 3 == 1 ? reason_open_text(f) : reason_close_text(f);
  const size_t chunk = 1 + (data[0] >> 4);
  const uint8_t *out = data + 1;
  const size_t n = size - 1;
  sides_t whole = {0}, parts = {0};
  const bool calls = data[0] & 0x80;
  run(f, prompt, calls, out, n, n ? n : 1, &whole);
  run(f, prompt, calls, out, n, chunk, &parts);
  if (whole.n_think != parts.n_think || whole.n_answer != parts.n_answer ||
      memcmp(whole.think, parts.think, whole.n_think) || memcmp(whole.answer, parts.answer, whole.n_answer))
    abort();
  if (f != REASON_GPT_OSS && (whole.switches > 1 || whole.n_think + whole.n_answer > n)) abort();
  if (f == REASON_NONE && (whole.n_think || whole.n_answer != n || memcmp(whole.answer, out, n))) abort();
  free(whole.think);
  free(whole.answer);
  free(parts.think);
  free(parts.answer);
  return 0;
}
