/* server/prom.c — Prometheus registry and text format (see prom.h). */
#include "server/prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"

#define MAX_CONST_LABELS 8

struct prom_series {
  const prom_family_t *fam;
  char **values;     /* [n_labels] */
  double value;      /* counter / gauge */
  uint64_t *buckets; /* histogram: [n_bounds + 1], per bucket, last = +Inf */
  double sum;
  uint64_t count;
};

struct prom_family {
  char *name, *help;
  prom_type_t type;
  char **labels; /* [n_labels] */
  int n_labels;
  double *bounds; /* [n_bounds] */
  int n_bounds;
  prom_series_t **series; /* [n_series] in creation order */
  size_t n_series, cap_series;
  prom_family_t *next;
};

struct prom_registry {
  prom_family_t *head, *tail;
  char *const_names[MAX_CONST_LABELS];
  char *const_values[MAX_CONST_LABELS];
  int n_const;
};

static char *dup(const char *s) { return xstrdup(s ? s : ""); }

__attribute__((noreturn)) static void misuse(const char *what, const char *name) {
  log_error("prom: %s: \"%s\" (programmer error)", what, name);
  abort();
}

static bool valid_name(const char *s, bool colon) {
  if (!s || !*s) return false;
  for (const char *p = s; *p; p++) {
    char c = *p;
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
    if (!alpha && !(p > s && c >= '0' && c <= '9')) return false;
  }
  return true;
}

prom_registry_t *prom_registry_create(void) { return xcalloc(1, sizeof(prom_registry_t)); }

static void series_free(prom_series_t *s, int n_labels) {
  for (int i = 0; i < n_labels; i++) free(s->values[i]);
  free(s->values);
  free(s->buckets);
  free(s);
}

void prom_registry_destroy(prom_registry_t *reg) {
  if (!reg) return;
  for (prom_family_t *f = reg->head, *next; f; f = next) {
    next = f->next;
    for (size_t i = 0; i < f->n_series; i++) series_free(f->series[i], f->n_labels);
    for (int i = 0; i < f->n_labels; i++) free(f->labels[i]);
    free(f->series);
    free(f->labels);
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
  }
  for (int i = 0; i < reg->n_const; i++) {
    free(reg->const_names[i]);
    free(reg->const_values[i]);
  }
  free(reg);
}

void prom_registry_const_label(prom_registry_t *reg, const char *name, const char *value) {
  if (!valid_name(name, false) || strcmp(name, "le") == 0) misuse("bad label name", name);
  if (reg->n_const == MAX_CONST_LABELS) misuse("too many constant labels", name);
  reg->const_names[reg->n_const] = dup(name);
  reg->const_values[reg->n_const++] = dup(value);
}

static prom_family_t *family(prom_registry_t *reg, prom_type_t type, const char *name, const char *help,
                             int n_labels, const char *const *label_names) {
  if (!valid_name(name, true)) misuse("bad metric name", name);
  for (prom_family_t *f = reg->head; f; f = f->next)
    if (strcmp(f->name, name) == 0) misuse("metric registered twice", name);
  prom_family_t *f = xcalloc(1, sizeof *f);
  f->name = dup(name);
  f->help = dup(help);
  f->type = type;
  f->n_labels = n_labels;
  f->labels = xcalloc((size_t)n_labels, sizeof *f->labels);
  for (int i = 0; i < n_labels; i++) {
    if (!valid_name(label_names[i], false) || strcmp(label_names[i], "le") == 0)
      misuse("bad label name", label_names[i]);
    f->labels[i] = dup(label_names[i]);
  }
  if (reg->tail) reg->tail->next = f;
  else reg->head = f;
  reg->tail = f;
  return f;
}

prom_family_t *prom_counter(prom_registry_t *reg, const char *name, const char *help,
                            int n_labels, const char *const *label_names) {
  return family(reg, PROM_COUNTER, name, help, n_labels, label_names);
}

prom_family_t *prom_gauge(prom_registry_t *reg, const char *name, const char *help,
                          int n_labels, const char *const *label_names) {
  return family(reg, PROM_GAUGE, name, help, n_labels, label_names);
}

prom_family_t *prom_histogram(prom_registry_t *reg, const char *name, const char *help,
                              int n_labels, const char *const *label_names,
                              const double *bounds, int n_bounds) {
  for (int i = 0; i < n_bounds; i++)
    if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
      misuse("histogram bounds must be finite and increasing", name);
  prom_family_t *f = family(reg, PROM_HISTOGRAM, name, help, n_labels, label_names);
  f->bounds = xcalloc((size_t)n_bounds, sizeof *f->bounds);
  memcpy(f->bounds, bounds, (size_t)n_bounds * sizeof *bounds);
  f->n_bounds = n_bounds;
  return f;
}

prom_series_t *prom_series(prom_family_t *f, const char *const *values) {
  for (size_t i = 0; i < f->n_series; i++) {
    prom_series_t *s = f->series[i];
    int k = 0;
    while (k < f->n_labels && strcmp(s->values[k], values[k]) == 0) k++;
    if (k == f->n_labels) return s;
  }
  prom_series_t *s = xcalloc(1, sizeof *s);
  s->fam = f;
  s->values = xcalloc((size_t)f->n_labels, sizeof *s->values);
  for (int k = 0; k < f->n_labels; k++) s->values[k] = dup(values[k]);
  if (f->type == PROM_HISTOGRAM) s->buckets = xcalloc((size_t)f->n_bounds + 1, sizeof *s->buckets);
  xgrow(&f->series, &f->cap_series, f->n_series + 1, sizeof *f->series, 16);
  f->series[f->n_series++] = s;
  return s;
}

void prom_add(prom_series_t *s, double v) {
  if (s->fam->type == PROM_HISTOGRAM) misuse("prom_add on a histogram", s->fam->name);
  if (s->fam->type == PROM_COUNTER && !(v >= 0)) return; /* counters only go up */
  s->value += v;
}

void prom_set(prom_series_t *s, double v) {
  if (s->fam->type == PROM_HISTOGRAM) misuse("prom_set on a histogram", s->fam->name);
  s->value = v;
}

double prom_value(const prom_series_t *s) {
  return s->fam->type == PROM_HISTOGRAM ? (double)s->count : s->value;
}

void prom_observe(prom_series_t *s, double v) {
  const prom_family_t *f = s->fam;
  if (f->type != PROM_HISTOGRAM) misuse("prom_observe on a counter or gauge", f->name);
  int b = 0;
  while (b < f->n_bounds && !(v <= f->bounds[b])) b++; /* NaN lands in +Inf */
  s->buckets[b]++;
  s->count++;
  s->sum += v;
}

void prom_hist_set(prom_series_t *s, const uint64_t *counts, double sum) {
  const prom_family_t *f = s->fam;
  if (f->type != PROM_HISTOGRAM) misuse("prom_hist_set on a counter or gauge", f->name);
  s->count = 0;
  for (int b = 0; b <= f->n_bounds; b++) {
    s->buckets[b] = counts[b];
    s->count += counts[b];
  }
  s->sum = sum;
}

int prom_buckets_125(double max, double *out, int cap) {
  int n = 0;
  for (double scale = 1; n < cap; scale *= 10) {
    const double steps[3] = {1, 2, 5};
    for (int i = 0; i < 3 && n < cap; i++) {
      double v = steps[i] * scale;
      if (v > max) return n;
      out[n++] = v;
    }
  }
  return n;
}

/* ---- the text format ------------------------------------------------------------- */

/* Escapes a label value ("\", "\"", "\n") or HELP text ("\\", "\n"). */
static void sb_escaped(buf_t *b, const char *s, bool quote) {
  for (; *s; s++) {
    if (*s == '\\') buf_printf(b, "\\\\");
    else if (*s == '\n') buf_printf(b, "\\n");
    else if (*s == '"' && quote) buf_printf(b, "\\\"");
    else buf_putc(b, *s);
  }
}

/* Writes v the way the Prometheus Python client (and so vLLM) does: the
 * shortest decimal that reads back as v, in Python's repr style ("7.5",
 * "4.0", "0.001", "1e-05", "1e+16"), with its switch to exponent form for
 * 7 or more integer digits ("2.56e+06"); +Inf, -Inf, NaN. */
static void format_number(char *out, size_t size, double v) {
  if (isnan(v)) {
    snprintf(out, size, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
    return;
  }
  char e[48];
  for (int prec = 0; prec <= 17; prec++) {
    snprintf(e, sizeof e, "%.*e", prec, v);
    if (strtod(e, NULL) == v) break;
  }
  /* e is "[-]d[.ddd]e[+-]XX": split into sign, digits and exponent */
  const char *p = e;
  bool neg = *p == '-';
  if (neg) p++;
  char digits[24];
  int nd = 0;
  for (; *p && *p != 'e'; p++)
    if (*p != '.') digits[nd++] = *p;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  int x = atoi(p + 1);
  size_t o = 0;
  if (neg) out[o++] = '-';
  if (x >= 6 && x < 16 && !neg) { /* the client's Go-style exponent */
    o += (size_t)snprintf(out + o, size - o, "%c%s%.*s", digits[0], nd > 1 ? "." : "", nd - 1, digits + 1);
    snprintf(out + o, size - o, "e+%02d", x);
  } else if (x >= -4 && x < 16) { /* fixed notation, always with a fraction */
    if (x < 0) {
      o += (size_t)snprintf(out + o, size - o, "0.%.*s%s", -x - 1, "0000", digits);
    } else {
      for (int i = 0; i <= x; i++) out[o++] = i < nd ? digits[i] : '0';
      snprintf(out + o, size - o, ".%s", nd > x + 1 ? digits + x + 1 : "0");
    }
  } else {
    o += (size_t)snprintf(out + o, size - o, "%c%s%.*s", digits[0], nd > 1 ? "." : "", nd - 1, digits + 1);
    snprintf(out + o, size - o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
  }
}

static void sb_number(buf_t *b, double v) {
  char tmp[64];
  format_number(tmp, sizeof tmp, v);
  buf_printf(b, "%s", tmp);
}

/* {const labels, series labels[, le="bound"]} — nothing when empty. */
static void sb_labels(buf_t *b, const prom_registry_t *reg, const prom_series_t *s, const char *le) {
  const prom_family_t *f = s->fam;
  if (!reg->n_const && !f->n_labels && !le) return;
  buf_putc(b, '{');
  int n = 0;
  for (int i = 0; i < reg->n_const; i++, n++) {
    buf_printf(b, "%s%s=\"", n ? "," : "", reg->const_names[i]);
    sb_escaped(b, reg->const_values[i], true);
    buf_putc(b, '"');
  }
  for (int i = 0; i < f->n_labels; i++, n++) {
    buf_printf(b, "%s%s=\"", n ? "," : "", f->labels[i]);
    sb_escaped(b, s->values[i], true);
    buf_putc(b, '"');
  }
  if (le) buf_printf(b, "%sle=\"%s\"", n ? "," : "", le);
  buf_putc(b, '}');
}

static void render_series(buf_t *b, const prom_registry_t *reg, const prom_series_t *s) {
  const prom_family_t *f = s->fam;
  if (f->type != PROM_HISTOGRAM) {
    buf_printf(b, "%s", f->name);
    sb_labels(b, reg, s, NULL);
    buf_putc(b, ' ');
    sb_number(b, s->value);
    buf_putc(b, '\n');
    return;
  }
  uint64_t cum = 0;
  for (int i = 0; i <= f->n_bounds; i++) {
    cum += s->buckets[i];
    char le[64] = "+Inf";
    if (i < f->n_bounds) format_number(le, sizeof le, f->bounds[i]);
    buf_printf(b, "%s_bucket", f->name);
    sb_labels(b, reg, s, le);
    buf_putc(b, ' ');
    sb_number(b, (double)cum);
    buf_putc(b, '\n');
  }
  buf_printf(b, "%s_sum", f->name);
  sb_labels(b, reg, s, NULL);
  buf_putc(b, ' ');
  sb_number(b, s->sum);
  buf_printf(b, "\n%s_count", f->name);
  sb_labels(b, reg, s, NULL);
  buf_putc(b, ' ');
  sb_number(b, (double)s->count);
  buf_putc(b, '\n');
}

char *prom_render(const prom_registry_t *reg, size_t *len) {
  static const char *const type_names[] = {"counter", "gauge", "histogram"};
  buf_t b = {0};
  buf_reserve(&b, 4096); /* an empty registry still gives "" */
  for (const prom_family_t *f = reg->head; f; f = f->next) {
    buf_printf(&b, "# HELP %s ", f->name);
    sb_escaped(&b, f->help, false);
    buf_printf(&b, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
    for (size_t i = 0; i < f->n_series; i++) render_series(&b, reg, f->series[i]);
  }
  if (len) *len = b.len;
  return b.p;
}
