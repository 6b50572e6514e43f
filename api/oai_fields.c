/* api/oai_fields.c — typed access to request JSON fields (see
 * oai_fields.h). */
#include "api/oai_fields.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_alloc.h"
#include "api/json_strict.h"

#define INT_EXACT_MAX 9007199254740992.0 /* 2^53: larger doubles are not exact integers */

int oai__fail(oai__ctx_t *c, const char *code, const char *param, const char *fmt, ...) {
  oai_error_t *e = c->err;
  e->status = 400;
  e->type = "invalid_request_error";
  e->code = code;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return -EINVAL;
}

int oai__oom(oai__ctx_t *c) {
  oai__fail(c, "out_of_memory", NULL, "the server ran out of memory reading the request; try again");
  c->err->status = 503;
  c->err->type = "server_error";
  return -ENOMEM;
}

void oai__ctx_init(oai__ctx_t *c, const oai_limits_t *lim, oai_limits_t *dflt, arena_t *arena, oai_error_t *err) {
  *dflt = oai_limits_default();
  memset(c, 0, sizeof *c);
  c->arena = arena;
  c->lim = lim ? lim : dflt;
  c->err = err;
  memset(err, 0, sizeof *err);
  oai__begin(c);
}

void oai__begin(oai__ctx_t *c) { arena_fallible(c->arena, true); }

int oai__end(oai__ctx_t *c, int r) {
  arena_fallible(c->arena, false);
  return c->arena->oom ? oai__oom(c) : r;
}

const char *oai__type_name(const cJSON *x) {
  if (!x || cJSON_IsNull(x)) return "null";
  if (cJSON_IsBool(x)) return "a boolean";
  if (cJSON_IsNumber(x)) return "a number";
  if (cJSON_IsString(x)) return "a string";
  if (cJSON_IsArray(x)) return "an array";
  if (cJSON_IsObject(x)) return "an object";
  return "an invalid value";
}

const cJSON *oai__get(const cJSON *obj, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
  return x && !cJSON_IsNull(x) ? x : NULL;
}

/* The field (NULL when absent or null: nothing to check) and, in *name, what
 * errors call it: "key" or "prefix.key" (nb holds 160 bytes). */
static const cJSON *field(const oai__ctx_t *c, const cJSON *obj, const char *key, bool *given,
                          char *nb, const char **name) {
  const cJSON *x = oai__get(obj, key);
  if (given) *given = x != NULL;
  *name = key;
  if (c->prefix) {
    snprintf(nb, 160, "%s.%s", c->prefix, key);
    *name = nb;
  }
  return x;
}

int oai__get_bool(oai__ctx_t *c, const cJSON *obj, const char *key, bool *out, bool *given) {
  char nb[160];
  const char *name;
  const cJSON *x = field(c, obj, key, given, nb, &name);
  if (!x) return 0;
  if (!cJSON_IsBool(x))
    return oai__fail(c, "invalid_type", name, "%s must be a boolean, got %s", name, oai__type_name(x));
  *out = cJSON_IsTrue(x);
  return 0;
}

int oai__get_float(oai__ctx_t *c, const cJSON *obj, const char *key, double lo, double hi,
                   bool lo_open, bool hi_open, float *out, bool *given) {
  char nb[160];
  const char *name;
  const cJSON *x = field(c, obj, key, given, nb, &name);
  if (!x) return 0;
  if (!cJSON_IsNumber(x))
    return oai__fail(c, "invalid_type", name, "%s must be a number, got %s", name, oai__type_name(x));
  double v = x->valuedouble;
  if (!isfinite(v) || (lo_open ? v <= lo : v < lo) || (hi_open ? v >= hi : v > hi))
    return oai__fail(c, "invalid_value", name, "%s must be in %s%g, %g%s, got %g", name,
                     lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]", v);
  *out = (float)v;
  return 0;
}

/* Whether x is a number holding an exact integer in [lo, hi]. */
static bool int_in(const cJSON *x, int64_t lo, int64_t hi, int64_t *out) {
  if (!cJSON_IsNumber(x)) return false;
  double v = x->valuedouble;
  if (!isfinite(v) || v != floor(v) || fabs(v) > INT_EXACT_MAX) return false;
  if (v < (double)lo || v > (double)hi) return false;
  *out = (int64_t)v;
  return true;
}

int oai__get_int(oai__ctx_t *c, const cJSON *obj, const char *key, int64_t lo, int64_t hi,
                 int64_t *out, bool *given) {
  char nb[160];
  const char *name;
  const cJSON *x = field(c, obj, key, given, nb, &name);
  if (!x) return 0;
  if (!cJSON_IsNumber(x))
    return oai__fail(c, "invalid_type", name, "%s must be an integer, got %s", name, oai__type_name(x));
  if (x->valuedouble != floor(x->valuedouble))
    return oai__fail(c, "invalid_type", name, "%s must be an integer, got %g", name, x->valuedouble);
  if (!int_in(x, lo, hi, out))
    return oai__fail(c, "invalid_value", name, "%s must be between %lld and %lld, got %.0f", name,
                     (long long)lo, (long long)hi, x->valuedouble);
  return 0;
}

int oai__get_string(oai__ctx_t *c, const cJSON *obj, const char *key, const char **out,
                    size_t *len, bool *given) {
  char nb[160];
  const char *name;
  const cJSON *x = field(c, obj, key, given, nb, &name);
  if (!x) return 0;
  if (!cJSON_IsString(x))
    return oai__fail(c, "invalid_type", name, "%s must be a string, got %s", name, oai__type_name(x));
  size_t n = strlen(x->valuestring);
  *out = arena_strndup(c->arena, x->valuestring, n);
  OAI_NEED(c, *out);
  if (len) *len = n;
  return 0;
}

int oai__token_id(oai__ctx_t *c, const cJSON *x, const char *param, int32_t *out) {
  int64_t hi = c->lim->vocab_size > 0 ? c->lim->vocab_size - 1 : INT32_MAX;
  int64_t v;
  if (!int_in(x, 0, hi, &v)) {
    if (!cJSON_IsNumber(x))
      return oai__fail(c, "invalid_type", param, "%s must be a token id (an integer), got %s", param,
                       oai__type_name(x));
    return oai__fail(c, "invalid_value", param, "%s: token id %.*f is not in [0, %lld]", param,
                     x->valuedouble == floor(x->valuedouble) ? 0 : 6, x->valuedouble, (long long)hi);
  }
  *out = (int32_t)v;
  return 0;
}

int oai__token_array(oai__ctx_t *c, const cJSON *arr, const char *param, int32_t **out,
                     int32_t *n) {
  if (!cJSON_IsArray(arr))
    return oai__fail(c, "invalid_type", param, "%s must be an array of token ids, got %s", param,
                     oai__type_name(arr));
  int count = cJSON_GetArraySize(arr);
  if (count == 0) return oai__fail(c, "invalid_value", param, "%s must not be empty", param);
  int32_t *ids = arena_array(c->arena, (size_t)count, sizeof *ids);
  OAI_NEED(c, ids);
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, arr) {
    char p[160];
    snprintf(p, sizeof p, "%s[%d]", param, i);
    if (oai__token_id(c, x, p, &ids[i])) return -EINVAL;
    i++;
  }
  *out = ids;
  *n = count;
  return 0;
}

/* One item at param into *pr: x, a string (text) or not (token ids). */
static int prompt_item(oai__ctx_t *c, const cJSON *x, const char *param, oai_prompt_t *pr) {
  if (!cJSON_IsString(x)) {
    int32_t *ids;
    if (oai__token_array(c, x, param, &ids, &pr->n_tokens)) return -EINVAL;
    pr->tokens = ids;
    return 0;
  }
  const size_t n = strlen(x->valuestring);
  if (n == 0) return oai__fail(c, "invalid_value", param, "%s must not be empty", param);
  OAI_NEED(c, pr->text = arena_strndup(c->arena, x->valuestring, n));
  pr->text_len = n;
  return 0;
}

int oai__prompts(oai__ctx_t *c, const cJSON *root, const char *key, int max, oai_prompt_t **items,
                 int32_t *n) {
  const cJSON *p = oai__get(root, key);
  if (!p) return oai__fail(c, "missing_required_parameter", key, "%s is required", key);
  if (cJSON_IsString(p)) {
    OAI_NEED(c, *items = arena_zalloc(c->arena, sizeof **items));
    *n = 1;
    return prompt_item(c, p, key, *items);
  }
  if (!cJSON_IsArray(p))
    return oai__fail(c, "invalid_type", key,
                     "%s must be a string, an array of strings, an array of token ids or an array of token-id "
                     "arrays; got %s",
                     key, oai__type_name(p));
  const int count = cJSON_GetArraySize(p);
  if (count == 0) return oai__fail(c, "invalid_value", key, "%s must not be empty", key);
  if (cJSON_IsNumber(p->child)) { /* one item of token ids */
    OAI_NEED(c, *items = arena_zalloc(c->arena, sizeof **items));
    *n = 1;
    return prompt_item(c, p, key, *items);
  }
  if (count > max)
    return oai__fail(c, "invalid_value", key, "%s has %d %ss; at most %d are accepted", key, count, key, max);
  char first[48];
  snprintf(first, sizeof first, "%.20s[0]", key);
  const bool strings = cJSON_IsString(p->child);
  if (!strings && !cJSON_IsArray(p->child))
    return oai__fail(c, "invalid_type", first, "%s must be a string, a token id or an array of token ids, got %s",
                     first, oai__type_name(p->child));
  oai_prompt_t *out;
  OAI_NEED(c, out = arena_array(c->arena, (size_t)count, sizeof *out));
  memset(out, 0, (size_t)count * sizeof *out);
  *items = out;
  *n = count;
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, p) {
    char param[48];
    snprintf(param, sizeof param, "%.20s[%d]", key, i);
    oai_prompt_t *pr = &out[i++];
    if (strings ? !cJSON_IsString(e) : !cJSON_IsArray(e))
      return oai__fail(c, "invalid_type", param, "%s must be %s like %s, got %s", param,
                       strings ? "a string" : "an array of token ids", first, oai__type_name(e));
    if (prompt_item(c, e, param, pr)) return -EINVAL;
  }
  return 0;
}

int oai__parse_object(oai__ctx_t *c, const char *body, size_t len, cJSON **root) {
  *root = NULL;
  size_t start = 0;
  while (start < len && (body[start] == ' ' || body[start] == '\t' || body[start] == '\r' ||
                         body[start] == '\n'))
    start++;
  if (start == len)
    return oai__fail(c, "invalid_json", NULL, "the request body is empty; expected a JSON object");
  char why[160];
  if (json_strict_check(body, len, why, sizeof why) != 0) return oai__fail(c, "invalid_json", NULL, "%s", why);
  json_alloc_begin(); /* memory running out here is a 503, not the client's bad JSON */
  cJSON *x = cJSON_ParseWithLength(body, len);
  if (json_alloc_end()) {
    cJSON_Delete(x);
    return oai__oom(c);
  }
  if (!x) /* cannot happen after the strict check, but cJSON has the last word */
    return oai__fail(c, "invalid_json", NULL, "the request body is not valid JSON");
  if (!cJSON_IsObject(x)) {
    int r = oai__fail(c, "invalid_type", NULL, "the request body must be a JSON object, got %s",
                      oai__type_name(x));
    cJSON_Delete(x);
    return r;
  }
  const char *dup = json_strict_dup_key(x);
  if (dup) {
    int r = oai__fail(c, "invalid_json", NULL, "the key \"%.100s\" appears twice in one object", dup);
    cJSON_Delete(x);
    return r;
  }
  *root = x;
  c->body = body;
  c->body_len = len;
  return 0;
}

/* ---- 64-bit integers from the JSON text ------------------------------------------ */

/* Skips the JSON value at body[i] (which cJSON accepted) and returns the
 * index after it. */
static size_t skip_value(const char *b, size_t len, size_t i) {
  int depth = 0;
  bool in_str = false;
  for (; i < len; i++) {
    const char ch = b[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') {
        in_str = false;
        if (depth == 0) return i + 1;
      }
    } else if (ch == '"') {
      in_str = true;
    } else if (ch == '{' || ch == '[') {
      depth++;
    } else if (ch == '}' || ch == ']') {
      if (depth == 0) return i; /* the end of the enclosing object */
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (ch == ',' || ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n')) {
      return i;
    }
  }
  return i;
}

static size_t skip_ws(const char *b, size_t len, size_t i) {
  while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) i++;
  return i;
}

/* The text of the first top-level member named key (written without
 * escapes), or NULL. */
static const char *raw_member(const char *b, size_t len, const char *key, size_t *vlen) {
  const size_t klen = strlen(key);
  size_t i = skip_ws(b, len, 0) + 1; /* past '{' */
  while (i < len) {
    i = skip_ws(b, len, i);
    if (i >= len || b[i] != '"') return NULL;
    const size_t k0 = i + 1, k1 = skip_value(b, len, i) - 1; /* the key's text: b[k0, k1) */
    i = skip_ws(b, len, k1 + 1) + 1; /* past ':' */
    i = skip_ws(b, len, i);
    const size_t v0 = i;
    i = skip_value(b, len, i);
    if (k1 - k0 == klen && memcmp(b + k0, key, klen) == 0) {
      *vlen = i - v0;
      return b + v0;
    }
    i = skip_ws(b, len, i);
    if (i < len && b[i] == ',') i++;
    else return NULL;
  }
  return NULL;
}

int oai__get_u64(oai__ctx_t *c, const cJSON *root, const char *key, uint64_t *out, bool *given) {
  const cJSON *x = oai__get(root, key);
  *given = x != NULL;
  if (!x) return 0;
  if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble != floor(x->valuedouble))
    return oai__fail(c, "invalid_type", key, "%s must be an integer, got %s", key,
                     cJSON_IsNumber(x) ? "a fraction" : oai__type_name(x));
  size_t n = 0;
  const char *raw = c->body ? raw_member(c->body, c->body_len, key, &n) : NULL;
  char text[32];
  bool digits = raw && n > 0 && n < sizeof text;
  for (size_t i = 0; digits && i < n; i++) digits = (raw[i] >= '0' && raw[i] <= '9') || (i == 0 && raw[i] == '-');
  if (!digits) { /* an exponent form, or a key written with escapes: only what a double holds exactly */
    int64_t v;
    if (oai__get_int(c, root, key, -(INT64_C(1) << 53), INT64_C(1) << 53, &v, NULL)) return -EINVAL;
    *out = (uint64_t)v;
    return 0;
  }
  memcpy(text, raw, n);
  text[n] = '\0';
  errno = 0;
  char *end;
  if (text[0] == '-') {
    long long s = strtoll(text, &end, 10);
    *out = (uint64_t)s;
  } else {
    *out = (uint64_t)strtoull(text, &end, 10);
  }
  if (errno == ERANGE || *end)
    return oai__fail(c, "invalid_value", key, "%s must be an integer in [-2^63, 2^64 - 1], got %s", key, text);
  return 0;
}
