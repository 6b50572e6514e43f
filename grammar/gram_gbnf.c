/* grammar/gram_gbnf.c — the GBNF compiler (llama.cpp's grammar format, as
 * its grammars/README.md documents it) into the shared expression builder.
 *
 *   rule    ::= name "::=" alts            (one per line; `root` starts)
 *   alts    ::= seq ("|" seq)*            (a new line may start with "|")
 *   seq     ::= (atom postfix*)*
 *   atom    ::= "literal" | [class] | [^class] | . | name | "(" alts ")"
 *   postfix ::= * | + | ? | {m} | {m,} | {m,n} | {,n}
 *
 * Newlines end a rule except inside parentheses and after "|"; # starts a
 * comment. Literals and classes take \n \r \t \\ \" \[ \] \- \xHH \uHHHH
 * \UHHHHHHHH; classes match code points (UTF-8 encoded). Errors carry the
 * byte offset. */
#include <string.h>

#include "grammar/gram_int.h"

typedef struct gp {
  gx_build_t *b;
  const char *s;
  size_t n, i;
  int depth;
} gp_t;

static int at_end(const gp_t *p) { return p->i >= p->n; }
static int peek(const gp_t *p) { return p->i < p->n ? (unsigned char)p->s[p->i] : -1; }

static void skip_space(gp_t *p, int newline_ok) {
  while (p->i < p->n) {
    char c = p->s[p->i];
    if (c == ' ' || c == '\t') p->i++;
    else if (c == '#') {
      while (p->i < p->n && p->s[p->i] != '\n' && p->s[p->i] != '\r') p->i++;
    } else if ((c == '\n' || c == '\r') && newline_ok) p->i++;
    else break;
  }
}

static int is_word(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int fail(gp_t *p, const char *msg) { return gx_fail(p->b, (int64_t)p->i, GRAM_EINVAL, "%s", msg); }

static int hex_digits(gp_t *p, int k, uint32_t *out) {
  uint32_t v = 0;
  for (int j = 0; j < k; j++) {
    int c = peek(p), d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return fail(p, "expected a hex digit in escape");
    v = v * 16 + (uint32_t)d;
    p->i++;
  }
  *out = v;
  return 0;
}

/* One character of a literal or class: a code point (escapes decoded) and
 * whether it was raw bytes we should copy (raw: a byte that is not UTF-8). */
static int read_char(gp_t *p, uint32_t *cp) {
  if (at_end(p)) return fail(p, "unexpected end of input");
  if (p->s[p->i] == '\\') {
    p->i++;
    int c = peek(p);
    p->i++;
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
      *cp = (uint32_t)c;
      return 0;
    case 'x': return hex_digits(p, 2, cp);
    case 'u': return hex_digits(p, 4, cp) ? -1 : (*cp >= 0xD800 && *cp <= 0xDFFF ? fail(p, "surrogate code point") : 0);
    case 'U':
      if (hex_digits(p, 8, cp)) return -1;
      return *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF) ? fail(p, "code point out of range") : 0;
    default: p->i--; return fail(p, "unknown escape");
    }
  }
  int k = utf8_decode(p->s + p->i, p->n - p->i, cp);
  if (k <= 0) return fail(p, "invalid UTF-8");
  p->i += (size_t)k;
  return 0;
}

static int32_t literal(gp_t *p) {
  p->i++; /* the quote */
  int32_t q = gx_seq(p->b);
  while (!p->b->failed) {
    if (at_end(p) || p->s[p->i] == '\n') return fail(p, "unterminated string literal");
    if (p->s[p->i] == '"') {
      p->i++;
      return q;
    }
    uint32_t cp;
    if (read_char(p, &cp)) return -1;
    gx_add(p->b, q, gx_codepoint(p->b, cp));
  }
  return -1;
}

#define MAX_CLASS 1024

static int32_t char_class(gp_t *p) {
  p->i++; /* [ */
  int negate = 0;
  if (peek(p) == '^') negate = 1, p->i++;
  uint32_t lo[MAX_CLASS], hi[MAX_CLASS];
  int n = 0;
  for (;;) {
    if (at_end(p) || p->s[p->i] == '\n') return fail(p, "unterminated character class");
    if (p->s[p->i] == ']') {
      p->i++;
      break;
    }
    if (n == MAX_CLASS) return fail(p, "character class too long");
    uint32_t a, z;
    if (read_char(p, &a)) return -1;
    z = a;
    if (peek(p) == '-' && p->i + 1 < p->n && p->s[p->i + 1] != ']') {
      p->i++;
      if (read_char(p, &z)) return -1;
      if (z < a) return fail(p, "character range out of order");
    }
    lo[n] = a, hi[n] = z, n++;
  }
  return gx_codepoints(p->b, lo, hi, n, negate);
}

static int read_int(gp_t *p, int32_t *v) {
  if (peek(p) < '0' || peek(p) > '9') return fail(p, "expected a number");
  int64_t x = 0;
  while (peek(p) >= '0' && peek(p) <= '9') {
    x = x * 10 + (peek(p) - '0');
    if (x > GRAM_MAX_REPEAT) return gx_fail(p->b, (int64_t)p->i, GRAM_ELIMIT, "repetition count above %d", GRAM_MAX_REPEAT);
    p->i++;
  }
  *v = (int32_t)x;
  return 0;
}

static int32_t alts(gp_t *p, int nested);

static int32_t atom(gp_t *p, int nested) {
  int c = peek(p);
  if (c == '"') return literal(p);
  if (c == '[') return char_class(p);
  if (c == '.') {
    p->i++;
    uint32_t lo = '\n', hi = '\n';
    return gx_codepoints(p->b, &lo, &hi, 1, true);
  }
  if (c == '(') {
    size_t at = p->i++;
    if (++p->depth > GRAM_MAX_DEPTH) return gx_fail(p->b, (int64_t)at, GRAM_ELIMIT, "groups nested deeper than %d", GRAM_MAX_DEPTH);
    skip_space(p, 1);
    int32_t x = alts(p, 1);
    skip_space(p, 1);
    if (x < 0) return -1;
    if (peek(p) != ')') return fail(p, "expected ')'");
    p->i++;
    p->depth--;
    return x;
  }
  if (is_word(c)) {
    size_t st = p->i;
    while (is_word(peek(p))) p->i++;
    int32_t r = gx_rule_named(p->b, p->s + st, p->i - st, (int64_t)st);
    return gx_ref(p->b, r);
  }
  if (c == '<') return fail(p, "token references (<...>) are not supported");
  return fail(p, "expected a literal, class, rule name or group");
}

static int32_t postfix(gp_t *p, int32_t x) {
  for (;;) {
    int c = peek(p);
    if (c == '*') x = gx_repeat(p->b, x, 0, -1);
    else if (c == '+') x = gx_repeat(p->b, x, 1, -1);
    else if (c == '?') x = gx_repeat(p->b, x, 0, 1);
    else if (c == '{') {
      size_t at = p->i++;
      int32_t m = 0, n = -1;
      skip_space(p, 0);
      if (peek(p) != ',' && read_int(p, &m)) return -1;
      skip_space(p, 0);
      if (peek(p) == ',') {
        p->i++;
        skip_space(p, 0);
        if (peek(p) != '}' && read_int(p, &n)) return -1;
      } else n = m;
      skip_space(p, 0);
      if (peek(p) != '}') return fail(p, "expected '}'");
      if (n >= 0 && n < m) return gx_fail(p->b, (int64_t)at, GRAM_EINVAL, "repetition {%d,%d}: max below min", m, n);
      x = gx_repeat(p->b, x, m, n);
    } else return x;
    p->i++;
  }
}

static int32_t seq(gp_t *p, int nested) {
  int32_t q = gx_seq(p->b);
  for (;;) {
    skip_space(p, nested);
    int c = peek(p);
    if (c < 0 || c == '|' || c == ')' || c == '\n' || c == '\r') return q;
    /* the next rule's "name ::=" (a rule may follow on the same line only
     * after a newline, but be forgiving) */
    if (is_word(c)) {
      size_t j = p->i;
      while (j < p->n && is_word((unsigned char)p->s[j])) j++;
      while (j < p->n && (p->s[j] == ' ' || p->s[j] == '\t')) j++;
      if (j + 3 <= p->n && !memcmp(p->s + j, "::=", 3)) return q;
    }
    int32_t x = atom(p, nested);
    if (x < 0) return -1;
    x = postfix(p, x);
    if (gx_add(p->b, q, x) < 0) return -1;
  }
}

/* At the end of a line outside parentheses: does the next non-blank line
 * continue this rule with "|"? Moves there if so. */
static int continues(gp_t *p) {
  size_t save = p->i;
  skip_space(p, 1);
  if (peek(p) == '|') return 1;
  p->i = save;
  return 0;
}

static int32_t alts(gp_t *p, int nested) {
  int32_t a = gx_alt(p->b);
  for (;;) {
    int32_t s = seq(p, nested);
    if (s < 0 || gx_add(p->b, a, s) < 0) return -1;
    skip_space(p, nested);
    if (peek(p) == '|' || (!nested && continues(p))) {
      p->i++;
      skip_space(p, 1);
      continue;
    }
    return a;
  }
}

gram_t *gram_compile_gbnf(const char *src, size_t len, gram_err_t *err) {
  gx_build_t b;
  gx_init(&b, err);
  gram_t *g = NULL;
  if (len > GRAM_MAX_INPUT) {
    gx_fail(&b, -1, GRAM_ELIMIT, "grammar text longer than %d bytes", GRAM_MAX_INPUT);
    goto out;
  }
  gp_t p = {.b = &b, .s = src, .n = len};
  for (;;) {
    skip_space(&p, 1);
    if (at_end(&p)) break;
    size_t st = p.i;
    while (is_word(peek(&p))) p.i++;
    if (p.i == st) {
      fail(&p, "expected a rule name");
      goto out;
    }
    int32_t r = gx_rule_named(&b, src + st, p.i - st, (int64_t)st);
    skip_space(&p, 0);
    if (p.i + 3 > p.n || memcmp(src + p.i, "::=", 3)) {
      fail(&p, "expected '::='");
      goto out;
    }
    p.i += 3;
    skip_space(&p, 1);
    int32_t body = alts(&p, 0);
    if (body < 0 || gx_define(&b, r, body, (int64_t)st)) goto out;
    skip_space(&p, 0);
    if (!at_end(&p) && peek(&p) != '\n' && peek(&p) != '\r') {
      fail(&p, peek(&p) == ')' ? "unbalanced ')'" : "expected the end of the rule");
      goto out;
    }
  }
  int32_t root = -1;
  for (int32_t i = 0; i < b.n_rules; i++)
    if (!strcmp(b.rules[i].name, "root") && b.rules[i].body >= 0) root = i;
  if (root < 0) {
    gx_fail(&b, -1, GRAM_EINVAL, "the grammar has no 'root' rule");
    goto out;
  }
  g = gx_finish(&b, root);
out:
  gx_free(&b);
  return g;
}
