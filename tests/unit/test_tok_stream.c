/* tests/unit/test_tok_stream.c — decoding (text/tok_decode.c, tok_utf8.c):
 * the streaming detokenizer's hold-back of split characters, what cannot
 * complete, invalid UTF-8, and tok_decode's snprintf-like contract. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "tests/unit/gguf_writer.h"
#include "tests/unit/testutil.h"
#include "tests/unit/tok_vocab_util.h"

/* ---- streaming and UTF-8 ------------------------------------------------------------ */

/* An independent check that s[n] is well-formed UTF-8: decode, then reject
 * overlong forms, surrogates and code points past U+10FFFF. */
static int well_formed(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint32_t c = s[i], cp;
    int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!k || i + (size_t)k > n) return 0;
    cp = k == 1 ? c : c & (0x7F >> k);
    for (int j = 1; j < k; j++) {
      if ((s[i + (size_t)j] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + (size_t)j] & 0x3F);
    }
    uint32_t min = k == 1 ? 0 : k == 2 ? 0x80 : k == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += (size_t)k;
  }
  return 1;
}

static void stream_holds_back_split_emoji(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  int end = vb_add(&v, "<|im_end|>", 3, 0);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  const char *s = "x\xF0\x9F\x98\x80y"; /* x 😀 y, one token per byte */
  int32_t ids[16];
  int64_t n = tok_encode(tok, s, strlen(s), 0, ids, 16);
  assert_int_equal(n, 6);
  tok_stream_t st;
  tok_stream_init(&st, tok, 0);
  size_t cap = tok_stream_max_out(tok);
  char *out = malloc(cap);
  const int want_len[] = {1, 0, 0, 0, 4, 1};
  char all[32];
  size_t k = 0;
  for (int i = 0; i < 6; i++) {
    int w = tok_stream_push(&st, ids[i], out, cap);
    assert_int_equal(w, want_len[i]);
    memcpy(all + k, out, (size_t)w);
    k += (size_t)w;
    if (i == 3) { /* a control token in the middle is skipped and breaks nothing */
      assert_int_equal(tok_stream_push(&st, end, out, cap), 0);
    }
  }
  assert_int_equal(tok_stream_flush(&st, out, cap), 0);
  assert_int_equal(k, strlen(s));
  assert_memory_equal(all, s, k);
  /* too small an output buffer: refused, and the stream is unchanged */
  tok_stream_init(&st, tok, 0);
  assert_int_equal(tok_stream_push(&st, ids[1], out, cap), 0);
  assert_int_equal(tok_stream_push(&st, ids[2], out, cap), 0);
  assert_int_equal(tok_stream_push(&st, ids[3], out, cap), 0);
  assert_int_equal(tok_stream_push(&st, ids[4], out, 3), -ENOSPC);
  assert_int_equal(tok_stream_push(&st, ids[4], out, 4), 4);
  assert_memory_equal(out, "\xF0\x9F\x98\x80", 4);
  assert_int_equal(tok_stream_push(&st, -1, out, cap), -EINVAL);
  /* rendering specials */
  tok_stream_init(&st, tok, TOK_DEC_SPECIAL);
  assert_int_equal(tok_stream_push(&st, end, out, cap), 10);
  assert_memory_equal(out, "<|im_end|>", 10);
  free(out);
  tok_destroy(tok);
  vb_free(&v);
}

static void stream_replaces_what_cannot_complete(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  size_t cap = tok_stream_max_out(tok);
  char *out = malloc(cap);
  tok_stream_t st;
  /* F0 9F then 'A': the held bytes can never complete → one U+FFFD */
  tok_stream_init(&st, tok, 0);
  assert_int_equal(tok_stream_push(&st, 0xF0, out, cap), 0);
  assert_int_equal(tok_stream_push(&st, 0x9F, out, cap), 0);
  assert_int_equal(tok_stream_push(&st, 'A', out, cap), 4);
  assert_memory_equal(out, "\xEF\xBF\xBD" "A", 4);
  /* a lone continuation byte: U+FFFD at once */
  assert_int_equal(tok_stream_push(&st, 0x80, out, cap), 3);
  /* an incomplete character at the end: flushed as U+FFFD */
  assert_int_equal(tok_stream_push(&st, 0xE2, out, cap), 0);
  assert_int_equal(tok_stream_flush(&st, out, cap), 3);
  assert_memory_equal(out, "\xEF\xBF\xBD", 3);
  assert_int_equal(tok_stream_flush(&st, out, cap), 0);

  /* random byte sequences: whatever the chunking, the output is well-formed
   * and equals the whole sequence decoded with replacement */
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 2);
  const uint8_t pool[] = {'a', 0x80, 0x9F, 0xBF, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x90, 0xF4, 0xED, 0xA0, 0xFF};
  for (int t = 0; t < 300; t++) {
    int32_t ids[24];
    int n = 1 + (int)tu_below(&r, 24);
    for (int i = 0; i < n; i++) ids[i] = pool[tu_below(&r, sizeof pool)];
    char got[128], want[128];
    size_t k = 0;
    tok_stream_init(&st, tok, 0);
    for (int i = 0; i < n; i++) {
      int w = tok_stream_push(&st, ids[i], out, cap);
      assert_true(w >= 0);
      memcpy(got + k, out, (size_t)w);
      k += (size_t)w;
    }
    int w = tok_stream_flush(&st, out, cap);
    memcpy(got + k, out, (size_t)w);
    k += (size_t)w;
    int64_t wl = tok_decode(tok, ids, (size_t)n, TOK_DEC_VALID_UTF8, want, sizeof want);
    assert_true(well_formed((const uint8_t *)got, k));
    assert_int_equal(k, wl);
    assert_memory_equal(got, want, k);
  }
  free(out);
  tok_destroy(tok);
  vb_free(&v);
}

static void invalid_utf8_is_replaced_or_refused(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "smollm", NULL);
  /* maximal ill-formed subsequences, as Python's decode("utf-8", "replace") */
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"\xE0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xE1\x80" "A", "\xEF\xBF\xBD" "A"},
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
      {"a\xF0\x9F\x98\x80\x80" "b", "a\xF0\x9F\x98\x80\xEF\xBF\xBD" "b"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    int32_t got[64], want[64];
    int64_t ng = tok_encode(tok, cases[c].in, strlen(cases[c].in), 0, got, 64);
    int64_t nw = tok_encode(tok, cases[c].want, strlen(cases[c].want), 0, want, 64);
    assert_true(ng > 0);
    assert_int_equal(ng, nw);
    assert_memory_equal(got, want, (size_t)ng * sizeof(int32_t));
    assert_int_equal(tok_encode(tok, cases[c].in, strlen(cases[c].in), TOK_ENC_STRICT, got, 64),
                     -EILSEQ);
    char out[64];
    assert_int_equal(tok_decode(tok, got, (size_t)ng, 0, out, sizeof out),
                     (int64_t)strlen(cases[c].want));
    assert_string_equal(out, cases[c].want);
  }
  assert_int_equal(tok_encode(tok, NULL, 3, 0, NULL, 0), -EINVAL);
  assert_int_equal(tok_encode(tok, NULL, 0, 0, NULL, 0), 0);

  /* random bytes never crash; what they decode to is well-formed and encodes
   * to the same ids */
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 3);
  for (int t = 0; t < 300; t++) {
    uint8_t text[64];
    size_t n = tu_below(&r, sizeof text);
    for (size_t i = 0; i < n; i++) text[i] = (uint8_t)tu_next(&r);
    int32_t ids[256];
    int64_t k = tok_encode(tok, (const char *)text, n, 0, ids, 256);
    assert_true(k >= 0 && k <= 256);
    char out[256];
    int64_t m = tok_decode(tok, ids, (size_t)k, 0, out, sizeof out);
    assert_true(m >= 0 && m < (int64_t)sizeof out);
    assert_true(well_formed((const uint8_t *)out, (size_t)m));
    int32_t again[256];
    assert_int_equal(tok_encode(tok, out, (size_t)m, TOK_ENC_STRICT, again, 256), k);
    assert_memory_equal(again, ids, (size_t)k * sizeof(int32_t));
  }
  tok_destroy(tok);
  vb_free(&v);
}

static void decode_is_snprintf_like(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  vb_merge(&v, "a", "b");
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  int32_t ids[] = {vb_find(&v, "ab"), 'c', vb_find(&v, "ab")};
  char out[8];
  memset(out, 'Z', sizeof out);
  assert_int_equal(tok_decode(tok, ids, 3, 0, out, 4), 5);
  assert_string_equal(out, "abc");
  assert_int_equal(tok_decode(tok, ids, 3, 0, NULL, 0), 5);
  int32_t bad[] = {'a', 99999};
  assert_int_equal(tok_decode(tok, bad, 2, 0, out, sizeof out), -EINVAL);
  /* encode returns the full count even when the array is short */
  int32_t few[2];
  assert_int_equal(tok_encode(tok, "ab ab ab", 8, 0, few, 2), 5); /* ab Ġ ab Ġ ab */
  assert_int_equal(few[0], ids[0]);
  size_t len;
  assert_non_null(tok_piece(tok, ' ', &len));
  assert_int_equal(len, 1);
  assert_null(tok_piece(tok, -1, &len));
  assert_int_equal(tok_find(tok, vb_bl(" "), strlen(vb_bl(" "))), ' ');
  assert_int_equal(tok_find(tok, "zzz", 3), -1);
  assert_int_equal(tok_type(tok, 'a'), TOK_TYPE_NORMAL);
  assert_int_equal(tok_type(tok, 1 << 20), -EINVAL);
  tok_destroy(tok);
  vb_free(&v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stream_holds_back_split_emoji),
      cmocka_unit_test(stream_replaces_what_cannot_complete),
      cmocka_unit_test(invalid_utf8_is_replaced_or_refused),
      cmocka_unit_test(decode_is_snprintf_like),
  };
  return cmocka_run_group_tests_name("tok_stream", tests, NULL, NULL);
}
