/* tests/unit/test_utf8.c — base/utf8.h against an independent UTF-8
 * decoder, glibc's iconv (UTF-8 → UTF-32LE): every lead and second byte,
 * the third and fourth bytes on each side of the continuation range, every
 * length; every code point encoded; random strings judged whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <iconv.h>
#include <string.h>

#include "base/utf8.h"
#include "tests/unit/testutil.h"

static iconv_t from_utf8, to_utf8;

/* iconv's reading of the first character of s[0..n): its length with its
 * code point in *cp, 0 when ill-formed, -n when iconv wants more bytes. */
static int ref_char(const uint8_t *s, size_t n, uint32_t *cp) {
  char *in = (char *)s, *out;
  size_t in_left = n, out_left = 4;
  uint32_t u = 0;
  out = (char *)&u;
  iconv(from_utf8, NULL, NULL, NULL, NULL);
  const size_t r = iconv(from_utf8, &in, &in_left, &out, &out_left);
  const int e = errno;
  if (in_left < n) { /* converted one character (then ran out of room, or reached the end) */
    *cp = u;
    return (int)(n - in_left);
  }
  return r == (size_t)-1 && e == EINVAL ? -(int)n : 0;
}

static void chars_match_iconv(void **state) {
  (void)state;
  /* past the second byte only "continuation or not" matters: both ends of
   * 80..BF and one byte outside on each side */
  static const uint8_t later[] = {0x41, 0x80, 0xBF, 0xC0};
  long checked = 0;
  for (int a = 0; a < 256; a++)
    for (int b = 0; b < 256; b++)
      for (unsigned c = 0; c < sizeof later; c++)
        for (unsigned d = 0; d < sizeof later; d++) {
          const uint8_t s[4] = {(uint8_t)a, (uint8_t)b, later[c], later[d]};
          for (size_t n = 1; n <= 4; n++) {
            uint32_t want_cp = 0, got_cp = 0xFFFFFFFF;
            const int want = ref_char(s, n, &want_cp), got = utf8_char(s, n);
            const int dec = utf8_decode(s, n, &got_cp);
            /* well-formed exactly when iconv reads a character, of the same length */
            if ((got > 0) != (want > 0) || (got > 0 && got != want))
              fail_msg("%02x %02x %02x %02x n=%zu: utf8_char %d, iconv %d", a, b, later[c], later[d], n, got, want);
            /* a cut-off beginning is one iconv waits on too (iconv also waits on
             * some beginnings that can no longer become well-formed) */
            if (got < 0 && want != got) fail_msg("%02x %02x n=%zu: cut off %d, iconv %d", a, b, n, got, want);
            /* every proper beginning of a well-formed character is a cut-off one */
            for (int k = 1; got > 0 && k < got; k++) assert_int_equal(utf8_char(s, (size_t)k), -k);
            assert_int_equal(dec, got > 0 ? got : 0);
            if (got > 0) assert_int_equal(got_cp, want_cp);
            checked++;
          }
        }
  assert_int_equal(checked, 256L * 256 * 16 * 4);
}

static void encode_matches_iconv(void **state) {
  (void)state;
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    char got[4], want[4];
    const int n = utf8_encode(cp, got);
    char *in = (char *)&cp, *out = want;
    size_t in_left = 4, out_left = sizeof want;
    iconv(to_utf8, NULL, NULL, NULL, NULL);
    assert_int_not_equal(iconv(to_utf8, &in, &in_left, &out, &out_left), (size_t)-1);
    assert_int_equal(n, (int)(sizeof want - out_left));
    assert_memory_equal(got, want, (size_t)n);
    uint32_t back = 0;
    assert_int_equal(utf8_decode(got, (size_t)n, &back), n);
    assert_int_equal(back, cp);
  }
}

/* Random strings over bytes that make UTF-8 interesting: valid exactly
 * when iconv converts all of them. */
static void strings_match_iconv(void **state) {
  (void)state;
  static const uint8_t pool[] = {'a', 0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  int valid = 0;
  for (int t = 0; t < 200000; t++) {
    uint8_t s[12];
    const size_t n = (size_t)tu_below(&r, sizeof s + 1);
    for (size_t i = 0; i < n; i++) s[i] = pool[tu_below(&r, sizeof pool)];
    if (n && tu_below(&r, 2)) { /* half of them: a real character in the middle */
      char c[4];
      const uint32_t cp = (uint32_t)tu_below(&r, 0x110000);
      const int k = cp >= 0xD800 && cp <= 0xDFFF ? 0 : utf8_encode(cp, c);
      const size_t at = (size_t)tu_below(&r, n);
      for (int i = 0; i < k && at + (size_t)i < n; i++) s[at + (size_t)i] = (uint8_t)c[i];
    }
    uint32_t u[16];
    char *in = (char *)s, *out = (char *)u;
    size_t in_left = n, out_left = sizeof u;
    iconv(from_utf8, NULL, NULL, NULL, NULL);
    const bool want = iconv(from_utf8, &in, &in_left, &out, &out_left) != (size_t)-1 && in_left == 0;
    assert_int_equal(utf8_valid(s, n), want);
    valid += want;
  }
  assert_true(valid > 1000); /* the pool reaches both answers */
}

static int setup(void **state) {
  (void)state;
  from_utf8 = iconv_open("UTF-32LE", "UTF-8");
  to_utf8 = iconv_open("UTF-8", "UTF-32LE");
  return from_utf8 == (iconv_t)-1 || to_utf8 == (iconv_t)-1 ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  iconv_close(from_utf8);
  iconv_close(to_utf8);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chars_match_iconv),
      cmocka_unit_test(encode_matches_iconv),
      cmocka_unit_test(strings_match_iconv),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
