/* tests/unit/test_sched_stop.c — stop strings with hold-back, against a
 * brute-force reference over random texts fed in random pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched_stop.h"
#include "tests/unit/testutil.h"

typedef buf_t out_t; /* base/buf.h */

static void rejects_bad_strings(void **state) {
  (void)state;
  sched_stops_t s;
  char err[128];
  const char *empty[] = {"ok", ""};
  assert_int_equal(sched_stops_init(&s, empty, 2, 4, 16, err, sizeof err), -EINVAL);
  const char *bad_utf8[] = {"ok", "a\xC3"};
  assert_int_equal(sched_stops_init(&s, bad_utf8, 2, 4, 16, err, sizeof err), -EINVAL);
  const char *surrogate[] = {"\xED\xA0\x80"};
  assert_int_equal(sched_stops_init(&s, surrogate, 1, 4, 16, err, sizeof err), -EINVAL);
  const char *too_long[] = {"0123456789abcdefg"};
  assert_int_equal(sched_stops_init(&s, too_long, 1, 4, 16, err, sizeof err), -EINVAL);
  const char *many[] = {"a", "b", "c"};
  assert_int_equal(sched_stops_init(&s, many, 3, 2, 16, err, sizeof err), -EINVAL);
  const char *good[] = {"é!", "\xF0\x9F\x98\x80", "x"};
  assert_int_equal(sched_stops_init(&s, good, 3, 4, 16, err, sizeof err), 0);
  assert_int_equal(s.max_len, 4);
  sched_stops_free(&s);
  assert_int_equal(sched_stops_init(&s, NULL, 0, 4, 16, err, sizeof err), 0);
  sched_stops_free(&s);
}

/* A stop string split over pieces: held back until decided, dropped when it
 * completes; a near miss is released once it cannot match. */
static void holds_back_across_pieces(void **state) {
  (void)state;
  sched_stops_t s;
  char err[128];
  const char *strs[] = {"</end>", "STOP"};
  assert_int_equal(sched_stops_init(&s, strs, 2, 4, 16, err, sizeof err), 0);
  sched_stop_state_t st;
  sched_stop_state_init(&st, &s);
  out_t o = {0};
  assert_int_equal(sched_stop_push(&st, &s, "Hello </", 8, &o), -1);
  assert_int_equal(o.len, 6); /* "</" held */
  assert_memory_equal(o.p, "Hello ", 6);
  assert_int_equal(sched_stop_push(&st, &s, "en", 2, &o), -1);
  assert_int_equal(o.len, 6);
  assert_int_equal(sched_stop_push(&st, &s, "x ST", 4, &o), -1); /* "</enx" cannot match */
  assert_int_equal(o.len, 12);
  assert_memory_equal(o.p, "Hello </enx ", 12);
  assert_int_equal(sched_stop_push(&st, &s, "OP and more", 11, &o), 1);
  assert_int_equal(o.len, 12);
  sched_stop_state_free(&st);
  /* flush releases what is held */
  sched_stop_state_init(&st, &s);
  o.len = 0;
  assert_int_equal(sched_stop_push(&st, &s, "a </en", 6, &o), -1);
  assert_int_equal(o.len, 2);
  sched_stop_flush(&st, &o);
  assert_int_equal(o.len, 6);
  assert_memory_equal(o.p, "a </en", 6);
  sched_stop_state_free(&st);
  sched_stops_free(&s);
  free(o.p);
}

/* Reference: the released text after seeing text[0..n) (no match yet), and
 * the first match (end position, string) in the whole text. */
static size_t ref_held(const char *t, size_t n, char **strs, int k) {
  size_t keep = 0;
  for (int i = 0; i < k; i++) {
    size_t L = strlen(strs[i]);
    for (size_t j = (L - 1 < n ? L - 1 : n); j > keep; j--)
      if (memcmp(t + n - j, strs[i], j) == 0) {
        keep = j;
        break;
      }
  }
  return keep;
}

static int ref_match(const char *t, size_t n, char **strs, int k, size_t *start) {
  for (size_t e = 1; e <= n; e++) {
    int best = -1;
    for (int i = 0; i < k; i++) {
      size_t L = strlen(strs[i]);
      if (L <= e && memcmp(t + e - L, strs[i], L) == 0 && (best < 0 || L > strlen(strs[best]))) best = i;
    }
    if (best >= 0) {
      *start = e - strlen(strs[best]);
      return best;
    }
  }
  return -1;
}

static void random_against_reference(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  for (int round = 0; round < 3000; round++) {
    /* small alphabet: overlaps and near misses everywhere */
    int k = 1 + (int)tu_below(&r, 4);
    char buf[4][8];
    char *strs[4];
    for (int i = 0; i < k; i++) {
      int L = 1 + (int)tu_below(&r, 6);
      for (int j = 0; j < L; j++) buf[i][j] = (char)('a' + tu_below(&r, 3));
      buf[i][L] = 0;
      strs[i] = buf[i];
    }
    char text[64];
    size_t n = (size_t)tu_below(&r, 60);
    for (size_t j = 0; j < n; j++) text[j] = (char)('a' + tu_below(&r, 3));
    sched_stops_t s;
    char err[64];
    assert_int_equal(sched_stops_init(&s, (const char *const *)strs, k, 4, 8, err, sizeof err), 0);
    sched_stop_state_t st;
    sched_stop_state_init(&st, &s);
    out_t o = {0};
    size_t fed = 0, start = 0;
    int want = ref_match(text, n, strs, k, &start), got = -1;
    while (fed < n && got < 0) {
      size_t piece = 1 + (size_t)tu_below(&r, 5);
      if (piece > n - fed) piece = n - fed;
      got = sched_stop_push(&st, &s, text + fed, piece, &o);
      fed += piece;
      if (got < 0) { /* exactly the undecided suffix is held */
        assert_int_equal(o.len, fed - ref_held(text, fed, strs, k));
        assert_memory_equal(o.p, text, o.len);
      }
    }
    assert_int_equal(got, want);
    if (want >= 0) {
      assert_int_equal(o.len, start);
      assert_memory_equal(o.p, text, start);
    } else {
      sched_stop_flush(&st, &o);
      assert_int_equal(o.len, n);
      if (n) assert_memory_equal(o.p, text, n);
    }
    free(o.p);
    sched_stop_state_free(&st);
    sched_stops_free(&s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rejects_bad_strings),
      cmocka_unit_test(holds_back_across_pieces),
      cmocka_unit_test(random_against_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
