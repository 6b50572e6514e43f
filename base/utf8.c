/* base/utf8.c — UTF-8 (see utf8.h). */
#include "base/utf8.h"

int utf8_char(const void *str, size_t n) {
  const uint8_t *s = (const uint8_t *)str;
  const uint8_t c = s[0];
  if (c < 0x80) return 1;
  int len;
  uint8_t lo = 0x80, hi = 0xBF; /* the second byte's range */
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
    const uint8_t b = s[i];
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return len;
}

bool utf8_valid(const void *str, size_t n) {
  const uint8_t *s = (const uint8_t *)str;
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) { /* ASCII runs are the common case */
      i++;
      continue;
    }
    const int k = utf8_char(s + i, n - i);
    if (k <= 0) return false;
    i += (size_t)k;
  }
  return true;
}

int utf8_decode(const void *str, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  const uint8_t *s = (const uint8_t *)str;
  const int len = utf8_char(s, n);
  if (len <= 0) return 0;
  uint32_t v = len == 1 ? s[0] : s[0] & (0x7Fu >> len);
  for (int i = 1; i < len; i++) v = v << 6 | (s[i] & 0x3Fu);
  *cp = v;
  return len;
}

int utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}
