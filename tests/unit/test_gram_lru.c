/* tests/unit/test_gram_lru.c — the cache of compiled grammars
 * (grammar/gram_lru.h): hits by content, a second insertion of a key keeps
 * the first entry, least recently used entries go first past the bound,
 * and an evicted entry lives on while a user holds it (ASan sees the
 * frees). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "grammar/gram_lru.h"
#include "tests/unit/gram_testutil.h"

static gram_t *regex(const char *re) { return gram_test_regex(re, NULL); }

static gram_entry_t *put(gram_lru_t *l, const char *re) { return gram_lru_put(l, re, strlen(re), regex(re)); }

static void hits_by_content(void **state) {
  (void)state;
  gram_vocab_t *v = gram_test_vocab();
  gram_lru_t *l = gram_lru_create(v, 4, 0);
  assert_null(gram_lru_get(l, "ab", 2));
  gram_entry_t *a = put(l, "ab");
  gram_entry_t *a2 = gram_lru_get(l, "ab", 2);
  assert_ptr_equal(a, a2);
  assert_int_equal(gram_test_judge(gram_entry_grammar(a), "ab"), 1);
  gram_entry_t *a3 = put(l, "ab"); /* compiled twice (a race): the first entry stays */
  assert_ptr_equal(a, a3);
  gram_lru_stats_t st;
  gram_lru_get_stats(l, &st);
  assert_int_equal(st.entries, 1);
  assert_int_equal(st.hits, 1);
  assert_int_equal(st.misses, 1);
  /* a matcher on the entry's cache works */
  gram_matcher_t *m = gram_matcher_create(gram_entry_cache(a), NULL);
  assert_int_equal(gram_matcher_accept_bytes(m, "ab", 2), 0);
  assert_true(gram_matcher_is_accepting(m));
  gram_matcher_destroy(m);
  gram_entry_unref(a), gram_entry_unref(a2), gram_entry_unref(a3);
  gram_lru_destroy(l);
  gram_vocab_destroy(v);
}

static void evicts_least_recent_and_keeps_used(void **state) {
  (void)state;
  gram_vocab_t *v = gram_test_vocab();
  gram_lru_t *l = gram_lru_create(v, 2, 0);
  gram_entry_t *a = put(l, "a");
  gram_entry_unref(put(l, "b"));
  gram_entry_unref(gram_lru_get(l, "a", 1)); /* a is now the most recent */
  gram_entry_unref(put(l, "c"));               /* b goes */
  gram_entry_t *b = gram_lru_get(l, "b", 1);
  assert_null(b);
  gram_entry_t *a2 = gram_lru_get(l, "a", 1);
  assert_ptr_equal(a, a2);
  gram_entry_unref(a2);
  gram_entry_unref(put(l, "d")); /* c goes: a was got after c went in */
  gram_lru_stats_t st;
  gram_lru_get_stats(l, &st);
  assert_int_equal(st.entries, 2);
  assert_int_equal(st.evictions, 2);
  assert_null(gram_lru_get(l, "c", 1));
  /* a is held by this test: still usable after the cache lets go */
  gram_lru_destroy(l);
  assert_int_equal(gram_test_judge(gram_entry_grammar(a), "a"), 1);
  gram_matcher_t *m = gram_matcher_create(gram_entry_cache(a), NULL);
  assert_int_equal(gram_matcher_accept_bytes(m, "a", 1), 0);
  gram_matcher_destroy(m);
  gram_entry_unref(a);
  gram_vocab_destroy(v);
}

/* The bytes of one filled token cache of x{1} (a cache's bytes do not
 * depend on the repetition count here: one entry per stack top). */
static size_t one_cache_bytes(gram_vocab_t *v) {
  gram_lru_t *l = gram_lru_create(v, 100, 0);
  gram_entry_t *e = put(l, "x{1}");
  uint32_t mask[4];
  gram_matcher_t *m = gram_matcher_create(gram_entry_cache(e), NULL);
  assert_true(gram_matcher_fill_mask(m, mask) > 0);
  size_t b = gram_cache_bytes(gram_entry_cache(e));
  gram_matcher_destroy(m);
  gram_entry_unref(e);
  gram_lru_destroy(l);
  return b;
}

static void bounded_by_bytes(void **state) {
  (void)state;
  gram_vocab_t *v = gram_test_vocab();
  const size_t one = one_cache_bytes(v);
  gram_lru_t *l = gram_lru_create(v, 100, one * 3 / 2); /* room for one filled cache, not two */
  for (int i = 0; i < 5; i++) {
    char re[8];
    snprintf(re, sizeof re, "x{%d}", i + 1);
    gram_entry_t *e = put(l, re);
    uint32_t mask[4];
    gram_matcher_t *m = gram_matcher_create(gram_entry_cache(e), NULL);
    assert_true(gram_matcher_fill_mask(m, mask) > 0); /* fills the token cache: the idle older one goes */
    gram_matcher_destroy(m);
    gram_entry_unref(e);
  }
  gram_lru_stats_t st;
  gram_lru_get_stats(l, &st);
  assert_int_equal(st.entries, 1);
  assert_int_equal(st.evictions, 4);
  gram_lru_destroy(l);
  gram_vocab_destroy(v);
}

/* The total is a bound, not a hint: with an entry in use holding its bytes,
 * a second grammar's mask that does not fit fails (GRAM_ELIMIT, the bound
 * named), and the first one goes on; once the first is let go, it fits. */
static void total_bound_fails_a_mask_cleanly(void **state) {
  (void)state;
  gram_vocab_t *v = gram_test_vocab();
  const size_t one = one_cache_bytes(v);
  gram_lru_t *l = gram_lru_create(v, 100, one * 3 / 2);
  uint32_t mask[4];
  gram_entry_t *a = put(l, "x{1}");
  gram_matcher_t *ma = gram_matcher_create(gram_entry_cache(a), NULL);
  assert_true(gram_matcher_fill_mask(ma, mask) > 0);
  gram_entry_t *b = put(l, "x{2}");
  gram_matcher_t *mb = gram_matcher_create(gram_entry_cache(b), NULL);
  assert_int_equal(gram_matcher_fill_mask(mb, mask), GRAM_ELIMIT);
  assert_non_null(strstr(gram_matcher_error(mb), "total"));
  assert_int_equal(gram_matcher_accept_bytes(ma, "x", 1), 0); /* the one in use is unharmed */
  gram_matcher_destroy(ma);
  gram_entry_unref(a); /* idle now: the next fill may evict it */
  assert_true(gram_matcher_fill_mask(mb, mask) > 0);
  gram_matcher_destroy(mb);
  gram_entry_unref(b);
  gram_lru_destroy(l);
  gram_vocab_destroy(v);
}

/* One grammar's own bound (cache_bytes): its mask fails, the others work. */
static void per_grammar_bound(void **state) {
  (void)state;
  gram_vocab_t *v = gram_test_vocab();
  gram_err_t err;
  gram_limits_t lim = {.cache_bytes = 64}; /* less than any entry */
  gram_t *g = gram_compile_regex("x{3}", 4, &lim, &err);
  assert_non_null(g);
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = gram_matcher_create(c, NULL);
  uint32_t mask[4];
  assert_int_equal(gram_matcher_fill_mask(m, mask), GRAM_ELIMIT);
  assert_non_null(strstr(gram_matcher_error(m), "cache_bytes"));
  gram_matcher_destroy(m), gram_cache_destroy(c), gram_destroy(g);
  gram_vocab_destroy(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hits_by_content),
      cmocka_unit_test(evicts_least_recent_and_keeps_used),
      cmocka_unit_test(bounded_by_bytes),
      cmocka_unit_test(total_bound_fails_a_mask_cleanly),
      cmocka_unit_test(per_grammar_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
