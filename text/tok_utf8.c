/* text/tok_utf8.c — UTF-8 well-formedness for the tokenizer: checking
 * input, replacing ill-formed bytes by U+FFFD, holding back an incomplete
 * character at the end of a stream, and the GPT-2 byte-level alphabet.
 *
 * Well-formed sequences (Unicode, Table 3-7):
 *   00..7F
 *   C2..DF 80..BF
 *   E0 A0..BF 80..BF | E1..EC 80..BF 80..BF | ED 80..9F 80..BF | EE..EF 80..BF 80..BF
 *   F0 90..BF 80..BF 80..BF | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF
 * A maximal ill-formed subsequence (the longest prefix of a well-formed
 * sequence, or one byte that starts none) becomes one U+FFFD, which is also
 * what Python's bytes.decode("utf-8", "replace") does. */
#include <string.h>

#include "text/tok_internal.h"

int tok__utf8_char(const uint8_t *s, size_t n) {
  uint8_t c = s[0];
  if (c < 0x80) return 1;
  int len;
  uint8_t lo = 0x80, hi = 0xBF; /* range of the second byte */
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int i = 1; i < len; i++) {
    if ((size_t)i >= n) return -i; /* cut off: i bytes so far, all valid */
    uint8_t b = s[i];
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return len;
}

int tok__utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) { /* ASCII runs are the common case */
      i++;
      continue;
    }
    int k = tok__utf8_char(s + i, n - i);
    if (k <= 0) return 0;
    i += (size_t)k;
  }
  return 1;
}

/* The length of the maximal ill-formed subsequence at s[0..n) (>= 1), given
 * that tok__utf8_char returned 0 or a negative value there. */
static size_t bad_len(const uint8_t *s, size_t n) {
  size_t k = 1;
  while (k < n && k < 4) {
    int r = tok__utf8_char(s, k + 1);
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
    int k = tok__utf8_char(s + i, n - i);
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
  uint32_t cp = tok__byte_cp(b);
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xC0 | (cp >> 6));
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}
