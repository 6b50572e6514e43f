/* grammar/gram_build.c — the expression builder every compiler writes into:
 * nodes (byte sets, sequences, alternatives, repetitions, rule references),
 * named and anonymous rules, errors, and code-point classes lowered to UTF-8
 * byte sequences. The lowering into the flat grammar is gram_lower.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

const char *gram_strerror(int code) {
  switch (code) {
  case 0: return "ok";
  case GRAM_EINVAL: return "invalid grammar input";
  case GRAM_ELIMIT: return "grammar too large or too ambiguous (a bound was exceeded)";
  case GRAM_ENOMEM: return "out of memory";
  case GRAM_EREJECT: return "not allowed by the grammar";
  default: return "unknown grammar error";
  }
}

void gram__set_range(gram_set_t *s, unsigned lo, unsigned hi) {
  for (unsigned c = lo; c <= hi && c < 256; c++) gram__set_add(s, c);
}

void gx_init(gx_build_t *b, gram_err_t *err) {
  memset(b, 0, sizeof *b);
  b->err = err;
  if (err) {
    err->pos = -1;
    err->msg[0] = 0;
  }
}

void gx_free(gx_build_t *b) {
  for (int32_t i = 0; i < b->n_rules; i++) free(b->rules[i].name);
  free(b->rules);
  free(b->nodes);
  free(b->sets);
  memset(b, 0, sizeof *b);
}

int gx_fail(gx_build_t *b, int64_t pos, int code, const char *fmt, ...) {
  if (!b->failed) {
    b->failed = code ? code : GRAM_EINVAL;
    if (b->err) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(b->err->msg, sizeof b->err->msg, fmt, ap);
      va_end(ap);
      b->err->pos = pos;
    }
  }
  return -1;
}

static int grow(void **p, int32_t *cap, int32_t need, size_t elem) {
  if (need <= *cap) return 0;
  int32_t nc = *cap ? *cap : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * elem);
  if (!q) return -1;
  *p = q;
  *cap = nc;
  return 0;
}

static int32_t node(gx_build_t *b, gx_kind_t k) {
  if (b->failed) return -1;
  if (b->n_nodes >= GRAM_MAX_NODES)
    return gx_fail(b, -1, GRAM_ELIMIT, "grammar too large: more than %d expression nodes", GRAM_MAX_NODES);
  if (grow((void **)&b->nodes, &b->cap_nodes, b->n_nodes + 1, sizeof *b->nodes))
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  gx_node_t *n = &b->nodes[b->n_nodes];
  memset(n, 0, sizeof *n);
  n->kind = (uint8_t)k;
  n->first = n->last = n->next = -1;
  return b->n_nodes++;
}

int32_t gx_empty(gx_build_t *b) { return node(b, GX_EMPTY); }
int32_t gx_nothing(gx_build_t *b) { return node(b, GX_NOTHING); }

int32_t gx_set(gx_build_t *b, const gram_set_t *s) {
  if (b->failed) return -1;
  int32_t id = -1;
  /* the last few sets are the likely repeats; a linear probe of them is enough
   * (gram_lower.c deduplicates all of them) */
  for (int32_t i = b->n_sets - 1; i >= 0 && i >= b->n_sets - 8; i--)
    if (!memcmp(&b->sets[i], s, sizeof *s)) id = i;
  if (id < 0) {
    if (grow((void **)&b->sets, &b->cap_sets, b->n_sets + 1, sizeof *b->sets))
      return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
    b->sets[b->n_sets] = *s;
    id = b->n_sets++;
  }
  int32_t n = node(b, GX_SET);
  if (n >= 0) b->nodes[n].a = id;
  return n;
}

int32_t gx_byte(gx_build_t *b, unsigned c) {
  gram_set_t s = {{0}};
  gram__set_add(&s, c & 255);
  return gx_set(b, &s);
}

int32_t gx_seq(gx_build_t *b) { return node(b, GX_SEQ); }
int32_t gx_alt(gx_build_t *b) { return node(b, GX_ALT); }

int32_t gx_add(gx_build_t *b, int32_t parent, int32_t child) {
  if (b->failed || parent < 0 || child < 0) return -1;
  gx_node_t *p = &b->nodes[parent];
  if (p->last < 0) p->first = child;
  else b->nodes[p->last].next = child;
  p->last = child;
  return parent;
}

int32_t gx_lit(gx_build_t *b, const char *s, size_t n) {
  int32_t q = gx_seq(b);
  for (size_t i = 0; i < n; i++) gx_add(b, q, gx_byte(b, (unsigned char)s[i]));
  return b->failed ? -1 : q;
}

int32_t gx_seq2(gx_build_t *b, int32_t x, int32_t y) { return gx_add(b, gx_add(b, gx_seq(b), x), y); }
int32_t gx_seq3(gx_build_t *b, int32_t x, int32_t y, int32_t z) { return gx_add(b, gx_seq2(b, x, y), z); }
int32_t gx_alt2(gx_build_t *b, int32_t x, int32_t y) { return gx_add(b, gx_add(b, gx_alt(b), x), y); }

int32_t gx_repeat(gx_build_t *b, int32_t child, int32_t min, int32_t max) {
  if (b->failed || child < 0) return -1;
  if (min < 0 || min > GRAM_MAX_REPEAT || max > GRAM_MAX_REPEAT || (max >= 0 && max < min))
    return gx_fail(b, -1, GRAM_ELIMIT, "repetition {%d,%d} out of range (at most %d)", min, max,
                   GRAM_MAX_REPEAT);
  int32_t n = node(b, GX_REPEAT);
  if (n < 0) return -1;
  b->nodes[n].a = child;
  b->nodes[n].min = min;
  b->nodes[n].max = max;
  return n;
}

int32_t gx_opt(gx_build_t *b, int32_t child) { return gx_repeat(b, child, 0, 1); }

int32_t gx_ref(gx_build_t *b, int32_t rule) {
  if (rule < 0) return -1;
  int32_t n = node(b, GX_REF);
  if (n >= 0) b->nodes[n].a = rule;
  return n;
}

static int32_t rule_add(gx_build_t *b, char *name, int64_t pos) {
  if (!name) return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  if (b->n_rules >= GRAM_MAX_RULES) {
    free(name);
    return gx_fail(b, pos, GRAM_ELIMIT, "grammar too large: more than %d rules", GRAM_MAX_RULES);
  }
  if (grow((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) {
    free(name);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  b->rules[b->n_rules] = (gx_rule_t){.name = name, .body = -1, .def_pos = pos};
  return b->n_rules++;
}

int32_t gx_rule_named(gx_build_t *b, const char *name, size_t len, int64_t pos) {
  if (b->failed) return -1;
  for (int32_t i = 0; i < b->n_rules; i++)
    if (strlen(b->rules[i].name) == len && !memcmp(b->rules[i].name, name, len)) return i;
  char *copy = malloc(len + 1); /* (not strndup: name need not be terminated) */
  if (copy) memcpy(copy, name, len), copy[len] = 0;
  return rule_add(b, copy, pos);
}

int32_t gx_rule_new(gx_build_t *b, const char *prefix) {
  if (b->failed) return -1;
  char *name = NULL;
  if (asprintf(&name, "%s-%d", prefix, b->n_rules) < 0) name = NULL;
  return rule_add(b, name, -1);
}

int gx_define(gx_build_t *b, int32_t r, int32_t body, int64_t pos) {
  if (b->failed || r < 0 || body < 0) return -1;
  if (b->rules[r].body >= 0) return gx_fail(b, pos, GRAM_EINVAL, "rule '%s' defined twice", b->rules[r].name);
  b->rules[r].body = body;
  return 0;
}

/* ---- UTF-8 ------------------------------------------------------------------ */

int32_t gx_codepoint(gx_build_t *b, uint32_t c) {
  char buf[4];
  return gx_lit(b, buf, (size_t)utf8_encode(c, buf));
}

/* Emits into alternative `alt` the byte-range sequences that encode exactly
 * the code points [lo, hi], all of one UTF-8 length. */
static void utf8_split(gx_build_t *b, int32_t alt, uint32_t lo, uint32_t hi) {
  char a[4], z[4];
  int n = utf8_encode(lo, a);
  /* if lo and hi differ above the low 6k bits but the lower bits do not span
   * whole blocks, split so each piece is a product of byte ranges */
  for (int i = 1; i < n; i++) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_split(b, alt, lo, lo | m);
        utf8_split(b, alt, (lo | m) + 1, hi);
        return;
      }
      if ((hi & m) != m) {
        utf8_split(b, alt, lo, (hi & ~m) - 1);
        utf8_split(b, alt, hi & ~m, hi);
        return;
      }
    }
  }
  utf8_encode(hi, z);
  int32_t q = gx_seq(b);
  for (int i = 0; i < n; i++) {
    gram_set_t s = {{0}};
    gram__set_range(&s, (unsigned char)a[i], (unsigned char)z[i]);
    gx_add(b, q, gx_set(b, &s));
  }
  gx_add(b, alt, q);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return a < c ? -1 : a > c;
}

int gram__cp_normalize(const uint32_t *lo, const uint32_t *hi, int n, bool negate, uint32_t *L, uint32_t *H) {
  uint64_t *r = malloc(sizeof *r * (size_t)(n + 1));
  if (!r) return -1;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (lo[i] <= hi[i] && lo[i] <= 0x10FFFF) r[k++] = (uint64_t)lo[i] << 32 | (hi[i] > 0x10FFFF ? 0x10FFFF : hi[i]);
  qsort(r, (size_t)k, sizeof *r, cmp_u64);
  int m = 0;
  for (int i = 0; i < k; i++) {
    uint32_t a = (uint32_t)(r[i] >> 32), z = (uint32_t)r[i];
    if (m && a <= H[m - 1] + 1) {
      if (z > H[m - 1]) H[m - 1] = z;
    } else L[m] = a, H[m] = z, m++;
  }
  free(r);
  if (!negate) return m;
  /* complement in place: entry mm <= i is written after entry i is read */
  uint32_t next = 0;
  int mm = 0;
  for (int i = 0; i < m; i++) {
    uint32_t a = L[i], z = H[i];
    if (a > next) L[mm] = next, H[mm] = a - 1, mm++;
    next = z + 1;
  }
  if (next <= 0x10FFFF) L[mm] = next, H[mm] = 0x10FFFF, mm++;
  return mm;
}

int32_t gx_codepoints(gx_build_t *b, const uint32_t *lo, const uint32_t *hi, int n, bool negate) {
  if (b->failed) return -1;
  uint32_t *L = malloc(sizeof *L * (size_t)(n + 2)), *H = malloc(sizeof *H * (size_t)(n + 2));
  int m = L && H ? gram__cp_normalize(lo, hi, n, negate, L, H) : -1;
  if (m < 0) {
    free(L), free(H);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  int32_t alt = gx_alt(b);
  gram_set_t ascii = {{0}};
  bool any_ascii = false;
  static const uint32_t cut[] = {0x7F, 0x7FF, 0xD7FF, 0xDFFF, 0xFFFF, 0x10FFFF};
  for (int i = 0; i < m && !b->failed; i++) {
    uint32_t a = L[i];
    for (int j = 0; j < 6 && a <= H[i]; j++) {
      uint32_t z = H[i] < cut[j] ? H[i] : cut[j];
      if (a > cut[j]) continue;
      if (j == 0) {
        gram__set_range(&ascii, a, z);
        any_ascii = true;
      } else if (j != 3) { /* j == 3: the surrogates, never */
        utf8_split(b, alt, a, z);
      }
      a = z + 1;
    }
  }
  if (any_ascii) gx_add(b, alt, gx_set(b, &ascii));
  free(L), free(H);
  if (b->failed) return -1;
  if (b->nodes[alt].first < 0) return gx_nothing(b);
  return alt;
}
