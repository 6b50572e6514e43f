/* text/jinja/jinja_json.c — Python's json.dumps() over interpreter values (what
 * Hugging Face's `tojson` filter calls) and Python's float repr, which both
 * str() and json.dumps() print floats with. See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* repr(float): the shortest digits that read back as f, in fixed notation
 * when the decimal exponent is in [-4, 16), else scientific ("1e-05",
 * "1.5e+16"); integral values keep ".0". */
void jinja_float_repr(double f, char *buf) {
  if (isnan(f)) {
    strcpy(buf, "nan");
    return;
  }
  if (isinf(f)) {
    strcpy(buf, f > 0 ? "inf" : "-inf");
    return;
  }
  if (f == 0) {
    strcpy(buf, signbit(f) ? "-0.0" : "0.0");
    return;
  }
  char tmp[48];
  for (int p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  /* tmp: [-]d[.ddd]e(+|-)xx */
  char digits[24];
  int nd = 0, neg = 0;
  const char *p = tmp;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  for (; *p && *p != 'e'; p++)
    if (*p != '.') digits[nd++] = *p;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  int e = atoi(p + 1);
  char *o = buf;
  if (neg) *o++ = '-';
  if (e < -4 || e >= 16) {
    *o++ = digits[0];
    if (nd > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)nd - 1);
      o += nd - 1;
    }
    sprintf(o, "e%c%02d", e < 0 ? '-' : '+', abs(e));
    return;
  }
  if (e < 0) {
    *o++ = '0';
    *o++ = '.';
    for (int i = 0; i < -e - 1; i++) *o++ = '0';
    memcpy(o, digits, (size_t)nd);
    o += nd;
  } else {
    for (int i = 0; i <= e; i++) *o++ = i < nd ? digits[i] : '0';
    *o++ = '.';
    if (nd > e + 1) {
      memcpy(o, digits + e + 1, (size_t)(nd - e - 1));
      o += nd - e - 1;
    } else {
      *o++ = '0';
    }
  }
  *o = 0;
}

static void json_str(jinja_ctx_t *c, jinja_buf_t *b, const char *s, size_t n, int ascii) {
  jinja_buf_putc(c, b, '"');
  size_t i = 0, run = 0;
  while (i < n) {
    unsigned char ch = (unsigned char)s[i];
    const char *esc = NULL;
    switch (ch) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    case '\b': esc = "\\b"; break;
    case '\f': esc = "\\f"; break;
    default: break;
    }
    if (!esc && ch >= 0x20 && (!ascii || ch < 0x7f)) {
      i++;
      run++;
      continue;
    }
    jinja_buf_put(c, b, s + i - run, run);
    run = 0;
    if (esc) {
      jinja_buf_put(c, b, esc, 2);
      i++;
    } else if (ch < 0x80) {
      jinja_buf_printf(c, b, "\\u%04x", ch);
      i++;
    } else {
      uint32_t cp = jinja_utf8_next(s, n, &i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        jinja_buf_printf(c, b, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        jinja_buf_printf(c, b, "\\u%04x", cp);
      }
    }
  }
  jinja_buf_put(c, b, s + i - run, run);
  jinja_buf_putc(c, b, '"');
}

static void newline_indent(jinja_ctx_t *c, jinja_buf_t *b, const jinja_json_opts_t *o, int level) {
  jinja_buf_putc(c, b, '\n');
  for (int i = 0; i < level; i++) {
    if (o->indent_str) jinja_buf_put(c, b, o->indent_str, o->indent_len);
    else for (int k = 0; k < o->indent; k++) jinja_buf_putc(c, b, ' ');
  }
}

/* A dict key as json.dumps writes it: strings as they are, None/bools/
 * numbers converted; other types are errors. */
static void json_key(jinja_ctx_t *c, jinja_buf_t *b, jv_t k, int ascii) {
  char tmp[40];
  switch (k.kind) {
  case JK_STR: json_str(c, b, k.s, k.n, ascii); return;
  case JK_NONE: json_str(c, b, "null", 4, 0); return;
  case JK_BOOL: json_str(c, b, k.b ? "true" : "false", k.b ? 4 : 5, 0); return;
  case JK_INT: snprintf(tmp, sizeof tmp, "%" PRId64, k.i); break;
  case JK_FLOAT:
    if (isnan(k.f)) strcpy(tmp, "NaN");
    else if (isinf(k.f)) strcpy(tmp, k.f > 0 ? "Infinity" : "-Infinity");
    else jinja_float_repr(k.f, tmp);
    break;
  default:
    jinja_fail(c, -EINVAL, "keys must be str, int, float, bool or None, not %s", jinja_type_name(k));
  }
  json_str(c, b, tmp, strlen(tmp), 0);
}

static void json_value(jinja_ctx_t *c, jinja_buf_t *b, jv_t v, const jinja_json_opts_t *o, int level) {
  char tmp[40];
  jinja_step(c);
  switch (v.kind) {
  case JK_NONE: jinja_buf_put(c, b, "null", 4); return;
  case JK_BOOL: v.b ? jinja_buf_put(c, b, "true", 4) : jinja_buf_put(c, b, "false", 5); return;
  case JK_INT: jinja_buf_printf(c, b, "%" PRId64, v.i); return;
  case JK_FLOAT:
    if (isnan(v.f)) strcpy(tmp, "NaN");
    else if (isinf(v.f)) strcpy(tmp, v.f > 0 ? "Infinity" : "-Infinity");
    else jinja_float_repr(v.f, tmp);
    jinja_buf_put(c, b, tmp, strlen(tmp));
    return;
  case JK_STR: json_str(c, b, v.s, v.n, o->ensure_ascii); return;
  case JK_LIST: {
    if (v.list->n == 0) {
      jinja_buf_put(c, b, "[]", 2);
      return;
    }
    if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "values nested too deeply");
    jinja_buf_putc(c, b, '[');
    for (uint32_t i = 0; i < v.list->n; i++) {
      if (i) jinja_buf_put(c, b, o->item_sep, o->item_sep_len);
      if (o->indent >= 0) newline_indent(c, b, o, level + 1);
      json_value(c, b, v.list->v[i], o, level + 1);
    }
    if (o->indent >= 0) newline_indent(c, b, o, level);
    jinja_buf_putc(c, b, ']');
    c->depth--;
    return;
  }
  case JK_DICT: {
    jinja_dict_t *d = v.dict;
    if (d->n == 0) {
      jinja_buf_put(c, b, "{}", 2);
      return;
    }
    if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "values nested too deeply");
    uint32_t *order = jinja_alloc(c, d->n * sizeof *order);
    for (uint32_t i = 0; i < d->n; i++) order[i] = i;
    if (o->sort_keys) { /* insertion sort: dicts in templates are small */
      for (uint32_t i = 1; i < d->n; i++) {
        uint32_t x = order[i], j = i;
        while (j > 0 && jinja_compare(c, d->k[order[j - 1]], d->k[x]) > 0) {
          order[j] = order[j - 1];
          j--;
        }
        order[j] = x;
      }
    }
    jinja_buf_putc(c, b, '{');
    for (uint32_t i = 0; i < d->n; i++) {
      if (i) jinja_buf_put(c, b, o->item_sep, o->item_sep_len);
      if (o->indent >= 0) newline_indent(c, b, o, level + 1);
      json_key(c, b, d->k[order[i]], o->ensure_ascii);
      jinja_buf_put(c, b, o->key_sep, o->key_sep_len);
      json_value(c, b, d->v[order[i]], o, level + 1);
    }
    if (o->indent >= 0) newline_indent(c, b, o, level);
    jinja_buf_putc(c, b, '}');
    c->depth--;
    return;
  }
  default:
    jinja_fail(c, -EINVAL, "Object of type %s is not JSON serializable", jinja_type_name(v));
  }
}

void jinja_tojson(jinja_ctx_t *c, jinja_buf_t *b, jv_t v, const jinja_json_opts_t *o) {
  json_value(c, b, v, o, 0);
}
