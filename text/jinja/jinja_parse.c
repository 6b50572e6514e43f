/* text/jinja/jinja_parse.c — tokens to a syntax tree, following the grammar of
 * jinja2's parser (precedence from loosest: `x if c else y`, or, and, not,
 * comparisons and `in`, + -, ~, * / // %, **, unary - +, then postfix
 * (.attr, [index], [a:b:c], calls), filters `|f(...)` and tests `is t(...)`).
 *
 * Statements: if/elif/else, for (tuple targets, `if` filter, else), set
 * (names, tuples, namespace attributes, block form with filters), macro,
 * break/continue, and Hugging Face's {% generation %}. Anything else — a tag
 * such as extends/include/import/call/filter/with, an unknown filter or test
 * (outside the conditional places where jinja2 defers that check to run
 * time), `*args` — fails here with its line, so a model's template is rejected at
 * load time rather than at the first request. See jinja.h. */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum { MAX_PARSE_DEPTH = 200 };

typedef struct parser {
  jinja_ctx_t *c;
  jinja_tok_t *t;
  size_t i, n;
  int depth;
  int loops; /* enclosing for loops (in the current macro) */
} parser_t;

typedef struct nodevec {
  jinja_node_t **v;
  uint32_t n, cap;
} nodevec_t;

static void vec_push(parser_t *P, nodevec_t *v, jinja_node_t *x) {
  if (v->n == v->cap) {
    uint32_t cap = v->cap ? v->cap * 2 : 4;
    jinja_node_t **nv = jinja_alloc(P->c, cap * sizeof *nv);
    if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
    v->v = nv;
    v->cap = cap;
  }
  v->v[v->n++] = x;
}

static jinja_tok_t *cur(parser_t *P) { return &P->t[P->i]; }
static jinja_tok_t *peek(parser_t *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static jinja_tok_t *advance(parser_t *P) {
  jinja_tok_t *t = cur(P);
  if (P->i + 1 < P->n) P->i++;
  return t;
}

static int tok_is_op(const jinja_tok_t *t, const char *op) {
  return t->kind == JT_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static int tok_is_name(const jinja_tok_t *t, const char *name) {
  return t->kind == JT_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}
static int is_op(parser_t *P, const char *op) { return tok_is_op(cur(P), op); }
static int is_name(parser_t *P, const char *name) { return tok_is_name(cur(P), name); }
static int skip_op(parser_t *P, const char *op) { return is_op(P, op) ? (advance(P), 1) : 0; }
static int skip_name(parser_t *P, const char *name) { return is_name(P, name) ? (advance(P), 1) : 0; }

static const char *describe(const jinja_tok_t *t, char *buf, size_t size) {
  switch (t->kind) {
  case JT_EOF: return "end of template";
  case JT_TEXT: return "template data";
  case JT_BLOCK_BEGIN: return "'{%'";
  case JT_BLOCK_END: return "end of statement block";
  case JT_VAR_BEGIN: return "'{{'";
  case JT_VAR_END: return "end of print statement";
  case JT_STRING: return "string";
  case JT_INT: case JT_FLOAT: return "number";
  default: snprintf(buf, size, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
  }
}

static _Noreturn void fail_at(parser_t *P, const char *what) {
  char buf[64];
  jinja_fail(P->c, -EINVAL, "line %d: %s, got %s", cur(P)->line, what, describe(cur(P), buf, sizeof buf));
}

static void expect_op(parser_t *P, const char *op) {
  if (!skip_op(P, op)) {
    char what[32];
    snprintf(what, sizeof what, "expected '%s'", op);
    fail_at(P, what);
  }
}
static jinja_tok_t *expect_kind(parser_t *P, int kind, const char *what) {
  if (cur(P)->kind != kind) fail_at(P, what);
  return advance(P);
}

static jinja_node_t *node(parser_t *P, int kind) {
  jinja_node_t *x = jinja_alloc(P->c, sizeof *x);
  x->kind = (uint8_t)kind;
  x->line = cur(P)->line;
  return x;
}
static jinja_node_t *node2(parser_t *P, int kind, jinja_node_t *a, jinja_node_t *b) {
  jinja_node_t *x = node(P, kind);
  x->a = a;
  x->b = b;
  return x;
}

static void enter(parser_t *P) {
  if (++P->depth > MAX_PARSE_DEPTH) jinja_fail(P->c, -E2BIG, "line %d: template nested too deeply", cur(P)->line);
}

static jinja_node_t *parse_expression(parser_t *P, int with_condexpr);
static jinja_node_t *parse_unary(parser_t *P, int with_filter);
static jinja_node_t *parse_primary(parser_t *P);
static jinja_node_t *parse_postfix(parser_t *P, jinja_node_t *x);

static int is_tuple_end(parser_t *P, const char *extra_end) {
  jinja_tok_t *t = cur(P);
  if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || tok_is_op(t, ")")) return 1;
  return extra_end && tok_is_name(t, extra_end);
}

static jinja_node_t *parse_tuple(parser_t *P, int simplified, int with_condexpr, const char *extra_end,
                                 int explicit_parens) {
  nodevec_t items = {0};
  int is_tuple = 0;
  int line = cur(P)->line;
  for (;;) {
    if (items.n) expect_op(P, ",");
    if (is_tuple_end(P, extra_end)) break;
    vec_push(P, &items, simplified ? parse_primary(P) : parse_expression(P, with_condexpr));
    if (is_op(P, ",")) is_tuple = 1;
    else break;
  }
  if (!is_tuple) {
    if (items.n) return items.v[0];
    if (!explicit_parens) fail_at(P, "expected an expression");
  }
  jinja_node_t *x = node(P, JN_TUPLE);
  x->line = line;
  x->items = items.v;
  x->n_items = items.n;
  return x;
}

static void parse_call_args(parser_t *P, jinja_node_t *x) {
  nodevec_t pos = {0}, kw = {0};
  nodevec_t names = {0}; /* NAME nodes carrying the keyword names */
  expect_op(P, "(");
  while (!is_op(P, ")")) {
    if (pos.n || kw.n) {
      expect_op(P, ",");
      if (is_op(P, ")")) break;
    }
    if (is_op(P, "*") || is_op(P, "**")) fail_at(P, "*args and **kwargs are not supported");
    if (cur(P)->kind == JT_NAME && tok_is_op(peek(P, 1), "=")) {
      jinja_node_t *nm = node(P, JN_NAME);
      jinja_tok_t *t = advance(P);
      nm->name = t->s;
      nm->name_len = t->n;
      advance(P);
      vec_push(P, &names, nm);
      vec_push(P, &kw, parse_expression(P, 1));
    } else {
      if (kw.n) fail_at(P, "positional argument after keyword argument");
      vec_push(P, &pos, parse_expression(P, 1));
    }
  }
  expect_op(P, ")");
  x->items = pos.v;
  x->n_items = pos.n;
  x->kw = kw.v;
  x->n_kw = kw.n;
  if (kw.n) {
    x->kw_names = jinja_alloc(P->c, kw.n * sizeof *x->kw_names);
    x->kw_lens = jinja_alloc(P->c, kw.n * sizeof *x->kw_lens);
    for (uint32_t i = 0; i < kw.n; i++) {
      x->kw_names[i] = names.v[i]->name;
      x->kw_lens[i] = names.v[i]->name_len;
    }
  }
}

/* A FILTER or TEST node over arg, named by the next tokens (dotted names
 * such as `a.b` are one name, as in jinja2). An unknown name gets id -1;
 * check_names() decides after parsing whether that is a compile error. */
static jinja_node_t *named_node(parser_t *P, int kind, jinja_node_t *arg) {
  jinja_node_t *x = node(P, kind);
  x->a = arg;
  if (cur(P)->kind != JT_NAME) fail_at(P, kind == JN_FILTER ? "expected a filter name" : "expected a test name");
  jinja_tok_t *t = advance(P);
  x->name = t->s;
  x->name_len = t->n;
  if (is_op(P, ".")) {
    jinja_buf_t b = {0};
    jinja_buf_put(P->c, &b, t->s, t->n);
    while (skip_op(P, ".")) {
      jinja_tok_t *part = expect_kind(P, JT_NAME, "expected a name after '.'");
      jinja_buf_putc(P->c, &b, '.');
      jinja_buf_put(P->c, &b, part->s, part->n);
    }
    x->name = b.p;
    x->name_len = (uint32_t)b.len;
  }
  x->id = (int16_t)(kind == JN_FILTER ? jinja_filter_id(x->name, x->name_len) : jinja_test_id(x->name, x->name_len));
  return x;
}

static jinja_node_t *parse_filters(parser_t *P, jinja_node_t *arg, int start_inline) {
  while (is_op(P, "|") || start_inline) {
    if (!start_inline) advance(P);
    start_inline = 0;
    arg = named_node(P, JN_FILTER, arg);
    if (is_op(P, "(")) parse_call_args(P, arg);
  }
  return arg;
}

static jinja_node_t *parse_test(parser_t *P, jinja_node_t *arg) {
  advance(P); /* is */
  int negated = skip_name(P, "not");
  jinja_node_t *t = named_node(P, JN_TEST, arg);
  jinja_tok_t *c = cur(P);
  if (is_op(P, "(")) {
    parse_call_args(P, t);
  } else if ((c->kind == JT_NAME || c->kind == JT_STRING || c->kind == JT_INT || c->kind == JT_FLOAT ||
              tok_is_op(c, "[") || tok_is_op(c, "{")) &&
             !tok_is_name(c, "else") && !tok_is_name(c, "or") && !tok_is_name(c, "and")) {
    if (tok_is_name(c, "is")) fail_at(P, "tests cannot be chained with 'is'");
    t->items = jinja_alloc(P->c, sizeof *t->items);
    t->items[0] = parse_postfix(P, parse_primary(P));
    t->n_items = 1;
  }
  if (negated) return node2(P, JN_NOT, t, NULL);
  return t;
}

static jinja_node_t *parse_call(parser_t *P, jinja_node_t *callee) {
  jinja_node_t *call = node2(P, JN_CALL, callee, NULL);
  parse_call_args(P, call);
  return call;
}

static jinja_node_t *parse_filter_expr(parser_t *P, jinja_node_t *x) {
  for (;;) {
    if (is_op(P, "|")) {
      x = parse_filters(P, x, 0);
    } else if (is_name(P, "is")) {
      x = parse_test(P, x);
    } else if (is_op(P, "(")) {
      x = parse_call(P, x);
    } else {
      return x;
    }
  }
}

/* The inside of [...]: an index or a slice a:b:c. */
static jinja_node_t *parse_subscribed(parser_t *P, jinja_node_t *obj) {
  jinja_node_t *parts[3] = {NULL, NULL, NULL};
  if (!is_op(P, ":")) {
    jinja_node_t *x = parse_expression(P, 1);
    if (!is_op(P, ":")) return node2(P, JN_ITEM, obj, x);
    parts[0] = x;
  }
  advance(P); /* : */
  if (!is_op(P, "]") && !is_op(P, ",") && !is_op(P, ":")) parts[1] = parse_expression(P, 1);
  if (skip_op(P, ":") && !is_op(P, "]") && !is_op(P, ",")) parts[2] = parse_expression(P, 1);
  jinja_node_t *s = node2(P, JN_SLICE, obj, parts[0]);
  s->c = parts[1];
  s->d = parts[2];
  return s;
}

static jinja_node_t *parse_postfix(parser_t *P, jinja_node_t *x) {
  for (;;) {
    if (skip_op(P, ".")) {
      jinja_tok_t *t = cur(P);
      if (t->kind == JT_NAME) {
        advance(P);
        jinja_node_t *g = node2(P, JN_ATTR, x, NULL);
        g->name = t->s;
        g->name_len = t->n;
        x = g;
      } else if (t->kind == JT_INT) {
        advance(P);
        jinja_node_t *k = node(P, JN_CONST);
        k->value = jv_int(t->i);
        x = node2(P, JN_ITEM, x, k);
      } else {
        fail_at(P, "expected a name or number after '.'");
      }
    } else if (skip_op(P, "[")) {
      x = parse_subscribed(P, x);
      if (is_op(P, ",")) { /* x[a, b]: the key is a tuple */
        if (x->kind != JN_ITEM) fail_at(P, "slices in tuple subscripts are not supported");
        nodevec_t keys = {0};
        vec_push(P, &keys, x->b);
        while (skip_op(P, ",") && !is_op(P, "]")) vec_push(P, &keys, parse_expression(P, 1));
        jinja_node_t *tuple = node(P, JN_TUPLE);
        tuple->items = keys.v;
        tuple->n_items = keys.n;
        x->b = tuple;
      }
      expect_op(P, "]");
    } else if (is_op(P, "(")) {
      x = parse_call(P, x);
    } else {
      return x;
    }
  }
}

static jinja_node_t *parse_primary(parser_t *P) {
  enter(P);
  jinja_tok_t *t = cur(P);
  jinja_node_t *x;
  if (t->kind == JT_NAME) {
    advance(P);
    x = node(P, JN_CONST);
    if (tok_is_name(t, "true") || tok_is_name(t, "True")) x->value = jv_bool(1);
    else if (tok_is_name(t, "false") || tok_is_name(t, "False")) x->value = jv_bool(0);
    else if (tok_is_name(t, "none") || tok_is_name(t, "None")) x->value = jv_none();
    else {
      x->kind = JN_NAME;
      x->name = t->s;
      x->name_len = t->n;
    }
  } else if (t->kind == JT_STRING) {
    jinja_buf_t b = {0};
    while (cur(P)->kind == JT_STRING) {
      jinja_buf_put(P->c, &b, cur(P)->s, cur(P)->n);
      advance(P);
    }
    x = node(P, JN_CONST);
    x->value = jv_strref(b.p ? b.p : "", b.len);
  } else if (t->kind == JT_INT || t->kind == JT_FLOAT) {
    advance(P);
    x = node(P, JN_CONST);
    x->value = t->kind == JT_INT ? jv_int(t->i) : jv_float(t->f);
  } else if (skip_op(P, "(")) {
    x = parse_tuple(P, 0, 1, NULL, 1);
    expect_op(P, ")");
  } else if (skip_op(P, "[")) {
    nodevec_t items = {0};
    while (!is_op(P, "]")) {
      if (items.n) expect_op(P, ",");
      if (is_op(P, "]")) break;
      vec_push(P, &items, parse_expression(P, 1));
    }
    expect_op(P, "]");
    x = node(P, JN_LIST);
    x->items = items.v;
    x->n_items = items.n;
  } else if (skip_op(P, "{")) {
    nodevec_t keys = {0}, vals = {0};
    while (!is_op(P, "}")) {
      if (keys.n) expect_op(P, ",");
      if (is_op(P, "}")) break;
      vec_push(P, &keys, parse_expression(P, 1));
      expect_op(P, ":");
      vec_push(P, &vals, parse_expression(P, 1));
    }
    expect_op(P, "}");
    x = node(P, JN_DICT);
    x->items = keys.v;
    x->vals = vals.v;
    x->n_items = keys.n;
  } else {
    fail_at(P, "expected an expression");
  }
  P->depth--;
  return x;
}

static jinja_node_t *parse_unary(parser_t *P, int with_filter) {
  enter(P);
  jinja_node_t *x;
  if (skip_op(P, "-")) x = node2(P, JN_NEG, parse_unary(P, 0), NULL);
  else if (skip_op(P, "+")) x = node2(P, JN_POS, parse_unary(P, 0), NULL);
  else x = parse_primary(P);
  x = parse_postfix(P, x);
  if (with_filter) x = parse_filter_expr(P, x);
  P->depth--;
  return x;
}

static jinja_node_t *binop(parser_t *P, int op, jinja_node_t *a, jinja_node_t *b) {
  jinja_node_t *x = node2(P, JN_BINOP, a, b);
  x->op = (uint8_t)op;
  return x;
}

/* The arithmetic levels, loosest first; each is left-associative (as in
 * jinja2, ** too). */
typedef struct level_op {
  const char *tok;
  int op;
} level_op_t;
static const level_op_t arith_levels[][5] = {
    {{"+", JO_ADD}, {"-", JO_SUB}},
    {{"~", JO_CONCAT}},
    {{"*", JO_MUL}, {"/", JO_DIV}, {"//", JO_FLOORDIV}, {"%", JO_MOD}},
    {{"**", JO_POW}},
};
enum { N_ARITH_LEVELS = sizeof arith_levels / sizeof *arith_levels };

static jinja_node_t *parse_arith(parser_t *P, int level) {
  if (level == N_ARITH_LEVELS) return parse_unary(P, 1);
  jinja_node_t *x = parse_arith(P, level + 1);
  for (;;) {
    const level_op_t *o = arith_levels[level];
    while (o->tok && !is_op(P, o->tok)) o++;
    if (!o->tok) return x;
    advance(P);
    x = binop(P, o->op, x, parse_arith(P, level + 1));
  }
}

static jinja_node_t *parse_math1(parser_t *P) { return parse_arith(P, 0); }

static jinja_node_t *parse_compare(parser_t *P) {
  jinja_node_t *first = parse_math1(P);
  nodevec_t operands = {0};
  uint8_t ops[64];
  for (;;) {
    int op;
    if (is_op(P, "==")) op = JO_EQ;
    else if (is_op(P, "!=")) op = JO_NE;
    else if (is_op(P, "<")) op = JO_LT;
    else if (is_op(P, "<=")) op = JO_LE;
    else if (is_op(P, ">")) op = JO_GT;
    else if (is_op(P, ">=")) op = JO_GE;
    else if (is_name(P, "in")) op = JO_IN;
    else if (is_name(P, "not") && tok_is_name(peek(P, 1), "in")) op = JO_NOTIN, advance(P);
    else break;
    advance(P);
    if (operands.n == sizeof ops) fail_at(P, "too many chained comparisons");
    ops[operands.n] = (uint8_t)op;
    vec_push(P, &operands, parse_math1(P));
  }
  if (!operands.n) return first;
  jinja_node_t *x = node2(P, JN_COMPARE, first, NULL);
  x->items = operands.v;
  x->n_items = operands.n;
  x->ops = jinja_alloc(P->c, operands.n);
  memcpy(x->ops, ops, operands.n);
  return x;
}

static jinja_node_t *parse_not(parser_t *P) {
  if (skip_name(P, "not")) {
    enter(P);
    jinja_node_t *x = node2(P, JN_NOT, parse_not(P), NULL);
    P->depth--;
    return x;
  }
  return parse_compare(P);
}

/* `a or b` over `a and b` over `not a`. */
static jinja_node_t *parse_logic(parser_t *P, int is_or) {
  jinja_node_t *x = is_or ? parse_logic(P, 0) : parse_not(P);
  while (skip_name(P, is_or ? "or" : "and")) x = node2(P, is_or ? JN_OR : JN_AND, x, is_or ? parse_logic(P, 0) : parse_not(P));
  return x;
}

static jinja_node_t *parse_or(parser_t *P) { return parse_logic(P, 1); }

static jinja_node_t *parse_condexpr(parser_t *P) {
  enter(P);
  jinja_node_t *x = parse_or(P);
  while (skip_name(P, "if")) {
    jinja_node_t *cond = node2(P, JN_COND, parse_or(P), x);
    if (skip_name(P, "else")) cond->c = parse_condexpr(P);
    x = cond;
  }
  P->depth--;
  return x;
}

static jinja_node_t *parse_expression(parser_t *P, int with_condexpr) {
  return with_condexpr ? parse_condexpr(P) : parse_or(P);
}

/* ---- statements ---------------------------------------------------------- */

static void parse_body(parser_t *P, const char *const *ends, jinja_node_t ***items, uint32_t *n);

/* `%}` then the body up to one of `ends` (left current). */
static void parse_statements(parser_t *P, const char *const *ends, jinja_node_t ***items, uint32_t *n) {
  skip_op(P, ":");
  expect_kind(P, JT_BLOCK_END, "expected end of statement block");
  parse_body(P, ends, items, n);
}

static int is_keyword(const jinja_tok_t *t) {
  static const char *const kw[] = {"true", "false", "none", "True", "False", "None", "and", "or", "not",
                                   "in", "is", "if", "else"};
  for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
    if (tok_is_name(t, kw[i])) return 1;
  return 0;
}

static jinja_node_t *parse_target(parser_t *P, const char *extra_end, int with_namespace) {
  if (with_namespace && cur(P)->kind == JT_NAME && tok_is_op(peek(P, 1), ".")) {
    jinja_node_t *ns = node(P, JN_NAME);
    jinja_tok_t *t = advance(P);
    ns->name = t->s;
    ns->name_len = t->n;
    advance(P);
    jinja_tok_t *a = expect_kind(P, JT_NAME, "expected an attribute name");
    jinja_node_t *x = node2(P, JN_ATTR, ns, NULL);
    x->name = a->s;
    x->name_len = a->n;
    return x;
  }
  jinja_node_t *x = parse_tuple(P, 1, 1, extra_end, 0);
  int ok = x->kind == JN_NAME;
  if (x->kind == JN_TUPLE) {
    ok = x->n_items > 0;
    for (uint32_t i = 0; i < x->n_items; i++) ok &= x->items[i]->kind == JN_NAME;
  }
  if (!ok) jinja_fail(P->c, -EINVAL, "line %d: can't assign to this expression", x->line);
  return x;
}

static jinja_node_t *parse_for(parser_t *P) {
  static const char *const ends[] = {"endfor", "else", NULL};
  static const char *const end_only[] = {"endfor", NULL};
  jinja_node_t *x = node(P, JN_FOR);
  x->a = parse_target(P, "in", 0);
  if (!skip_name(P, "in")) fail_at(P, "expected 'in'");
  x->b = parse_tuple(P, 0, 0, "recursive", 0);
  if (skip_name(P, "if")) x->c = parse_expression(P, 1);
  if (is_name(P, "recursive")) fail_at(P, "recursive loops are not supported");
  P->loops++;
  parse_statements(P, ends, &x->items, &x->n_items);
  P->loops--;
  if (tok_is_name(advance(P), "else")) {
    x->d = node(P, JN_BLOCK);
    parse_statements(P, end_only, &x->d->items, &x->d->n_items);
    advance(P);
  }
  return x;
}

static jinja_node_t *parse_if(parser_t *P) {
  static const char *const ends[] = {"elif", "else", "endif", NULL};
  static const char *const end_only[] = {"endif", NULL};
  jinja_node_t *first = node(P, JN_IF), *x = first;
  for (;;) {
    x->a = parse_tuple(P, 0, 0, NULL, 0);
    parse_statements(P, ends, &x->items, &x->n_items);
    jinja_tok_t *t = advance(P);
    if (tok_is_name(t, "elif")) {
      x->b = node(P, JN_IF);
      x = x->b;
      continue;
    }
    if (tok_is_name(t, "else")) {
      x->b = node(P, JN_BLOCK);
      parse_statements(P, end_only, &x->b->items, &x->b->n_items);
      advance(P);
    }
    return first;
  }
}

static jinja_node_t *parse_set(parser_t *P) {
  static const char *const ends[] = {"endset", NULL};
  jinja_node_t *target = parse_target(P, NULL, 1);
  if (skip_op(P, "=")) {
    jinja_node_t *x = node2(P, JN_SET, target, parse_tuple(P, 0, 1, NULL, 0));
    return x;
  }
  if (target->kind != JN_NAME) fail_at(P, "a block set needs a plain name");
  jinja_node_t *x = node2(P, JN_SET_BLOCK, target, NULL);
  x->c = is_op(P, "|") ? parse_filters(P, NULL, 0) : NULL;
  parse_statements(P, ends, &x->items, &x->n_items);
  advance(P);
  return x;
}

static jinja_node_t *parse_macro(parser_t *P) {
  static const char *const ends[] = {"endmacro", NULL};
  jinja_node_t *x = node(P, JN_MACRO);
  jinja_tok_t *t = expect_kind(P, JT_NAME, "expected a macro name");
  if (is_keyword(t)) jinja_fail(P->c, -EINVAL, "line %d: can't use '%.*s' as a macro name", t->line, (int)t->n, t->s);
  x->name = t->s;
  x->name_len = t->n;
  nodevec_t names = {0}, defaults = {0};
  int seen_default = 0;
  expect_op(P, "(");
  while (!is_op(P, ")")) {
    if (names.n) expect_op(P, ",");
    jinja_node_t *nm = node(P, JN_NAME);
    jinja_tok_t *a = expect_kind(P, JT_NAME, "expected an argument name");
    nm->name = a->s;
    nm->name_len = a->n;
    vec_push(P, &names, nm);
    if (skip_op(P, "=")) {
      vec_push(P, &defaults, parse_expression(P, 1));
      seen_default = 1;
    } else {
      if (seen_default) fail_at(P, "non-default argument follows default argument");
      vec_push(P, &defaults, NULL);
    }
  }
  expect_op(P, ")");
  x->n_kw = names.n;
  x->kw = defaults.v;
  x->kw_names = jinja_alloc(P->c, (names.n + 1) * sizeof *x->kw_names);
  x->kw_lens = jinja_alloc(P->c, (names.n + 1) * sizeof *x->kw_lens);
  for (uint32_t i = 0; i < names.n; i++) {
    x->kw_names[i] = names.v[i]->name;
    x->kw_lens[i] = names.v[i]->name_len;
  }
  int loops = P->loops;
  P->loops = 0;
  parse_statements(P, ends, &x->items, &x->n_items);
  P->loops = loops;
  advance(P);
  return x;
}

static jinja_node_t *parse_statement(parser_t *P) {
  static const char *const gen_ends[] = {"endgeneration", NULL};
  static const char *const unsupported[] = {"extends", "block", "include", "import", "from", "call",
                                            "filter", "with", "autoescape", "do", "trans", NULL};
  jinja_tok_t *t = cur(P);
  if (t->kind != JT_NAME) fail_at(P, "expected a statement name");
  enter(P);
  jinja_node_t *x = NULL;
  advance(P);
  if (tok_is_name(t, "for")) {
    x = parse_for(P);
  } else if (tok_is_name(t, "if")) {
    x = parse_if(P);
  } else if (tok_is_name(t, "set")) {
    x = parse_set(P);
  } else if (tok_is_name(t, "macro")) {
    x = parse_macro(P);
  } else if (tok_is_name(t, "break") || tok_is_name(t, "continue")) {
    if (!P->loops) jinja_fail(P->c, -EINVAL, "line %d: '%.*s' outside a loop", t->line, (int)t->n, t->s);
    x = node(P, tok_is_name(t, "break") ? JN_BREAK : JN_CONTINUE);
  } else if (tok_is_name(t, "generation")) {
    x = node(P, JN_BLOCK);
    parse_statements(P, gen_ends, &x->items, &x->n_items);
    advance(P);
  } else {
    for (size_t i = 0; unsupported[i]; i++)
      if (tok_is_name(t, unsupported[i]))
        jinja_fail(P->c, -ENOTSUP, "line %d: the '%s' tag is not supported", t->line, unsupported[i]);
    jinja_fail(P->c, -EINVAL, "line %d: unknown tag '%.*s'", t->line, (int)(t->n > 40 ? 40 : t->n), t->s);
  }
  P->depth--;
  return x;
}

static void parse_body(parser_t *P, const char *const *ends, jinja_node_t ***items, uint32_t *n) {
  nodevec_t body = {0};
  for (;;) {
    jinja_tok_t *t = cur(P);
    if (t->kind == JT_EOF) {
      if (ends) {
        char what[96] = "unexpected end of template, expected";
        for (size_t k = 0; ends[k]; k++)
          snprintf(what + strlen(what), sizeof what - strlen(what), "%s '%s'", k ? (ends[k + 1] ? "," : " or") : "",
                   ends[k]);
        jinja_fail(P->c, -EINVAL, "%s", what);
      }
      break;
    }
    if (t->kind == JT_TEXT) {
      jinja_node_t *x = node(P, JN_TEXT);
      x->value = jv_strref(t->s, t->n);
      advance(P);
      vec_push(P, &body, x);
    } else if (t->kind == JT_VAR_BEGIN) {
      advance(P);
      jinja_node_t *x = node2(P, JN_OUTPUT, parse_tuple(P, 0, 1, NULL, 0), NULL);
      expect_kind(P, JT_VAR_END, "expected end of print statement");
      vec_push(P, &body, x);
    } else if (t->kind == JT_BLOCK_BEGIN) {
      advance(P);
      for (size_t k = 0; ends && ends[k]; k++)
        if (is_name(P, ends[k])) goto done;
      vec_push(P, &body, parse_statement(P));
      expect_kind(P, JT_BLOCK_END, "expected end of statement block");
    } else {
      fail_at(P, "unexpected token");
    }
  }
done:
  *items = body.v;
  *n = body.n;
}

/* Unknown filters and tests are compile errors except where jinja2 defers
 * them to run time: in if statements (test and branches) and in inline if
 * expressions, though not inside a loop, macro or block set nested there. */
static void check_names(jinja_ctx_t *c, const jinja_node_t *n, int soft) {
  if (!n) return;
  if ((n->kind == JN_FILTER || n->kind == JN_TEST) && n->id < 0 && !soft)
    jinja_fail(c, -EINVAL, "line %d: no %s named '%.*s'", n->line, n->kind == JN_FILTER ? "filter" : "test",
               (int)n->name_len, n->name);
  int child = soft, body = soft;
  if (n->kind == JN_IF || n->kind == JN_COND) child = body = 1;
  else if (n->kind == JN_FOR) body = 0;
  else if (n->kind == JN_MACRO || n->kind == JN_SET_BLOCK) child = body = 0;
  check_names(c, n->a, child);
  check_names(c, n->b, child);
  check_names(c, n->c, child);
  check_names(c, n->d, n->kind == JN_FOR ? body : child);
  int is_stmt = n->kind >= JN_TEXT;
  for (uint32_t i = 0; i < n->n_items; i++) check_names(c, n->items[i], is_stmt ? body : child);
  if (n->vals)
    for (uint32_t i = 0; i < n->n_items; i++) check_names(c, n->vals[i], child);
  for (uint32_t i = 0; i < n->n_kw; i++) check_names(c, n->kw[i], child);
}

jinja_node_t *jinja_parse(jinja_ctx_t *c, const char *src, size_t len) {
  parser_t P = {.c = c};
  jinja_lex(c, src, len, &P.t, &P.n);
  jinja_node_t *root = node(&P, JN_BLOCK);
  parse_body(&P, NULL, &root->items, &root->n_items);
  check_names(c, root, 0);
  /* the names the body assigns unconditionally (see jinja.h) */
  uint32_t n = 0;
  for (uint32_t i = 0; i < root->n_items; i++) {
    const jinja_node_t *x = root->items[i];
    if (x->kind == JN_MACRO) n++;
    else if ((x->kind == JN_SET || x->kind == JN_SET_BLOCK) && x->a->kind == JN_NAME) n++;
    else if (x->kind == JN_SET && x->a->kind == JN_TUPLE) n += x->a->n_items;
  }
  root->kw_names = jinja_alloc(c, (n + 1) * sizeof *root->kw_names);
  root->kw_lens = jinja_alloc(c, (n + 1) * sizeof *root->kw_lens);
  for (uint32_t i = 0; i < root->n_items; i++) {
    const jinja_node_t *x = root->items[i];
    if (x->kind == JN_MACRO) {
      root->kw_names[root->n_kw] = x->name;
      root->kw_lens[root->n_kw++] = x->name_len;
    } else if ((x->kind == JN_SET || x->kind == JN_SET_BLOCK) && x->a->kind != JN_ATTR) {
      uint32_t k = x->a->kind == JN_TUPLE ? x->a->n_items : 1;
      for (uint32_t j = 0; j < k; j++) {
        const jinja_node_t *t = x->a->kind == JN_TUPLE ? x->a->items[j] : x->a;
        root->kw_names[root->n_kw] = t->name;
        root->kw_lens[root->n_kw++] = t->name_len;
      }
    }
  }
  return root;
}
