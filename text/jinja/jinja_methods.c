/* text/jinja/jinja_methods.c — the Python methods templates call on values
 * ("a".strip(), s.split(","), d.items(), d.get(k, x), ...), loop.cycle(),
 * and the global functions: range (capped at 100000 items like jinja2's
 * sandbox), namespace, dict, raise_exception and strftime_now.
 *
 * Case mapping uses the C library's simple mappings in the C.UTF-8 locale:
 * Python's special cases that change length ('ß'.upper() == 'SS') are not
 * reproduced. See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wctype.h>

/* ---- case mapping ----------------------------------------------------------- */

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void utf8_init(void) { utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

static uint32_t to_upper(uint32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
  pthread_once(&utf8_once, utf8_init);
  return utf8_locale ? (uint32_t)towupper_l((wint_t)cp, utf8_locale) : cp;
}
static uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  pthread_once(&utf8_once, utf8_init);
  return utf8_locale ? (uint32_t)towlower_l((wint_t)cp, utf8_locale) : cp;
}
static int is_cased(uint32_t cp) { return to_upper(cp) != cp || to_lower(cp) != cp; }
static int is_alpha(uint32_t cp) {
  if (cp < 0x80) return ((cp | 32) - 'a') < 26u;
  pthread_once(&utf8_once, utf8_init);
  return utf8_locale ? iswalpha_l((wint_t)cp, utf8_locale) : 0;
}

/* The title filter splits words at runs of [-\s({[<]. */
static int title_sep(uint32_t cp) { return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jinja_isspace(cp); }

enum { PY_TITLE = 10 };

jv_t jinja__case(jinja_ctx_t *c, jv_t s, int mode) {
  jinja_buf_t b = {0};
  size_t i = 0;
  int prev_cased = 0, prev_sep = 1, first = 1;
  while (i < s.n) {
    uint32_t cp = jinja_utf8_next(s.s, s.n, &i), out = cp;
    switch (mode) {
    case JINJA_LOWER: out = to_lower(cp); break;
    case JINJA_UPPER: out = to_upper(cp); break;
    case JINJA_CAPITALIZE: out = first ? to_upper(cp) : to_lower(cp); break;
    case JINJA_TITLE: out = prev_sep ? to_upper(cp) : to_lower(cp); break;
    case PY_TITLE: out = prev_cased ? to_lower(cp) : to_upper(cp); break;
    }
    prev_sep = title_sep(cp);
    prev_cased = is_cased(cp);
    first = 0;
    jinja_utf8_put(c, &b, out);
  }
  return jv_strref(b.p ? b.p : "", b.len);
}

/* ---- str helpers ---------------------------------------------------------- */

static int in_chars(uint32_t cp, const jv_t *chars) {
  if (!chars) return jinja_isspace(cp);
  for (size_t i = 0; i < chars->n;)
    if (jinja_utf8_next(chars->s, chars->n, &i) == cp) return 1;
  return 0;
}

jv_t jinja__strip(jv_t s, const jv_t *chars, int which) {
  size_t start = 0, end = s.n;
  if (which & 1) {
    while (start < end) {
      size_t j = start;
      if (!in_chars(jinja_utf8_next(s.s, s.n, &j), chars)) break;
      start = j;
    }
  }
  if (which & 2) {
    size_t i = start, keep = start;
    while (i < end) {
      uint32_t cp = jinja_utf8_next(s.s, s.n, &i);
      if (!in_chars(cp, chars)) keep = i;
    }
    end = keep;
  }
  return jv_strref(s.s + start, end - start);
}

jv_t jinja__replace(jinja_ctx_t *c, jv_t s, jv_t old, jv_t new_, int64_t count) {
  jinja_buf_t b = {0};
  if (old.n == 0) { /* new before every character and at the end */
    size_t i = 0;
    int64_t done = 0;
    while (i <= s.n) {
      if (count < 0 || done < count) {
        jinja_buf_put(c, &b, new_.s, new_.n);
        done++;
      }
      if (i == s.n) break;
      size_t j = i;
      jinja_utf8_next(s.s, s.n, &j);
      jinja_buf_put(c, &b, s.s + i, j - i);
      i = j;
    }
    return jv_strref(b.p ? b.p : "", b.len);
  }
  size_t i = 0;
  int64_t done = 0;
  while (i < s.n) {
    const char *hit = (count < 0 || done < count) ? memmem(s.s + i, s.n - i, old.s, old.n) : NULL;
    if (!hit) break;
    size_t at = (size_t)(hit - s.s);
    jinja_buf_put(c, &b, s.s + i, at - i);
    jinja_buf_put(c, &b, new_.s, new_.n);
    i = at + old.n;
    done++;
  }
  jinja_buf_put(c, &b, s.s + i, s.n - i);
  return jv_strref(b.p ? b.p : "", b.len);
}

/* Copies digits of s[0:n] without the underscores Python allows between
 * digits; returns 0, or -1 on a misplaced underscore or a long string. */
static int clean_digits(const char *s, size_t n, char *out, size_t size) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '_') {
      int ok = i > 0 && i + 1 < n && strchr("0123456789abcdefABCDEF", s[i - 1]) && strchr("0123456789abcdefABCDEF", s[i + 1]);
      if (!ok) return -1;
      continue;
    }
    if (k + 1 >= size) return -1;
    out[k++] = s[i];
  }
  out[k] = 0;
  return 0;
}

int jinja__parse_number(jv_t s, int want_int, int base, jv_t *out) {
  jv_t t = jinja__strip(s, NULL, 3);
  char buf[128];
  if (t.n == 0 || clean_digits(t.s, t.n, buf, sizeof buf) < 0) return -1;
  char *end;
  if (want_int) {
    const char *p = buf;
    int b = base;
    size_t off = (*p == '+' || *p == '-') ? 1 : 0;
    if (p[off] == '0' && p[off + 1] && strchr("xXoObB", p[off + 1])) {
      int pb = (p[off + 1] | 32) == 'x' ? 16 : (p[off + 1] | 32) == 'o' ? 8 : 2;
      if (b != pb && b != 0) goto as_float;
      b = pb;
    }
    if (b == 0) b = 10;
    if (b == 10 || b == 2 || b == 8 || b == 16) {
      errno = 0;
      long long v = strtoll(p, &end, b);
      if (*end == 0 && end != p && errno == 0 && (b != 10 || !(p[off] == '0' && v != 0))) {
        *out = jv_int(v);
        return 0;
      }
      if (errno == ERANGE) return -1;
    }
  }
as_float:
  for (const char *p = buf; *p; p++)
    if (*p == 'x' || *p == 'X' || *p == 'p' || *p == 'P' || *p == '(') return -1;
  errno = 0;
  double d = strtod(buf, &end);
  if (*end != 0 || end == buf) return -1;
  if (want_int) {
    if (d != d || !(fabs(d) < 9.2e18)) return -1;
    *out = jv_int((int64_t)d);
  } else {
    *out = jv_float(d);
  }
  return 0;
}

/* ---- printf-style formatting (str % args) --------------------------------------- */

static void pad_put(jinja_ctx_t *c, jinja_buf_t *b, const char *s, size_t n, long width, int left) {
  long chars = (long)jinja_utf8_count(s, n);
  if (!left)
    for (long i = chars; i < width; i++) jinja_buf_putc(c, b, ' ');
  jinja_buf_put(c, b, s, n);
  if (left)
    for (long i = chars; i < width; i++) jinja_buf_putc(c, b, ' ');
}

jv_t jinja__format(jinja_ctx_t *c, jv_t fmt, jv_t args) {
  jinja_list_t one = {.n = 1, .cap = 1, .v = &args};
  int is_tuple = args.kind == JK_LIST && args.list->tuple;
  jinja_list_t *list = is_tuple ? args.list : &one;
  /* a lone argument with __getitem__ (dict, list, Undefined) may go unused */
  int mapping = !is_tuple && (args.kind == JK_DICT || args.kind == JK_LIST || args.kind == JK_UNDEF);
  uint32_t next = 0;
  jinja_buf_t b = {0};
  for (size_t i = 0; i < fmt.n; i++) {
    if (fmt.s[i] != '%') {
      jinja_buf_putc(c, &b, fmt.s[i]);
      continue;
    }
    char spec[32] = "%";
    size_t k = 1;
    int left = 0;
    long width = 0;
    i++;
    while (i < fmt.n && strchr("-+ 0#", fmt.s[i]) && k < 8) {
      if (fmt.s[i] == '-') left = 1;
      spec[k++] = fmt.s[i++];
    }
    while (i < fmt.n && fmt.s[i] >= '0' && fmt.s[i] <= '9' && k < 16) width = width * 10 + (fmt.s[i] - '0'), spec[k++] = fmt.s[i++];
    long prec = -1;
    if (i < fmt.n && fmt.s[i] == '.') {
      spec[k++] = fmt.s[i++];
      prec = 0;
      while (i < fmt.n && fmt.s[i] >= '0' && fmt.s[i] <= '9' && k < 24) prec = prec * 10 + (fmt.s[i] - '0'), spec[k++] = fmt.s[i++];
    }
    if (i >= fmt.n) jinja_fail(c, -EINVAL, "incomplete format");
    char conv = fmt.s[i];
    if (conv == '%') {
      jinja_buf_putc(c, &b, '%');
      continue;
    }
    if (conv == '(' || conv == '*') jinja_fail(c, -ENOTSUP, "'%%(name)' and '*' formats are not supported");
    if (width > 4096 || prec > 4096) jinja_fail(c, -E2BIG, "format width too large");
    if (next >= list->n) jinja_fail(c, -EINVAL, "not enough arguments for format string");
    jv_t v = list->v[next++];
    if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v);
    char tmp[4200];
    if (conv == 's' || conv == 'r') {
      jinja_buf_t t = {0};
      if (conv == 's') jinja_str(c, &t, v);
      else jinja_repr(c, &t, v);
      size_t n = t.len;
      if (prec >= 0) n = jinja_utf8_offset(t.p ? t.p : "", t.len, (size_t)prec);
      pad_put(c, &b, t.p ? t.p : "", n, width, left);
    } else if (strchr("diouxX", conv) && conv != 'u') {
      int64_t x;
      if (v.kind == JK_INT || v.kind == JK_BOOL) x = v.kind == JK_INT ? v.i : v.b;
      else if (v.kind == JK_FLOAT && (conv == 'd' || conv == 'i') && fabs(v.f) < 9.2e18) x = (int64_t)v.f;
      else jinja_fail(c, -EINVAL, "%%%c format: a number is required, not %s", conv, jinja_type_name(v));
      spec[k++] = 'l';
      spec[k++] = 'l';
      spec[k++] = conv == 'i' ? 'd' : conv;
      spec[k] = 0;
      snprintf(tmp, sizeof tmp, spec, (long long)x);
      jinja_buf_put(c, &b, tmp, strlen(tmp));
    } else if (strchr("eEfFgG", conv)) {
      double x;
      if (v.kind == JK_FLOAT) x = v.f;
      else if (v.kind == JK_INT || v.kind == JK_BOOL) x = v.kind == JK_INT ? (double)v.i : v.b;
      else jinja_fail(c, -EINVAL, "must be real number, not %s", jinja_type_name(v));
      spec[k++] = conv;
      spec[k] = 0;
      snprintf(tmp, sizeof tmp, spec, x);
      jinja_buf_put(c, &b, tmp, strlen(tmp));
    } else if (conv == 'c') {
      jinja_buf_t t = {0};
      if (v.kind == JK_INT && v.i >= 0 && v.i <= 0x10ffff) jinja_utf8_put(c, &t, (uint32_t)v.i);
      else if (v.kind == JK_STR && jinja_utf8_count(v.s, v.n) == 1) jinja_buf_put(c, &t, v.s, v.n);
      else jinja_fail(c, -EINVAL, "%%c requires int or char");
      pad_put(c, &b, t.p, t.len, width, left);
    } else {
      jinja_fail(c, -EINVAL, "unsupported format character '%c'", conv);
    }
  }
  if (next < list->n && !mapping) jinja_fail(c, -EINVAL, "not all arguments converted during string formatting");
  return jv_strref(b.p ? b.p : "", b.len);
}

/* ---- methods ------------------------------------------------------------------ */

static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith",
                                          "endswith", "upper", "lower", "title", "capitalize", "replace",
                                          "find", "rfind", "count", "join", "isdigit", "isalpha", "isalnum",
                                          "isspace", "isupper", "islower", "splitlines", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};
static const char *const list_methods[] = {"index", "count", NULL};
static const char *const loop_methods[] = {"cycle", NULL};

static const char *find_in(const char *const *names, const char *name, size_t n) {
  for (size_t i = 0; names[i]; i++)
    if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) return names[i];
  return NULL;
}

jv_t jinja_bind_method(jinja_ctx_t *c, jv_t obj, const char *name, size_t n) {
  const char *m = NULL;
  switch (obj.kind) {
  case JK_STR: m = find_in(str_methods, name, n); break;
  case JK_DICT: m = find_in(dict_methods, name, n); break;
  case JK_LIST: m = find_in(list_methods, name, n); break;
  case JK_LOOP: m = find_in(loop_methods, name, n); break;
  default: break;
  }
  if (!m) return jv_undef_named(name, n, JU_ATTR, obj.kind);
  jinja_method_t *bm = jinja_alloc(c, sizeof *bm);
  bm->self = obj;
  bm->name = m;
  bm->len = (uint32_t)n;
  jv_t v = {.kind = JK_METHOD};
  v.method = bm;
  return v;
}

static void max_args(jinja_ctx_t *c, const jinja_args_t *a, uint32_t max, const char *name) {
  if (a->n_pos + a->n_kw > max) jinja_fail(c, -EINVAL, "%s() takes at most %u argument(s)", name, max);
}

static jv_t str_arg(jinja_ctx_t *c, const jinja_args_t *a, uint32_t i, const char *kw, const char *method) {
  jv_t *p = jinja_arg(a, i, kw);
  if (!p) jinja_fail(c, -EINVAL, "%s() is missing an argument", method);
  if (p->kind == JK_UNDEF) jinja_fail_undefined(c, *p);
  if (p->kind != JK_STR) jinja_fail(c, -EINVAL, "%s() argument must be str, not %s", method, jinja_type_name(*p));
  return *p;
}

/* Python's str.split / rsplit. */
static jv_t split(jinja_ctx_t *c, jv_t s, const jinja_args_t *a, int from_right) {
  jv_t sep = jv_none(), *p = jinja_arg(a, 0, "sep");
  if (p) sep = *p;
  jv_t *mp = jinja_arg(a, 1, "maxsplit");
  int64_t maxsplit = mp && mp->kind == JK_INT ? mp->i : -1;
  jinja_list_t *l = jinja_list_new(c, 0);
  if (sep.kind == JK_STR) {
    if (sep.n == 0) jinja_fail(c, -EINVAL, "empty separator");
    if (!from_right || maxsplit < 0) {
      size_t i = 0;
      int64_t done = 0;
      for (;;) {
        const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s.s + i, s.n - i, sep.s, sep.n) : NULL;
        if (!hit) break;
        jinja_list_push(c, l, jv_strref(s.s + i, (size_t)(hit - s.s) - i));
        i = (size_t)(hit - s.s) + sep.n;
        done++;
      }
      jinja_list_push(c, l, jv_strref(s.s + i, s.n - i));
      return jv_list(l);
    }
    size_t end = s.n;
    int64_t done = 0;
    jinja_list_t *rev = jinja_list_new(c, 0);
    while (done < maxsplit) {
      size_t k = end;
      int found = 0;
      while (k >= sep.n) {
        if (memcmp(s.s + k - sep.n, sep.s, sep.n) == 0) {
          found = 1;
          break;
        }
        k--;
      }
      if (!found) break;
      jinja_list_push(c, rev, jv_strref(s.s + k, end - k));
      end = k - sep.n;
      done++;
    }
    jinja_list_push(c, rev, jv_strref(s.s, end));
    for (uint32_t i = rev->n; i-- > 0;) jinja_list_push(c, l, rev->v[i]);
    return jv_list(l);
  }
  if (sep.kind != JK_NONE) jinja_fail(c, -EINVAL, "must be str or None, not %s", jinja_type_name(sep));
  /* whitespace runs; maxsplit leaves the rest (stripped on the split side) */
  size_t n = jinja_utf8_count(s.s, s.n);
  size_t *off = jinja_alloc(c, (n + 1) * sizeof *off);
  uint8_t *sp = jinja_alloc(c, n + 1);
  for (size_t i = 0, k = 0; k <= n; k++) {
    off[k] = i;
    if (k < n) sp[k] = (uint8_t)jinja_isspace(jinja_utf8_next(s.s, s.n, &i));
  }
  int64_t done = 0;
  if (!from_right || maxsplit < 0) {
    size_t k = 0;
    for (;;) {
      while (k < n && sp[k]) k++;
      if (k == n) break;
      if (maxsplit >= 0 && done == maxsplit) { /* the rest, trailing whitespace kept */
        jinja_list_push(c, l, jv_strref(s.s + off[k], off[n] - off[k]));
        break;
      }
      size_t st = k;
      while (k < n && !sp[k]) k++;
      jinja_list_push(c, l, jv_strref(s.s + off[st], off[k] - off[st]));
      done++;
    }
    return jv_list(l);
  }
  jinja_list_t *rev = jinja_list_new(c, 0);
  size_t k = n;
  for (;;) {
    while (k > 0 && sp[k - 1]) k--;
    if (k == 0) break;
    if (done == maxsplit) { /* the rest, leading whitespace kept */
      jinja_list_push(c, rev, jv_strref(s.s, off[k]));
      break;
    }
    size_t e = k;
    while (k > 0 && !sp[k - 1]) k--;
    jinja_list_push(c, rev, jv_strref(s.s + off[k], off[e] - off[k]));
    done++;
  }
  for (uint32_t i = rev->n; i-- > 0;) jinja_list_push(c, l, rev->v[i]);
  return jv_list(l);
}

static int affix(jinja_ctx_t *c, jv_t s, const jinja_args_t *a, int suffix) {
  max_args(c, a, 1, suffix ? "endswith" : "startswith");
  jv_t *p = jinja_arg(a, 0, NULL);
  if (!p) jinja_fail(c, -EINVAL, "startswith/endswith need an argument");
  jinja_list_t one = {.n = 1, .cap = 1, .v = p};
  jinja_list_t *opts = p->kind == JK_LIST && p->list->tuple ? p->list : &one;
  for (uint32_t i = 0; i < opts->n; i++) {
    jv_t x = opts->v[i];
    if (x.kind != JK_STR) jinja_fail(c, -EINVAL, "startswith/endswith need a str or a tuple of str");
    if (x.n <= s.n && memcmp(suffix ? s.s + s.n - x.n : s.s, x.s, x.n) == 0) return 1;
  }
  return 0;
}

static jv_t str_method(jinja_ctx_t *c, jv_t s, const char *m, const jinja_args_t *a) {
#define IS(x) (strcmp(m, x) == 0)
  if (IS("strip") || IS("lstrip") || IS("rstrip")) {
    max_args(c, a, 1, m);
    jv_t *chars = jinja_arg(a, 0, NULL);
    if (chars && chars->kind != JK_STR && chars->kind != JK_NONE)
      jinja_fail(c, -EINVAL, "%s arg must be None or str", m);
    return jinja__strip(s, chars && chars->kind == JK_STR ? chars : NULL, IS("strip") ? 3 : IS("lstrip") ? 1 : 2);
  }
  if (IS("split") || IS("rsplit")) {
    max_args(c, a, 2, m);
    return split(c, s, a, IS("rsplit"));
  }
  if (IS("splitlines")) {
    jinja_list_t *l = jinja_list_new(c, 0);
    size_t start = 0;
    for (size_t i = 0; i < s.n; i++) {
      if (s.s[i] != '\n' && s.s[i] != '\r') continue;
      jinja_list_push(c, l, jv_strref(s.s + start, i - start));
      if (s.s[i] == '\r' && i + 1 < s.n && s.s[i + 1] == '\n') i++;
      start = i + 1;
    }
    if (start < s.n) jinja_list_push(c, l, jv_strref(s.s + start, s.n - start));
    return jv_list(l);
  }
  if (IS("startswith") || IS("endswith")) return jv_bool(affix(c, s, a, IS("endswith")));
  if (IS("upper")) return jinja__case(c, s, JINJA_UPPER);
  if (IS("lower")) return jinja__case(c, s, JINJA_LOWER);
  if (IS("title")) return jinja__case(c, s, PY_TITLE);
  if (IS("capitalize")) return jinja__case(c, s, JINJA_CAPITALIZE);
  if (IS("replace")) {
    max_args(c, a, 3, m);
    jv_t *count = jinja_arg(a, 2, "count");
    return jinja__replace(c, s, str_arg(c, a, 0, NULL, m), str_arg(c, a, 1, NULL, m),
                          count && count->kind == JK_INT ? count->i : -1);
  }
  if (IS("find") || IS("rfind") || IS("count")) {
    max_args(c, a, 1, m);
    jv_t sub = str_arg(c, a, 0, NULL, m);
    if (IS("count")) {
      if (sub.n == 0) return jv_int((int64_t)jinja_utf8_count(s.s, s.n) + 1);
      int64_t k = 0;
      for (const char *p = s.s, *e = s.s + s.n; (p = memmem(p, (size_t)(e - p), sub.s, sub.n)); p += sub.n) k++;
      return jv_int(k);
    }
    const char *hit = NULL;
    if (IS("find")) {
      hit = sub.n ? memmem(s.s, s.n, sub.s, sub.n) : s.s;
    } else {
      for (size_t k = s.n + 1; k-- > 0 && !hit;)
        if (k + sub.n <= s.n && memcmp(s.s + k, sub.s, sub.n) == 0) hit = s.s + k;
    }
    return jv_int(hit ? (int64_t)jinja_utf8_count(s.s, (size_t)(hit - s.s)) : -1);
  }
  if (IS("join")) {
    max_args(c, a, 1, m);
    jv_t *p = jinja_arg(a, 0, NULL);
    if (!p) jinja_fail(c, -EINVAL, "join() needs an argument");
    jinja_list_t *l = jinja_iterate(c, *p);
    jinja_buf_t b = {0};
    for (uint32_t i = 0; i < l->n; i++) {
      if (l->v[i].kind != JK_STR)
        jinja_fail(c, -EINVAL, "sequence item %u: expected str instance, %s found", i, jinja_type_name(l->v[i]));
      if (i) jinja_buf_put(c, &b, s.s, s.n);
      jinja_buf_put(c, &b, l->v[i].s, l->v[i].n);
    }
    return jv_strref(b.p ? b.p : "", b.len);
  }
  /* is* predicates: false on "", else every character qualifies (isupper/
   * islower: some cased character and none of the other case). */
  int all = s.n > 0, cased = 0, wrong_case = 0;
  for (size_t i = 0; i < s.n;) {
    uint32_t cp = jinja_utf8_next(s.s, s.n, &i);
    int digit = cp >= '0' && cp <= '9';
    if (IS("isdigit")) all &= digit;
    else if (IS("isalpha")) all &= is_alpha(cp);
    else if (IS("isalnum")) all &= digit || is_alpha(cp);
    else if (IS("isspace")) all &= jinja_isspace(cp);
    if (is_cased(cp)) {
      cased = 1;
      if (IS("isupper") ? to_upper(cp) != cp : to_lower(cp) != cp) wrong_case = 1;
    }
  }
  if (IS("isupper") || IS("islower")) return jv_bool(cased && !wrong_case);
  return jv_bool(all);
#undef IS
}

jv_t jinja_call_method(jinja_ctx_t *c, const jinja_method_t *bm, const jinja_args_t *a) {
  jv_t self = bm->self;
  const char *m = bm->name;
  if (self.kind == JK_STR) return str_method(c, self, m, a);
  if (self.kind == JK_DICT) {
    jinja_dict_t *d = self.dict;
    if (!strcmp(m, "get")) {
      max_args(c, a, 2, m);
      jv_t *k = jinja_arg(a, 0, NULL);
      if (!k) jinja_fail(c, -EINVAL, "get expected at least 1 argument, got 0");
      jv_t *v = jinja_dict_get(d, *k), *dflt = jinja_arg(a, 1, NULL);
      return v ? *v : dflt ? *dflt : jv_none();
    }
    max_args(c, a, 0, m);
    jinja_list_t *l = jinja_list_new(c, d->n);
    for (uint32_t i = 0; i < d->n; i++) {
      if (!strcmp(m, "keys")) {
        l->v[i] = d->k[i];
      } else if (!strcmp(m, "values")) {
        l->v[i] = d->v[i];
      } else {
        jinja_list_t *pair = jinja_list_new(c, 2);
        pair->tuple = 1;
        pair->v[0] = d->k[i];
        pair->v[1] = d->v[i];
        pair->n = 2;
        l->v[i] = jv_list(pair);
      }
    }
    l->n = d->n;
    return jv_list(l);
  }
  if (self.kind == JK_LIST) {
    max_args(c, a, 1, m);
    jv_t *x = jinja_arg(a, 0, NULL);
    if (!x) jinja_fail(c, -EINVAL, "%s() takes exactly one argument", m);
    int64_t k = 0;
    for (uint32_t i = 0; i < self.list->n; i++) {
      if (!jinja_equal(self.list->v[i], *x)) continue;
      if (!strcmp(m, "index")) return jv_int(i);
      k++;
    }
    if (!strcmp(m, "index")) jinja_fail(c, -EINVAL, "value is not in list");
    return jv_int(k);
  }
  if (self.kind == JK_LOOP) {
    if (a->n_pos == 0) jinja_fail(c, -EINVAL, "no items for cycling given");
    return a->pos[self.loop->index0 % a->n_pos];
  }
  jinja_fail(c, -EINVAL, "unknown method %s", m);
}

/* ---- global functions -------------------------------------------------------------- */

static const char *const global_names[JINJA_FN_COUNT] = {"range", "namespace", "dict", "raise_exception",
                                                         "strftime_now"};

int jinja_global_id(const char *name, size_t n) {
  for (int i = 0; i < JINJA_FN_COUNT; i++)
    if (strlen(global_names[i]) == n && memcmp(global_names[i], name, n) == 0) return i;
  return -1;
}

static int64_t int_arg(jinja_ctx_t *c, jv_t v, const char *fn) {
  if (v.kind == JK_INT) return v.i;
  if (v.kind == JK_BOOL) return v.b;
  if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v);
  jinja_fail(c, -EINVAL, "'%s' object cannot be interpreted as an integer in %s()", jinja_type_name(v), fn);
}

/* dict(mapping?, **kwargs) as a fresh dict. */
static jinja_dict_t *dict_from_args(jinja_ctx_t *c, const jinja_args_t *a, const char *fn) {
  jinja_dict_t *d = jinja_dict_new(c, a->n_kw);
  if (a->n_pos > 1) jinja_fail(c, -EINVAL, "%s() takes at most 1 positional argument", fn);
  if (a->n_pos == 1) {
    jv_t m = a->pos[0];
    if (m.kind == JK_DICT || m.kind == JK_NS) {
      for (uint32_t i = 0; i < m.dict->n; i++) jinja_dict_set(c, d, m.dict->k[i], m.dict->v[i]);
    } else {
      jinja_list_t *l = jinja_iterate(c, m);
      for (uint32_t i = 0; i < l->n; i++) {
        if (l->v[i].kind != JK_LIST || l->v[i].list->n != 2)
          jinja_fail(c, -EINVAL, "%s() sequence elements must be pairs", fn);
        jinja_dict_set(c, d, l->v[i].list->v[0], l->v[i].list->v[1]);
      }
    }
  }
  for (uint32_t i = 0; i < a->n_kw; i++) jinja_dict_set(c, d, jv_strref(a->kw_names[i], a->kw_lens[i]), a->kw[i]);
  return d;
}

jv_t jinja_call_global(jinja_ctx_t *c, int id, const jinja_args_t *a) {
  switch (id) {
  case JINJA_FN_RANGE: {
    if (a->n_kw || a->n_pos < 1 || a->n_pos > 3) jinja_fail(c, -EINVAL, "range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a->n_pos == 1) {
      stop = int_arg(c, a->pos[0], "range");
    } else {
      start = int_arg(c, a->pos[0], "range");
      stop = int_arg(c, a->pos[1], "range");
      if (a->n_pos == 3) step = int_arg(c, a->pos[2], "range");
    }
    if (step == 0) jinja_fail(c, -EINVAL, "range() arg 3 must not be zero");
    double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                            : ceil(((double)start - (double)stop) / -(double)step);
    if (count < 0) count = 0;
    if (count > 100000)
      jinja_fail(c, -E2BIG, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jinja_list_t *l = jinja_list_new(c, (uint32_t)count);
    for (int64_t i = 0; i < (int64_t)count; i++) l->v[l->n++] = jv_int(start + i * step);
    return jv_list(l);
  }
  case JINJA_FN_NAMESPACE: {
    jv_t v = {.kind = JK_NS};
    v.dict = dict_from_args(c, a, "namespace");
    return v;
  }
  case JINJA_FN_DICT: return jv_dict(dict_from_args(c, a, "dict"));
  case JINJA_FN_RAISE: {
    jv_t *msg = jinja_arg(a, 0, "message");
    jv_t s = msg ? jinja_to_string(c, *msg) : jv_strref("", 0);
    jinja_fail(c, -EBADMSG, "%.*s", (int)s.n, s.s);
  }
  case JINJA_FN_STRFTIME: {
    jv_t *fmt = jinja_arg(a, 0, "format");
    if (!fmt || fmt->kind != JK_STR) jinja_fail(c, -EINVAL, "strftime_now needs a format string");
    char *f = jinja_strdup(c, fmt->s, fmt->n);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[512];
    size_t n = fmt->n ? strftime(out, sizeof out, f, &tm) : 0;
    return jv_str(c, out, n);
  }
  default: jinja_fail(c, -EINVAL, "unknown function %d", id);
  }
}
