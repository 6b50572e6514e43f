/* text/jinja/jinja_value.c — the interpreter's values: construction, lists and
 * dicts, Python's truth, equality and ordering, str() and repr(), and the
 * UTF-8 helpers strings need (Python counts and slices code points).
 * See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "base/utf8.h"

jv_t jv_str(jinja_ctx_t *c, const char *s, size_t n) {
  if (n > UINT32_MAX) jinja_fail(c, -E2BIG, "string longer than 4 GiB");
  return jv_strref(jinja_strdup(c, s, n), n);
}

jv_t jv_undef_named(const char *name, size_t n, int sub, int obj_kind) {
  jv_t v = {.kind = JK_UNDEF, .sub = (uint8_t)sub, .obj = (uint8_t)obj_kind, .n = (uint32_t)n};
  v.s = name;
  return v;
}

jinja_list_t *jinja_list_new(jinja_ctx_t *c, uint32_t cap) {
  jinja_list_t *l = jinja_alloc(c, sizeof *l);
  l->cap = cap ? cap : 1; /* never a NULL array, even empty */
  l->v = jinja_alloc(c, l->cap * sizeof *l->v);
  return l;
}

void jinja_list_push(jinja_ctx_t *c, jinja_list_t *l, jv_t v) {
  if (l->n == l->cap) {
    if (l->cap >= (1u << 30)) jinja_fail(c, -E2BIG, "list too long");
    uint32_t cap = l->cap ? l->cap * 2 : 4;
    jv_t *nv = jinja_alloc(c, cap * sizeof *nv);
    if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = v;
}

jinja_dict_t *jinja_dict_new(jinja_ctx_t *c, uint32_t cap) {
  jinja_dict_t *d = jinja_alloc(c, sizeof *d);
  d->cap = cap ? cap : 1; /* never NULL arrays, even empty */
  d->k = jinja_alloc(c, d->cap * sizeof *d->k);
  d->v = jinja_alloc(c, d->cap * sizeof *d->v);
  return d;
}

jv_t *jinja_dict_get(jinja_dict_t *d, jv_t k) {
  for (uint32_t i = 0; i < d->n; i++)
    if (jinja_equal(d->k[i], k)) return &d->v[i];
  return NULL;
}

jv_t *jinja_dict_get_str(jinja_dict_t *d, const char *s, size_t n) {
  for (uint32_t i = 0; i < d->n; i++)
    if (d->k[i].kind == JK_STR && d->k[i].n == n && memcmp(d->k[i].s, s, n) == 0) return &d->v[i];
  return NULL;
}

void jinja_dict_set(jinja_ctx_t *c, jinja_dict_t *d, jv_t k, jv_t v) {
  jv_t *old = jinja_dict_get(d, k);
  if (old) {
    *old = v;
    return;
  }
  if (d->n == d->cap) {
    if (d->cap >= (1u << 28)) jinja_fail(c, -E2BIG, "dict too large");
    uint32_t cap = d->cap ? d->cap * 2 : 4;
    jv_t *nk = jinja_alloc(c, cap * sizeof *nk), *nv = jinja_alloc(c, cap * sizeof *nv);
    if (d->n) {
      memcpy(nk, d->k, d->n * sizeof *nk);
      memcpy(nv, d->v, d->n * sizeof *nv);
    }
    d->k = nk;
    d->v = nv;
    d->cap = cap;
  }
  d->k[d->n] = k;
  d->v[d->n] = v;
  d->n++;
}

/* ---- truth, equality, order -------------------------------------------- */

int jinja_truthy(jv_t v) {
  switch (v.kind) {
  case JK_UNDEF: case JK_NONE: return 0;
  case JK_BOOL: return v.b;
  case JK_INT: return v.i != 0;
  case JK_FLOAT: return v.f != 0.0;
  case JK_STR: return v.n != 0;
  case JK_LIST: return v.list->n != 0;
  case JK_DICT: return v.dict->n != 0;
  default: return 1;
  }
}

static int is_number(jv_t v) { return v.kind == JK_BOOL || v.kind == JK_INT || v.kind == JK_FLOAT; }

static int num_cmp(jv_t a, jv_t b) {
  if (a.kind != JK_FLOAT && b.kind != JK_FLOAT) {
    int64_t x = a.kind == JK_BOOL ? a.b : a.i, y = b.kind == JK_BOOL ? b.b : b.i;
    return (x > y) - (x < y);
  }
  double x = a.kind == JK_FLOAT ? a.f : a.kind == JK_BOOL ? a.b : (double)a.i;
  double y = b.kind == JK_FLOAT ? b.f : b.kind == JK_BOOL ? b.b : (double)b.i;
  return (x > y) - (x < y); /* NaN compares "equal" here; see jinja_equal */
}

int jinja_equal(jv_t a, jv_t b) {
  if (is_number(a) && is_number(b)) {
    if ((a.kind == JK_FLOAT && a.f != a.f) || (b.kind == JK_FLOAT && b.f != b.f)) return 0;
    return num_cmp(a, b) == 0;
  }
  if (a.kind != b.kind) return 0;
  switch (a.kind) {
  case JK_UNDEF: case JK_NONE: return 1;
  case JK_STR: return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
  case JK_LIST:
    if (a.list->n != b.list->n || a.list->tuple != b.list->tuple) return 0;
    for (uint32_t i = 0; i < a.list->n; i++)
      if (!jinja_equal(a.list->v[i], b.list->v[i])) return 0;
    return 1;
  case JK_DICT:
    if (a.dict->n != b.dict->n) return 0;
    for (uint32_t i = 0; i < a.dict->n; i++) {
      jv_t *o = jinja_dict_get(b.dict, a.dict->k[i]);
      if (!o || !jinja_equal(a.dict->v[i], *o)) return 0;
    }
    return 1;
  case JK_NS: return a.dict == b.dict;
  case JK_LOOP: return a.loop == b.loop;
  case JK_FUNC: return a.fn == b.fn;
  case JK_MACRO: return a.macro == b.macro;
  case JK_METHOD: return a.method == b.method;
  default: return 0;
  }
}

int jinja_compare(jinja_ctx_t *c, jv_t a, jv_t b) {
  if (a.kind == JK_UNDEF) jinja_fail_undefined(c, a);
  if (b.kind == JK_UNDEF) jinja_fail_undefined(c, b);
  if (is_number(a) && is_number(b)) return num_cmp(a, b);
  if (a.kind == JK_STR && b.kind == JK_STR) {
    size_t n = a.n < b.n ? a.n : b.n;
    int r = n ? memcmp(a.s, b.s, n) : 0; /* UTF-8 byte order is code point order */
    if (r) return r;
    return (a.n > b.n) - (a.n < b.n);
  }
  if (a.kind == JK_LIST && b.kind == JK_LIST && a.list->tuple == b.list->tuple) {
    uint32_t n = a.list->n < b.list->n ? a.list->n : b.list->n;
    for (uint32_t i = 0; i < n; i++)
      if (!jinja_equal(a.list->v[i], b.list->v[i])) return jinja_compare(c, a.list->v[i], b.list->v[i]);
    return (a.list->n > b.list->n) - (a.list->n < b.list->n);
  }
  jinja_fail(c, -EINVAL, "'<' not supported between instances of '%s' and '%s'", jinja_type_name(a),
             jinja_type_name(b));
}

const char *jinja_type_name(jv_t v) {
  switch (v.kind) {
  case JK_UNDEF: return "Undefined";
  case JK_NONE: return "NoneType";
  case JK_BOOL: return "bool";
  case JK_INT: return "int";
  case JK_FLOAT: return "float";
  case JK_STR: return "str";
  case JK_LIST: return v.list->tuple ? "tuple" : "list";
  case JK_DICT: return "dict";
  case JK_NS: return "Namespace";
  case JK_LOOP: return "LoopContext";
  case JK_FUNC: return "function";
  case JK_METHOD: return "builtin_function_or_method";
  case JK_MACRO: return "Macro";
  default: return "object";
  }
}

void jinja_fail_undefined(jinja_ctx_t *c, jv_t v) {
  /* the owner's type from its kind alone (a tuple reads as "list" here) */
  static const char *const names[] = {"Undefined", "None", "bool", "int", "float", "str", "list", "dict",
                                      "Namespace", "LoopContext", "function", "builtin_function_or_method", "Macro"};
  const char *owner = v.obj < sizeof names / sizeof *names ? names[v.obj] : "object";
  switch (v.sub) {
  case JU_NAME: jinja_fail(c, -EINVAL, "'%.*s' is undefined", (int)v.n, v.s);
  case JU_ATTR: jinja_fail(c, -EINVAL, "'%s object' has no attribute '%.*s'", owner, (int)v.n, v.s);
  case JU_ITEM: jinja_fail(c, -EINVAL, "%s object has no element %.*s", owner, (int)v.n, v.s);
  default: jinja_fail(c, -EINVAL, "undefined value used");
  }
}

/* ---- str() and repr() --------------------------------------------------- */

/* Python's str.isprintable() for one code point, approximated by the
 * non-printable classes that occur in text: controls, separators other than
 * the space, format characters, surrogates and private use. */
static int is_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return 0;
  if (cp < 0x600) return 1;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61c || cp == 0x6dd || cp == 0x70f || cp == 0x1680 ||
      cp == 0x180e || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
      (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || (cp >= 0xd800 && cp <= 0xf8ff) ||
      cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0xe0000 && cp <= 0xe007f) ||
      cp >= 0xf0000)
    return 0;
  return 1;
}

static void repr_str(jinja_ctx_t *c, jinja_buf_t *b, const char *s, size_t n) {
  int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
  char q = has_sq && !has_dq ? '"' : '\'';
  jinja_buf_putc(c, b, q);
  size_t i = 0;
  while (i < n) {
    size_t start = i;
    uint32_t cp = jinja_utf8_next(s, n, &i);
    if (cp == (uint32_t)q || cp == '\\') {
      jinja_buf_putc(c, b, '\\');
      jinja_buf_putc(c, b, (char)cp);
    } else if (cp == '\n') {
      jinja_buf_put(c, b, "\\n", 2);
    } else if (cp == '\r') {
      jinja_buf_put(c, b, "\\r", 2);
    } else if (cp == '\t') {
      jinja_buf_put(c, b, "\\t", 2);
    } else if (!is_printable(cp)) {
      if (cp <= 0xff) jinja_buf_printf(c, b, "\\x%02x", cp);
      else if (cp <= 0xffff) jinja_buf_printf(c, b, "\\u%04x", cp);
      else jinja_buf_printf(c, b, "\\U%08x", cp);
    } else {
      jinja_buf_put(c, b, s + start, i - start);
    }
  }
  jinja_buf_putc(c, b, q);
}

static void str_or_repr(jinja_ctx_t *c, jinja_buf_t *b, jv_t v, int repr) {
  char tmp[40];
  jinja_step(c);
  switch (v.kind) {
  case JK_UNDEF:
    if (repr) jinja_buf_put(c, b, "Undefined", 9);
    return;
  case JK_NONE: jinja_buf_put(c, b, "None", 4); return;
  case JK_BOOL: v.b ? jinja_buf_put(c, b, "True", 4) : jinja_buf_put(c, b, "False", 5); return;
  case JK_INT: jinja_buf_printf(c, b, "%" PRId64, v.i); return;
  case JK_FLOAT:
    jinja_float_repr(v.f, tmp);
    jinja_buf_put(c, b, tmp, strlen(tmp));
    return;
  case JK_STR:
    if (repr) repr_str(c, b, v.s, v.n);
    else jinja_buf_put(c, b, v.s, v.n);
    return;
  case JK_LIST: {
    if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "values nested too deeply");
    jinja_buf_putc(c, b, v.list->tuple ? '(' : '[');
    for (uint32_t i = 0; i < v.list->n; i++) {
      if (i) jinja_buf_put(c, b, ", ", 2);
      str_or_repr(c, b, v.list->v[i], 1);
    }
    if (v.list->tuple && v.list->n == 1) jinja_buf_putc(c, b, ',');
    jinja_buf_putc(c, b, v.list->tuple ? ')' : ']');
    c->depth--;
    return;
  }
  case JK_DICT:
  case JK_NS: {
    if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "values nested too deeply");
    if (v.kind == JK_NS) jinja_buf_put(c, b, "<Namespace ", 11);
    jinja_buf_putc(c, b, '{');
    for (uint32_t i = 0; i < v.dict->n; i++) {
      if (i) jinja_buf_put(c, b, ", ", 2);
      str_or_repr(c, b, v.dict->k[i], 1);
      jinja_buf_put(c, b, ": ", 2);
      str_or_repr(c, b, v.dict->v[i], 1);
    }
    jinja_buf_putc(c, b, '}');
    if (v.kind == JK_NS) jinja_buf_putc(c, b, '>');
    c->depth--;
    return;
  }
  default:
    jinja_fail(c, -EINVAL, "cannot convert a %s to a string", jinja_type_name(v));
  }
}

void jinja_str(jinja_ctx_t *c, jinja_buf_t *b, jv_t v) { str_or_repr(c, b, v, 0); }
void jinja_repr(jinja_ctx_t *c, jinja_buf_t *b, jv_t v) { str_or_repr(c, b, v, 1); }

jv_t jinja_to_string(jinja_ctx_t *c, jv_t v) {
  if (v.kind == JK_STR) return v;
  if (v.kind == JK_UNDEF) return jv_strref("", 0);
  jinja_buf_t b = {0};
  jinja_str(c, &b, v);
  return jv_strref(b.p ? b.p : "", b.len);
}

/* ---- UTF-8 ------------------------------------------------------------- */

uint32_t jinja_utf8_next(const char *s, size_t n, size_t *i) {
  uint32_t cp = 0xfffd; /* an ill-formed byte: one U+FFFD each */
  const int len = utf8_decode(s + *i, n - *i, &cp);
  *i += len > 0 ? (size_t)len : 1;
  return cp;
}

size_t jinja_utf8_count(const char *s, size_t n) {
  size_t i = 0, count = 0;
  while (i < n) {
    if ((unsigned char)s[i] < 0x80) i++;
    else jinja_utf8_next(s, n, &i);
    count++;
  }
  return count;
}

size_t jinja_utf8_offset(const char *s, size_t n, size_t k) {
  size_t i = 0;
  while (k-- && i < n) {
    if ((unsigned char)s[i] < 0x80) i++;
    else jinja_utf8_next(s, n, &i);
  }
  return i;
}

void jinja_utf8_put(jinja_ctx_t *c, jinja_buf_t *b, uint32_t cp) {
  char t[4];
  if (cp < 0x80) jinja_buf_putc(c, b, (char)cp);
  else jinja_buf_put(c, b, t, (size_t)utf8_encode(cp, t));
}

int jinja_isspace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
