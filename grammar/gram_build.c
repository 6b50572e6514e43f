/* grammar/gram_build.c — the expression builder every compiler writes into:
 * nodes (byte sets, sequences, alternatives, repetitions, rule references),
 * named and anonymous rules, errors, and code-point classes lowered to UTF-8
 * byte sequences. The lowering into the flat grammar is gram_lower.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "grammar/gram_int.h"

gram_limits_t gram_limits_default(void) {
  return (gram_limits_t){
      .max_size = 500000,
      .max_repeat = 10000,
      .max_depth = 128,
      .max_literal = 16384,
      .compile_ns = INT64_C(10000000000),
      .max_stacks = 4096,
      .max_closure = 200000,
      .max_frames = 1 << 20,
      .mask_fuel = 20000000,
      .cache_bytes = (int64_t)64 << 20,
  };
}

gram_limits_t gram_limits_or_default(const gram_limits_t *l) {
  gram_limits_t d = gram_limits_default();
  if (!l) return d;
  gram_limits_t r = *l;
  if (r.max_size <= 0) r.max_size = d.max_size;
  if (r.max_repeat <= 0) r.max_repeat = d.max_repeat;
  if (r.max_depth <= 0) r.max_depth = d.max_depth;
  if (r.max_literal <= 0) r.max_literal = d.max_literal;
  if (r.compile_ns == 0) r.compile_ns = d.compile_ns;
  if (r.max_stacks <= 0) r.max_stacks = d.max_stacks;
  if (r.max_closure <= 0) r.max_closure = d.max_closure;
  if (r.max_frames <= 0) r.max_frames = d.max_frames;
  if (r.mask_fuel <= 0) r.mask_fuel = d.mask_fuel;
  if (r.cache_bytes <= 0) r.cache_bytes = d.cache_bytes;
  return r;
}

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

static const char *rule_key(const void *ctx, int32_t id, size_t *len) {
  const gx_build_t *b = ctx;
  *len = strlen(b->rules[id].name);
  return b->rules[id].name;
}

void gx_init(gx_build_t *b, const gram_limits_t *lim, gram_err_t *err) {
  memset(b, 0, sizeof *b);
  b->err = err;
  b->lim = gram_limits_or_default(lim);
  if (b->lim.compile_ns > 0) b->deadline = clock_now_ns() + b->lim.compile_ns;
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
  strmap_free(&b->names);
  memset(b, 0, sizeof *b);
}

int gx_tick(gx_build_t *b, int64_t work) {
  if (b->failed) return -1;
  b->ticks += work;
  if (b->ticks < 4096) return 0;
  b->ticks = 0;
  if (b->deadline && clock_now_ns() > b->deadline)
    return gx_fail(b, -1, GRAM_ELIMIT, "the grammar took more than %lld ms to compile (bound: compile time)",
                   (long long)(b->lim.compile_ns / 1000000));
  return 0;
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
  if (b->failed || gx_tick(b, 1)) return -1;
  if (b->n_nodes >= b->lim.max_size)
    return gx_fail(b, -1, GRAM_ELIMIT, "grammar too large: more than %d expression nodes (bound: max_size)",
                   b->lim.max_size);
  if (grow((void **)&b->nodes, &b->cap_nodes, b->n_nodes + 1, sizeof *b->nodes))
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  gx_node_t *n = &b->nodes[b->n_nodes];
  memset(n, 0, sizeof *n);
  n->kind = (uint8_t)k;
  n->first = n->last = n->next = -1;
  n->depth = 1;
  n->copies = 1;
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
  const gx_node_t *c = &b->nodes[child];
  if (c->depth >= p->depth) {
    if (c->depth + 1 > b->lim.max_depth)
      return gx_fail(b, -1, GRAM_ELIMIT, "expressions nested deeper than %d (bound: max_depth)", b->lim.max_depth);
    p->depth = c->depth + 1;
  }
  if (c->copies > p->copies) p->copies = c->copies;
  if (p->last < 0) p->first = child;
  else b->nodes[p->last].next = child;
  p->last = child;
  p->n_kids++;
  return parent;
}

int32_t gx_lit(gx_build_t *b, const char *s, size_t n) {
  if (b->failed) return -1;
  if (n > (size_t)b->lim.max_literal)
    return gx_fail(b, -1, GRAM_ELIMIT, "a literal of %zu bytes (more than %d; bound: max_literal)", n,
                   b->lim.max_literal);
  int32_t q = gx_seq(b);
  for (size_t i = 0; i < n; i++) gx_add(b, q, gx_byte(b, (unsigned char)s[i]));
  return b->failed ? -1 : q;
}

int32_t gx_seq2(gx_build_t *b, int32_t x, int32_t y) { return gx_add(b, gx_add(b, gx_seq(b), x), y); }
int32_t gx_seq3(gx_build_t *b, int32_t x, int32_t y, int32_t z) { return gx_add(b, gx_seq2(b, x, y), z); }
int32_t gx_alt2(gx_build_t *b, int32_t x, int32_t y) { return gx_add(b, gx_add(b, gx_alt(b), x), y); }

int32_t gx_repeat_at(gx_build_t *b, int32_t child, int32_t min, int32_t max, int64_t pos) {
  if (b->failed || child < 0) return -1;
  const int32_t lim = b->lim.max_repeat;
  if (min < 0 || min > lim || max > lim || (max >= 0 && max < min))
    return gx_fail(b, pos, GRAM_ELIMIT, "repetition {%d,%d} out of range (at most %d; bound: max_repeat)", min,
                   max < 0 ? min : max, lim);
  if (min == 1 && max == 1) return child;
  /* the copies of one byte set this repetition and those inside it make:
   * a product, however few nodes (x{0,100}{0,100} is x{0,10000}) */
  const int64_t factor = max >= 0 ? (max ? max : 1) : (min ? min : 1);
  const int64_t copies = factor * b->nodes[child].copies;
  if (copies > lim)
    return gx_fail(b, pos, GRAM_ELIMIT,
                   "nested repetitions make more than %d copies (%lld; bound: max_repeat)", lim,
                   (long long)copies);
  if (b->nodes[child].depth + 1 > b->lim.max_depth)
    return gx_fail(b, pos, GRAM_ELIMIT, "expressions nested deeper than %d (bound: max_depth)", b->lim.max_depth);
  int32_t n = node(b, GX_REPEAT);
  if (n < 0) return -1;
  gx_node_t *r = &b->nodes[n];
  r->a = child;
  r->min = min;
  r->max = max;
  r->copies = (int32_t)copies;
  r->depth = b->nodes[child].depth + 1;
  return n;
}

int32_t gx_repeat(gx_build_t *b, int32_t child, int32_t min, int32_t max) {
  return gx_repeat_at(b, child, min, max, -1);
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
  if (b->n_rules >= b->lim.max_size) {
    free(name);
    return gx_fail(b, pos, GRAM_ELIMIT, "grammar too large: more than %d rules (bound: max_size)", b->lim.max_size);
  }
  if (grow((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) {
    free(name);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  b->rules[b->n_rules] = (gx_rule_t){.name = name, .body = -1, .def_pos = pos, .nullable = -1, .of = -1, .nonempty = -1};
  return b->n_rules++;
}

/* Indexes rule r by its name (named rules only: a generated name such as
 * "group-3" never captures a GBNF rule of that name). */
static int index_name(gx_build_t *b, int32_t r) {
  if (!b->names.slots || (uint64_t)(b->n_names + 1) * 2 > b->names.mask + 1) { /* rebuild twice as big */
    strmap_t m;
    if (strmap_init(&m, (uint64_t)(b->n_names + 1) * 2 + 8, rule_key, b))
      return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
    for (uint64_t i = 0; b->names.slots && i <= b->names.mask; i++)
      if (b->names.slots[i] >= 0) strmap_add(&m, b->names.slots[i]);
    strmap_free(&b->names);
    b->names = m;
  }
  strmap_add(&b->names, r);
  b->n_names++;
  return 0;
}

int32_t gx_rule_named(gx_build_t *b, const char *name, size_t len, int64_t pos) {
  if (b->failed) return -1;
  if (b->names.slots) {
    int32_t r = strmap_find(&b->names, name, len);
    if (r >= 0) return r;
  }
  if (memchr(name, 0, len)) return gx_fail(b, pos, GRAM_EINVAL, "a rule name holds a NUL byte");
  char *copy = malloc(len + 1); /* (not strndup: name need not be terminated) */
  if (copy) memcpy(copy, name, len), copy[len] = 0;
  int32_t r = rule_add(b, copy, pos);
  return r < 0 || index_name(b, r) ? -1 : r;
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
