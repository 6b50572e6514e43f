/* tests/unit/test_grammar.c — the grammar engine (grammar/): the GBNF and
 * regex compilers, the matcher, bounds against hostile input, and token masks
 * checked against a brute-force reference (each token tried on its own, no
 * cache, no trie) on a small vocabulary. The schema compiler is in
 * test_grammar_schema.c. */
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

/* ---- helpers ------------------------------------------------------------------ */

#define NV GRAM_TEST_NV
#define VOCAB gram_test_vocab_text

#define gbnf gram_test_gbnf
static gram_t *regex(const char *re) { return gram_test_regex(re, NULL); }

#define judge gram_test_judge
#define vocab gram_test_vocab

static void expect_error(gram_t *g, const gram_err_t *err, const char *needle, int64_t pos) {
  assert_null(g);
  if (!strstr(err->msg, needle)) fail_msg("error '%s' does not say '%s'", err->msg, needle);
  if (pos >= 0) assert_int_equal(err->pos, pos);
}

/* ---- compilers and matcher ------------------------------------------------------ */

static void gbnf_arithmetic(void **state) {
  gram_t *g = gbnf("root ::= expr\n"
                   "expr ::= term ((\"+\" | \"-\") term)*   # sums\n"
                   "term ::= [0-9]+ | \"(\" expr \")\"\n");
  GRAM_TEST_EXPECT(g, {"1+2", 1},
                   {"(12-3)+(4)", 1},
                   {"(1+", 0},
                   {"", 0},
                   {"1++", -1},
                   {"a", -1});
  gram_destroy(g);
}

static void gbnf_syntax(void **state) {
  gram_t *g = gbnf("root ::= \"\\x41\\u00e9\\n\" [^\\]a-c] x{2,3} y?\n"
                   "x ::= [\\u20AC]\n"
                   "y ::=\n  \"p\"\n  | \"q\" # continued alternatives\n");
  GRAM_TEST_EXPECT(g, {"Aé\nd€€", 1},
                   {"Aé\nd€€€q", 1},
                   {"Aé\n]€€", -1},
                   {"Aé\na€€", -1},
                   {"Aé\nd€€€€", -1});
  gram_destroy(g);
  g = gbnf("root ::= . .\n");
  GRAM_TEST_EXPECT(g, {"é\xe2\x82\xac", 1},
                   {"\n.", -1},
                   {"\xed\xa0\x80" "a", -1}, /* a surrogate is not a character */
                   {"\xc3", 0});
  gram_destroy(g);
}

static void gbnf_errors(void **state) {
  gram_err_t err;
  const char *s = "root ::= \"a\" | b\n";
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "undefined rule 'b'", 15);
  s = "root ::= \"ab\n";
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "unterminated", 12);
  s = "root ::= x\nx ::= y x \"b\" | \"c\"\ny ::= \"a\"?\n"; /* left recursion through a nullable */
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "left recursion", -1);
  s = "root ::= ( \"a\" | \"b\" \n";
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "expected ')'", -1);
  s = "root ::= \"a\" ::=\n";
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "", -1);
  s = "root ::= x\nx ::= \"a\" x\n"; /* never ends */
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "no sentence", -1);
  s = "root ::= \"a\"\nroot ::= \"b\"\n";
  expect_error(gram_compile_gbnf(s, strlen(s), NULL, &err), &err, "defined twice", -1);
}

static void regex_forms(void **state) {
  gram_t *g = regex("^(?:[a-z]+|\\d{2,3})@(?P<d>x|yz)\\.(com|org)?$");
  GRAM_TEST_EXPECT(g, {"abc@x.com", 1},
                   {"123@yz.", 1},
                   {"1@x.", -1});
  gram_destroy(g);
  g = regex("[^\\s\\d]\\w*?\\.\\*[\\-+]{1}.");
  GRAM_TEST_EXPECT(g, {"a_9.*-é", 1},
                   {" a.*-x", -1});
  gram_destroy(g);
  g = regex("a{,2}b{2,}");
  GRAM_TEST_EXPECT(g, {"aabbbb", 1},
                   {"aaab", -1});
  gram_destroy(g);
  gram_err_t err;
  const char *bad[][2] = {{"a(?=b)", "lookahead"}, {"(a)\\1", "backreference"}, {"\\bx", "word boundary"},
                          {"(?i)a", "flags"},    {"a|*", "nothing to repeat"}, {"[a-", "unterminated"},
                          {"a$b", "end"},         {"\\p{L}", "property"},        {"a++", "possessive"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    expect_error(gram_compile_regex(bad[i][0], strlen(bad[i][0]), NULL, &err), &err, bad[i][1], -1);
}

static void choice(void **state) {
  const char *ch[] = {"yes", "no", "nope"};
  size_t l[] = {3, 2, 4};
  gram_err_t err;
  gram_t *g = gram_compile_choice(ch, l, 3, NULL, &err);
  assert_non_null(g);
  GRAM_TEST_EXPECT(g, {"no", 1},
                   {"nop", 0},
                   {"yess", -1});
  gram_destroy(g);
  expect_error(gram_compile_choice(ch, l, 0, NULL, &err), &err, "empty", -1);
}

/* ---- hostile input -------------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void hostile_inputs_fail_fast(void **state) {
  gram_err_t err;
  size_t n = 200000;
  char *s = malloc(n + 16);
  /* nesting */
  memset(s, '(', n / 2), memset(s + n / 2, ')', n / 2), s[n] = 0;
  expect_error(gram_compile_regex(s, n, NULL, &err), &err, "deeper", -1);
  /* repetition products */
  const char *re = "((((a{1000}){1000}){1000}){1000})"; /* shared rules: small, but 10^12 copies */
  expect_error(gram_compile_regex(re, strlen(re), NULL, &err), &err, "max_repeat", -1);
  const char *gb = "root ::= ((\"a\" | \"b\" \"c\"){3000} | \"d\"){3000}\n"; /* 9M elements unshared */
  gram_t *big = gram_compile_gbnf(gb, strlen(gb), NULL, &err);
  if (big) { /* (the alternatives are shared rules: fine either way, but fast) */
    assert_true(gram_n_elems(big) <= gram_limits_default().max_size);
    gram_destroy(big);
  }
  re = "a{100001}";
  expect_error(gram_compile_regex(re, strlen(re), NULL, &err), &err, "above", -1);
  free(s);
  /* an exponentially ambiguous grammar parses in bounded time: the stacks of
   * equal content are one, so a^n has few live stacks */
  gram_t *g = gbnf("root ::= x*\nx ::= \"a\" | \"a\" | \"a\" \"a\" | y\ny ::= \"a\"+\n");
  gram_vocab_t *v = vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  double t0 = now();
  int rc = 0;
  for (int i = 0; i < 2000 && !rc; i++) rc = gram_matcher_accept_bytes(m, "a", 1);
  /* either it parses or it stops at a bound with an error: never a hang */
  assert_true(rc == 0 || rc == GRAM_ELIMIT);
  assert_true(now() - t0 < 60);
  uint32_t mask[(NV + 31) / 32];
  assert_true(gram_matcher_fill_mask(m, mask) >= 0 || rc);
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_vocab_destroy(v), gram_destroy(g);
}

/* ---- masks ---------------------------------------------------------------------- */

/* The reference: token t is allowed iff accepting its bytes succeeds (EOG:
 * iff the matcher accepts now). */
static void brute_mask(gram_matcher_t *m, uint32_t *mask) {
  memset(mask, 0, sizeof(uint32_t) * ((NV + 31) / 32));
  for (int32_t t = 0; t < NV; t++) {
    if (gram_matcher_accept_token(m, t) == 0) {
      mask[t >> 5] |= 1u << (t & 31);
      assert_int_equal(gram_matcher_rollback(m, 1), 1);
    }
  }
}

static uint64_t rng(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static void masks_equal_brute_force(void **state) {
  const char *grammars[] = {
      "root ::= expr\nexpr ::= term ((\"+\" | \"-\" | \"*\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\" | [a-c]+\n",
      "root ::= obj\nobj ::= \"{\" (pair (\",\" pair)*)? \"}\"\npair ::= str \":\" val\n"
      "val ::= str | num | obj | \"true\" | \"false\" | \"null\" | \"[\" (val (\",\" val)*)? \"]\"\n"
      "str ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [n\"\\\\] | \"\\\\u\" [0-9]{4})* \"\\\"\"\n"
      "num ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ([eE] [+-] [0-9]+)?\n",
      "root ::= ([ab] | \"é\" | \"€\" | [\\n ]){0,6} \"x\" \"y\"?\n",
      "root ::= item{2,4}\nitem ::= \"a\" | \"ab\" | \"abc\" | \"b\" \"c\"?\n",
  };
  gram_vocab_t *v = vocab();
  uint32_t got[(NV + 31) / 32], want[(NV + 31) / 32];
  for (size_t gi = 0; gi < sizeof grammars / sizeof *grammars; gi++) {
    gram_t *g = gbnf(grammars[gi]);
    gram_cache_t *c = gram_cache_create(g, v);
    for (uint64_t seed = 1; seed <= 30; seed++) {
      gram_matcher_t *m = gram_matcher_create(c, NULL);
      uint64_t s = seed;
      for (int step = 0; step < 40; step++) {
        int32_t n = gram_matcher_fill_mask(m, got);
        brute_mask(m, want);
        if (memcmp(got, want, sizeof got)) {
          for (int32_t t = 0; t < NV; t++)
            if ((got[t >> 5] ^ want[t >> 5]) >> (t & 31) & 1)
              print_error("grammar %zu seed %llu step %d: token '%s' mask %d brute %d\n", gi,
                          (unsigned long long)seed, step, VOCAB[t], got[t >> 5] >> (t & 31) & 1,
                          want[t >> 5] >> (t & 31) & 1);
          fail();
        }
        if (n == 0) break;
        /* EOG only where accepting */
        assert_int_equal((got[(NV - 3) >> 5] >> ((NV - 3) & 31)) & 1, gram_matcher_is_accepting(m));
        int32_t pick = (int32_t)(rng(&s) % (uint64_t)n), t = 0;
        for (;; t++)
          if ((got[t >> 5] >> (t & 31) & 1) && pick-- == 0) break;
        assert_int_equal(gram_matcher_accept_token(m, t), 0);
        if (gram_matcher_is_ended(m)) break;
      }
      gram_matcher_destroy(m);
    }
    assert_true(gram_cache_entries(c) > 0);
    gram_cache_destroy(c), gram_destroy(g);
  }
  gram_vocab_destroy(v);
}

static void rollback_and_ending(void **state) {
  gram_t *g = regex("ab(c|x)");
  gram_vocab_t *v = vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  uint32_t m0[(NV + 31) / 32], m1[(NV + 31) / 32];
  assert_int_equal(gram_matcher_fill_mask(m, m0) > 0, 1);
  assert_int_equal(gram_matcher_accept_token(m, 3 /* "ab" */), 0);
  assert_int_equal(gram_matcher_accept_token(m, 3), GRAM_EREJECT);
  assert_int_equal(gram_matcher_accept_token(m, NV - 3), GRAM_EREJECT); /* EOG: not yet */
  int sb = gram_matcher_shortest_byte(m);
  assert_true(sb == 'c' || sb == 'x');
  assert_int_equal(gram_matcher_accept_token(m, 2 /* "c" */), 0);
  assert_true(gram_matcher_is_accepting(m));
  assert_true(gram_matcher_is_ended(m));
  assert_int_equal(gram_matcher_shortest_byte(m), -1);
  assert_int_equal(gram_matcher_fill_mask(m, m1), 2); /* the two EOG ids */
  assert_int_equal(gram_matcher_accept_token(m, NV - 2), 0);
  assert_int_equal(gram_matcher_fill_mask(m, m1), 0);
  assert_int_equal(gram_matcher_rollback(m, 5), 3);
  gram_matcher_fill_mask(m, m1);
  assert_memory_equal(m0, m1, sizeof m0);
  assert_int_equal(gram_matcher_accept_token(m, NV - 1), GRAM_EREJECT); /* empty token */
  assert_int_equal(gram_matcher_accept_token(m, NV), GRAM_EREJECT);     /* out of range */
  gram_matcher_accept_token(m, 0);
  gram_matcher_reset(m);
  gram_matcher_fill_mask(m, m1);
  assert_memory_equal(m0, m1, sizeof m0);
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_vocab_destroy(v), gram_destroy(g);
}

static void shortest_completion(void **state) {
  gram_t *g = gbnf("root ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [a-z]{3,5} | \"{\" root \"}\"\n");
  gram_vocab_t *v = vocab();
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  assert_int_equal(gram_matcher_accept_bytes(m, "[abc,{[x", 8), 0);
  int n = 0, b;
  char out[64];
  while ((b = gram_matcher_shortest_byte(m)) >= 0 && n < 60) {
    out[n++] = (char)b;
    assert_int_equal(gram_matcher_accept_bytes(m, out + n - 1, 1), 0);
  }
  out[n] = 0;
  assert_string_equal(out, "aa]}]");
  assert_true(gram_matcher_is_accepting(m));
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_vocab_destroy(v), gram_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gbnf_arithmetic),      cmocka_unit_test(gbnf_syntax),
      cmocka_unit_test(gbnf_errors),          cmocka_unit_test(regex_forms),
      cmocka_unit_test(choice),               cmocka_unit_test(hostile_inputs_fail_fast),
      cmocka_unit_test(masks_equal_brute_force), cmocka_unit_test(rollback_and_ending),
      cmocka_unit_test(shortest_completion),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
