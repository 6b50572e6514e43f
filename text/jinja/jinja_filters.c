/* text/jinja/jinja_filters.c — Jinja's filters and tests, with jinja2 3.1's
 * semantics (and Hugging Face's `tojson`: json.dumps(x, ensure_ascii=False,
 * indent=None, separators=None, sort_keys=False), not Jinja's HTML-safe one).
 * Generators (select, map, ...) are evaluated eagerly into lists.
 * See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
  F_ABS, F_CAPITALIZE, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST, F_FLOAT, F_INDENT, F_INT, F_ITEMS,
  F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE,
  F_REVERSE, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE,
  F_UPPER, F_COUNT_
};
static const char *const filter_names[F_COUNT_] = {
    "abs", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "indent", "int", "items",
    "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
    "reverse", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique",
    "upper"};

enum {
  T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_EQ2, T_ESCAPED, T_EVEN, T_FALSE,
  T_FLOAT, T_GE, T_GE2, T_GT, T_GT2, T_GREATERTHAN, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LE2, T_LOWER,
  T_LT, T_LT2, T_LESSTHAN, T_MAPPING, T_NE, T_NE2, T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING,
  T_TRUE, T_UNDEFINED, T_UPPER, T_COUNT_
};
static const char *const test_names[T_COUNT_] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even", "false",
    "float", "ge", ">=", "gt", ">", "greaterthan", "in", "integer", "iterable", "le", "<=", "lower",
    "lt", "<", "lessthan", "mapping", "ne", "!=", "none", "number", "odd", "sameas", "sequence", "string",
    "true", "undefined", "upper"};

static int find_name(const char *const *names, int count, const char *name, size_t n) {
  for (int i = 0; i < count; i++)
    if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) return i;
  return -1;
}

int jinja_filter_id(const char *name, size_t n) { return find_name(filter_names, F_COUNT_, name, n); }
int jinja_test_id(const char *name, size_t n) { return find_name(test_names, T_COUNT_, name, n); }

static void check_args(jinja_ctx_t *c, const jinja_args_t *a, uint32_t max, const char *what, const char *name) {
  if (a->n_pos > max)
    jinja_fail(c, -EINVAL, "%s '%s' takes at most %u positional argument(s), got %u", what, name, max, a->n_pos);
}

static jv_t arg_or(const jinja_args_t *a, uint32_t i, const char *name, jv_t dflt) {
  jv_t *p = jinja_arg(a, i, name);
  return p ? *p : dflt;
}

static jv_t need_str(jinja_ctx_t *c, jv_t v, const char *what) {
  if (v.kind != JK_STR) jinja_fail(c, -EINVAL, "%s must be a string, not %s", what, jinja_type_name(v));
  return v;
}

/* ---- strings ------------------------------------------------------------ */

static jv_t html_escape(jinja_ctx_t *c, jv_t v) {
  v = jinja_to_string(c, v);
  jinja_buf_t b = {0};
  for (uint32_t i = 0; i < v.n; i++) {
    switch (v.s[i]) {
    case '&': jinja_buf_put(c, &b, "&amp;", 5); break;
    case '<': jinja_buf_put(c, &b, "&lt;", 4); break;
    case '>': jinja_buf_put(c, &b, "&gt;", 4); break;
    case '"': jinja_buf_put(c, &b, "&#34;", 5); break;
    case '\'': jinja_buf_put(c, &b, "&#39;", 5); break;
    default: jinja_buf_putc(c, &b, v.s[i]);
    }
  }
  return jv_strref(b.p ? b.p : "", b.len);
}

static jv_t do_indent(jinja_ctx_t *c, jv_t s, const jinja_args_t *a) {
  jv_t width = arg_or(a, 0, "width", jv_int(4));
  int first = jinja_truthy(arg_or(a, 1, "first", jv_bool(0)));
  int blank = jinja_truthy(arg_or(a, 2, "blank", jv_bool(0)));
  jinja_buf_t ind = {0};
  if (width.kind == JK_STR) jinja_buf_put(c, &ind, width.s, width.n);
  else if (width.kind == JK_INT) for (int64_t i = 0; i < width.i && i < 1024; i++) jinja_buf_putc(c, &ind, ' ');
  else jinja_fail(c, -EINVAL, "indent width must be an int or a string");
  s = jinja_to_string(c, s);
  /* Python: lines = (s + "\n").splitlines(); the first as it is, the others
   * indented unless empty (all of them with blank=True). */
  jinja_buf_t src = {0}, out = {0};
  jinja_buf_put(c, &src, s.s, s.n);
  jinja_buf_putc(c, &src, '\n');
  size_t start = 0;
  for (size_t i = 0; i < src.len; i++) {
    if (src.p[i] != '\n' && src.p[i] != '\r') continue;
    size_t end = i;
    if (src.p[i] == '\r' && i + 1 < src.len && src.p[i + 1] == '\n') i++;
    if (start == 0) {
      if (first) jinja_buf_put(c, &out, ind.p, ind.len);
    } else {
      jinja_buf_putc(c, &out, '\n');
      if (end > start || blank) jinja_buf_put(c, &out, ind.p, ind.len);
    }
    jinja_buf_put(c, &out, src.p + start, end - start);
    start = i + 1;
  }
  return jv_strref(out.p ? out.p : "", out.len);
}

static jv_t do_tojson(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  jinja_json_opts_t o = {.indent = -1};
  o.ensure_ascii = jinja_truthy(arg_or(a, 0, "ensure_ascii", jv_bool(0)));
  jv_t indent = arg_or(a, 1, "indent", jv_none());
  jv_t seps = arg_or(a, 2, "separators", jv_none());
  o.sort_keys = jinja_truthy(arg_or(a, 3, "sort_keys", jv_bool(0)));
  check_args(c, a, 4, "filter", "tojson");
  if (indent.kind == JK_INT || indent.kind == JK_BOOL) {
    int64_t k = indent.kind == JK_INT ? indent.i : indent.b;
    o.indent = k < 0 ? 0 : k > 64 ? 64 : (int)k;
  } else if (indent.kind == JK_STR) {
    o.indent = 0;
    o.indent_str = indent.s;
    o.indent_len = indent.n;
  } else if (indent.kind != JK_NONE) {
    jinja_fail(c, -EINVAL, "tojson indent must be an int, a string or none");
  }
  o.item_sep = o.indent >= 0 ? "," : ", ";
  o.item_sep_len = strlen(o.item_sep);
  o.key_sep = ": ";
  o.key_sep_len = 2;
  if (seps.kind == JK_LIST && seps.list->n == 2 && seps.list->v[0].kind == JK_STR && seps.list->v[1].kind == JK_STR) {
    o.item_sep = seps.list->v[0].s;
    o.item_sep_len = seps.list->v[0].n;
    o.key_sep = seps.list->v[1].s;
    o.key_sep_len = seps.list->v[1].n;
  } else if (seps.kind != JK_NONE) {
    jinja_fail(c, -EINVAL, "tojson separators must be a pair of strings");
  }
  jinja_buf_t b = {0};
  jinja_tojson(c, &b, v, &o);
  return jv_strref(b.p ? b.p : "", b.len);
}

/* ---- sequences ---------------------------------------------------------- */

/* Jinja's attribute getter: "a.b.0" looked up part by part with getitem. */
static jv_t get_attr_path(jinja_ctx_t *c, jv_t item, jv_t path) {
  need_str(c, path, "attribute");
  size_t start = 0;
  for (size_t i = 0; i <= path.n; i++) {
    if (i < path.n && path.s[i] != '.') continue;
    const char *part = path.s + start;
    size_t len = i - start;
    jv_t key = jv_strref(part, len);
    int all_digits = len > 0;
    for (size_t k = 0; k < len; k++) all_digits &= part[k] >= '0' && part[k] <= '9';
    if (all_digits && len < 18) key = jv_int(strtoll(part, NULL, 10));
    item = jinja_getitem(c, item, key);
    start = i + 1;
  }
  return item;
}

static int is_case_fold(jv_t v) { return v.kind == JK_STR; }

/* The sort key Jinja uses when case_sensitive is false: strings lowered. */
static jv_t sort_key(jinja_ctx_t *c, jv_t item, jv_t attribute, int case_sensitive) {
  if (attribute.kind != JK_NONE) item = get_attr_path(c, item, attribute);
  if (!case_sensitive && is_case_fold(item)) item = jinja__case(c, item, JINJA_LOWER);
  return item;
}

static jv_t do_minmax(jinja_ctx_t *c, jv_t v, const jinja_args_t *a, int want_max) {
  int cs = jinja_truthy(arg_or(a, 0, "case_sensitive", jv_bool(0)));
  jv_t attr = arg_or(a, 1, "attribute", jv_none());
  jinja_list_t *l = jinja_iterate(c, v);
  if (!l->n) return jv_undef_named("No aggregated item, sequence was empty.", 39, JU_PLAIN, 0);
  uint32_t best = 0;
  jv_t bk = sort_key(c, l->v[0], attr, cs);
  for (uint32_t i = 1; i < l->n; i++) {
    jv_t k = sort_key(c, l->v[i], attr, cs);
    int r = jinja_compare(c, k, bk);
    if (want_max ? r > 0 : r < 0) best = i, bk = k;
  }
  return l->v[best];
}

/* src's items ordered by keys[i] (one per item), as Python's sorted():
 * stable, and reverse keeps equal items in their order. A new list. */
static jv_t sorted_by(jinja_ctx_t *c, const jinja_list_t *src, const jv_t *keys, int reverse) {
  uint32_t n = src->n;
  jinja_list_t *l = jinja_list_new(c, n);
  /* stable insertion sort (Python's sort is stable; lists here are small) */
  uint32_t *idx = jinja_alloc(c, (n + 1) * sizeof *idx);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t j = i;
    while (j > 0) {
      int r = jinja_compare(c, keys[idx[j - 1]], keys[i]);
      if (reverse ? r >= 0 : r <= 0) break;
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = i;
    jinja_step(c);
  }
  for (uint32_t i = 0; i < n; i++) l->v[i] = src->v[idx[i]];
  l->n = n;
  return jv_list(l);
}

static jv_t do_sort(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  int reverse = jinja_truthy(arg_or(a, 0, "reverse", jv_bool(0)));
  int cs = jinja_truthy(arg_or(a, 1, "case_sensitive", jv_bool(0)));
  jv_t attr = arg_or(a, 2, "attribute", jv_none());
  jinja_list_t *src = jinja_iterate(c, v);
  jv_t *keys = jinja_alloc(c, (src->n + 1) * sizeof *keys);
  for (uint32_t i = 0; i < src->n; i++) keys[i] = sort_key(c, src->v[i], attr, cs);
  return sorted_by(c, src, keys, reverse);
}

static jv_t do_unique(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  int cs = jinja_truthy(arg_or(a, 0, "case_sensitive", jv_bool(0)));
  jv_t attr = arg_or(a, 1, "attribute", jv_none());
  jinja_list_t *src = jinja_iterate(c, v), *l = jinja_list_new(c, src->n), *seen = jinja_list_new(c, src->n);
  for (uint32_t i = 0; i < src->n; i++) {
    jv_t k = sort_key(c, src->v[i], attr, cs);
    int dup = 0;
    for (uint32_t j = 0; j < seen->n && !dup; j++) dup = jinja_equal(seen->v[j], k);
    if (dup) continue;
    seen->v[seen->n++] = k;
    l->v[l->n++] = src->v[i];
  }
  return jv_list(l);
}

/* select/reject/selectattr/rejectattr: keep items whose (attribute's) test
 * result equals `want`; with no test name, the truth value. */
static jv_t select_items(jinja_ctx_t *c, jv_t v, const jinja_args_t *a, int by_attr, int want) {
  if (!jinja_truthy(v)) return jv_list(jinja_list_new(c, 0)); /* jinja2: `if value:` */
  jinja_list_t *src = jinja_iterate(c, v), *out = jinja_list_new(c, src->n);
  uint32_t first_test = by_attr ? 1 : 0;
  if (by_attr && a->n_pos < 1) jinja_fail(c, -EINVAL, "selectattr/rejectattr need an attribute name");
  int test = -1;
  if (a->n_pos > first_test) {
    jv_t name = need_str(c, a->pos[first_test], "test name");
    test = jinja_test_id(name.s, name.n);
    if (test < 0) jinja_fail(c, -EINVAL, "no test named '%.*s'", (int)name.n, name.s);
  }
  jinja_args_t targs = {0};
  if (a->n_pos > first_test + 1) {
    targs.pos = a->pos + first_test + 1;
    targs.n_pos = a->n_pos - first_test - 1;
  }
  for (uint32_t i = 0; i < src->n; i++) {
    jv_t x = by_attr ? get_attr_path(c, src->v[i], a->pos[0]) : src->v[i];
    int r = test < 0 ? jinja_truthy(x) : jinja_apply_test(c, test, x, &targs);
    if (r == want) out->v[out->n++] = src->v[i];
  }
  return jv_list(out);
}

static jv_t do_map(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  if (!jinja_truthy(v)) return jv_list(jinja_list_new(c, 0)); /* jinja2: `if value:` */
  jinja_list_t *src = jinja_iterate(c, v), *out = jinja_list_new(c, src->n);
  jv_t *attr = jinja_arg(a, UINT32_MAX, "attribute");
  if (attr) {
    jv_t dflt = arg_or(a, UINT32_MAX, "default", jv_undef());
    for (uint32_t i = 0; i < src->n; i++) {
      jv_t x = get_attr_path(c, src->v[i], *attr);
      out->v[out->n++] = x.kind == JK_UNDEF && jinja_arg(a, UINT32_MAX, "default") ? dflt : x;
    }
    return jv_list(out);
  }
  if (a->n_pos < 1) jinja_fail(c, -EINVAL, "map needs a filter name or attribute=");
  jv_t name = need_str(c, a->pos[0], "filter name");
  int id = jinja_filter_id(name.s, name.n);
  if (id < 0) jinja_fail(c, -EINVAL, "no filter named '%.*s'", (int)name.n, name.s);
  jinja_args_t fargs = *a;
  fargs.pos++;
  fargs.n_pos--;
  for (uint32_t i = 0; i < src->n; i++) out->v[out->n++] = jinja_apply_filter(c, id, src->v[i], &fargs);
  return jv_list(out);
}

static jv_t do_join(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  jv_t sep = jinja_to_string(c, arg_or(a, 0, "d", jv_strref("", 0)));
  jv_t attr = arg_or(a, 1, "attribute", jv_none());
  jinja_list_t *l = jinja_iterate(c, v);
  jinja_buf_t b = {0};
  for (uint32_t i = 0; i < l->n; i++) {
    if (i) jinja_buf_put(c, &b, sep.s, sep.n);
    jinja_str(c, &b, attr.kind == JK_NONE ? l->v[i] : get_attr_path(c, l->v[i], attr));
  }
  return jv_strref(b.p ? b.p : "", b.len);
}

static jv_t do_items(jinja_ctx_t *c, jv_t v) {
  if (v.kind == JK_UNDEF) return jv_list(jinja_list_new(c, 0));
  if (v.kind != JK_DICT) jinja_fail(c, -EINVAL, "Can only get item pairs from a mapping.");
  jinja_list_t *l = jinja_list_new(c, v.dict->n);
  for (uint32_t i = 0; i < v.dict->n; i++) {
    jinja_list_t *pair = jinja_list_new(c, 2);
    pair->tuple = 1;
    pair->v[0] = v.dict->k[i];
    pair->v[1] = v.dict->v[i];
    pair->n = 2;
    l->v[l->n++] = jv_list(pair);
  }
  return jv_list(l);
}

/* dictsort(case_sensitive=false, by='key', reverse=false): a mapping's
 * (key, value) pairs sorted by key or by value, strings compared lowered
 * unless case_sensitive (jinja2's do_dictsort). */
static jv_t do_dictsort(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  check_args(c, a, 3, "filter", "dictsort");
  int cs = jinja_truthy(arg_or(a, 0, "case_sensitive", jv_bool(0)));
  jv_t by = arg_or(a, 1, "by", jv_strref("key", 3));
  int reverse = jinja_truthy(arg_or(a, 2, "reverse", jv_bool(0)));
  if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v); /* Undefined.items() raises */
  if (v.kind != JK_DICT) jinja_fail(c, -EINVAL, "'%s' object has no attribute 'items'", jinja_type_name(v));
  const int pos = by.kind == JK_STR && by.n == 3 && memcmp(by.s, "key", 3) == 0     ? 0
                  : by.kind == JK_STR && by.n == 5 && memcmp(by.s, "value", 5) == 0 ? 1
                                                                                    : -1;
  if (pos < 0) jinja_fail(c, -EINVAL, "You can only sort by either \"key\" or \"value\"");
  jinja_list_t *pairs = do_items(c, v).list;
  jv_t *keys = jinja_alloc(c, (pairs->n + 1) * sizeof *keys);
  for (uint32_t i = 0; i < pairs->n; i++) keys[i] = sort_key(c, pairs->v[i].list->v[pos], jv_none(), cs);
  return sorted_by(c, pairs, keys, reverse);
}

static int64_t length_of(jinja_ctx_t *c, jv_t v) {
  switch (v.kind) {
  case JK_UNDEF: return 0;
  case JK_STR: return (int64_t)jinja_utf8_count(v.s, v.n);
  case JK_LIST: return v.list->n;
  case JK_DICT: return v.dict->n;
  default: jinja_fail(c, -EINVAL, "object of type '%s' has no len()", jinja_type_name(v));
  }
}

static jv_t do_sum(jinja_ctx_t *c, jv_t v, const jinja_args_t *a) {
  jv_t attr = arg_or(a, 0, "attribute", jv_none());
  jv_t acc = arg_or(a, 1, "start", jv_int(0));
  jinja_list_t *l = jinja_iterate(c, v);
  for (uint32_t i = 0; i < l->n; i++) {
    jv_t x = attr.kind == JK_NONE ? l->v[i] : get_attr_path(c, l->v[i], attr);
    if (!((acc.kind == JK_INT || acc.kind == JK_FLOAT || acc.kind == JK_BOOL) &&
          (x.kind == JK_INT || x.kind == JK_FLOAT || x.kind == JK_BOOL)))
      jinja_fail(c, -EINVAL, "sum needs numbers, got '%s'", jinja_type_name(x));
    if (acc.kind == JK_FLOAT || x.kind == JK_FLOAT) {
      double p = acc.kind == JK_FLOAT ? acc.f : acc.kind == JK_BOOL ? acc.b : (double)acc.i;
      double q = x.kind == JK_FLOAT ? x.f : x.kind == JK_BOOL ? x.b : (double)x.i;
      acc = jv_float(p + q);
    } else {
      int64_t p = acc.kind == JK_BOOL ? acc.b : acc.i, q = x.kind == JK_BOOL ? x.b : x.i, r;
      if (__builtin_add_overflow(p, q, &r)) jinja_fail(c, -ERANGE, "integer overflow in sum");
      acc = jv_int(r);
    }
  }
  return acc;
}

static jv_t do_reverse(jinja_ctx_t *c, jv_t v) {
  if (v.kind == JK_STR) {
    jinja_list_t *chars = jinja_iterate(c, v);
    jinja_buf_t b = {0};
    for (uint32_t i = chars->n; i-- > 0;) jinja_buf_put(c, &b, chars->v[i].s, chars->v[i].n);
    return jv_strref(b.p ? b.p : "", b.len);
  }
  jinja_list_t *src = jinja_iterate(c, v), *l = jinja_list_new(c, src->n);
  for (uint32_t i = src->n; i-- > 0;) l->v[l->n++] = src->v[i];
  return jv_list(l);
}

jv_t jinja_apply_filter(jinja_ctx_t *c, int id, jv_t v, const jinja_args_t *a) {
  const char *name = filter_names[id];
  switch (id) {
  case F_ABS:
    check_args(c, a, 0, "filter", name);
    if (v.kind == JK_INT) {
      if (v.i == INT64_MIN) jinja_fail(c, -ERANGE, "integer overflow in abs");
      return jv_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.kind == JK_BOOL) return jv_int(v.b);
    if (v.kind == JK_FLOAT) return jv_float(fabs(v.f));
    if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v);
    jinja_fail(c, -EINVAL, "bad operand type for abs(): '%s'", jinja_type_name(v));
  case F_CAPITALIZE: return jinja__case(c, jinja_to_string(c, v), JINJA_CAPITALIZE);
  case F_TITLE: return jinja__case(c, jinja_to_string(c, v), JINJA_TITLE);
  case F_LOWER: return jinja__case(c, jinja_to_string(c, v), JINJA_LOWER);
  case F_UPPER: return jinja__case(c, jinja_to_string(c, v), JINJA_UPPER);
  case F_COUNT:
  case F_LENGTH: return jv_int(length_of(c, v));
  case F_D:
  case F_DEFAULT: {
    jv_t dflt = arg_or(a, 0, "default_value", jv_strref("", 0));
    int boolean = jinja_truthy(arg_or(a, 1, "boolean", jv_bool(0)));
    check_args(c, a, 2, "filter", name);
    if (v.kind == JK_UNDEF || (boolean && !jinja_truthy(v))) return dflt;
    return v;
  }
  case F_DICTSORT: return do_dictsort(c, v, a);
  case F_E:
  case F_ESCAPE: return html_escape(c, v);
  case F_SAFE: return v;
  case F_STRING: return jinja_to_string(c, v);
  case F_FIRST: {
    jinja_list_t *l = jinja_iterate(c, v);
    return l->n ? l->v[0] : jv_undef_named("No first item, sequence was empty.", 34, JU_PLAIN, 0);
  }
  case F_LAST: {
    jinja_list_t *l = jinja_iterate(c, v);
    return l->n ? l->v[l->n - 1] : jv_undef_named("No last item, sequence was empty.", 33, JU_PLAIN, 0);
  }
  case F_INT:
  case F_FLOAT: {
    int want_int = id == F_INT;
    jv_t dflt = arg_or(a, 0, "default", want_int ? jv_int(0) : jv_float(0.0));
    jv_t base = arg_or(a, 1, "base", jv_int(10));
    jv_t out;
    if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v); /* int(Undefined) raises */
    if (v.kind == JK_INT || v.kind == JK_BOOL) {
      int64_t i = v.kind == JK_INT ? v.i : v.b;
      return want_int ? jv_int(i) : jv_float((double)i);
    }
    if (v.kind == JK_FLOAT) {
      if (!want_int) return v;
      if (v.f != v.f) return dflt;
      if (!(fabs(v.f) < 9.2e18)) jinja_fail(c, -ERANGE, "cannot convert float %g to integer", v.f);
      return jv_int((int64_t)v.f);
    }
    if (v.kind == JK_STR && jinja__parse_number(v, want_int, base.kind == JK_INT ? (int)base.i : 10, &out) == 0)
      return out;
    return dflt;
  }
  case F_INDENT: return do_indent(c, v, a);
  case F_ITEMS: return do_items(c, v);
  case F_JOIN: return do_join(c, v, a);
  case F_LIST: {
    jinja_list_t *src = jinja_iterate(c, v), *l = jinja_list_new(c, src->n);
    memcpy(l->v, src->v, src->n * sizeof *l->v);
    l->n = src->n;
    return jv_list(l);
  }
  case F_MAP: return do_map(c, v, a);
  case F_MAX: return do_minmax(c, v, a, 1);
  case F_MIN: return do_minmax(c, v, a, 0);
  case F_SELECT: return select_items(c, v, a, 0, 1);
  case F_REJECT: return select_items(c, v, a, 0, 0);
  case F_SELECTATTR: return select_items(c, v, a, 1, 1);
  case F_REJECTATTR: return select_items(c, v, a, 1, 0);
  case F_REPLACE: {
    if (a->n_pos < 2) jinja_fail(c, -EINVAL, "replace needs old and new strings");
    jv_t count = arg_or(a, 2, "count", jv_none());
    return jinja__replace(c, jinja_to_string(c, v), jinja_to_string(c, a->pos[0]), jinja_to_string(c, a->pos[1]),
                          count.kind == JK_INT ? count.i : -1);
  }
  case F_REVERSE: return do_reverse(c, v);
  case F_SORT: return do_sort(c, v, a);
  case F_SUM: return do_sum(c, v, a);
  case F_TOJSON: return do_tojson(c, v, a);
  case F_TRIM: {
    jv_t chars = arg_or(a, 0, "chars", jv_none());
    jv_t s = jinja_to_string(c, v);
    return chars.kind == JK_NONE ? jinja__strip(s, NULL, 3) : jinja__strip(s, &chars, 3);
  }
  case F_UNIQUE: return do_unique(c, v, a);
  default: jinja_fail(c, -EINVAL, "filter %d is not implemented", id);
  }
}

/* ---- tests ---------------------------------------------------------------- */

static jv_t test_arg(jinja_ctx_t *c, const jinja_args_t *a, const char *name) {
  if (a->n_pos < 1) jinja_fail(c, -EINVAL, "test '%s' needs an argument", name);
  return a->pos[0];
}

static int is_str_case(jinja_ctx_t *c, jv_t v, int upper) {
  jv_t s = jinja_to_string(c, v);
  jv_t other = jinja__case(c, s, upper ? JINJA_LOWER : JINJA_UPPER), same = jinja__case(c, s, upper ? JINJA_UPPER : JINJA_LOWER);
  /* Python: islower() is true when there is a cased character and none is
   * upper; approximated by "changes under upper() and not under lower()". */
  return jinja_equal(same, s) && !jinja_equal(other, s);
}

/* Tests that take one argument besides the value; the others take none. */
static int test_takes_arg(int id) {
  switch (id) {
  case T_DIVISIBLEBY: case T_EQ: case T_EQUALTO: case T_EQ2: case T_NE: case T_NE2: case T_LT: case T_LT2:
  case T_LESSTHAN: case T_LE: case T_LE2: case T_GT: case T_GT2: case T_GREATERTHAN: case T_GE: case T_GE2:
  case T_IN: case T_SAMEAS:
    return 1;
  default: return 0;
  }
}

int jinja_apply_test(jinja_ctx_t *c, int id, jv_t v, const jinja_args_t *a) {
  const char *name = test_names[id];
  if (a->n_pos + a->n_kw != (uint32_t)test_takes_arg(id))
    jinja_fail(c, -EINVAL, "test '%s' takes %d argument(s), got %u", name, test_takes_arg(id) + 1,
               a->n_pos + a->n_kw + 1);
  switch (id) {
  case T_BOOLEAN: return v.kind == JK_BOOL;
  case T_CALLABLE: return v.kind == JK_FUNC || v.kind == JK_METHOD || v.kind == JK_MACRO || v.kind == JK_LOOP;
  case T_DEFINED: return v.kind != JK_UNDEF;
  case T_UNDEFINED: return v.kind == JK_UNDEF;
  case T_DIVISIBLEBY: {
    jv_t d = test_arg(c, a, name);
    if (v.kind == JK_INT && d.kind == JK_INT) {
      if (d.i == 0) jinja_fail(c, -EDOM, "integer division or modulo by zero");
      return d.i == -1 || v.i % d.i == 0;
    }
    if ((v.kind == JK_INT || v.kind == JK_FLOAT) && (d.kind == JK_INT || d.kind == JK_FLOAT)) {
      double x = v.kind == JK_INT ? (double)v.i : v.f, y = d.kind == JK_INT ? (double)d.i : d.f;
      if (y == 0) jinja_fail(c, -EDOM, "float modulo");
      return fmod(x, y) == 0;
    }
    jinja_fail(c, -EINVAL, "divisibleby needs numbers");
  }
  case T_EQ: case T_EQUALTO: case T_EQ2: return jinja_equal(v, test_arg(c, a, name));
  case T_NE: case T_NE2: return !jinja_equal(v, test_arg(c, a, name));
  case T_LT: case T_LT2: case T_LESSTHAN: return jinja_compare(c, v, test_arg(c, a, name)) < 0;
  case T_LE: case T_LE2: return jinja_compare(c, v, test_arg(c, a, name)) <= 0;
  case T_GT: case T_GT2: case T_GREATERTHAN: return jinja_compare(c, v, test_arg(c, a, name)) > 0;
  case T_GE: case T_GE2: return jinja_compare(c, v, test_arg(c, a, name)) >= 0;
  case T_ESCAPED: return 0;
  case T_EVEN:
  case T_ODD: {
    if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v);
    if (v.kind != JK_INT && v.kind != JK_BOOL) jinja_fail(c, -EINVAL, "test '%s' needs an integer", name);
    int64_t i = v.kind == JK_INT ? v.i : v.b;
    return (i % 2 == 0) == (id == T_EVEN);
  }
  case T_FALSE: return v.kind == JK_BOOL && !v.b;
  case T_TRUE: return v.kind == JK_BOOL && v.b;
  case T_FLOAT: return v.kind == JK_FLOAT;
  case T_INTEGER: return v.kind == JK_INT;
  case T_NUMBER: return v.kind == JK_INT || v.kind == JK_FLOAT || v.kind == JK_BOOL;
  case T_IN: {
    jv_t seq = test_arg(c, a, name);
    if (seq.kind == JK_STR) {
      if (v.kind != JK_STR) jinja_fail(c, -EINVAL, "'in <string>' requires string as left operand");
      return v.n == 0 || memmem(seq.s, seq.n, v.s, v.n) != NULL;
    }
    if (seq.kind == JK_DICT) return jinja_dict_get(seq.dict, v) != NULL;
    jinja_list_t *l = jinja_iterate(c, seq);
    for (uint32_t i = 0; i < l->n; i++)
      if (jinja_equal(l->v[i], v)) return 1;
    return 0;
  }
  case T_ITERABLE: return v.kind == JK_STR || v.kind == JK_LIST || v.kind == JK_DICT || v.kind == JK_UNDEF || v.kind == JK_LOOP;
  case T_SEQUENCE: return v.kind == JK_STR || v.kind == JK_LIST || v.kind == JK_DICT || v.kind == JK_UNDEF;
  case T_MAPPING: return v.kind == JK_DICT;
  case T_NONE: return v.kind == JK_NONE;
  case T_STRING: return v.kind == JK_STR;
  case T_LOWER: return is_str_case(c, v, 0);
  case T_UPPER: return is_str_case(c, v, 1);
  case T_SAMEAS: {
    jv_t o = test_arg(c, a, name);
    if (v.kind != o.kind) return 0;
    switch (v.kind) {
    case JK_NONE: case JK_UNDEF: return 1;
    case JK_BOOL: return v.b == o.b;
    case JK_INT: return v.i == o.i;
    case JK_FLOAT: return v.f == o.f;
    case JK_STR: return v.s == o.s && v.n == o.n;
    default: return jinja_equal(v, o) && v.list == o.list;
    }
  }
  default: jinja_fail(c, -EINVAL, "test %d is not implemented", id);
  }
}
