/* api/json_strict.c — RFC 8259's grammar, checked before cJSON parses a
 * request body, and the duplicate-key walk after (see json_strict.h). */
#include "api/json_strict.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"

typedef struct scan {
  const unsigned char *s;
  size_t n, i;
  char *err;
  size_t err_len;
} scan_t;

static int bad(scan_t *c, const char *what) {
  if (c->i >= c->n) snprintf(c->err, c->err_len, "invalid JSON: %s at the end of the body", what);
  else if (c->s[c->i] >= 0x20 && c->s[c->i] < 0x7F)
    snprintf(c->err, c->err_len, "invalid JSON: %s at byte %zu ('%c')", what, c->i, c->s[c->i]);
  else snprintf(c->err, c->err_len, "invalid JSON: %s at byte %zu (byte 0x%02X)", what, c->i, c->s[c->i]);
  return -EINVAL;
}

static int peek(const scan_t *c) { return c->i < c->n ? c->s[c->i] : -1; }

static void ws(scan_t *c) {
  while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
    c->i++;
}

static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }

static int is_hex(int ch) { return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }

static int number(scan_t *c) {
  if (peek(c) == '-') c->i++;
  if (peek(c) == '0') {
    c->i++;
    if (is_digit(peek(c))) return bad(c, "a number with a leading zero");
  } else if (is_digit(peek(c))) {
    while (is_digit(peek(c))) c->i++;
  } else {
    return bad(c, "a number without digits");
  }
  if (peek(c) == '.') {
    c->i++;
    if (!is_digit(peek(c))) return bad(c, "no digit after a decimal point");
    while (is_digit(peek(c))) c->i++;
  }
  if (peek(c) == 'e' || peek(c) == 'E') {
    c->i++;
    if (peek(c) == '+' || peek(c) == '-') c->i++;
    if (!is_digit(peek(c))) return bad(c, "no digit in an exponent");
    while (is_digit(peek(c))) c->i++;
  }
  return 0;
}

/* The four hex digits after "\u" (at c->i) as a number, or -1. */
static long hex4(const scan_t *c) {
  if (c->n - c->i < 4) return -1;
  long v = 0;
  for (int k = 0; k < 4; k++) {
    int ch = c->s[c->i + k];
    if (!is_hex(ch)) return -1;
    v = v * 16 + (ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
  }
  return v;
}

/* A \u escape's digits; a high surrogate must be followed by a \u low
 * one and a low one may not stand alone (cJSON refuses them, so the gate
 * does too: it is never looser than the parser behind it). */
static int surrogates(scan_t *c) {
  long v = hex4(c);
  if (v < 0) return bad(c, "a \\u escape without four hex digits");
  if (v >= 0xDC00 && v <= 0xDFFF) return bad(c, "a lone low surrogate escape");
  c->i += 4;
  if (v < 0xD800 || v > 0xDBFF) return 0;
  if (c->n - c->i < 2 || c->s[c->i] != '\\' || c->s[c->i + 1] != 'u') return bad(c, "a lone high surrogate escape");
  c->i += 2;
  v = hex4(c);
  if (v < 0xDC00 || v > 0xDFFF) return bad(c, "a high surrogate escape without its low half");
  c->i += 4;
  return 0;
}

static int string(scan_t *c) {
  c->i++; /* the opening quote */
  for (;;) {
    int ch = peek(c);
    if (ch < 0) return bad(c, "an unterminated string");
    if (ch == '"') {
      c->i++;
      return 0;
    }
    if (ch < 0x20) return bad(c, "a control character inside a string (it must be escaped)");
    if (ch >= 0x80) {
      const int len = utf8_char(c->s + c->i, c->n - c->i); /* RFC 3629: base/utf8.h */
      if (len <= 0) return bad(c, "invalid UTF-8");
      c->i += (size_t)len;
      continue;
    }
    if (ch != '\\') {
      c->i++;
      continue;
    }
    c->i++;
    ch = peek(c);
    if (ch == 'u') {
      c->i++;
      int rc = surrogates(c);
      if (rc) return rc;
    } else if (ch > 0 && strchr("\"\\/bfnrt", ch)) {
      c->i++;
    } else {
      return bad(c, "an unknown escape");
    }
  }
}

static int literal(scan_t *c, const char *word) {
  size_t k = strlen(word);
  if (c->n - c->i < k || memcmp(c->s + c->i, word, k) != 0) return bad(c, "an unexpected character");
  c->i += k;
  return 0;
}

/* An object key, its ':' and the whitespace up to the value. */
static int key(scan_t *c) {
  if (peek(c) != '"') return bad(c, "an object key that is not a string");
  int rc = string(c);
  if (rc) return rc;
  ws(c);
  if (peek(c) != ':') return bad(c, "a missing ':' after an object key");
  c->i++;
  ws(c);
  return 0;
}

/* One value, iteratively: stack[d] is '{' or '[' for each open container. */
int json_strict_check(const char *text, size_t n, char *err, size_t err_len) {
  scan_t c = {(const unsigned char *)text, n, 0, err, err_len};
  char stack[JSON_STRICT_MAX_DEPTH];
  int d = 0;
  ws(&c);
  for (;;) {
    /* a value is due */
    int ch = peek(&c), rc = 0;
    if (ch == '{' || ch == '[') {
      if (d == JSON_STRICT_MAX_DEPTH) return bad(&c, "nesting too deep");
      stack[d++] = (char)ch;
      c.i++;
      ws(&c);
      if (peek(&c) == (ch == '{' ? '}' : ']')) { /* empty */
        c.i++;
        d--;
      } else if (ch == '{') {
        if ((rc = key(&c)) != 0) return rc;
        continue;
      } else {
        continue;
      }
    } else if (ch == '"') {
      rc = string(&c);
    } else if (ch == '-' || is_digit(ch)) {
      rc = number(&c);
    } else if (ch == 't') {
      rc = literal(&c, "true");
    } else if (ch == 'f') {
      rc = literal(&c, "false");
    } else if (ch == 'n') {
      rc = literal(&c, "null");
    } else {
      return bad(&c, ch < 0 ? "a missing value" : "an unexpected character where a value should start");
    }
    if (rc) return rc;
    /* after a value: close containers or go on to the next element */
    for (;;) {
      ws(&c);
      if (d == 0) {
        if (c.i != c.n) return bad(&c, "data after the JSON value");
        return 0;
      }
      ch = peek(&c);
      const char close = stack[d - 1] == '{' ? '}' : ']';
      if (ch == close) {
        c.i++;
        d--;
        continue;
      }
      if (ch != ',') return bad(&c, stack[d - 1] == '{' ? "a missing ',' or '}'" : "a missing ',' or ']'");
      c.i++;
      ws(&c);
      if (stack[d - 1] == '{' && (rc = key(&c)) != 0) return rc;
      break; /* the next value */
    }
  }
}

static int key_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

const char *json_strict_dup_key(const cJSON *root) {
  if (!root) return NULL;
  const char *dup = NULL;
  if (cJSON_IsObject(root)) {
    size_t n = 0;
    for (const cJSON *x = root->child; x; x = x->next) n++;
    if (n > 1) {
      const char **keys = xmalloc(n * sizeof *keys);
      size_t k = 0;
      for (const cJSON *x = root->child; x; x = x->next) keys[k++] = x->string ? x->string : "";
      qsort(keys, n, sizeof *keys, key_cmp);
      for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) dup = keys[i];
      free(keys);
    }
  }
  for (const cJSON *x = root->child; x && !dup; x = x->next) dup = json_strict_dup_key(x);
  return dup;
}
