/* text/jinja/jinja_eval.c — runs a parsed template: statements, scopes and
 * expressions, with Python's semantics for operators (int/float arithmetic,
 * str and list concatenation, floor division and modulo signs, chained
 * comparisons, and/or returning operands) and Jinja's for Undefined (falsy,
 * prints as "", iterates as empty; arithmetic, attributes and calls on it
 * fail with jinja2's UndefinedError message).
 *
 * Scopes: the render's variables are the outermost frame; the template body
 * runs in a frame of its own; each loop iteration and each macro call gets a
 * fresh frame, so `set` inside a loop does not leak out of it (use
 * namespace() for that), while `set` inside `if` does. See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ---- frames -------------------------------------------------------------- */

jinja_frame_t *jinja_frame_new(jinja_ctx_t *c, jinja_frame_t *parent) {
  jinja_frame_t *f = jinja_alloc(c, sizeof *f);
  f->parent = parent;
  return f;
}

void jinja_frame_set(jinja_ctx_t *c, jinja_frame_t *f, const char *name, size_t n, jv_t v) {
  for (uint32_t i = 0; i < f->n; i++) {
    if (f->lens[i] == n && memcmp(f->names[i], name, n) == 0) {
      f->vals[i] = v;
      return;
    }
  }
  if (f->n == f->cap) {
    uint32_t cap = f->cap ? f->cap * 2 : 4;
    const char **nn = jinja_alloc(c, cap * sizeof *nn);
    uint32_t *nl = jinja_alloc(c, cap * sizeof *nl);
    jv_t *nv = jinja_alloc(c, cap * sizeof *nv);
    if (f->n) {
      memcpy(nn, f->names, f->n * sizeof *nn);
      memcpy(nl, f->lens, f->n * sizeof *nl);
      memcpy(nv, f->vals, f->n * sizeof *nv);
    }
    f->names = nn;
    f->lens = nl;
    f->vals = nv;
    f->cap = cap;
  }
  f->names[f->n] = name;
  f->lens[f->n] = (uint32_t)n;
  f->vals[f->n] = v;
  f->n++;
}

static jv_t *frame_find(jinja_frame_t *f, const char *name, size_t n) {
  for (uint32_t i = f->n; i-- > 0;)
    if (f->lens[i] == n && memcmp(f->names[i], name, n) == 0) return &f->vals[i];
  return NULL;
}

/* A name declared by the template body: inner frames (loops, macros) do not
 * see the render's variable of that name, only the body's own (jinja.h). */
static int declared(const jinja_ctx_t *c, const char *name, size_t n) {
  const jinja_node_t *root = c->root;
  for (uint32_t i = 0; root && i < root->n_kw; i++)
    if (root->kw_lens[i] == n && memcmp(root->kw_names[i], name, n) == 0) return 1;
  return 0;
}

/* The variable `name` as seen from f, or NULL (*hidden: a declared name
 * not yet assigned, which must not fall back to a global function). */
static jv_t *frame_lookup(jinja_ctx_t *c, jinja_frame_t *f, const char *name, size_t n, int *hidden) {
  *hidden = 0;
  for (jinja_frame_t *fr = f; fr; fr = fr->parent) {
    if (fr == c->globals && f != c->top && declared(c, name, n)) {
      *hidden = 1;
      return NULL;
    }
    jv_t *p = frame_find(fr, name, n);
    if (p) return p;
  }
  return NULL;
}

/* ---- attribute and item access -------------------------------------------- */

static jv_t loop_attr(jinja_ctx_t *c, jv_t obj, const char *name, size_t n) {
  jinja_loop_t *L = obj.loop;
  int64_t len = L->items->n, i = L->index0;
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
  if (IS("index")) return jv_int(i + 1);
  if (IS("index0")) return jv_int(i);
  if (IS("revindex")) return jv_int(len - i);
  if (IS("revindex0")) return jv_int(len - i - 1);
  if (IS("first")) return jv_bool(i == 0);
  if (IS("last")) return jv_bool(i == len - 1);
  if (IS("length")) return jv_int(len);
  if (IS("depth")) return jv_int(L->depth0 + 1);
  if (IS("depth0")) return jv_int(L->depth0);
  if (IS("previtem")) return i > 0 ? L->items->v[i - 1] : jv_undef_named("previtem", 8, JU_PLAIN, JK_LOOP);
  if (IS("nextitem")) return i + 1 < len ? L->items->v[i + 1] : jv_undef_named("nextitem", 8, JU_PLAIN, JK_LOOP);
#undef IS
  return jinja_bind_method(c, obj, name, n);
}

jv_t jinja_getattr(jinja_ctx_t *c, jv_t obj, const char *name, size_t n) {
  jv_t v;
  switch (obj.kind) {
  case JK_UNDEF: jinja_fail_undefined(c, obj);
  case JK_DICT:
    v = jinja_bind_method(c, obj, name, n);
    if (v.kind != JK_UNDEF) return v;
    jv_t *p = jinja_dict_get_str(obj.dict, name, n);
    if (p) return *p;
    break;
  case JK_NS: {
    jv_t *q = jinja_dict_get_str(obj.dict, name, n);
    if (q) return *q;
    break;
  }
  case JK_LOOP:
    v = loop_attr(c, obj, name, n);
    if (v.kind != JK_UNDEF) return v;
    break;
  default:
    v = jinja_bind_method(c, obj, name, n);
    if (v.kind != JK_UNDEF) return v;
  }
  return jv_undef_named(name, n, JU_ATTR, obj.kind);
}

static jv_t undef_index(jinja_ctx_t *c, jv_t obj, jv_t key) {
  jinja_buf_t b = {0};
  jinja_repr(c, &b, key);
  return jv_undef_named(b.p, b.len, JU_ITEM, obj.kind);
}

jv_t jinja_getitem(jinja_ctx_t *c, jv_t obj, jv_t key) {
  if (obj.kind == JK_UNDEF) jinja_fail_undefined(c, obj);
  if (key.kind == JK_UNDEF) jinja_fail_undefined(c, key);
  if (obj.kind == JK_DICT) {
    jv_t *p = jinja_dict_get(obj.dict, key);
    if (p) return *p;
  } else if ((obj.kind == JK_LIST || obj.kind == JK_STR) && (key.kind == JK_INT || key.kind == JK_BOOL)) {
    int64_t i = key.kind == JK_BOOL ? key.b : key.i;
    if (obj.kind == JK_LIST) {
      int64_t len = obj.list->n;
      if (i < 0) i += len;
      if (i >= 0 && i < len) return obj.list->v[i];
    } else {
      int64_t len = (int64_t)jinja_utf8_count(obj.s, obj.n);
      if (i < 0) i += len;
      if (i >= 0 && i < len) {
        size_t a = jinja_utf8_offset(obj.s, obj.n, (size_t)i), b = a;
        jinja_utf8_next(obj.s, obj.n, &b);
        return jv_strref(obj.s + a, b - a);
      }
    }
    return undef_index(c, obj, key);
  }
  if (key.kind == JK_STR) return jinja_getattr(c, obj, key.s, key.n);
  return undef_index(c, obj, key);
}

/* A slice bound: *given 0 for none or absent, 1 for an int. */
static int64_t slice_arg(jinja_ctx_t *c, const jinja_node_t *n, jinja_frame_t *f, int *given) {
  *given = 0;
  if (!n) return 0;
  jv_t v = jinja_eval(c, f, n);
  if (v.kind == JK_NONE) return 0;
  if (v.kind == JK_INT || v.kind == JK_BOOL) {
    *given = 1;
    return v.kind == JK_INT ? v.i : v.b;
  }
  if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v);
  jinja_fail(c, -EINVAL, "slice indices must be integers or None or have an __index__ method");
}

/* Python's slice arithmetic over `len` items; writes the start and step
 * and returns the number of items selected. */
static int64_t slice_indices(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n, int64_t len,
                             int64_t *start_out, int64_t *step_out) {
  int gs, ge, gt;
  int64_t start = slice_arg(c, n->b, f, &gs), stop = slice_arg(c, n->c, f, &ge), step = slice_arg(c, n->d, f, &gt);
  if (!gt) step = 1;
  if (step == 0) jinja_fail(c, -EINVAL, "slice step cannot be zero");
  int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? len - 1 : len;
  if (!gs) start = step < 0 ? upper : lower;
  else {
    if (start < 0) start += len;
    start = start < lower ? lower : start > upper ? upper : start;
  }
  if (!ge) stop = step < 0 ? lower : upper;
  else {
    if (stop < 0) stop += len;
    stop = stop < lower ? lower : stop > upper ? upper : stop;
  }
  *start_out = start;
  *step_out = step;
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / -step : 0;
}

static jv_t eval_slice(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n) {
  jv_t obj = jinja_eval(c, f, n->a);
  if (obj.kind == JK_UNDEF) jinja_fail_undefined(c, obj);
  int64_t start, step, count;
  if (obj.kind == JK_DICT) jinja_fail(c, -EINVAL, "unhashable type: 'slice'");
  if (obj.kind == JK_LIST) {
    count = slice_indices(c, f, n, obj.list->n, &start, &step);
    jinja_list_t *l = jinja_list_new(c, (uint32_t)count);
    l->tuple = obj.list->tuple;
    for (int64_t k = 0; k < count; k++) l->v[k] = obj.list->v[start + k * step];
    l->n = (uint32_t)count;
    return jv_list(l);
  }
  if (obj.kind == JK_STR) {
    size_t len = jinja_utf8_count(obj.s, obj.n);
    if (len == obj.n) { /* ASCII: bytes are characters */
      count = slice_indices(c, f, n, (int64_t)len, &start, &step);
        if (step == 1) return jv_strref(obj.s + start, (size_t)count);
      char *p = jinja_alloc(c, (size_t)count + 1);
      for (int64_t k = 0; k < count; k++) p[k] = obj.s[start + k * step];
      return jv_strref(p, (size_t)count);
    }
    size_t *off = jinja_alloc(c, (len + 1) * sizeof *off);
    for (size_t i = 0, k = 0; k <= len; k++) {
      off[k] = i;
      if (i < obj.n) jinja_utf8_next(obj.s, obj.n, &i);
    }
    count = slice_indices(c, f, n, (int64_t)len, &start, &step);
    jinja_buf_t b = {0};
    for (int64_t k = 0; k < count; k++) {
      size_t at = (size_t)(start + k * step);
      jinja_buf_put(c, &b, obj.s + off[at], off[at + 1] - off[at]);
    }
    return jv_strref(b.p ? b.p : "", b.len);
  }
  /* jinja2 compiles slices to plain Python subscripts, which fail here;
   * but it folds a literal's slice through getitem, which gives Undefined */
  if (n->a->kind == JN_CONST) return jv_undef_named("slice", 5, JU_PLAIN, obj.kind);
  jinja_fail(c, -EINVAL, "'%s' object is not subscriptable", jinja_type_name(obj));
}

jinja_list_t *jinja_iterate(jinja_ctx_t *c, jv_t v) {
  switch (v.kind) {
  case JK_UNDEF: return jinja_list_new(c, 0);
  case JK_LIST: return v.list;
  case JK_DICT: {
    jinja_list_t *l = jinja_list_new(c, v.dict->n);
    memcpy(l->v, v.dict->k, v.dict->n * sizeof *l->v);
    l->n = v.dict->n;
    return l;
  }
  case JK_STR: {
    jinja_list_t *l = jinja_list_new(c, v.n);
    for (size_t i = 0; i < v.n;) {
      size_t s = i;
      jinja_utf8_next(v.s, v.n, &i);
      l->v[l->n++] = jv_strref(v.s + s, i - s);
    }
    return l;
  }
  default: jinja_fail(c, -EINVAL, "'%s' object is not iterable", jinja_type_name(v));
  }
}

/* ---- arithmetic ------------------------------------------------------------- */

static int is_num(jv_t v) { return v.kind == JK_INT || v.kind == JK_BOOL || v.kind == JK_FLOAT; }
static int is_int(jv_t v) { return v.kind == JK_INT || v.kind == JK_BOOL; }
static int64_t as_int(jv_t v) { return v.kind == JK_BOOL ? v.b : v.i; }
static double as_float(jv_t v) { return v.kind == JK_FLOAT ? v.f : (double)as_int(v); }

static _Noreturn void bad_operands(jinja_ctx_t *c, const char *op, jv_t a, jv_t b) {
  if (a.kind == JK_UNDEF) jinja_fail_undefined(c, a);
  if (b.kind == JK_UNDEF) jinja_fail_undefined(c, b);
  if (a.kind == JK_STR && !strcmp(op, "+"))
    jinja_fail(c, -EINVAL, "can only concatenate str (not \"%s\") to str", jinja_type_name(b));
  jinja_fail(c, -EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", op, jinja_type_name(a),
             jinja_type_name(b));
}

static jv_t repeat(jinja_ctx_t *c, jv_t seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.kind == JK_STR) {
    if (seq.n && (uint64_t)times > (c->max_output ? c->max_output : UINT32_MAX) / seq.n)
      jinja_fail(c, -E2BIG, "string repetition too large");
    jinja_buf_t b = {0};
    for (int64_t i = 0; i < times; i++) jinja_buf_put(c, &b, seq.s, seq.n);
    return jv_strref(b.p ? b.p : "", b.len);
  }
  if (seq.list->n && (uint64_t)times > (1u << 24) / seq.list->n) jinja_fail(c, -E2BIG, "list repetition too large");
  jinja_list_t *l = jinja_list_new(c, (uint32_t)(seq.list->n * times));
  l->tuple = seq.list->tuple;
  for (int64_t i = 0; i < times; i++)
    for (uint32_t k = 0; k < seq.list->n; k++) l->v[l->n++] = seq.list->v[k];
  return jv_list(l);
}

/* Python's float floor division and modulo (signs follow the divisor). */
static void float_divmod(double x, double y, double *div_out, double *mod_out) {
  double mod = fmod(x, y), div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = copysign(0.0, y);
  }
  double floordiv;
  if (div != 0) {
    floordiv = floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = copysign(0.0, x / y);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

static jv_t arith(jinja_ctx_t *c, int op, jv_t a, jv_t b) {
  static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
  const char *name = names[op];
  if (op == JO_ADD) {
    if (a.kind == JK_STR && b.kind == JK_STR) {
      jinja_buf_t buf = {0};
      jinja_buf_put(c, &buf, a.s, a.n);
      jinja_buf_put(c, &buf, b.s, b.n);
      return jv_strref(buf.p ? buf.p : "", buf.len);
    }
    if (a.kind == JK_LIST && b.kind == JK_LIST && a.list->tuple == b.list->tuple) {
      jinja_list_t *l = jinja_list_new(c, a.list->n + b.list->n);
      l->tuple = a.list->tuple;
      memcpy(l->v, a.list->v, a.list->n * sizeof *l->v);
      memcpy(l->v + a.list->n, b.list->v, b.list->n * sizeof *l->v);
      l->n = a.list->n + b.list->n;
      return jv_list(l);
    }
  }
  if (op == JO_MUL) {
    if ((a.kind == JK_STR || a.kind == JK_LIST) && is_int(b)) return repeat(c, a, as_int(b));
    if ((b.kind == JK_STR || b.kind == JK_LIST) && is_int(a)) return repeat(c, b, as_int(a));
  }
  if (op == JO_MOD && a.kind == JK_STR) return jinja__format(c, a, b);
  if (!is_num(a) || !is_num(b)) bad_operands(c, name, a, b);
  if (is_int(a) && is_int(b) && op != JO_DIV) {
    int64_t x = as_int(a), y = as_int(b), r = 0;
    switch (op) {
    case JO_ADD: if (__builtin_add_overflow(x, y, &r)) goto overflow; return jv_int(r);
    case JO_SUB: if (__builtin_sub_overflow(x, y, &r)) goto overflow; return jv_int(r);
    case JO_MUL: if (__builtin_mul_overflow(x, y, &r)) goto overflow; return jv_int(r);
    case JO_FLOORDIV:
    case JO_MOD: {
      if (y == 0) jinja_fail(c, -EDOM, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) goto overflow;
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q--;
        m += y;
      }
      return jv_int(op == JO_FLOORDIV ? q : m);
    }
    case JO_POW:
      if (y >= 0) {
        int64_t acc = 1, base = x;
        while (y) {
          if ((y & 1) && __builtin_mul_overflow(acc, base, &acc)) goto overflow;
          y >>= 1;
          if (y && __builtin_mul_overflow(base, base, &base)) goto overflow;
        }
        return jv_int(acc);
      }
      if (x == 0) jinja_fail(c, -EDOM, "0.0 cannot be raised to a negative power");
      return jv_float(pow((double)x, (double)y));
    }
  }
  double x = as_float(a), y = as_float(b), d, m;
  switch (op) {
  case JO_ADD: return jv_float(x + y);
  case JO_SUB: return jv_float(x - y);
  case JO_MUL: return jv_float(x * y);
  case JO_DIV:
    if (y == 0) jinja_fail(c, -EDOM, "division by zero");
    return jv_float(x / y);
  case JO_FLOORDIV:
  case JO_MOD:
    if (y == 0) jinja_fail(c, -EDOM, "float floor division by zero");
    float_divmod(x, y, &d, &m);
    return jv_float(op == JO_FLOORDIV ? d : m);
  case JO_POW:
    if (x == 0 && y < 0) jinja_fail(c, -EDOM, "0.0 cannot be raised to a negative power");
    if (x < 0 && y != floor(y)) jinja_fail(c, -EDOM, "complex results are not supported");
    return jv_float(pow(x, y));
  }
overflow:
  jinja_fail(c, -ERANGE, "integer overflow in '%s'", name);
}

static int contains(jinja_ctx_t *c, jv_t item, jv_t seq) {
  switch (seq.kind) {
  case JK_UNDEF: return 0;
  case JK_STR:
    if (item.kind != JK_STR)
      jinja_fail(c, -EINVAL, "'in <string>' requires string as left operand, not %s", jinja_type_name(item));
    if (item.n == 0) return 1;
    return memmem(seq.s, seq.n, item.s, item.n) != NULL;
  case JK_LIST:
    for (uint32_t i = 0; i < seq.list->n; i++)
      if (jinja_equal(seq.list->v[i], item)) return 1;
    return 0;
  case JK_DICT:
    if ((item.kind == JK_LIST && !item.list->tuple) || item.kind == JK_DICT || item.kind == JK_NS)
      jinja_fail(c, -EINVAL, "unhashable type: '%s'", jinja_type_name(item));
    return jinja_dict_get(seq.dict, item) != NULL;
  default: jinja_fail(c, -EINVAL, "argument of type '%s' is not iterable", jinja_type_name(seq));
  }
}

static int compare(jinja_ctx_t *c, int op, jv_t a, jv_t b) {
  switch (op) {
  case JO_EQ: return jinja_equal(a, b);
  case JO_NE: return !jinja_equal(a, b);
  case JO_IN: return contains(c, a, b);
  case JO_NOTIN: return !contains(c, a, b);
  default: break;
  }
  if ((a.kind == JK_FLOAT && a.f != a.f) || (b.kind == JK_FLOAT && b.f != b.f)) {
    if (is_num(a) && is_num(b)) return 0;
  }
  int r = jinja_compare(c, a, b);
  switch (op) {
  case JO_LT: return r < 0;
  case JO_LE: return r <= 0;
  case JO_GT: return r > 0;
  default: return r >= 0;
  }
}

/* ---- calls -------------------------------------------------------------------- */

jv_t *jinja_arg(const jinja_args_t *a, uint32_t i, const char *name) {
  if (i < a->n_pos) return &a->pos[i];
  if (name) {
    size_t n = strlen(name);
    for (uint32_t k = 0; k < a->n_kw; k++)
      if (a->kw_lens[k] == n && memcmp(a->kw_names[k], name, n) == 0) return &a->kw[k];
  }
  return NULL;
}

static void eval_args(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n, jinja_args_t *a) {
  a->n_pos = n->n_items;
  a->pos = n->n_items ? jinja_alloc(c, n->n_items * sizeof *a->pos) : NULL;
  for (uint32_t i = 0; i < n->n_items; i++) a->pos[i] = jinja_eval(c, f, n->items[i]);
  a->n_kw = n->n_kw;
  a->kw_names = n->kw_names;
  a->kw_lens = n->kw_lens;
  a->kw = n->n_kw ? jinja_alloc(c, n->n_kw * sizeof *a->kw) : NULL;
  for (uint32_t i = 0; i < n->n_kw; i++) a->kw[i] = jinja_eval(c, f, n->kw[i]);
}

static void exec_body(jinja_ctx_t *c, jinja_frame_t *f, jinja_node_t *const *items, uint32_t n);

static jv_t call_macro(jinja_ctx_t *c, const jinja_macro_t *m, const jinja_args_t *a) {
  const jinja_node_t *def = m->node;
  if (a->n_pos > def->n_kw)
    jinja_fail(c, -EINVAL, "macro '%.*s' takes not more than %u argument(s)", (int)def->name_len, def->name,
               def->n_kw);
  for (uint32_t k = 0; k < a->n_kw; k++) {
    uint32_t p = 0;
    while (p < def->n_kw && !(def->kw_lens[p] == a->kw_lens[k] && !memcmp(def->kw_names[p], a->kw_names[k], a->kw_lens[k])))
      p++;
    if (p == def->n_kw || p < a->n_pos)
      jinja_fail(c, -EINVAL, "macro '%.*s' got an unexpected keyword argument '%.*s'", (int)def->name_len,
                 def->name, (int)a->kw_lens[k], a->kw_names[k]);
  }
  if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "macro calls nested too deeply");
  jinja_frame_t *f = jinja_frame_new(c, m->scope);
  for (uint32_t p = 0; p < def->n_kw; p++) {
    jv_t v = jv_undef_named(def->kw_names[p], def->kw_lens[p], JU_NAME, 0);
    jv_t *given = p < a->n_pos ? &a->pos[p] : NULL;
    for (uint32_t k = 0; !given && k < a->n_kw; k++)
      if (a->kw_lens[k] == def->kw_lens[p] && !memcmp(a->kw_names[k], def->kw_names[p], a->kw_lens[k]))
        given = &a->kw[k];
    if (given) v = *given;
    else if (def->kw[p]) v = jinja_eval(c, f, def->kw[p]);
    jinja_frame_set(c, f, def->kw_names[p], def->kw_lens[p], v);
  }
  jinja_buf_t out = {0}, *saved = c->out;
  c->out = &out;
  exec_body(c, f, def->items, def->n_items);
  c->out = saved;
  c->loop_ctl = JINJA_LOOP_NONE;
  c->depth--;
  return jv_strref(out.p ? out.p : "", out.len);
}

jv_t jinja_call_value(jinja_ctx_t *c, jv_t fn, const jinja_args_t *a) {
  switch (fn.kind) {
  case JK_FUNC: return jinja_call_global(c, fn.fn, a);
  case JK_METHOD: return jinja_call_method(c, fn.method, a);
  case JK_MACRO: return call_macro(c, fn.macro, a);
  case JK_UNDEF: jinja_fail_undefined(c, fn);
  default: jinja_fail(c, -EINVAL, "'%s' object is not callable", jinja_type_name(fn));
  }
}

static _Noreturn void unknown_name(jinja_ctx_t *c, const jinja_node_t *n) {
  jinja_fail(c, -EINVAL, "line %d: No %s named '%.*s'.", n->line, n->kind == JN_FILTER ? "filter" : "test",
             (int)n->name_len, n->name);
}

static jv_t apply_filter_node(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n, jv_t arg) {
  if (n->id < 0) unknown_name(c, n);
  jinja_args_t a;
  eval_args(c, f, n, &a);
  return jinja_apply_filter(c, n->id, arg, &a);
}

/* ---- expressions ---------------------------------------------------------------- */

jv_t jinja_eval(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n) {
  jinja_step(c);
  if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "expression nested too deeply");
  jv_t r;
  switch (n->kind) {
  case JN_CONST: r = n->value; break;
  case JN_NAME: {
    int hidden;
    jv_t *p = frame_lookup(c, f, n->name, n->name_len, &hidden);
    if (p) {
      r = *p;
    } else {
      int id = hidden ? -1 : jinja_global_id(n->name, n->name_len);
      if (id >= 0) {
        r = (jv_t){.kind = JK_FUNC};
        r.fn = id;
      } else {
        r = jv_undef_named(n->name, n->name_len, JU_NAME, 0);
      }
    }
    break;
  }
  case JN_LIST:
  case JN_TUPLE: {
    jinja_list_t *l = jinja_list_new(c, n->n_items);
    l->tuple = n->kind == JN_TUPLE;
    for (uint32_t i = 0; i < n->n_items; i++) l->v[l->n++] = jinja_eval(c, f, n->items[i]);
    r = jv_list(l);
    break;
  }
  case JN_DICT: {
    jinja_dict_t *d = jinja_dict_new(c, n->n_items);
    for (uint32_t i = 0; i < n->n_items; i++) {
      jv_t k = jinja_eval(c, f, n->items[i]);
      if (k.kind == JK_LIST && !k.list->tuple) jinja_fail(c, -EINVAL, "unhashable type: 'list'");
      if (k.kind == JK_DICT || k.kind == JK_UNDEF) jinja_fail(c, -EINVAL, "unhashable type: '%s'", jinja_type_name(k));
      jinja_dict_set(c, d, k, jinja_eval(c, f, n->vals[i]));
    }
    r = jv_dict(d);
    break;
  }
  case JN_ATTR: r = jinja_getattr(c, jinja_eval(c, f, n->a), n->name, n->name_len); break;
  case JN_ITEM: {
    jv_t obj = jinja_eval(c, f, n->a);
    r = jinja_getitem(c, obj, jinja_eval(c, f, n->b));
    break;
  }
  case JN_SLICE: r = eval_slice(c, f, n); break;
  case JN_CALL: {
    jv_t fn = jinja_eval(c, f, n->a);
    jinja_args_t a;
    eval_args(c, f, n, &a);
    r = jinja_call_value(c, fn, &a);
    break;
  }
  case JN_FILTER: r = apply_filter_node(c, f, n, jinja_eval(c, f, n->a)); break;
  case JN_TEST: {
    if (n->id < 0) unknown_name(c, n);
    jv_t v = jinja_eval(c, f, n->a);
    jinja_args_t a;
    eval_args(c, f, n, &a);
    r = jv_bool(jinja_apply_test(c, n->id, v, &a));
    break;
  }
  case JN_NOT: r = jv_bool(!jinja_truthy(jinja_eval(c, f, n->a))); break;
  case JN_NEG:
  case JN_POS: {
    jv_t v = jinja_eval(c, f, n->a);
    if (v.kind == JK_UNDEF) jinja_fail_undefined(c, v);
    if (!is_num(v)) jinja_fail(c, -EINVAL, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+', jinja_type_name(v));
    if (n->kind == JN_POS) r = v.kind == JK_BOOL ? jv_int(v.b) : v;
    else if (v.kind == JK_FLOAT) r = jv_float(-v.f);
    else if (as_int(v) == INT64_MIN) jinja_fail(c, -ERANGE, "integer overflow in unary -");
    else r = jv_int(-as_int(v));
    break;
  }
  case JN_BINOP: {
    jv_t a = jinja_eval(c, f, n->a), b = jinja_eval(c, f, n->b);
    if (n->op == JO_CONCAT) {
      jinja_buf_t buf = {0};
      jinja_str(c, &buf, a);
      jinja_str(c, &buf, b);
      r = jv_strref(buf.p ? buf.p : "", buf.len);
    } else {
      r = arith(c, n->op, a, b);
    }
    break;
  }
  case JN_AND:
    r = jinja_eval(c, f, n->a);
    if (jinja_truthy(r)) r = jinja_eval(c, f, n->b);
    break;
  case JN_OR:
    r = jinja_eval(c, f, n->a);
    if (!jinja_truthy(r)) r = jinja_eval(c, f, n->b);
    break;
  case JN_COMPARE: {
    jv_t left = jinja_eval(c, f, n->a);
    r = jv_bool(1);
    for (uint32_t i = 0; i < n->n_items; i++) {
      jv_t right = jinja_eval(c, f, n->items[i]);
      if (!compare(c, n->ops[i], left, right)) {
        r = jv_bool(0);
        break;
      }
      left = right;
    }
    break;
  }
  case JN_COND:
    if (jinja_truthy(jinja_eval(c, f, n->a))) r = jinja_eval(c, f, n->b);
    else r = n->c ? jinja_eval(c, f, n->c) : jv_undef();
    break;
  default: jinja_fail(c, -EINVAL, "line %d: not an expression", n->line);
  }
  c->depth--;
  return r;
}

/* ---- statements ------------------------------------------------------------------- */

static void assign(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *target, jv_t v) {
  if (target->kind == JN_NAME) {
    jinja_frame_set(c, f, target->name, target->name_len, v);
    return;
  }
  if (target->kind == JN_ATTR) {
    int hidden;
    jv_t *ns = frame_lookup(c, f, target->a->name, target->a->name_len, &hidden);
    if (!ns || ns->kind != JK_NS)
      jinja_fail(c, -EINVAL, "line %d: can't assign attribute on non-namespace object", target->line);
    jinja_dict_set(c, ns->dict, jv_strref(target->name, target->name_len), v);
    return;
  }
  jinja_list_t *items = jinja_iterate(c, v);
  if (items->n != target->n_items)
    jinja_fail(c, -EINVAL, "line %d: %s values to unpack (expected %u, got %u)", target->line,
               items->n > target->n_items ? "too many" : "not enough", target->n_items, items->n);
  for (uint32_t i = 0; i < target->n_items; i++)
    jinja_frame_set(c, f, target->items[i]->name, target->items[i]->name_len, items->v[i]);
}

static void exec_for(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n) {
  jinja_list_t *items = jinja_iterate(c, jinja_eval(c, f, n->b));
  if (n->c) {
    jinja_list_t *kept = jinja_list_new(c, items->n);
    for (uint32_t i = 0; i < items->n; i++) {
      jinja_frame_t *tmp = jinja_frame_new(c, f);
      assign(c, tmp, n->a, items->v[i]);
      if (jinja_truthy(jinja_eval(c, tmp, n->c))) kept->v[kept->n++] = items->v[i];
    }
    items = kept;
  }
  jinja_loop_t *loop = jinja_alloc(c, sizeof *loop);
  loop->items = items;
  jv_t loop_v = {.kind = JK_LOOP};
  loop_v.loop = loop;
  for (uint32_t i = 0; i < items->n; i++) {
    loop->index0 = i;
    jinja_frame_t *it = jinja_frame_new(c, f);
    assign(c, it, n->a, items->v[i]);
    jinja_frame_set(c, it, "loop", 4, loop_v);
    exec_body(c, it, n->items, n->n_items);
    int ctl = c->loop_ctl;
    c->loop_ctl = JINJA_LOOP_NONE;
    if (ctl == JINJA_LOOP_BREAK) break;
  }
  if (items->n == 0 && n->d) exec_body(c, f, n->d->items, n->d->n_items);
}

static jv_t filter_chain(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n, jv_t v) {
  if (!n) return v;
  return apply_filter_node(c, f, n, filter_chain(c, f, n->a, v));
}

static void exec_node(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n) {
  jinja_step(c);
  switch (n->kind) {
  case JN_TEXT: jinja_buf_put(c, c->out, n->value.s, n->value.n); return;
  case JN_OUTPUT: jinja_str(c, c->out, jinja_eval(c, f, n->a)); return;
  case JN_IF:
    for (; n && n->kind == JN_IF; n = n->b) {
      if (jinja_truthy(jinja_eval(c, f, n->a))) {
        exec_body(c, f, n->items, n->n_items);
        return;
      }
    }
    if (n) exec_body(c, f, n->items, n->n_items);
    return;
  case JN_FOR: exec_for(c, f, n); return;
  case JN_SET: assign(c, f, n->a, jinja_eval(c, f, n->b)); return;
  case JN_SET_BLOCK: {
    jinja_buf_t out = {0}, *saved = c->out;
    c->out = &out;
    exec_body(c, f, n->items, n->n_items);
    c->out = saved;
    assign(c, f, n->a, filter_chain(c, f, n->c, jv_strref(out.p ? out.p : "", out.len)));
    return;
  }
  case JN_MACRO: {
    jinja_macro_t *m = jinja_alloc(c, sizeof *m);
    m->node = n;
    m->scope = f;
    jv_t v = {.kind = JK_MACRO};
    v.macro = m;
    jinja_frame_set(c, f, n->name, n->name_len, v);
    return;
  }
  case JN_BREAK: c->loop_ctl = JINJA_LOOP_BREAK; return;
  case JN_CONTINUE: c->loop_ctl = JINJA_LOOP_CONTINUE; return;
  case JN_BLOCK: exec_body(c, f, n->items, n->n_items); return;
  default: jinja_fail(c, -EINVAL, "line %d: not a statement", n->line);
  }
}

static void exec_body(jinja_ctx_t *c, jinja_frame_t *f, jinja_node_t *const *items, uint32_t n) {
  if (++c->depth > c->max_depth) jinja_fail(c, -E2BIG, "statements nested too deeply");
  for (uint32_t i = 0; i < n && !c->loop_ctl; i++) exec_node(c, f, items[i]);
  c->depth--;
}

void jinja_render(jinja_ctx_t *c, const jinja_node_t *root) {
  jinja_frame_t *f = jinja_frame_new(c, c->globals);
  c->top = f;
  c->root = root;
  exec_body(c, f, root->items, root->n_items);
}
