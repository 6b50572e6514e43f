/* tests/unit/gram_testutil.c — see gram_testutil.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tests/unit/gram_testutil.h"

const char *const gram_test_vocab_text[GRAM_TEST_NV] = {
    "a", "b", "c", "ab", "abc", "ba", "(", ")", "+", "-", "*", "0", "1", "12", "123", "0.", ".5", "\"", "\",",
    "\"}", "{", "}", "{\"", "\":", ",", ":", " ", "  ", "\n", "x", "xy", "é", "\xc3", "\xa9", "ü", "\xe2\x82",
    "\xac", "€", "true", "false", "null", "tr", "ue", "\\", "\\n", "\\u", "00", "e+", "E", "[", "]", "[]", "{}",
    "<eos>", "<eot>", ""};

gram_vocab_t *gram_test_vocab(void) {
  size_t lens[GRAM_TEST_NV];
  for (int32_t i = 0; i < GRAM_TEST_NV; i++) lens[i] = strlen(gram_test_vocab_text[i]);
  int32_t eog[2] = {GRAM_TEST_NV - 3, GRAM_TEST_NV - 2};
  lens[GRAM_TEST_NV - 3] = lens[GRAM_TEST_NV - 2] = 0;
  gram_err_t err;
  gram_vocab_t *v = gram_vocab_create(GRAM_TEST_NV, gram_test_vocab_text, lens, eog, 2, &err);
  assert_non_null(v);
  return v;
}

int gram_test_judge(const gram_t *g, const char *s) {
  gram_vocab_t *v = gram_test_vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  assert_non_null(m);
  int rc = gram_matcher_accept_bytes(m, s, strlen(s));
  int r = rc ? -1 : gram_matcher_is_accepting(m);
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_vocab_destroy(v);
  return r;
}

void gram_test_expect(const gram_t *g, const gram_case_t *cases, int n) {
  for (int i = 0; i < n; i++) {
    int got = gram_test_judge(g, cases[i].text);
    if (got != cases[i].want) fail_msg("'%s': got %d, want %d", cases[i].text, got, cases[i].want);
  }
}

gram_t *gram_test_gbnf(const char *src) {
  gram_err_t err;
  gram_t *g = gram_compile_gbnf(src, strlen(src), NULL, &err);
  if (!g) fail_msg("gbnf: %s (at %lld)", err.msg, (long long)err.pos);
  return g;
}

gram_t *gram_test_regex(const char *re, const gram_limits_t *lim) {
  gram_err_t err;
  gram_t *g = gram_compile_regex(re, strlen(re), lim, &err);
  if (!g) fail_msg("regex %.60s: %s", re, err.msg);
  return g;
}
