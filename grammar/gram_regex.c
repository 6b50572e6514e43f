/* grammar/gram_regex.c — regular expressions (the subset ECMAScript and
 * Python share) into the expression builder, whole-match or search semantics,
 * optionally producing the body of a JSON string (for JSON Schema "pattern"
 * and "format"); plus the choice compiler.
 *
 * Supported: literals (UTF-8), escapes \n \r \t \f \v \0 \xHH \uHHHH \u{H..}
 * and escaped punctuation, classes [..] [^..] with ranges and \d \w \s \D \W
 * \S (ASCII meanings), `.` (any code point but \n), groups ( ), (?: ),
 * (?P<n> ), (?<n> ), alternation, * + ? {m} {m,} {m,n} {,n} and their lazy
 * forms (same language), ^ \A at the start and $ \Z \z at the end. Errors
 * name what is not supported: backreferences, lookaround, \b \B, flags,
 * \p{..}, possessive quantifiers, anchors inside. */
#include <string.h>

#include "grammar/gram_int.h"

typedef struct rp {
  gx_build_t *b;
  const char *s;
  size_t n, i;
  bool js; /* produce a JSON string body */
  int depth;
} rp_t;

static int peek(const rp_t *p) { return p->i < p->n ? (unsigned char)p->s[p->i] : -1; }

static int fail_at(rp_t *p, size_t at, const char *msg) {
  return gx_fail(p->b, (int64_t)at, GRAM_EINVAL, "regex: %s at offset %zu", msg, at);
}

/* ---- characters, in plain or JSON-string form ------------------------------- */

/* How code point c is written inside a JSON string (escaped if it must be). */
static int32_t js_char(rp_t *p, uint32_t c) {
  if (!p->js || (c >= 0x20 && c != '"' && c != '\\')) return gx_codepoint(p->b, c);
  char buf[8];
  const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
  if (!e) {
    static const char hex[] = "0123456789abcdef";
    memcpy(buf, "\\u00", 4);
    buf[4] = hex[c >> 4], buf[5] = hex[c & 15], buf[6] = 0;
    e = buf;
  }
  return gx_lit(p->b, e, strlen(e));
}

/* One code point from the (normalized, non-negated) ranges L/H. In JSON mode
 * the characters JSON escapes come as their escapes. */
static int32_t class_node(rp_t *p, uint32_t *L, uint32_t *H, int m) {
  if (!p->js) return gx_codepoints(p->b, L, H, m, false);
  int32_t alt = gx_alt(p->b);
  /* the plain part: the ranges minus 0x00-0x1F, '"' and '\\' */
  uint32_t PL[2 * 64 + 8], PH[2 * 64 + 8];
  int k = 0;
  for (int i = 0; i < m && !p->b->failed; i++) {
    for (uint32_t c = L[i]; c <= H[i] && c < 0x20; c++) gx_add(p->b, alt, js_char(p, c));
    if ('"' >= L[i] && '"' <= H[i]) gx_add(p->b, alt, js_char(p, '"'));
    if ('\\' >= L[i] && '\\' <= H[i]) gx_add(p->b, alt, js_char(p, '\\'));
    uint32_t a = L[i] < 0x20 ? 0x20 : L[i];
    /* cut out '"' (0x22) and '\\' (0x5C) */
    uint32_t cuts[3][2] = {{a, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, H[i]}};
    for (int j = 0; j < 3; j++) {
      uint32_t x = cuts[j][0] > a ? cuts[j][0] : a, y = cuts[j][1] < H[i] ? cuts[j][1] : H[i];
      if (x <= y && k < (int)(sizeof PL / sizeof *PL)) PL[k] = x, PH[k] = y, k++;
    }
    if (k >= 128) { /* flush (large classes) */
      gx_add(p->b, alt, gx_codepoints(p->b, PL, PH, k, false));
      k = 0;
    }
  }
  if (k) gx_add(p->b, alt, gx_codepoints(p->b, PL, PH, k, false));
  if (p->b->failed) return -1;
  return p->b->nodes[alt].first < 0 ? gx_nothing(p->b) : alt;
}

static int32_t ranges_node(rp_t *p, const uint32_t *lo, const uint32_t *hi, int n, bool negate) {
  uint32_t L[260], H[260];
  if (n > 256) return fail_at(p, p->i, "character class too long");
  int m = gram__cp_normalize(lo, hi, n, negate, L, H);
  if (m < 0) return gx_fail(p->b, -1, GRAM_ENOMEM, "out of memory");
  return class_node(p, L, H, m);
}

/* The ranges of \d \w \s (upper case: negated). Returns their count. */
static int shorthand(int c, uint32_t *lo, uint32_t *hi) {
  switch (c | 0x20) {
  case 'd': lo[0] = '0', hi[0] = '9'; return 1;
  case 'w':
    lo[0] = '0', hi[0] = '9', lo[1] = 'A', hi[1] = 'Z', lo[2] = 'a', hi[2] = 'z', lo[3] = '_', hi[3] = '_';
    return 4;
  case 's': lo[0] = '\t', hi[0] = '\r', lo[1] = ' ', hi[1] = ' '; return 2;
  }
  return 0;
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int read_hex(rp_t *p, int k, uint32_t *out) {
  uint32_t v = 0;
  for (int j = 0; j < k; j++) {
    int d = hexval(peek(p));
    if (d < 0) return fail_at(p, p->i, "expected a hex digit");
    v = v * 16 + (uint32_t)d, p->i++;
  }
  *out = v;
  return 0;
}

/* An escape after the backslash (p->i at the letter): a code point into *cp
 * (returns 0), a shorthand class into lo/hi (returns its count, *neg set), or
 * -1 after an error. */
static int escape(rp_t *p, uint32_t *cp, uint32_t *lo, uint32_t *hi, bool *neg, bool in_class) {
  size_t at = p->i - 1;
  int c = peek(p);
  if (c < 0) return fail_at(p, at, "trailing backslash");
  p->i++;
  *neg = false;
  switch (c) {
  case 'd': case 'w': case 's': case 'D': case 'W': case 'S':
    *neg = c < 'a';
    return shorthand(c, lo, hi);
  case 'n': *cp = '\n'; return 0;
  case 'r': *cp = '\r'; return 0;
  case 't': *cp = '\t'; return 0;
  case 'f': *cp = '\f'; return 0;
  case 'v': *cp = '\v'; return 0;
  case '0': *cp = 0; return 0;
  case 'x': return read_hex(p, 2, cp);
  case 'u':
    if (peek(p) == '{') {
      p->i++;
      uint32_t v = 0;
      int k = 0;
      while (hexval(peek(p)) >= 0 && k < 8) v = v * 16 + (uint32_t)hexval(peek(p)), p->i++, k++;
      if (!k || peek(p) != '}' || v > 0x10FFFF) return fail_at(p, at, "bad \\u{...} escape");
      p->i++;
      *cp = v;
      return 0;
    }
    if (read_hex(p, 4, cp)) return -1;
    if (*cp >= 0xD800 && *cp <= 0xDFFF) return fail_at(p, at, "surrogate escapes are not supported");
    return 0;
  case 'b':
    if (in_class) {
      *cp = '\b';
      return 0;
    }
    return fail_at(p, at, "word boundary \\b is not supported");
  case 'B': return fail_at(p, at, "\\B is not supported");
  case 'k': return fail_at(p, at, "backreferences are not supported");
  case 'p': case 'P': return fail_at(p, at, "Unicode property classes (\\p{..}) are not supported");
  case 'A': case 'Z': case 'z': case 'G': return fail_at(p, at, "anchors are supported only at the ends");
  default: {
    if (c >= '1' && c <= '9') return fail_at(p, at, "backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return fail_at(p, at, "unknown escape");
    p->i--;
    int k = utf8_decode(p->s + p->i, p->n - p->i, cp);
    if (k <= 0) return fail_at(p, at, "invalid UTF-8");
    p->i += (size_t)k;
    return 0;
  }
  }
}

static int32_t bracket(rp_t *p) {
  size_t at = p->i++;
  bool negate = false;
  if (peek(p) == '^') negate = true, p->i++;
  uint32_t lo[256], hi[256];
  int n = 0;
  bool first = true;
  for (;;) {
    int c = peek(p);
    if (c < 0) return fail_at(p, at, "unterminated character class");
    if (c == ']' && !first) {
      p->i++;
      break;
    }
    first = false;
    if (n > 250) return fail_at(p, at, "character class too long");
    if (c == '[' && p->i + 1 < p->n && p->s[p->i + 1] == ':')
      return fail_at(p, p->i, "POSIX classes ([:alpha:]) are not supported");
    uint32_t a;
    if (c == '\\') {
      p->i++;
      bool neg;
      int k = escape(p, &a, lo + n, hi + n, &neg, true);
      if (k < 0) return -1;
      if (k > 0) {
        if (neg) return fail_at(p, p->i - 2, "negated shorthand (\\D \\W \\S) inside a class is not supported");
        n += k;
        continue;
      }
    } else {
      int k = utf8_decode(p->s + p->i, p->n - p->i, &a);
      if (k <= 0) return fail_at(p, p->i, "invalid UTF-8");
      p->i += (size_t)k;
    }
    uint32_t z = a;
    if (peek(p) == '-' && p->i + 1 < p->n && p->s[p->i + 1] != ']') {
      p->i++;
      if (peek(p) == '\\') {
        p->i++;
        bool neg;
        int k = escape(p, &z, lo + n, hi + n, &neg, true);
        if (k != 0) return k < 0 ? -1 : fail_at(p, p->i, "a class shorthand cannot end a range");
      } else {
        int k = utf8_decode(p->s + p->i, p->n - p->i, &z);
        if (k <= 0) return fail_at(p, p->i, "invalid UTF-8");
        p->i += (size_t)k;
      }
      if (z < a) return fail_at(p, at, "character range out of order");
    }
    lo[n] = a, hi[n] = z, n++;
  }
  return ranges_node(p, lo, hi, n, negate);
}

static int32_t alts(rp_t *p);

static int32_t group(rp_t *p) {
  size_t at = p->i++;
  if (peek(p) == '?') {
    const char *r = p->s + p->i, *end = p->s + p->n;
    size_t left = (size_t)(end - r);
    if (left >= 2 && r[1] == ':') p->i += 2;
    else if (left >= 2 && (r[1] == '=' || r[1] == '!')) return fail_at(p, at, "lookahead is not supported");
    else if (left >= 3 && r[1] == '<' && (r[2] == '=' || r[2] == '!')) return fail_at(p, at, "lookbehind is not supported");
    else if (left >= 3 && r[1] == 'P' && r[2] == '=') return fail_at(p, at, "backreferences are not supported");
    else if (left >= 2 && (r[1] == '<' || (r[1] == 'P' && left >= 3 && r[2] == '<'))) {
      while (p->i < p->n && p->s[p->i] != '>') p->i++;
      if (p->i >= p->n) return fail_at(p, at, "unterminated group name");
      p->i++;
    } else if (left >= 2 && r[1] == '>') return fail_at(p, at, "atomic groups are not supported");
    else return fail_at(p, at, "inline flags and other (?...) groups are not supported");
  }
  if (++p->depth > GRAM_MAX_DEPTH) return gx_fail(p->b, (int64_t)at, GRAM_ELIMIT, "regex: groups nested deeper than %d", GRAM_MAX_DEPTH);
  int32_t x = alts(p);
  if (x < 0) return -1;
  if (peek(p) != ')') return fail_at(p, at, "missing ')'");
  p->i++;
  p->depth--;
  return x;
}

static int32_t atom(rp_t *p) {
  int c = peek(p);
  size_t at = p->i;
  uint32_t cp, lo[4], hi[4];
  switch (c) {
  case '(': return group(p);
  case '[': return bracket(p);
  case '.': {
    p->i++;
    uint32_t nl = '\n';
    return ranges_node(p, &nl, &nl, 1, true);
  }
  case '*': case '+': case '?': return fail_at(p, at, "nothing to repeat");
  case '^': return fail_at(p, at, "'^' is supported only at the start");
  case '$': return fail_at(p, at, "'$' is supported only at the end");
  case '\\': {
    p->i++;
    bool neg;
    int k = escape(p, &cp, lo, hi, &neg, false);
    if (k < 0) return -1;
    if (k > 0) return ranges_node(p, lo, hi, k, neg);
    return js_char(p, cp);
  }
  default: {
    int k = utf8_decode(p->s + p->i, p->n - p->i, &cp);
    if (k <= 0) return fail_at(p, at, "invalid UTF-8");
    p->i += (size_t)k;
    return js_char(p, cp);
  }
  }
}

/* {m}, {m,}, {m,n}, {,n} at p->i; 1 if one was read, 0 if '{' is a literal. */
static int braces(rp_t *p, int32_t *m, int32_t *n) {
  size_t j = p->i + 1;
  int64_t a = -1, z = -1;
  int comma = 0;
  for (; j < p->n && p->s[j] >= '0' && p->s[j] <= '9'; j++) a = (a < 0 ? 0 : a) * 10 + (p->s[j] - '0'), a = a > 1000000 ? 1000000 : a;
  if (j < p->n && p->s[j] == ',') {
    comma = 1;
    for (j++; j < p->n && p->s[j] >= '0' && p->s[j] <= '9'; j++) z = (z < 0 ? 0 : z) * 10 + (p->s[j] - '0'), z = z > 1000000 ? 1000000 : z;
  }
  if (j >= p->n || p->s[j] != '}' || (a < 0 && z < 0)) return 0;
  *m = a < 0 ? 0 : (int32_t)a;
  *n = comma ? (z < 0 ? -1 : (int32_t)z) : *m;
  p->i = j + 1;
  return 1;
}

static int32_t seq(rp_t *p) {
  int32_t q = gx_seq(p->b);
  for (;;) {
    int c = peek(p);
    if (c < 0 || c == '|' || c == ')') return q;
    int32_t x;
    if (c == '{') {
      int32_t m, n;
      size_t at = p->i;
      if (braces(p, &m, &n)) return fail_at(p, at, "nothing to repeat");
      p->i++;
      x = js_char(p, '{');
    } else x = atom(p);
    for (;;) {
      c = peek(p);
      size_t at = p->i;
      int32_t m, n;
      if (c == '*') m = 0, n = -1, p->i++;
      else if (c == '+') m = 1, n = -1, p->i++;
      else if (c == '?') m = 0, n = 1, p->i++;
      else if (c == '{' && braces(p, &m, &n)) {
        if (n >= 0 && n < m) return fail_at(p, at, "repetition {m,n} with n < m");
      } else break;
      if (peek(p) == '?') p->i++; /* lazy: same language */
      else if (peek(p) == '+') return fail_at(p, p->i, "possessive quantifiers are not supported");
      if (m > GRAM_MAX_REPEAT || n > GRAM_MAX_REPEAT)
        return gx_fail(p->b, (int64_t)at, GRAM_ELIMIT, "regex: repetition count above %d", GRAM_MAX_REPEAT);
      x = gx_repeat(p->b, x, m, n);
    }
    if (gx_add(p->b, q, x) < 0) return -1;
  }
}

static int32_t alts(rp_t *p) {
  int32_t a = gx_alt(p->b);
  for (;;) {
    if (gx_add(p->b, a, seq(p)) < 0) return -1;
    if (peek(p) != '|') return a;
    p->i++;
  }
}

/* Anything (search semantics around an unanchored pattern). */
static int32_t any_star(rp_t *p) {
  uint32_t nl = '\n';
  return gx_repeat(p->b, ranges_node(p, &nl, &nl, 1, true), 0, -1);
}

int32_t gram__regex_expr(gx_build_t *b, const char *re, size_t len, bool json_string, bool anchored) {
  if (len > GRAM_MAX_INPUT) return gx_fail(b, -1, GRAM_ELIMIT, "regex longer than %d bytes", GRAM_MAX_INPUT);
  rp_t p = {.b = b, .s = re, .n = len, .js = json_string};
  bool head = false, tail = false;
  if (p.n >= 1 && re[0] == '^') head = true, p.i = 1;
  else if (p.n >= 2 && re[0] == '\\' && re[1] == 'A') head = true, p.i = 2;
  size_t end = p.n;
  /* a trailing $ / \Z / \z that is not itself escaped */
  size_t bs = 0;
  if (end >= 1 && re[end - 1] == '$') {
    for (size_t j = end - 1; j > p.i && re[j - 1] == '\\'; j--) bs++;
    if (bs % 2 == 0) tail = true, end--;
  } else if (end >= 2 && re[end - 2] == '\\' && (re[end - 1] == 'Z' || re[end - 1] == 'z')) {
    for (size_t j = end - 2; j > p.i && re[j - 1] == '\\'; j--) bs++;
    if (bs % 2 == 0) tail = true, end -= 2;
  }
  if (end < p.i) end = p.i;
  p.n = end;
  int32_t x = alts(&p);
  if (x >= 0 && p.i < p.n) return fail_at(&p, p.i, "unbalanced ')'");
  if (x < 0) return -1;
  if (anchored || (head && tail)) return x;
  int32_t q = gx_seq(b);
  if (!head) gx_add(b, q, any_star(&p));
  gx_add(b, q, x);
  if (!tail) gx_add(b, q, any_star(&p));
  return b->failed ? -1 : q;
}

gram_t *gram_compile_regex(const char *re, size_t len, gram_err_t *err) {
  gx_build_t b;
  gx_init(&b, err);
  int32_t r = gx_rule_named(&b, "root", 4, 0);
  gram_t *g = gx_define(&b, r, gram__regex_expr(&b, re, len, false, true), 0) ? NULL : gx_finish(&b, r);
  gx_free(&b);
  return g;
}

gram_t *gram_compile_choice(const char *const *choices, const size_t *lens, size_t n, gram_err_t *err) {
  gx_build_t b;
  gx_init(&b, err);
  gram_t *g = NULL;
  if (n == 0) gx_fail(&b, -1, GRAM_EINVAL, "choice: the list is empty");
  int32_t a = gx_alt(&b);
  for (size_t i = 0; i < n && !b.failed; i++) {
    if (lens[i] > GRAM_MAX_INPUT) gx_fail(&b, -1, GRAM_ELIMIT, "choice %zu longer than %d bytes", i, GRAM_MAX_INPUT);
    gx_add(&b, a, gx_lit(&b, choices[i], lens[i]));
  }
  int32_t r = gx_rule_named(&b, "root", 4, 0);
  if (!gx_define(&b, r, a, 0)) g = gx_finish(&b, r);
  gx_free(&b);
  return g;
}
