/* grammar/gram_schema.c — JSON Schema (Draft 2020-12 subset) into the
 * expression builder: the schema walk (objects, arrays, references, the
 * type switch); numbers and strings are in gram_schema_scalar.c. These two
 * are the only files of the grammar module that see cJSON.
 *
 * Supported keywords: type (one or a list), properties, required,
 * additionalProperties (bool or schema), items, prefixItems, minItems,
 * the old tuple form (items an array, with additionalItems: read as
 * prefixItems and items),
 * maxItems, enum, const, anyOf, oneOf (as anyOf: exclusivity is not
 * enforced), allOf (of object schemas, merged), $ref ("#", "#/$defs/..", any
 * local JSON pointer; recursion works), $defs/definitions, minLength,
 * maxLength, pattern, format (date, time, date-time, uuid, email, ipv4),
 * minimum/maximum/exclusiveMinimum/exclusiveMaximum (integers exactly;
 * numbers with bounds: the integers within and decimals k.ddd whose unit
 * interval lies within, a subset; the side a schema leaves open is closed
 * at the int64 range for integers and at 1e15 for numbers, and a number
 * without bounds has at most 16 integral, 16 fraction and 16 exponent
 * digits, as llama.cpp's: no unbounded digit run), nullable (OpenAPI),
 * and the annotations title, description, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly. Any other keyword is an error
 * naming it and its JSON pointer.
 *
 * Output form: properties in the order the schema lists them (optional ones
 * may be left out), compact separators unless flexible whitespace is asked
 * for (then each run is bounded). Without "type" the type is inferred from
 * the keywords present (properties -> object, items -> array, ...); with no
 * keyword at all, any JSON value. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"
#include "grammar/gram_schema_int.h"


static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "nullable", "title", "description", "default", "examples", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", NULL};
static const char *const ANNOTATION[] = {"title", "description", "default", "examples", "$schema", "$id",
                                         "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                         "definitions", NULL};

static int in_list(const char *const *l, const char *s) {
  for (; *l; l++)
    if (!strcmp(*l, s)) return 1;
  return 0;
}

int gram__sc_fail(sc_t *c, const char *fmt, const char *what) {
  return gx_fail(c->b, -1, GRAM_EINVAL, fmt, what, c->plen ? c->path : "/");
}

/* Appends "/seg" (JSON pointer escaped) to the path; returns the old length. */
size_t gram__sc_path_push(sc_t *c, const char *seg) {
  size_t old = c->plen;
  if (c->plen + 2 < sizeof c->path) c->path[c->plen++] = '/';
  for (const char *s = seg; *s && c->plen + 3 < sizeof c->path; s++) {
    if (*s == '~' || *s == '/') c->path[c->plen++] = '~', c->path[c->plen++] = *s == '~' ? '0' : '1';
    else c->path[c->plen++] = *s;
  }
  c->path[c->plen] = 0;
  return old;
}
void gram__sc_path_pop(sc_t *c, size_t old) { c->plen = old, c->path[old] = 0; }

/* ---- shared pieces ------------------------------------------------------------ */

static int32_t ws(sc_t *c) { return c->o.flexible_ws ? gx_ref(c->b, c->r_ws) : gx_empty(c->b); }
static int32_t punct(sc_t *c, const char *p) { return gx_seq3(c->b, ws(c), gram__sc_lit(c, p), ws(c)); }

int32_t gram__sc_set_of(sc_t *c, const char *chars, unsigned lo, unsigned hi) {
  gram_set_t s = {{0}};
  for (; chars && *chars; chars++) gram__set_add(&s, (unsigned char)*chars);
  if (lo <= hi) gram__set_range(&s, lo, hi);
  return gx_set(c->b, &s);
}

static int32_t define(sc_t *c, const char *name, int32_t body) {
  int32_t r = gx_rule_named(c->b, name, strlen(name), -1);
  return gx_define(c->b, r, body, -1) ? -1 : r;
}

int32_t gram__sc_regex_js(sc_t *c, const char *re) { return gram__regex_expr(c->b, re, strlen(re), true, true); }

/* A JSON string escape: \\ then one of "\\/bfnrt or uXXXX. */
static int32_t escape(sc_t *c) {
  gx_build_t *b = c->b;
  return gx_seq2(b, gram__sc_lit(c, "\\"), gx_alt2(b, gram__sc_set_of(c, "\"\\/bfnrt", 1, 0),
                                         gx_seq2(b, gram__sc_lit(c, "u"), gx_repeat(b, gram__sc_set_of(c, "0123456789abcdefABCDEF", 1, 0), 4, 4))));
}

static void base_rules(sc_t *c) {
  gx_build_t *b = c->b;
  c->r_ws = define(c, "ws", gx_repeat(b, gram__sc_set_of(c, " \t\n\r", 1, 0), 0, c->o.ws_max));
  /* one JSON string character: plain (any code point but '"', '\\', the
   * C0 controls and DEL, as llguidance) or an escape */
  uint32_t lo[4] = {0, '"', '\\', 0x7F}, hi[4] = {0x1F, '"', '\\', 0x7F};
  int32_t plain = gx_codepoints(b, lo, hi, 4, true);
  c->r_char = define(c, "char", gx_alt2(b, plain, escape(c)));
  c->r_string = define(c, "string", gx_seq3(b, gram__sc_lit(c, "\""), gx_repeat(b, gx_ref(b, c->r_char), 0, -1), gram__sc_lit(c, "\"")));
  /* integers: the int64 range; numbers: llama.cpp's digit counts (an
   * integral part of at most 16 digits, a fraction and an exponent of 1 to
   * 16), so that no unbounded value lets greedy decoding write digits
   * until max_tokens */
  c->r_int = -1; /* the int64 range, made when a schema first asks for an integer (gram_schema_scalar.c) */
  int32_t integral = gx_alt2(b, gram__sc_lit(c, "0"), gx_seq2(b, gram__sc_set_of(c, "", '1', '9'),
                                                            gx_repeat(b, gram__sc_set_of(c, "", '0', '9'), 0, 15)));
  int32_t integral2 = gx_alt2(b, gram__sc_lit(c, "0"), gx_seq2(b, gram__sc_set_of(c, "", '1', '9'),
                                                             gx_repeat(b, gram__sc_set_of(c, "", '0', '9'), 0, 15)));
  int32_t frac = gx_opt(b, gx_seq2(b, gram__sc_lit(c, "."), gx_repeat(b, gram__sc_set_of(c, "", '0', '9'), 1, 16)));
  int32_t exp = gx_opt(b, gx_seq3(b, gram__sc_set_of(c, "eE", 1, 0), gx_opt(b, gram__sc_set_of(c, "+-", 1, 0)), integral2));
  c->r_number = define(c, "number", gx_seq3(b, gx_seq2(b, gx_opt(b, gram__sc_lit(c, "-")), integral), frac, exp));
  c->r_value = gx_rule_named(b, "value", 5, -1);
  c->r_object = gx_rule_named(b, "object", 6, -1);
  c->r_array = gx_rule_named(b, "array", 5, -1);
  int32_t v = gx_alt(b);
  gx_add(b, v, gx_ref(b, c->r_object)), gx_add(b, v, gx_ref(b, c->r_array)), gx_add(b, v, gx_ref(b, c->r_string));
  gx_add(b, v, gx_ref(b, c->r_number)), gx_add(b, v, gram__sc_lit(c, "true")), gx_add(b, v, gram__sc_lit(c, "false"));
  gx_add(b, v, gram__sc_lit(c, "null"));
  gx_define(b, c->r_value, v, -1);
  int32_t kv = gx_seq3(b, gx_ref(b, c->r_string), punct(c, ":"), gx_ref(b, c->r_value));
  int32_t kv2 = gx_seq3(b, gx_ref(b, c->r_string), punct(c, ":"), gx_ref(b, c->r_value));
  int32_t more = gx_repeat(b, gx_seq2(b, punct(c, ","), kv2), 0, -1);
  gx_define(b, c->r_object, gx_seq3(b, gx_seq2(b, gram__sc_lit(c, "{"), ws(c)), gx_opt(b, gx_seq2(b, kv, more)),
                                    gx_seq2(b, ws(c), gram__sc_lit(c, "}"))), -1);
  int32_t items = gx_seq2(b, gx_ref(b, c->r_value),
                          gx_repeat(b, gx_seq2(b, punct(c, ","), gx_ref(b, c->r_value)), 0, -1));
  gx_define(b, c->r_array, gx_seq3(b, gx_seq2(b, gram__sc_lit(c, "["), ws(c)), gx_opt(b, items),
                                   gx_seq2(b, ws(c), gram__sc_lit(c, "]"))), -1);
}

/* ---- literals: const, enum, keys ---------------------------------------------- */

static int32_t json_lit(sc_t *c, const cJSON *v) {
  char *s = cJSON_PrintUnformatted(v);
  if (!s) return gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
  int32_t x = gram__sc_lit(c, s);
  cJSON_free(s);
  return x;
}

/* The JSON text of string s (with quotes), malloc'd. */
static char *json_str(const char *s) {
  cJSON *j = cJSON_CreateString(s);
  char *t = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  return t;
}

/* ---- the schema walk ------------------------------------------------------------ */

static int32_t schema(sc_t *c, const cJSON *s);
static const cJSON *resolve(sc_t *c, const char *ref);

static int32_t sub(sc_t *c, const cJSON *s, const char *k1, const char *k2) {
  size_t old = gram__sc_path_push(c, k1);
  if (k2) gram__sc_path_push(c, k2);
  int32_t x = schema(c, s);
  gram__sc_path_pop(c, old);
  return x;
}

/* One node of the key trie other_key builds: the keys that share the
 * node's prefix (depth bytes) and the rule its expression defines. */
typedef struct key_node {
  int32_t rule;
  int32_t depth;
  int32_t first, n; /* the keys: order[first .. first + n) */
} key_node_t;

static int cmp_keys(const void *x, const void *y) {
  const char *const *a = x, *const *b = y;
  return strcmp(*a, *b);
}

/* The rest of a key (after its opening quote) that is none of the n keys
 * (their JSON-escaped bodies, without quotes): a trie of the keys, leaving
 * it at the first byte that differs or by ending early. Divergence inside a
 * multi-byte character or an escape that a key also starts there is not
 * offered (a narrower, still valid language). Iterative (a work list of
 * trie nodes, one rule each): a key's length never becomes stack depth. */
static int32_t other_key(sc_t *c, char **keys, int n, int32_t rest) {
  gx_build_t *b = c->b;
  size_t *len = malloc(sizeof *len * (size_t)(n + 1));
  key_node_t *work = malloc(sizeof *work * 64);
  int32_t n_work = 0, cap_work = 64, top = gx_rule_new(b, "key");
  if (!len || !work) {
    free(len), free(work);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  qsort(keys, (size_t)n, sizeof *keys, cmp_keys); /* a node's keys are a contiguous run */
  for (int i = 0; i < n; i++) len[i] = strlen(keys[i]);
  work[n_work++] = (key_node_t){top, 0, 0, n};
  while (n_work && !b->failed) {
    const key_node_t kn = work[--n_work];
    const size_t depth = (size_t)kn.depth;
    int32_t alt = gx_alt(b);
    gram_set_t kids = {{0}};
    int ends_here = 0;
    for (int i = kn.first; i < kn.first + kn.n; i++) {
      if (len[i] == depth) ends_here = 1;
      else gram__set_add(&kids, (unsigned char)keys[i][depth]);
    }
    if (!ends_here) gx_add(b, alt, gram__sc_lit(c, "\""));
    /* diverge here with one character, then any rest */
    gram_set_t first = {{0}};
    gram__set_range(&first, 0x20, 0x7E);
    first.w['"' >> 5] &= ~(1u << ('"' & 31));
    first.w['\\' >> 5] &= ~(1u << ('\\' & 31));
    int high = 0;
    for (int w = 0; w < 8; w++) first.w[w] &= ~kids.w[w], high |= w >= 4 && kids.w[w];
    int32_t d = gx_alt(b);
    gx_add(b, d, gx_set(b, &first));
    if (!high) { /* any non-ASCII code point: one shared rule, not one expression per trie node */
      if (!c->r_nonascii) {
        uint32_t lo = 0x80, hi = 0x10FFFF;
        c->r_nonascii = gx_rule_new(b, "nonascii");
        gx_define(b, c->r_nonascii, gx_codepoints(b, &lo, &hi, 1, false), -1);
      }
      gx_add(b, d, gx_ref(b, c->r_nonascii));
    }
    if (!gram__set_has(&kids, '\\')) gx_add(b, d, escape(c));
    gx_add(b, alt, gx_seq3(b, d, gx_ref(b, rest), gram__sc_lit(c, "\"")));
    /* the children: runs of keys with the same next byte (sorted: contiguous) */
    for (int i = kn.first; i < kn.first + kn.n && !b->failed;) {
      if (len[i] == depth) {
        i++;
        continue;
      }
      const unsigned char ch = (unsigned char)keys[i][depth];
      int j = i + 1;
      while (j < kn.first + kn.n && len[j] > depth && (unsigned char)keys[j][depth] == ch) j++;
      int32_t r = gx_rule_new(b, "key");
      gx_add(b, alt, gx_seq2(b, gx_byte(b, ch), gx_ref(b, r)));
      if (n_work == cap_work) {
        key_node_t *nw = realloc(work, sizeof *nw * (size_t)cap_work * 2);
        if (!nw) {
          gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
          break;
        }
        work = nw, cap_work *= 2;
      }
      work[n_work++] = (key_node_t){r, kn.depth + 1, i, j - i};
      i = j;
    }
    gx_define(b, kn.rule, alt, -1);
  }
  free(len), free(work);
  return b->failed ? -1 : gx_ref(b, top);
}

typedef struct prop {
  const char *name;
  const cJSON *schema; /* NULL: any value */
  int required;
  int src;             /* which schema of an allOf listed it (0: the object itself) */
} prop_t;

/* Names, indexed (a base/ string map over an array that grows): the
 * properties an object collects, the names one schema lists. Lookups are
 * constant time, so 25,000 properties cost 25,000 steps, not their square. */
typedef struct names {
  const char **name;
  int n, cap;
  strmap_t idx;
} names_t;

static const char *names_key(const void *ctx, int32_t id, size_t *len) {
  const names_t *s = ctx;
  *len = strlen(s->name[id]);
  return s->name[id];
}

static void names_free(names_t *s) {
  free(s->name);
  strmap_free(&s->idx);
}

/* The index of name, or -1. */
static int names_find(const names_t *s, const char *name) {
  return s->idx.slots ? strmap_find(&s->idx, name, strlen(name)) : -1;
}

/* Appends name (its bytes stay the caller's); 0 or -1 (no memory). */
static int names_add(names_t *s, const char *name) {
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 16;
    const char **nn = realloc(s->name, sizeof *nn * (size_t)nc);
    if (!nn) return -1;
    s->name = nn, s->cap = nc;
    strmap_t m; /* rebuilt for the new capacity */
    if (strmap_init(&m, (uint64_t)nc, names_key, s)) return -1;
    for (int i = 0; i < s->n; i++) strmap_add(&m, i);
    strmap_free(&s->idx);
    s->idx = m;
  }
  s->name[s->n] = name;
  strmap_add(&s->idx, s->n);
  s->n++;
  return 0;
}

/* The object of the props, in order; extra: -1 none, else the rule of the
 * value of any other key. */
static int32_t object_of(sc_t *c, prop_t *p, int n, int32_t extra_value) {
  gx_build_t *b = c->b;
  int32_t *kv = malloc(sizeof *kv * (size_t)(n + 1));
  int32_t *R = malloc(sizeof *R * (size_t)(2 * n + 2));
  char **keys = malloc(sizeof *keys * (size_t)(n + 1));
  if (!kv || !R || !keys) {
    free(kv), free(R), free(keys);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  int nk = 0;
  for (int i = 0; i < n && !b->failed; i++) {
    const size_t name_len = strlen(p[i].name);
    if (name_len > (size_t)b->lim.max_literal) {
      size_t old = gram__sc_path_push(c, "properties");
      gx_fail(b, -1, GRAM_ELIMIT, "json schema: a property name of %zu bytes (more than %d; bound: max_literal) (at %s)",
              name_len, b->lim.max_literal, c->path);
      gram__sc_path_pop(c, old);
      break;
    }
    char *q = json_str(p[i].name);
    if (!q) {
      gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
      break;
    }
    keys[nk++] = q;
    size_t old = gram__sc_path_push(c, "properties");
    int32_t v = p[i].schema ? sub(c, p[i].schema, p[i].name, NULL) : gx_ref(b, c->r_value);
    gram__sc_path_pop(c, old);
    kv[i] = gx_rule_new(b, "prop");
    gx_define(b, kv[i], gx_seq3(b, gram__sc_lit(c, q), punct(c, ":"), v), -1);
  }
  /* (kv holds copies of the quoted keys; keys may be rewritten below) */
  int32_t result = -1;
  if (!b->failed) {
    int32_t kva = -1;
    if (extra_value >= 0) {
      int32_t key;
      if (nk) {
        int32_t rest = gx_rule_new(b, "keyrest");
        gx_define(b, rest, gx_repeat(b, gx_ref(b, c->r_char), 0, -1), -1);
        for (int i = 0; i < nk; i++) { /* the bodies, without quotes */
          size_t L = strlen(keys[i]);
          memmove(keys[i], keys[i] + 1, L - 2);
          keys[i][L - 2] = 0;
        }
        key = gx_seq2(b, gram__sc_lit(c, "\""), other_key(c, keys, nk, rest));
      } else key = gx_ref(b, c->r_string);
      kva = gx_rule_new(b, "extra");
      gx_define(b, kva, gx_seq3(b, key, punct(c, ":"), gx_ref(b, extra_value)), -1);
    }
    /* R[i][s]: properties i.. given whether one was written (s) */
    for (int s = 0; s < 2; s++) {
      int32_t tail;
      if (kva < 0) tail = gx_empty(b);
      else if (s) tail = gx_repeat(b, gx_seq2(b, punct(c, ","), gx_ref(b, kva)), 0, -1);
      else tail = gx_opt(b, gx_seq2(b, gx_ref(b, kva), gx_repeat(b, gx_seq2(b, punct(c, ","), gx_ref(b, kva)), 0, -1)));
      R[2 * n + s] = gx_rule_new(b, "props");
      gx_define(b, R[2 * n + s], tail, -1);
    }
    for (int i = n - 1; i >= 0 && !b->failed; i--)
      for (int s = 0; s < 2; s++) {
        int32_t take = gx_seq3(b, s ? punct(c, ",") : gx_empty(b), gx_ref(b, kv[i]), gx_ref(b, R[2 * (i + 1) + 1]));
        int32_t body = p[i].required ? take : gx_alt2(b, take, gx_ref(b, R[2 * (i + 1) + s]));
        R[2 * i + s] = gx_rule_new(b, "props");
        gx_define(b, R[2 * i + s], body, -1);
      }
    result = gx_seq3(b, gx_seq2(b, gram__sc_lit(c, "{"), ws(c)), gx_ref(b, R[0]), gx_seq2(b, ws(c), gram__sc_lit(c, "}")));
  }
  for (int i = 0; i < nk; i++) free(keys[i]);
  free(kv), free(R), free(keys);
  return b->failed ? -1 : result;
}

/* What collect_props learned about one schema of an allOf. */
typedef struct src_info {
  int closed;        /* additionalProperties: false */
  int open;          /* additionalProperties: true or a schema */
  int has_props;
} src_info_t;

static int add_prop(sc_t *c, prop_t **p, int *n, int *cap, names_t *idx, prop_t q) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 16;
    prop_t *np = realloc(*p, sizeof *np * (size_t)*cap);
    if (!np) return gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
    *p = np;
  }
  if (names_add(idx, q.name)) return gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
  (*p)[(*n)++] = q;
  return gx_tick(c->b, 1);
}

/* Adds the properties/required of object schema s (source number src) to the
 * list (idx: its names, index i is p[i]); a property listed by two schemas
 * is an error, a required name another schema lists is merged. */
static int collect_props(sc_t *c, const cJSON *s, int src, prop_t **p, int *n, int *cap, names_t *idx,
                         const cJSON **extra, src_info_t *info) {
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  if (ref && (!cJSON_IsString(ref) || !(s = resolve(c, ref->valuestring)))) return -1;
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  if (props && !cJSON_IsObject(props)) return gram__sc_fail(c, "json schema: '%s' must be an object (at %s)", "properties");
  if (req && !cJSON_IsArray(req)) return gram__sc_fail(c, "json schema: '%s' must be an array (at %s)", "required");
  info->has_props = props != NULL;
  for (const cJSON *q = props ? props->child : NULL; q; q = q->next) {
    const int i = names_find(idx, q->string);
    if (i >= 0) {
      if ((*p)[i].schema && !cJSON_Compare((*p)[i].schema, q, 1))
        return gram__sc_fail(c, "json schema: property '%s' given different schemas across allOf (at %s)", q->string);
      (*p)[i].schema = q; /* was only required so far */
    } else if (add_prop(c, p, n, cap, idx, (prop_t){q->string, q, 0, src})) return -1;
  }
  for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
    if (!cJSON_IsString(r)) return gram__sc_fail(c, "json schema: '%s' entries must be strings (at %s)", "required");
    const int i = names_find(idx, r->valuestring);
    if (i >= 0) (*p)[i].required = 1;
    else if (add_prop(c, p, n, cap, idx, (prop_t){r->valuestring, NULL, 1, src})) return -1;
  }
  if (add) {
    if (cJSON_IsFalse(add)) info->closed = 1;
    else info->open = 1;
    if (!cJSON_IsBool(add)) {
      if (*extra) return gram__sc_fail(c, "json schema: '%s' given as a schema twice across allOf (at %s)", "additionalProperties");
      *extra = add;
    }
  }
  return 0;
}

/* The names the properties of (resolved) schema s list, indexed. */
static int listed_names(sc_t *c, const cJSON *s, names_t *out) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  for (const cJSON *q = props && cJSON_IsObject(props) ? props->child : NULL; q; q = q->next)
    if (names_add(out, q->string)) return gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
  return 0;
}

static int32_t object_node(sc_t *c, const cJSON *s) {
  prop_t *p = NULL;
  int n = 0, cap = 0;
  names_t names = {0};
  const cJSON *extra = NULL;
  const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
  int n_src = 1 + (all ? cJSON_GetArraySize(all) : 0);
  src_info_t *info = calloc((size_t)n_src, sizeof *info);
  const cJSON **srcs = calloc((size_t)n_src, sizeof *srcs);
  if (!info || !srcs) {
    free(info), free(srcs);
    return gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
  }
  srcs[0] = s;
  int rc = collect_props(c, s, 0, &p, &n, &cap, &names, &extra, &info[0]);
  size_t old = gram__sc_path_push(c, "allOf");
  int idx = 1;
  for (const cJSON *a = all ? all->child : NULL; a && !rc; a = a->next, idx++) {
    char num[16];
    snprintf(num, sizeof num, "%d", idx - 1);
    size_t o2 = gram__sc_path_push(c, num);
    for (const cJSON *k = a->child; k && !rc; k = k->next)
      if (!in_list(ANNOTATION, k->string) && strcmp(k->string, "properties") && strcmp(k->string, "required") &&
          strcmp(k->string, "additionalProperties") && strcmp(k->string, "type") && strcmp(k->string, "$ref"))
        rc = gram__sc_fail(c, "json schema: allOf supports object schemas only; '%s' is not supported there (at %s)", k->string);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(a, "$ref");
    srcs[idx] = ref && cJSON_IsString(ref) ? resolve(c, ref->valuestring) : a;
    if (!rc && srcs[idx]) rc = collect_props(c, a, idx, &p, &n, &cap, &names, &extra, &info[idx]);
    gram__sc_path_pop(c, o2);
  }
  gram__sc_path_pop(c, old);
  /* JSON Schema: a schema's additionalProperties: false refuses every name
   * its own properties do not list, whoever else lists it */
  int closed = 0, open = 0, any_props = 0, k = 0;
  for (int j = 0; j < n_src; j++) closed |= info[j].closed, open |= info[j].open, any_props |= info[j].has_props;
  uint8_t *drop = calloc((size_t)n + 1, 1);
  if (!drop && !rc) rc = gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
  for (int j = 0; j < n_src && !rc; j++) {
    if (!info[j].closed || !srcs[j]) continue;
    names_t listed = {0};
    rc = listed_names(c, srcs[j], &listed);
    for (int i = 0; i < n && !rc; i++) drop[i] |= names_find(&listed, p[i].name) < 0;
    names_free(&listed);
  }
  for (int i = 0; i < n && !rc; i++) {
    if (!drop[i]) p[k++] = p[i];
    else if (p[i].required)
      rc = gram__sc_fail(c, "json schema: required property '%s' is refused by an additionalProperties: false (at %s)", p[i].name);
  }
  free(drop);
  n = k;
  int32_t x = -1;
  if (!rc) {
    int32_t ev = -1;
    if (closed) ev = -1;
    else if (extra) {
      ev = gx_rule_new(c->b, "extravalue");
      gx_define(c->b, ev, sub(c, extra, "additionalProperties", NULL), -1);
    } else if (open || !any_props || c->o.additional_default) ev = c->r_value;
    x = object_of(c, p, n, ev);
  }
  free(p), free(info), free(srcs);
  names_free(&names);
  return x;
}

static int32_t array_node(sc_t *c, const cJSON *s) {
  gx_build_t *b = c->b;
  const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
  const cJSON *extra = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
  if (cJSON_IsArray(items)) { /* the old tuple form (draft 4 to 2019-09): items [...] is prefixItems, and
                               * additionalItems (absent: any) the elements after it, as llama.cpp reads it */
    if (prefix) return gram__sc_fail(c, "json schema: %s with prefixItems: give one of them (at %s)", "an items array");
    prefix = items;
    items = extra;
    extra = NULL;
  }
  if (extra) return gram__sc_fail(c, "json schema: '%s' needs an items array (the tuple form) (at %s)", "additionalItems");
  int32_t mn = 0, mx = -1;
  if (gram__sc_count(c, s, "minItems", &mn) < 0 || gram__sc_count(c, s, "maxItems", &mx) < 0) return -1;
  if (prefix && !cJSON_IsArray(prefix)) return gram__sc_fail(c, "json schema: '%s' must be an array (at %s)", "prefixItems");
  int np = prefix ? cJSON_GetArraySize(prefix) : 0;
  if (items && cJSON_IsFalse(items)) mx = mx < 0 || mx > np ? np : mx;
  if (mx >= 0 && mx < mn) return gram__sc_fail(c, "json schema: %s below minItems (at %s)", "maxItems");
  if (np > b->lim.max_repeat) return gram__sc_fail(c, "json schema: too many %s (bound: max_repeat) (at %s)", "prefixItems");
  /* the rule of one element after the prefix */
  int32_t item_rule = c->r_value;
  if (items && !cJSON_IsBool(items)) {
    item_rule = gx_rule_new(b, "item");
    gx_define(b, item_rule, sub(c, items, "items", NULL), -1);
  }
  /* tail(i): elements from index i on, one written before if i > 0 */
  int32_t tail;
  int32_t lo = mn > np ? mn - np : 0, hi = mx < 0 ? -1 : mx - np;
  if (mx >= 0 && mx <= np) tail = gx_empty(b);
  else if (np == 0) {
    int32_t more = gx_repeat(b, gx_seq2(b, punct(c, ","), gx_ref(b, item_rule)), lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    tail = gx_seq2(b, gx_ref(b, item_rule), more);
    if (lo == 0) tail = gx_opt(b, tail);
  } else {
    tail = gx_repeat(b, gx_seq2(b, punct(c, ","), gx_ref(b, item_rule)), lo, hi);
  }
  int32_t limit = mx >= 0 && mx < np ? mx : np;
  const cJSON *pi = prefix ? prefix->child : NULL;
  int32_t *elem = malloc(sizeof *elem * (size_t)(np + 1));
  if (!elem) return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  for (int i = 0; i < limit && !b->failed; i++, pi = pi->next) {
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    elem[i] = sub(c, pi, "prefixItems", num);
  }
  for (int i = limit - 1; i >= 0 && !b->failed; i--) {
    int32_t t = gx_seq3(b, i ? punct(c, ",") : gx_empty(b), elem[i], tail);
    tail = i < mn ? t : gx_opt(b, t);
  }
  free(elem);
  return gx_seq3(b, gx_seq2(b, gram__sc_lit(c, "["), ws(c)), tail, gx_seq2(b, ws(c), gram__sc_lit(c, "]")));
}

static const cJSON *resolve(sc_t *c, const char *ref) {
  if (ref[0] != '#') {
    gram__sc_fail(c, "json schema: only local $ref (\"#...\") is supported, not '%s' (at %s)", ref);
    return NULL;
  }
  const cJSON *t = c->root;
  const char *p = ref + 1;
  while (*p == '/') {
    p++;
    char seg[256];
    size_t k = 0;
    for (; *p && *p != '/' && k + 1 < sizeof seg; p++) {
      if (*p == '~' && (p[1] == '0' || p[1] == '1')) seg[k++] = p[1] == '0' ? '~' : '/', p++;
      else seg[k++] = *p;
    }
    seg[k] = 0;
    t = cJSON_IsArray(t) ? cJSON_GetArrayItem(t, atoi(seg)) : cJSON_GetObjectItemCaseSensitive(t, seg);
    if (!t) break;
  }
  if (!t || *p) {
    gram__sc_fail(c, "json schema: $ref '%s' does not resolve (at %s)", ref);
    return NULL;
  }
  return t;
}

static int32_t ref_node(sc_t *c, const char *ref) {
  const cJSON *t = resolve(c, ref);
  if (!t) return -1;
  for (int i = 0; i < c->n_refs; i++)
    if (c->ref_node[i] == t) return gx_ref(c->b, c->ref_rule[i]);
  const cJSON **nn = realloc(c->ref_node, sizeof *nn * (size_t)(c->n_refs + 1));
  if (nn) c->ref_node = nn;
  int32_t *nr = realloc(c->ref_rule, sizeof *nr * (size_t)(c->n_refs + 1));
  if (nr) c->ref_rule = nr;
  if (!nn || !nr) return gx_fail(c->b, -1, GRAM_ENOMEM, "out of memory");
  int32_t r = gx_rule_new(c->b, "ref");
  if (r < 0) return -1;
  c->ref_node[c->n_refs] = t, c->ref_rule[c->n_refs] = r, c->n_refs++;
  char saved[sizeof c->path];
  size_t plen = c->plen;
  memcpy(saved, c->path, sizeof saved);
  snprintf(c->path, sizeof c->path, "%s", ref + 1);
  c->plen = strlen(c->path);
  int32_t body = schema(c, t);
  memcpy(c->path, saved, sizeof saved);
  c->plen = plen;
  if (body < 0) return -1;
  c->b->rules[r].body = body;
  return gx_ref(c->b, r);
}

static int has_any(const cJSON *s, const char *const *keys) {
  for (; *keys; keys++)
    if (cJSON_GetObjectItemCaseSensitive(s, *keys)) return 1;
  return 0;
}

static int32_t typed(sc_t *c, const cJSON *s, const char *t) {
  gx_build_t *b = c->b;
  if (!strcmp(t, "null")) return gram__sc_lit(c, "null");
  if (!strcmp(t, "boolean")) return gx_alt2(b, gram__sc_lit(c, "true"), gram__sc_lit(c, "false"));
  if (!strcmp(t, "string")) return gram__sc_string(c, s);
  if (!strcmp(t, "integer")) return gram__sc_number(c, s, 1);
  if (!strcmp(t, "number")) return gram__sc_number(c, s, 0);
  if (!strcmp(t, "object")) return object_node(c, s);
  if (!strcmp(t, "array")) return array_node(c, s);
  size_t old = gram__sc_path_push(c, "type");
  gx_fail(b, -1, GRAM_EINVAL, "json schema: unknown type '%s' (at %s)", t, c->path);
  gram__sc_path_pop(c, old);
  return -1;
}

static int32_t schema(sc_t *c, const cJSON *s) {
  gx_build_t *b = c->b;
  if (b->failed) return -1;
  if (cJSON_IsTrue(s)) return gx_ref(b, c->r_value);
  if (cJSON_IsFalse(s)) return gram__sc_fail(c, "json schema: %s schema accepts nothing (at %s)", "the false");
  if (!cJSON_IsObject(s)) return gram__sc_fail(c, "json schema: %s must be an object or a boolean (at %s)", "a schema");
  if (++c->depth > b->lim.max_depth)
    return gx_fail(b, -1, GRAM_ELIMIT, "json schema: nested deeper than %d (bound: max_depth) (at %s)", b->lim.max_depth,
                   c->path);
  int32_t x = -1;
  for (const cJSON *k = s->child; k; k = k->next)
    if (!in_list(KNOWN, k->string)) {
      size_t old = gram__sc_path_push(c, k->string);
      gram__sc_fail(c, "json schema: keyword '%s' is not supported (at %s)", k->string);
      gram__sc_path_pop(c, old);
      goto out;
    }
  int constraints = 0;
  for (const cJSON *k = s->child; k; k = k->next) constraints += !in_list(ANNOTATION, k->string);
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
  const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
  const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
  if (!any) any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
  const cJSON *nullable = cJSON_GetObjectItemCaseSensitive(s, "nullable");
  int is_null = cJSON_IsTrue(nullable);
  if (ref || cst || en || any) {
    const char *key = ref ? "$ref" : cst ? "const" : en ? "enum" : any->string;
    if (constraints - (nullable != NULL) - (cJSON_GetObjectItemCaseSensitive(s, "type") != NULL && !ref) > 1) {
      size_t old = gram__sc_path_push(c, key);
      gram__sc_fail(c, "json schema: '%s' combined with other constraining keywords is not supported (at %s)", key);
      gram__sc_path_pop(c, old);
      goto out;
    }
    size_t old = gram__sc_path_push(c, key);
    if (ref) x = cJSON_IsString(ref) ? ref_node(c, ref->valuestring) : gram__sc_fail(c, "json schema: '%s' must be a string (at %s)", key);
    else if (cst) x = json_lit(c, cst);
    else if (!cJSON_IsArray(cst ? NULL : (en ? en : any)) || !(en ? en : any)->child)
      x = gram__sc_fail(c, "json schema: '%s' must be a non-empty array (at %s)", key);
    else {
      x = gx_alt(b);
      int i = 0;
      for (const cJSON *e = (en ? en : any)->child; e && !b->failed; e = e->next, i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        size_t o2 = gram__sc_path_push(c, num);
        gx_add(b, x, en ? json_lit(c, e) : schema(c, e));
        gram__sc_path_pop(c, o2);
      }
    }
    gram__sc_path_pop(c, old);
    if (is_null && x >= 0) x = gx_alt2(b, x, gram__sc_lit(c, "null"));
    goto out;
  }
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
  const char *types[8];
  int nt = 0;
  if (cJSON_IsString(type)) types[nt++] = type->valuestring;
  else if (cJSON_IsArray(type)) {
    for (const cJSON *t = type->child; t && nt < 8; t = t->next) {
      if (!cJSON_IsString(t)) break;
      types[nt++] = t->valuestring;
    }
    if (nt != cJSON_GetArraySize(type) || nt == 0) {
      gram__sc_fail(c, "json schema: '%s' must be a type name or a list of them (at %s)", "type");
      goto out;
    }
  } else if (type) {
    gram__sc_fail(c, "json schema: '%s' must be a type name or a list of them (at %s)", "type");
    goto out;
  } else {
    static const char *const obj[] = {"properties", "additionalProperties", "required", "allOf", NULL};
    static const char *const arr[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *const num[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    if (has_any(s, obj)) types[nt++] = "object";
    if (has_any(s, arr)) types[nt++] = "array";
    if (has_any(s, str)) types[nt++] = "string";
    if (has_any(s, num)) types[nt++] = "number";
    if (!nt) {
      x = gx_ref(b, c->r_value);
      goto out;
    }
  }
  x = gx_alt(b);
  for (int i = 0; i < nt && !b->failed; i++) gx_add(b, x, typed(c, s, types[i]));
  if (is_null) gx_add(b, x, gram__sc_lit(c, "null"));
out:
  c->depth--;
  return b->failed ? -1 : x;
}

static gram_t *compile(const cJSON *schema_doc, const gram_json_opts_t *opts, const gram_limits_t *lim,
                       gram_err_t *err) {
  gx_build_t b;
  gx_init(&b, lim, err);
  sc_t c = {.b = &b, .root = schema_doc};
  if (opts) c.o = *opts;
  if (c.o.ws_max <= 0) c.o.ws_max = 8;
  if (c.o.ws_max > 64) c.o.ws_max = 64;
  if (!c.o.flexible_ws) c.o.ws_max = 0;
  base_rules(&c);
  int32_t root = gx_rule_named(&b, "root", 4, -1);
  int32_t body = schema_doc ? schema(&c, schema_doc) : gx_ref(&b, c.r_object);
  gram_t *g = NULL;
  if (!gx_define(&b, root, gx_seq3(&b, ws(&c), body, ws(&c)), -1)) g = gx_finish(&b, root);
  free(c.ref_node), free(c.ref_rule);
  gx_free(&b);
  return g;
}

gram_t *gram_compile_json_schema(const cJSON *schema_doc, const gram_json_opts_t *opts, const gram_limits_t *lim,
                                 gram_err_t *err) {
  if (!schema_doc) {
    if (err) err->pos = -1, snprintf(err->msg, sizeof err->msg, "json schema: no schema");
    return NULL;
  }
  return compile(schema_doc, opts, lim, err);
}

gram_t *gram_compile_json_object(const gram_json_opts_t *opts, const gram_limits_t *lim, gram_err_t *err) {
  return compile(NULL, opts, lim, err);
}
