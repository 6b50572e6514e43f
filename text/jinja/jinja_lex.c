/* text/jinja/jinja_lex.c — template text to tokens, following jinja2's lexer:
 *
 *   - newlines (\r\n, \r) become \n and one trailing newline is dropped
 *     (keep_trailing_newline=False);
 *   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`,
 *     `-#}` all whitespace after it;
 *   - trim_blocks: a block or comment tag eats the one newline after it
 *     (not with `+%}`);
 *   - lstrip_blocks: spaces and tabs from the start of a line up to a block or
 *     comment tag are dropped (not with `{%+`, never before `{{`);
 *   - `{% raw %}...{% endraw %}` is text;
 *   - inside tags: names, strings (Python escapes), integers, floats and
 *     operators; `}}` / `%}` inside brackets are operators.
 * See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
  jinja_ctx_t *c;
  const char *s; /* normalised source */
  size_t n, pos;
  int line;
  jinja_tok_t *toks;
  size_t n_toks, cap;
  char balance[256]; /* expected closing brackets inside a tag */
  int n_balance;
} lexer_t;

static jinja_tok_t *emit(lexer_t *L, int kind, const char *s, size_t n) {
  if (L->n_toks == L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 256;
    jinja_tok_t *t = jinja_alloc(L->c, cap * sizeof *t);
    if (L->n_toks) memcpy(t, L->toks, L->n_toks * sizeof *t);
    L->toks = t;
    L->cap = cap;
  }
  jinja_tok_t *t = &L->toks[L->n_toks++];
  memset(t, 0, sizeof *t);
  t->kind = (uint8_t)kind;
  t->line = L->line;
  t->s = s;
  t->n = (uint32_t)n;
  return t;
}

static void count_lines(lexer_t *L, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (L->s[i] == '\n') L->line++;
}

/* Python whitespace (\s) at s[i], or 0; *len gets its byte length. */
static int space_at(const char *s, size_t n, size_t i, size_t *len) {
  unsigned char ch = (unsigned char)s[i];
  if (ch < 0x80) {
    *len = 1;
    return jinja_isspace(ch);
  }
  size_t j = i;
  uint32_t cp = jinja_utf8_next(s, n, &j);
  *len = j - i;
  return jinja_isspace(cp);
}

static size_t skip_space(const char *s, size_t n, size_t i) {
  size_t len;
  while (i < n && space_at(s, n, i, &len)) i += len;
  return i;
}

/* Length of text[0:n] without trailing whitespace (Python's rstrip()). */
static size_t rstrip_len(const char *s, size_t n) {
  size_t i = 0, keep = 0, len;
  while (i < n) {
    int sp = space_at(s, n, i, &len);
    i += len;
    if (!sp) keep = i;
  }
  return keep;
}

/* Emits the text before a tag after whitespace control: sign is the
 * character after the tag opener ('-', '+' or 0); lstrip says whether
 * lstrip_blocks applies to this kind of tag. */
static void emit_text(lexer_t *L, size_t from, size_t to, int sign, int lstrip, int line_starting) {
  const char *t = L->s + from;
  size_t n = to - from;
  if (sign == '-') {
    n = rstrip_len(t, n);
  } else if (sign != '+' && lstrip) {
    size_t l_pos = n;
    while (l_pos > 0 && t[l_pos - 1] != '\n') l_pos--;
    if ((l_pos > 0 || line_starting) && l_pos < n) {
      size_t i = l_pos, len;
      while (i < n && space_at(t, n, i, &len)) i += len;
      if (i == n) n = l_pos;
    }
  }
  if (n) emit(L, JT_TEXT, t, n);
  count_lines(L, from, to);
}

/* Matches `{%[-+]?\s*word\s*(-%}\s*|%}...)` at pos for raw/endraw; returns
 * the position after the tag or 0. trim: the plain `%}` eats one newline. */
static size_t match_word_tag(lexer_t *L, size_t pos, const char *word, int trim, int *sign) {
  const char *s = L->s;
  size_t n = L->n, i = pos + 2, wl = strlen(word);
  *sign = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) *sign = s[i++];
  i = skip_space(s, n, i);
  if (n - i < wl || memcmp(s + i, word, wl) != 0) return 0;
  i = skip_space(s, n, i + wl);
  if (i + 3 <= n && s[i] == '-' && s[i + 1] == '%' && s[i + 2] == '}') return skip_space(s, n, i + 3);
  if (trim && i + 3 <= n && s[i] == '+' && s[i + 1] == '%' && s[i + 2] == '}') return i + 3;
  if (i + 2 <= n && s[i] == '%' && s[i + 1] == '}') {
    i += 2;
    if (trim && i < n && s[i] == '\n') i++;
    return i;
  }
  return 0;
}

/* Decodes a string literal's escapes as Python's unicode-escape does. */
static void decode_string(lexer_t *L, jinja_tok_t *t, const char *s, size_t n) {
  jinja_buf_t b = {0};
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 >= n) {
      jinja_buf_putc(L->c, &b, s[i]);
      continue;
    }
    char e = s[++i];
    uint32_t cp = 0;
    int hex = 0;
    switch (e) {
    case '\n': continue;
    case '\\': case '\'': case '"': jinja_buf_putc(L->c, &b, e); continue;
    case 'a': jinja_buf_putc(L->c, &b, '\a'); continue;
    case 'b': jinja_buf_putc(L->c, &b, '\b'); continue;
    case 'f': jinja_buf_putc(L->c, &b, '\f'); continue;
    case 'n': jinja_buf_putc(L->c, &b, '\n'); continue;
    case 'r': jinja_buf_putc(L->c, &b, '\r'); continue;
    case 't': jinja_buf_putc(L->c, &b, '\t'); continue;
    case 'v': jinja_buf_putc(L->c, &b, '\v'); continue;
    case 'x': hex = 2; break;
    case 'u': hex = 4; break;
    case 'U': hex = 8; break;
    case 'N': jinja_fail(L->c, -EINVAL, "line %d: \\N{...} escapes are not supported", t->line);
    default:
      if (e >= '0' && e <= '7') {
        int k = 0;
        while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), k++;
        i--;
        jinja_utf8_put(L->c, &b, cp);
      } else {
        jinja_buf_putc(L->c, &b, '\\');
        jinja_buf_putc(L->c, &b, e);
      }
      continue;
    }
    for (int k = 0; k < hex; k++) {
      char h = i + 1 + (size_t)k < n ? s[i + 1 + (size_t)k] : 0;
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) jinja_fail(L->c, -EINVAL, "line %d: truncated \\%c escape in a string", t->line, e);
      cp = cp * 16 + (uint32_t)d;
    }
    i += (size_t)hex;
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      jinja_fail(L->c, -EINVAL, "line %d: escape \\%c%.*s is not a character", t->line, e, hex, s + i + 1 - hex);
    jinja_utf8_put(L->c, &b, cp);
  }
  t->s = b.p ? b.p : "";
  t->n = (uint32_t)b.len;
}

static int is_name_start(unsigned char ch) { return ch == '_' || (unsigned)((ch | 32) - 'a') < 26u || ch >= 0x80; }
static int is_name_char(unsigned char ch) { return is_name_start(ch) || (unsigned)(ch - '0') < 10u; }
static int is_digit(char ch) { return (unsigned char)(ch - '0') < 10u; }

/* Digits with single underscores between them, from i; returns the end. */
static size_t scan_digits(const char *s, size_t n, size_t i) {
  if (i >= n || !is_digit(s[i])) return i;
  while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) i++;
  return i;
}

static void lex_number(lexer_t *L) {
  const char *s = L->s;
  size_t n = L->n, start = L->pos, i = scan_digits(s, n, start), end = i;
  int is_float = 0;
  if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
    end = scan_digits(s, n, i + 1);
    is_float = 1;
  }
  if (end < n && (s[end] | 32) == 'e') {
    size_t j = end + 1;
    if (j < n && (s[j] == '+' || s[j] == '-')) j++;
    size_t k = scan_digits(s, n, j);
    if (k > j) {
      end = k;
      is_float = 1;
    }
  }
  if (start > 0 && s[start - 1] == '.') is_float = 0, end = i; /* (?<!\.) */
  char tmp[128];
  size_t k = 0;
  int base = 10;
  if (!is_float && s[start] == '0' && start + 1 < n && strchr("bBoOxX", s[start + 1]) && s[start + 1]) {
    base = (s[start + 1] | 32) == 'b' ? 2 : (s[start + 1] | 32) == 'o' ? 8 : 16;
    end = start + 2;
    while (end < n && (s[end] == '_' || (base == 16 ? strchr("0123456789abcdefABCDEF", s[end]) != NULL
                                                     : (unsigned char)(s[end] - '0') < (unsigned)base)) && s[end])
      end++;
    start += 2;
  }
  for (size_t j = start; j < end && k + 1 < sizeof tmp; j++)
    if (s[j] != '_') tmp[k++] = s[j];
  tmp[k] = 0;
  if (end - start >= sizeof tmp) jinja_fail(L->c, -EINVAL, "line %d: number literal too long", L->line);
  jinja_tok_t *t = emit(L, is_float ? JT_FLOAT : JT_INT, s + L->pos, end - L->pos);
  errno = 0;
  if (is_float) {
    t->f = strtod(tmp, NULL);
  } else {
    t->i = strtoll(tmp, NULL, base);
    if (errno == ERANGE) jinja_fail(L->c, -EINVAL, "line %d: integer literal out of range", L->line);
  }
  L->pos = end;
}

static const char *const operators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~",
                                        "[",  "]",  "(",  ")",  "{",  "}",  "=", ".", ":", "|", ",", ";",
                                        ">",  "<"};

/* Tokens of one {% %} or {{ }} tag until its end; returns 1 when the end
 * consumed a trailing newline. */
static int lex_tag(lexer_t *L, int block) {
  const char *s = L->s;
  size_t n = L->n;
  L->n_balance = 0;
  for (;;) {
    size_t i = L->pos;
    if (i >= n) jinja_fail(L->c, -EINVAL, "line %d: unexpected end of template inside a tag", L->line);
    if (L->n_balance == 0) {
      char close = block ? '%' : '}';
      if (block && s[i] == '+' && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
        emit(L, JT_BLOCK_END, s + i, 3);
        L->pos = i + 3;
        return 0;
      }
      if (s[i] == '-' && i + 2 < n && s[i + 1] == close && s[i + 2] == '}') {
        emit(L, block ? JT_BLOCK_END : JT_VAR_END, s + i, 3);
        size_t j = skip_space(s, n, i + 3);
        count_lines(L, i, j);
        L->pos = j;
        return j > i + 3 && s[j - 1] == '\n';
      }
      if (s[i] == close && i + 1 < n && s[i + 1] == '}') {
        emit(L, block ? JT_BLOCK_END : JT_VAR_END, s + i, 2);
        L->pos = i + 2;
        if (block && L->pos < n && s[L->pos] == '\n') {
          L->pos++;
          L->line++;
          return 1;
        }
        return 0;
      }
    }
    size_t len;
    if (space_at(s, n, i, &len)) {
      size_t j = skip_space(s, n, i);
      count_lines(L, i, j);
      L->pos = j;
      continue;
    }
    unsigned char ch = (unsigned char)s[i];
    if (is_digit((char)ch)) {
      lex_number(L);
      continue;
    }
    if (is_name_start(ch)) {
      size_t j = i + 1;
      while (j < n && is_name_char((unsigned char)s[j])) j++;
      emit(L, JT_NAME, s + i, j - i);
      L->pos = j;
      continue;
    }
    if (ch == '\'' || ch == '"') {
      size_t j = i + 1;
      while (j < n && s[j] != (char)ch) j += s[j] == '\\' ? 2 : 1;
      if (j >= n) jinja_fail(L->c, -EINVAL, "line %d: unterminated string", L->line);
      jinja_tok_t *t = emit(L, JT_STRING, NULL, 0);
      decode_string(L, t, s + i + 1, j - i - 1);
      count_lines(L, i, j);
      L->pos = j + 1;
      continue;
    }
    size_t k;
    for (k = 0; k < sizeof operators / sizeof *operators; k++) {
      size_t ol = strlen(operators[k]);
      if (n - i >= ol && memcmp(s + i, operators[k], ol) == 0) break;
    }
    if (k == sizeof operators / sizeof *operators)
      jinja_fail(L->c, -EINVAL, "line %d: unexpected character '%c'", L->line, ch);
    const char *op = operators[k];
    if (op[1] == 0 && strchr("([{", op[0])) {
      if (L->n_balance == (int)sizeof L->balance) jinja_fail(L->c, -E2BIG, "line %d: brackets nested too deeply", L->line);
      L->balance[L->n_balance++] = op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}';
    } else if (op[1] == 0 && strchr(")]}", op[0])) {
      if (L->n_balance == 0 || L->balance[L->n_balance - 1] != op[0])
        jinja_fail(L->c, -EINVAL, "line %d: unexpected '%c'", L->line, op[0]);
      L->n_balance--;
    }
    emit(L, JT_OP, s + i, strlen(op));
    L->pos = i + strlen(op);
  }
}

/* A comment from L->pos; returns 1 when its end consumed a newline. */
static int lex_comment(lexer_t *L) {
  const char *s = L->s;
  size_t n = L->n;
  for (size_t i = L->pos; i + 1 < n; i++) {
    size_t end = 0;
    int nl = 0;
    if ((s[i] == '+' || s[i] == '-') && i + 2 < n && s[i + 1] == '#' && s[i + 2] == '}') {
      end = i + 3;
      if (s[i] == '-') end = skip_space(s, n, end);
      nl = end > i + 3 && s[end - 1] == '\n';
    } else if (s[i] == '#' && s[i + 1] == '}') {
      end = i + 2;
      if (end < n && s[end] == '\n') end++, nl = 1;
    }
    if (end) {
      count_lines(L, L->pos, end);
      L->pos = end;
      return nl;
    }
  }
  jinja_fail(L->c, -EINVAL, "line %d: missing end of comment tag", L->line);
}

static int lex_raw(lexer_t *L, int line_starting) {
  for (size_t i = L->pos; i + 1 < L->n; i++) {
    if (L->s[i] != '{' || L->s[i + 1] != '%') continue;
    int sign;
    size_t end = match_word_tag(L, i, "endraw", 1, &sign);
    if (!end) continue;
    emit_text(L, L->pos, i, sign, 1, line_starting);
    count_lines(L, i, end);
    L->pos = end;
    return L->s[end - 1] == '\n';
  }
  jinja_fail(L->c, -EINVAL, "line %d: missing end of raw directive", L->line);
}

/* \r\n and \r to \n; one trailing newline dropped. */
static char *normalise(jinja_ctx_t *c, const char *src, size_t len, size_t *n_out) {
  char *d = jinja_alloc(c, len + 1);
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r') {
      d[n++] = '\n';
      if (i + 1 < len && src[i + 1] == '\n') i++;
    } else {
      d[n++] = src[i];
    }
  }
  if (n && d[n - 1] == '\n') n--;
  d[n] = 0;
  *n_out = n;
  return d;
}

void jinja_lex(jinja_ctx_t *c, const char *src, size_t len, jinja_tok_t **out, size_t *n_out) {
  lexer_t L = {.c = c, .line = 1};
  L.s = normalise(c, src, len, &L.n);
  const char *s = L.s;
  size_t n = L.n;
  int line_starting = 1;
  while (L.pos < n) {
    size_t t = L.pos;
    while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '%' || s[t + 1] == '{' || s[t + 1] == '#'))) t++;
    if (t + 1 >= n) {
      emit_text(&L, L.pos, n, 0, 0, 0);
      break;
    }
    char kind = s[t + 1];
    int sign = t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
    if (kind == '%') {
      int raw_sign;
      size_t raw_end = match_word_tag(&L, t, "raw", 0, &raw_sign);
      if (raw_end) {
        emit_text(&L, L.pos, t, raw_sign, 1, line_starting);
        count_lines(&L, t, raw_end);
        L.pos = raw_end;
        line_starting = lex_raw(&L, s[raw_end - 1] == '\n');
        continue;
      }
    }
    emit_text(&L, L.pos, t, sign, kind != '{', line_starting);
    L.pos = t + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      line_starting = lex_comment(&L);
    } else {
      emit(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, s + t, 2);
      line_starting = lex_tag(&L, kind == '%');
    }
  }
  emit(&L, JT_EOF, NULL, 0);
  *out = L.toks;
  *n_out = L.n_toks;
}
