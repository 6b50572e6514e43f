/* text/tok_utf8.c — the tokenizer's UTF-8 policy (well-formedness itself
 * is base/utf8.h's): replacing ill-formed bytes by U+FFFD, holding back an
 * incomplete character at the end of a stream, and the GPT-2 byte-level
 * alphabet.
 *
 * A maximal ill-formed subsequence (the longest prefix of a well-formed
 * sequence, or one byte that starts none) becomes one U+FFFD, which is also
 * what Python's bytes.decode("utf-8", "replace") does. */
#include <string.h>

#include "base/utf8.h"
#include "text/tok_internal.h"

/* The length of the maximal ill-formed subsequence at s[0..n) (>= 1), given
 * that utf8_char returned 0 or a negative value there. */
static size_t bad_len(const uint8_t *s, size_t n) {
  size_t k = 1;
  while (k < n && k < 4) {
    int r = utf8_char(s, k + 1);
    if (r == 0) break; /* adding s[k] breaks it: s[k] starts the next piece */
    k++;
  }
  return k;
}

size_t tok__utf8_sanitize(const uint8_t *s, size_t n, int hold_tail, uint8_t *out,
                          size_t *consumed) {
  static const uint8_t fffd[3] = {0xEF, 0xBF, 0xBD};
  size_t i = 0, o = 0;
  while (i < n) {
    int k = utf8_char(s + i, n - i);
    if (k > 0) {
      if (out) memcpy(out + o, s + i, (size_t)k);
      o += (size_t)k;
      i += (size_t)k;
      continue;
    }
    if (k < 0 && hold_tail) break; /* a valid prefix cut off by the end: keep it */
    size_t bad = k < 0 ? (size_t)-k : bad_len(s + i, n - i);
    if (out) memcpy(out + o, fffd, 3);
    o += 3;
    i += bad;
  }
  if (consumed) *consumed = i;
  return o;
}

/* ---- the GPT-2 byte-level alphabet -----------------------------------------
 * Printable bytes (21..7E, A1..AC, AE..FF) stand for themselves; the other 68
 * bytes, in increasing order, are written as U+0100, U+0101, ... */

static int printable(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t tok__byte_cp(uint8_t b) {
  if (printable(b)) return b;
  if (b <= 0x20) return 0x100 + b;                /* 33 bytes → U+0100..U+0120 */
  if (b >= 0x7F && b <= 0xA0) return 0x121 + (b - 0x7F); /* 34 → U+0121..U+0142 */
  return 0x143;                                    /* 0xAD */
}

int tok__cp_byte(uint32_t cp) {
  if (cp < 0x100) return printable(cp) ? (int)cp : -1;
  if (cp <= 0x120) return (int)(cp - 0x100);
  if (cp <= 0x142) return (int)(0x7F + (cp - 0x121));
  if (cp == 0x143) return 0xAD;
  return -1;
}

int tok__byte_utf8(uint8_t b, char out[2]) {
  char t[4]; /* the alphabet stops at U+0143: two bytes at most */
  const int n = utf8_encode(tok__byte_cp(b), t);
  memcpy(out, t, (size_t)n);
  return n;
}
