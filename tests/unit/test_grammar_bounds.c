/* tests/unit/test_grammar_bounds.c — the grammar engine against hostile
 * grammars (issue 35): every compiler refuses, naming the bound, what would
 * expand past gram_limits_t (nested repetitions, long names, alternations,
 * nesting, time); what is large but harmless (enums, choices, alternations
 * of thousands) compiles into few stacks; repetitions of nullable bodies
 * compile; the token mask and the matcher agree (checked against a
 * brute-force reference: each token tried on its own) on the regex that
 * made them disagree; a live-stack bound is reported by the next mask, never
 * by the step of a token a mask allowed; and random small grammars compile
 * within the bounds or are refused, never crash (a property test). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/gram.h"
#include "tests/unit/gram_testutil.h"

#define NV GRAM_TEST_NV
#define WORDS ((NV + 31) / 32)

static void expect_refused(gram_t *g, const gram_err_t *err, const char *needle) {
  if (g) fail_msg("compiled; expected an error saying '%s'", needle);
  if (!strstr(err->msg, needle)) fail_msg("error '%s' does not say '%s'", err->msg, needle);
}

#define regex_lim gram_test_regex
#define gbnf gram_test_gbnf

/* ---- refused, naming the bound ------------------------------------------------------ */

static void nested_repetitions_refused(void **state) {
  (void)state;
  gram_err_t err;
  const char *re[] = {".{0,10000}{0,10000}", "((((a{0,100}){0,100}){0,100}){0,100})", "(x{0,101}y){0,100}",
                      "((a+){3}){4000}"};
  for (size_t i = 0; i < sizeof re / sizeof *re; i++) {
    expect_refused(gram_compile_regex(re[i], strlen(re[i]), NULL, &err), &err, "max_repeat");
    assert_true(err.pos > 0); /* where: the repetition's offset */
  }
  const char *gb = "root ::= \"a\"{0,10000}{0,10000}\n";
  expect_refused(gram_compile_gbnf(gb, strlen(gb), NULL, &err), &err, "max_repeat");
  assert_int_equal(err.pos, 21);
  /* within the bound: 100 x 100 */
  gram_t *g = regex_lim("(a{0,100}){0,100}", NULL);
  gram_destroy(g);
  /* the bound is a setting */
  gram_limits_t lim = {.max_repeat = 99};
  expect_refused(gram_compile_regex("(ab){100}", 9, &lim, &err), &err, "max_repeat");
}

static void long_literals_and_names_refused(void **state) {
  (void)state;
  gram_err_t err;
  gram_limits_t lim = {.max_literal = 1000};
  char *s = malloc(2001);
  memset(s, 'k', 2000), s[2000] = 0;
  const char *one = s;
  size_t len = 2000;
  expect_refused(gram_compile_choice(&one, &len, 1, &lim, &err), &err, "max_literal");
  free(s);
  /* (property names: test_grammar_schema.c and the server tests) */
}

static void nesting_and_size_refused(void **state) {
  (void)state;
  gram_err_t err;
  /* a{1}{1}... is a itself; a?????... nests without bound in the source */
  size_t n = 60000;
  char *s = malloc(n + 2);
  s[0] = 'a';
  memset(s + 1, '?', n - 1), s[n] = 0;
  char *gb = malloc(n + 32);
  snprintf(gb, n + 32, "root ::= \"a\"%s\n", s + 1);
  expect_refused(gram_compile_gbnf(gb, strlen(gb), NULL, &err), &err, "max_depth");
  for (size_t i = 1; i + 3 <= n; i += 3) memcpy(s + i, "{1}", 3);
  s[1 + (n - 1) / 3 * 3] = 0;
  gram_t *g = regex_lim(s, NULL); /* {1} adds no node: compiles, the language is "a" */
  assert_int_equal(gram_test_judge(g, "a"), 1);
  gram_destroy(g);
  /* the expanded size */
  gram_limits_t lim = {.max_size = 2000};
  expect_refused(gram_compile_regex("[a-z]{5000}", 11, &lim, &err), &err, "max_size");
  free(s), free(gb);
}

static void alternations_of_unlike_starts_refused(void **state) {
  (void)state;
  gram_err_t err;
  gram_limits_t lim = {.max_stacks = 16};
  char src[4096];
  size_t k = (size_t)snprintf(src, sizeof src, "root ::= r0");
  for (int i = 1; i < 20; i++) k += (size_t)snprintf(src + k, sizeof src - k, " | r%d", i);
  k += (size_t)snprintf(src + k, sizeof src - k, "\n");
  for (int i = 0; i < 20; i++) k += (size_t)snprintf(src + k, sizeof src - k, "r%d ::= \"x%d\"\n", i, i);
  expect_refused(gram_compile_gbnf(src, k, &lim, &err), &err, "max_stacks");
}

static void compile_time_bounded(void **state) {
  (void)state;
  gram_err_t err;
  gram_limits_t lim = {.compile_ns = 1}; /* (the clock is read every few thousand steps) */
  expect_refused(gram_compile_regex("[a-z]{9000}", 11, &lim, &err), &err, "to compile");
}

/* ---- large but harmless ------------------------------------------------------------- */

/* Every live stack's count after the start and after each byte of text. */
static void walk_ok(const gram_t *g, const char *text, int want) {
  assert_int_equal(gram_test_judge(g, text), want);
}

static void alternations_of_thousands_compile(void **state) {
  (void)state;
  enum { N = 5000 };
  /* a regex w0|w1|...|w4999, a choice, a GBNF rule: merged into a trie */
  size_t cap = N * 16;
  char *re = malloc(cap), *gb = malloc(cap);
  const char **ch = malloc(sizeof *ch * N);
  size_t *len = malloc(sizeof *len * N);
  char(*words)[16] = malloc(sizeof *words * N);
  size_t r = 0, g = (size_t)snprintf(gb, cap, "root ::= ");
  for (int i = 0; i < N; i++) {
    snprintf(words[i], sizeof words[i], "w%d", i);
    ch[i] = words[i], len[i] = strlen(words[i]);
    r += (size_t)snprintf(re + r, cap - r, "%sw%d", i ? "|" : "", i);
    g += (size_t)snprintf(gb + g, cap - g, "%s\"w%d\"", i ? " | " : "", i);
  }
  gb[g++] = '\n', gb[g] = 0;
  gram_err_t err;
  gram_limits_t lim = {.max_stacks = 64}; /* far fewer than the alternatives */
  gram_t *gs[3] = {gram_compile_regex(re, r, &lim, &err), gram_compile_choice(ch, len, N, &lim, &err),
                   gram_compile_gbnf(gb, g, &lim, &err)};
  gram_vocab_t *v = gram_test_vocab();
  for (int i = 0; i < 3; i++) {
    if (!gs[i]) fail_msg("form %d: %s", i, err.msg);
    walk_ok(gs[i], "w4999", 1);
    walk_ok(gs[i], "w0", 1);
    walk_ok(gs[i], "w5000", -1);
    walk_ok(gs[i], "w49", 1);
    gram_cache_t *c = gram_cache_create(gs[i], v);
    int rc;
    gram_matcher_t *m = gram_matcher_create(c, &rc);
    assert_non_null(m);
    uint32_t mask[WORDS];
    assert_true(gram_matcher_fill_mask(m, mask) >= 0); /* (the test vocabulary has no "w": no token) */
    gram_matcher_destroy(m), gram_cache_destroy(c), gram_destroy(gs[i]);
  }
  gram_vocab_destroy(v);
  free(re), free(gb), free(ch), free(len), free(words);
}

/* ---- nullable repetitions ------------------------------------------------------------ */

static void nullable_repetitions_compile(void **state) {
  (void)state;
  gram_t *g = regex_lim("((a*)*)*b", NULL);
  GRAM_TEST_EXPECT(g, {"b", 1}, {"ab", 1}, {"aaab", 1}, {"aa", 0}, {"", 0}, {"ba", -1}, {"c", -1});
  gram_destroy(g);
  g = regex_lim("(a?)*", NULL);
  GRAM_TEST_EXPECT(g, {"", 1}, {"a", 1}, {"aaaa", 1}, {"b", -1});
  gram_destroy(g);
  g = regex_lim("a**", NULL);
  GRAM_TEST_EXPECT(g, {"", 1}, {"aaa", 1}, {"ab", -1});
  gram_destroy(g);
  g = regex_lim("(a?b?){2,3}c", NULL); /* at most 3 non-empty copies of a?b? */
  GRAM_TEST_EXPECT(g, {"c", 1}, {"abc", 1}, {"ababc", 1}, {"abababc", 1}, {"ababababc", -1}, {"aaac", 1},
                   {"aaaac", -1}, {"bac", 1});
  gram_destroy(g);
  /* GBNF: a star over a rule that may be empty */
  g = gbnf("root ::= x* \"b\"\nx ::= \"a\"? \"c\"?\n");
  GRAM_TEST_EXPECT(g, {"b", 1}, {"acab", 1}, {"ccab", 1}, {"ab", 1}, {"a", 0}, {"bb", -1});
  gram_destroy(g);
}

/* ---- the mask and the matcher agree ---------------------------------------------------- */

static void brute_mask(gram_matcher_t *m, uint32_t *mask) {
  memset(mask, 0, sizeof(uint32_t) * WORDS);
  for (int32_t t = 0; t < NV; t++)
    if (gram_matcher_accept_token(m, t) == 0) {
      mask[t >> 5] |= 1u << (t & 31);
      assert_int_equal(gram_matcher_rollback(m, 1), 1);
    }
}

static uint64_t rng(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

/* Walks random paths: at each step the mask must equal the brute force's
 * (every token tried by accept), and the token picked must be accepted. */
static void masks_agree(const gram_t *g, int seeds, int steps) {
  gram_vocab_t *v = gram_test_vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  uint32_t got[WORDS], want[WORDS];
  for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
    gram_matcher_t *m = gram_matcher_create(c, NULL);
    assert_non_null(m);
    uint64_t s = seed;
    for (int step = 0; step < steps; step++) {
      int32_t n = gram_matcher_fill_mask(m, got);
      if (n < 0) fail_msg("seed %llu step %d: mask failed: %s", (unsigned long long)seed, step, gram_matcher_error(m));
      brute_mask(m, want);
      if (memcmp(got, want, sizeof got)) {
        for (int32_t t = 0; t < NV; t++)
          if ((got[t >> 5] ^ want[t >> 5]) >> (t & 31) & 1)
            print_error("seed %llu step %d: token '%s' mask %d accept %d\n", (unsigned long long)seed, step,
                        gram_test_vocab_text[t], got[t >> 5] >> (t & 31) & 1, want[t >> 5] >> (t & 31) & 1);
        fail();
      }
      if (n == 0) break;
      int32_t pick = (int32_t)(rng(&s) % (uint64_t)n), t = 0;
      for (;; t++)
        if ((got[t >> 5] >> (t & 31) & 1) && pick-- == 0) break;
      assert_int_equal(gram_matcher_accept_token(m, t), 0);
      if (gram_matcher_is_ended(m)) break;
    }
    gram_matcher_destroy(m);
  }
  gram_cache_destroy(c), gram_vocab_destroy(v);
}

/* fuzz_grammar_regex's finding: with {838} of a body that may be empty, the
 * start closure put one stack per copy (838 ways to place the empty ones),
 * the step of an allowed token passed the live-stack bound the mask never
 * saw, and the matcher refused what its mask allowed. Now the body repeats
 * its non-empty sentences (one way), and the bound is the next mask's. */
static void mask_matcher_agree_on_nullable_repetition(void **state) {
  (void)state;
  gram_limits_t lim = {.max_repeat = 1000000}; /* (its 838 x 255 copies pass max_repeat by default) */
  gram_t *g = regex_lim("(|(b|c)+b|be{255}x?1){838}|e", &lim);
  masks_agree(g, 12, 30);
  gram_destroy(g);
  g = regex_lim("(|(b|c)+b|be{5}x?1){8}|e", NULL);
  masks_agree(g, 12, 30);
  gram_destroy(g);
  g = regex_lim("((a*)*)*b|(ab?)*c", NULL);
  masks_agree(g, 12, 30);
  gram_destroy(g);
}

/* A step that makes more stacks than max_stacks succeeds (its token was in
 * the mask); the next mask reports the bound. */
static void stack_bound_is_the_next_masks(void **state) {
  (void)state;
  char src[2048];
  size_t k = (size_t)snprintf(src, sizeof src, "root ::= \"a\" (");
  for (int i = 0; i < 20; i++) k += (size_t)snprintf(src + k, sizeof src - k, "%sr%d", i ? " | " : "", i);
  k += (size_t)snprintf(src + k, sizeof src - k, ")\n");
  for (int i = 0; i < 20; i++) k += (size_t)snprintf(src + k, sizeof src - k, "r%d ::= \"x\" s%d\ns%d ::= \"%c\"\n", i, i, i, 'a' + i);
  gram_err_t err;
  gram_limits_t lim = {.max_stacks = 25};
  gram_t *g = gram_compile_gbnf(src, k, &lim, &err); /* (20 alternatives: within 25) */
  if (!g) fail_msg("%s", err.msg);
  gram_destroy(g);
  lim.max_stacks = 16;
  g = gram_compile_gbnf(src, k, &lim, &err);
  expect_refused(g, &err, "max_stacks"); /* the alternation itself */
  /* the same stacks reached through nesting the compiler cannot see, and
   * below the two stack frames a token cache entry looks at: the token "a"
   * ends q and p, and only the real stack's t then opens 20 alternatives */
  k = (size_t)snprintf(src, sizeof src,
                       "root ::= p t\np ::= q z?\nq ::= \"a\"\nz ::= \"b\"\nt ::= u | r19\nu ::= ");
  for (int i = 0; i < 15; i++) k += (size_t)snprintf(src + k, sizeof src - k, "%sr%d", i ? " | " : "", i);
  k += (size_t)snprintf(src + k, sizeof src - k, " | w\nw ::= r15 | r16 | r17 | r18\n");
  for (int i = 0; i < 20; i++) k += (size_t)snprintf(src + k, sizeof src - k, "r%d ::= \"x\" s%d\ns%d ::= \"%c\"\n", i, i, i, 'a' + i);
  g = gram_compile_gbnf(src, k, &lim, &err);
  if (!g) fail_msg("%s", err.msg);
  gram_vocab_t *v = gram_test_vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  uint32_t mask[WORDS];
  int32_t k0 = gram_matcher_fill_mask(m, mask);
  if (k0 <= 0) fail_msg("first mask %d: %s", k0, gram_matcher_error(m));
  assert_int_equal(gram_matcher_accept_bytes(m, "a", 1), 0); /* 20 stacks now: the step succeeds */
  assert_int_equal(gram_matcher_fill_mask(m, mask), GRAM_ELIMIT);
  assert_non_null(strstr(gram_matcher_error(m), "max_stacks"));
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_vocab_destroy(v), gram_destroy(g);
}

/* A mask's work is bounded: a tiny fuel fails the first mask with its name. */
static void mask_fuel_bounded(void **state) {
  (void)state;
  gram_limits_t lim = {.mask_fuel = 5};
  gram_t *g = regex_lim("[a-z]+[0-9]*", &lim);
  gram_vocab_t *v = gram_test_vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  uint32_t mask[WORDS];
  assert_int_equal(gram_matcher_fill_mask(m, mask), GRAM_ELIMIT);
  assert_non_null(strstr(gram_matcher_error(m), "mask_fuel"));
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_vocab_destroy(v), gram_destroy(g);
}

/* ---- property: random small grammars ---------------------------------------------- */

/* A random regex of at most ~depth nesting from a small set of constructs,
 * into out (cap bytes). */
static size_t rand_regex(uint64_t *s, char *out, size_t cap, int depth) {
  static const char *const atoms[] = {"a", "b", "ab", ".", "[a-c]", "[^a]", "\\d", "x", "é", ""};
  static const char *const post[] = {"", "", "*", "+", "?", "{2}", "{0,3}", "{1,}", "{3,5}", "{0,120}", "{200}"};
  size_t n = 0;
  int parts = 1 + (int)(rng(s) % 3);
  for (int p = 0; p < parts && n + 64 < cap; p++) {
    if (p && rng(s) % 4 == 0) out[n++] = '|';
    if (depth > 0 && rng(s) % 2) {
      out[n++] = '(';
      n += rand_regex(s, out + n, cap - n - 2, depth - 1);
      out[n++] = ')';
    } else {
      n += (size_t)snprintf(out + n, cap - n, "%s", atoms[rng(s) % (sizeof atoms / sizeof *atoms)]);
    }
    if (n && out[n - 1] != '(' && out[n - 1] != '|')
      n += (size_t)snprintf(out + n, cap - n, "%s", post[rng(s) % (sizeof post / sizeof *post)]);
  }
  out[n] = 0;
  return n;
}

static void random_grammars_compile_within_bounds_or_are_refused(void **state) {
  (void)state;
  gram_limits_t lim = {.max_size = 20000, .max_repeat = 2000, .max_stacks = 256, .mask_fuel = 2000000};
  gram_vocab_t *v = gram_test_vocab();
  uint64_t s = 35;
  int compiled = 0, refused = 0;
  uint32_t mask[WORDS];
  for (int i = 0; i < 3000; i++) {
    char re[1024];
    size_t n = rand_regex(&s, re, sizeof re, 4);
    gram_err_t err;
    gram_t *g = gram_compile_regex(re, n, &lim, &err);
    if (!g) {
      assert_true(err.msg[0] != 0); /* refused with a reason */
      refused++;
      continue;
    }
    compiled++;
    assert_true(gram_n_elems(g) <= lim.max_size);
    assert_true(gram_n_rules(g) <= lim.max_size);
    gram_cache_t *c = gram_cache_create(g, v);
    gram_matcher_t *m = gram_matcher_create(c, NULL);
    for (int step = 0; m && step < 6; step++) { /* masks agree with the steps, or name a bound */
      int32_t k = gram_matcher_fill_mask(m, mask);
      if (k < 0) {
        assert_true(gram_matcher_error(m)[0] != 0);
        break;
      }
      for (int32_t t = 0; t < NV; t++) {
        int in = mask[t >> 5] >> (t & 31) & 1, rc = gram_matcher_accept_token(m, t);
        if (in ? !(rc == 0 || (rc == GRAM_ELIMIT && gram_matcher_error(m)[0])) : rc == 0)
          fail_msg("%s: token '%s' mask %d accept %d", re, gram_test_vocab_text[t], in, rc);
        if (rc == 0) gram_matcher_rollback(m, 1);
      }
      if (k == 0) break;
      int32_t pick = (int32_t)(rng(&s) % (uint64_t)k), t = 0;
      for (;; t++)
        if ((mask[t >> 5] >> (t & 31) & 1) && pick-- == 0) break;
      if (gram_matcher_accept_token(m, t) != 0) break;
    }
    gram_matcher_destroy(m), gram_cache_destroy(c), gram_destroy(g);
  }
  print_message("random regexes: %d compiled, %d refused\n", compiled, refused);
  assert_true(compiled > 1000);
  gram_vocab_destroy(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nested_repetitions_refused),
      cmocka_unit_test(long_literals_and_names_refused),
      cmocka_unit_test(nesting_and_size_refused),
      cmocka_unit_test(alternations_of_unlike_starts_refused),
      cmocka_unit_test(compile_time_bounded),
      cmocka_unit_test(alternations_of_thousands_compile),
      cmocka_unit_test(nullable_repetitions_compile),
      cmocka_unit_test(mask_matcher_agree_on_nullable_repetition),
      cmocka_unit_test(stack_bound_is_the_next_masks),
      cmocka_unit_test(mask_fuel_bounded),
      cmocka_unit_test(random_grammars_compile_within_bounds_or_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
