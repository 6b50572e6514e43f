/* text/jinja/jinja.h — the Jinja interpreter behind chat templates (internal to
 * text/; the public face is text/chat_template.h).
 *
 * It implements the subset of Jinja2 that chat templates use, with the
 * semantics of Python's jinja2 as Hugging Face runs it:
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) plus
 * the loopcontrols extension, a json.dumps-based `tojson`, and the globals
 * `raise_exception` and `strftime_now`.
 *
 * The pieces, one file each:
 *   jinja_arena.c     bump allocator with a byte cap, output buffers, errors
 *   jinja_value.c     the value type: equality, truth, str()/repr(), UTF-8
 *   jinja_json.c      tojson (json.dumps) and float repr
 *   jinja_lex.c       template text -> tokens, with Jinja's whitespace control
 *   jinja_parse.c     tokens -> syntax tree; unknown constructs fail here
 *   jinja_eval.c      statements and expressions
 *   jinja_filters.c   filters and tests
 *   jinja_methods.c   str/dict/list methods and the global functions
 *
 * Memory: a compiled template (tokens, tree, literals) lives in one arena; a
 * render allocates every value in a second arena freed when it ends. Values
 * are never freed one by one, so they need no reference counts.
 *
 * Errors: lexer, parser and evaluator report an error with jinja_fail(),
 * which longjmps back to the entry point (jinja_parse(), jinja_render()).
 * That is safe because everything a run allocates is in its arena. */
#ifndef TRAM_JINJA_H
#define TRAM_JINJA_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"

/* ---- arena, buffers, errors (jinja_arena.c) ----------------------------- */

#define JINJA_MSG_MAX 512

/* One run (a compile or a render): its arena, its error exit, its limits. */
typedef struct jinja_ctx {
  arena_t arena;          /* base/arena.h, capped at the run's memory limit */
  jmp_buf *jb;            /* where jinja_fail() jumps */
  int code;               /* negative errno of the failure */
  char msg[JINJA_MSG_MAX];
  /* render only */
  buf_t *out;             /* where output goes now (swapped for captures) */
  size_t max_output;      /* most bytes any output buffer may hold */
  uint64_t steps, max_steps; /* work done / allowed (statements + expressions) */
  int depth, max_depth;   /* nesting of evaluation and macro calls */
  int loop_ctl;           /* JINJA_LOOP_BREAK / _CONTINUE while unwinding */
  struct jinja_frame *globals; /* the render's variables */
  struct jinja_frame *top;     /* the template body's own frame */
  const struct jinja_node *root;
} jinja_ctx_t;

enum { JINJA_LOOP_NONE = 0, JINJA_LOOP_BREAK = 1, JINJA_LOOP_CONTINUE = 2 };

/* Growable bytes in the run's arena: a base/buf.h buffer, bound to the
 * arena and capped at max_output by its first jinja_buf_* call, so a
 * buffer starts as {0}. */
typedef buf_t jinja_buf_t;

/* The run's arena: chunks from 64 KiB, at most cap bytes (0: no cap). */
void jinja_arena_init(arena_t *a, size_t cap);
/* n zeroed bytes, 16-aligned; fails the run (-E2BIG) past the cap. */
void *jinja_alloc(jinja_ctx_t *c, size_t n);
/* A copy of s[n] with a NUL after it. */
char *jinja_strdup(jinja_ctx_t *c, const char *s, size_t n);

void jinja_buf_put(jinja_ctx_t *c, jinja_buf_t *b, const char *s, size_t n);
void jinja_buf_putc(jinja_ctx_t *c, jinja_buf_t *b, char ch);
void jinja_buf_printf(jinja_ctx_t *c, jinja_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the message and code and longjmps to c->jb. */
_Noreturn void jinja_fail(jinja_ctx_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Counts one unit of work; fails past c->max_steps. */
void jinja_step(jinja_ctx_t *c);

/* ---- values (jinja_value.c) -------------------------------------------- */

typedef enum jinja_kind {
  JK_UNDEF = 0, /* Jinja's Undefined: falsy, prints "", fails arithmetic */
  JK_NONE,
  JK_BOOL,
  JK_INT,
  JK_FLOAT,
  JK_STR,
  JK_LIST,   /* list or tuple (jinja_list_t.tuple) */
  JK_DICT,
  JK_NS,     /* namespace(): a dict whose attributes `set` may assign */
  JK_LOOP,   /* the `loop` variable */
  JK_FUNC,   /* a global function (range, namespace, raise_exception, ...) */
  JK_METHOD, /* a method bound to its object ("a".strip) */
  JK_MACRO,
} jinja_kind_t;

/* How an undefined value came about, for the message when it is misused. */
enum { JU_NAME = 0, JU_ATTR = 1, JU_ITEM = 2, JU_PLAIN = 3 };

typedef struct jinja_value {
  uint8_t kind; /* jinja_kind_t */
  uint8_t sub;  /* JK_UNDEF: JU_*; with JU_ATTR/JU_ITEM, `obj` holds the owner's kind */
  uint8_t obj;
  uint32_t n; /* JK_STR: bytes at s; JK_UNDEF: bytes of the name at s */
  union {
    int b;
    int64_t i;
    double f;
    const char *s; /* JK_STR: UTF-8, not NUL-terminated; JK_UNDEF: the name */
    struct jinja_list *list;
    struct jinja_dict *dict; /* JK_DICT, JK_NS */
    struct jinja_loop *loop;
    struct jinja_method *method;
    struct jinja_macro *macro;
    int fn; /* JK_FUNC: JINJA_FN_* */
  };
} jv_t;

typedef struct jinja_list {
  uint32_t n, cap;
  int tuple; /* prints as (a, b) */
  jv_t *v;
} jinja_list_t;

typedef struct jinja_dict { /* insertion-ordered, linear lookup */
  uint32_t n, cap;
  jv_t *k, *v;
} jinja_dict_t;

typedef struct jinja_loop {
  jinja_list_t *items; /* what the loop runs over (after its `if` filter) */
  int64_t index0;
  int depth0;
} jinja_loop_t;

typedef struct jinja_macro {
  const struct jinja_node *node; /* the MACRO node */
  struct jinja_frame *scope;     /* where it was defined */
} jinja_macro_t;

typedef struct jinja_method {
  jv_t self;
  const char *name;
  uint32_t len;
} jinja_method_t;

static inline jv_t jv_undef(void) { jv_t v = {.kind = JK_UNDEF, .sub = JU_PLAIN}; return v; }
static inline jv_t jv_none(void) { jv_t v = {.kind = JK_NONE}; return v; }
static inline jv_t jv_bool(int b) { jv_t v = {.kind = JK_BOOL}; v.b = !!b; return v; }
static inline jv_t jv_int(int64_t i) { jv_t v = {.kind = JK_INT}; v.i = i; return v; }
static inline jv_t jv_float(double f) { jv_t v = {.kind = JK_FLOAT}; v.f = f; return v; }
/* A string that points at s (not copied: s must outlive the run). */
static inline jv_t jv_strref(const char *s, size_t n) {
  jv_t v = {.kind = JK_STR, .n = (uint32_t)n};
  v.s = s;
  return v;
}
static inline jv_t jv_cstr(const char *s);

jv_t jv_str(jinja_ctx_t *c, const char *s, size_t n); /* copies; fails above 4 GiB */
jv_t jv_undef_named(const char *name, size_t n, int sub, int obj_kind);
jinja_list_t *jinja_list_new(jinja_ctx_t *c, uint32_t cap);
void jinja_list_push(jinja_ctx_t *c, jinja_list_t *l, jv_t v);
jinja_dict_t *jinja_dict_new(jinja_ctx_t *c, uint32_t cap);
/* Sets d[k] = v, keeping the position of an existing key. */
void jinja_dict_set(jinja_ctx_t *c, jinja_dict_t *d, jv_t k, jv_t v);
/* d[k] or NULL. */
jv_t *jinja_dict_get(jinja_dict_t *d, jv_t k);
jv_t *jinja_dict_get_str(jinja_dict_t *d, const char *s, size_t n);
static inline jv_t jv_list(jinja_list_t *l) { jv_t v = {.kind = JK_LIST}; v.list = l; return v; }
static inline jv_t jv_dict(jinja_dict_t *d) { jv_t v = {.kind = JK_DICT}; v.dict = d; return v; }

static inline jv_t jv_cstr(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return jv_strref(s, n);
}

/* Python's truth value (Undefined is false). */
int jinja_truthy(jv_t v);
/* Python ==, deep for lists and dicts (1 == 1.0 == True). */
int jinja_equal(jv_t a, jv_t b);
/* Python <, >, ...: returns <0, 0, >0; fails for unorderable types. */
int jinja_compare(jinja_ctx_t *c, jv_t a, jv_t b);
/* Python's type name ("str", "dict", "NoneType", ...). */
const char *jinja_type_name(jv_t v);
/* Fails with Jinja's UndefinedError message for this undefined value. */
_Noreturn void jinja_fail_undefined(jinja_ctx_t *c, jv_t v);
/* str(v) appended to b (Undefined -> "", None -> "None", lists by repr). */
void jinja_str(jinja_ctx_t *c, jinja_buf_t *b, jv_t v);
/* repr(v) appended to b. */
void jinja_repr(jinja_ctx_t *c, jinja_buf_t *b, jv_t v);
/* str(v) as a string value (no copy when v is a string). */
jv_t jinja_to_string(jinja_ctx_t *c, jv_t v);
/* Python float repr (shortest round-trip, "1.0", "1e-05"); buf >= 32. */
void jinja_float_repr(double f, char *buf);

/* UTF-8 helpers. Invalid bytes decode as U+FFFD one byte at a time. */
uint32_t jinja_utf8_next(const char *s, size_t n, size_t *i);
size_t jinja_utf8_count(const char *s, size_t n);
/* Byte offset of code point k (k <= count). */
size_t jinja_utf8_offset(const char *s, size_t n, size_t k);
void jinja_utf8_put(jinja_ctx_t *c, jinja_buf_t *b, uint32_t cp);
/* Python's str.isspace() for one code point. */
int jinja_isspace(uint32_t cp);

/* ---- tojson (jinja_json.c) ---------------------------------------------- */

typedef struct jinja_json_opts {
  int indent;           /* < 0: none (one line) */
  const char *indent_str; /* when set, used per level instead of `indent` spaces */
  size_t indent_len;
  const char *item_sep, *key_sep; size_t item_sep_len, key_sep_len;
  int sort_keys, ensure_ascii;
} jinja_json_opts_t;

/* json.dumps(v, **opts) appended to b. */
void jinja_tojson(jinja_ctx_t *c, jinja_buf_t *b, jv_t v, const jinja_json_opts_t *o);

/* ---- tokens and syntax tree (jinja_lex.c, jinja_parse.c) --------------- */

typedef enum jinja_tok_kind {
  JT_EOF = 0,
  JT_TEXT,        /* template data, whitespace control already applied */
  JT_BLOCK_BEGIN, /* {% */
  JT_BLOCK_END,   /* %} */
  JT_VAR_BEGIN,   /* {{ */
  JT_VAR_END,     /* }} */
  JT_NAME,
  JT_STRING,      /* escapes decoded */
  JT_INT,
  JT_FLOAT,
  JT_OP,          /* one of the operators; text in s/n */
} jinja_tok_kind_t;

typedef struct jinja_tok {
  uint8_t kind;
  int line;
  const char *s; /* JT_TEXT, JT_NAME, JT_STRING, JT_OP bytes */
  uint32_t n;
  int64_t i;     /* JT_INT */
  double f;      /* JT_FLOAT */
} jinja_tok_t;

/* Splits the template into tokens (in c's arena; *out and *n_out). */
void jinja_lex(jinja_ctx_t *c, const char *src, size_t len, jinja_tok_t **out, size_t *n_out);

typedef enum jinja_node_kind {
  /* expressions */
  JN_CONST, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL,
  JN_FILTER, JN_TEST, JN_NOT, JN_NEG, JN_POS, JN_BINOP, JN_AND, JN_OR, JN_COMPARE, JN_COND,
  /* statements */
  JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_BREAK, JN_CONTINUE,
  JN_BLOCK, /* a plain body: else branches, {% generation %} */
} jinja_node_kind_t;

typedef enum jinja_op {
  JO_ADD, JO_SUB, JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD, JO_POW, JO_CONCAT,
  JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE, JO_IN, JO_NOTIN,
} jinja_op_t;

/* One node; which fields mean what depends on the kind:
 *   CONST value | NAME name | LIST/TUPLE items | DICT items (keys), vals
 *   ATTR a.name | ITEM a[b] | SLICE a[b:c:d] (each may be NULL)
 *   CALL a(items, kw) | FILTER a|name(items, kw), id | TEST a is name(items), id, flag = negated
 *   NOT/NEG/POS a | BINOP a op b | AND/OR a, b | COMPARE a (ops[i] items[i])...
 *   COND b if a else c (c NULL: undefined)
 *   TEXT value | OUTPUT a | IF if a: items else b (b: IF for elif, BLOCK for else)
 *   FOR for a in b if c: items else d (a: NAME or TUPLE of NAMEs)
 *   SET a = b (a: NAME, TUPLE of NAMEs, or ATTR of a NAME)
 *   SET_BLOCK a = capture(items), then the filter chain c whose innermost a is NULL
 *   MACRO name(kw names, kw defaults (NULL: none)): items
 *   BLOCK items; the template's root BLOCK lists in kw_names the names its
 *   body assigns unconditionally (set, block set, macro), which loop bodies
 *   and macros see as Undefined until assigned, as in jinja2 */
typedef struct jinja_node {
  uint8_t kind, op, flag;
  int16_t id;
  int line;
  jv_t value;
  const char *name;
  uint32_t name_len;
  struct jinja_node *a, *b, *c, *d;
  struct jinja_node **items, **vals;
  uint32_t n_items;
  const char **kw_names;
  uint32_t *kw_lens;
  struct jinja_node **kw;
  uint32_t n_kw;
  uint8_t *ops;
} jinja_node_t;

/* Parses the template into a BLOCK node (in c's arena). Fails the run on a
 * syntax error or an unsupported construct, naming it and the line. */
jinja_node_t *jinja_parse(jinja_ctx_t *c, const char *src, size_t len);

/* ---- evaluation (jinja_eval.c) ------------------------------------------ */

typedef struct jinja_frame {
  struct jinja_frame *parent;
  uint32_t n, cap;
  const char **names;
  uint32_t *lens;
  jv_t *vals;
} jinja_frame_t;

jinja_frame_t *jinja_frame_new(jinja_ctx_t *c, jinja_frame_t *parent);
void jinja_frame_set(jinja_ctx_t *c, jinja_frame_t *f, const char *name, size_t n, jv_t v);

/* Runs the template with c->globals as its variables, writing to c->out. */
void jinja_render(jinja_ctx_t *c, const jinja_node_t *root);
jv_t jinja_eval(jinja_ctx_t *c, jinja_frame_t *f, const jinja_node_t *n);

/* Evaluated call arguments. */
typedef struct jinja_args {
  jv_t *pos;
  uint32_t n_pos;
  const char **kw_names;
  uint32_t *kw_lens;
  jv_t *kw;
  uint32_t n_kw;
} jinja_args_t;

/* The i-th argument: positional, else the keyword `name`, else NULL. */
jv_t *jinja_arg(const jinja_args_t *a, uint32_t i, const char *name);
/* Calls a macro or function value. */
jv_t jinja_call_value(jinja_ctx_t *c, jv_t fn, const jinja_args_t *a);
/* Iterates v as Python would (list items, dict keys, string characters;
 * Undefined -> empty); fails for what is not iterable. */
jinja_list_t *jinja_iterate(jinja_ctx_t *c, jv_t v);
/* Jinja's getattr(obj, name) and getitem(obj, key). */
jv_t jinja_getattr(jinja_ctx_t *c, jv_t obj, const char *name, size_t n);
jv_t jinja_getitem(jinja_ctx_t *c, jv_t obj, jv_t key);

/* ---- builtins (jinja_filters.c, jinja_methods.c) ------------------------ */

enum {
  JINJA_FN_RANGE, JINJA_FN_NAMESPACE, JINJA_FN_DICT, JINJA_FN_RAISE, JINJA_FN_STRFTIME,
  JINJA_FN_COUNT
};

/* Ids by name, -1 when unknown (checked at compile time, as Jinja does). */
int jinja_filter_id(const char *name, size_t n);
int jinja_test_id(const char *name, size_t n);
int jinja_global_id(const char *name, size_t n);
jv_t jinja_apply_filter(jinja_ctx_t *c, int id, jv_t v, const jinja_args_t *a);
int jinja_apply_test(jinja_ctx_t *c, int id, jv_t v, const jinja_args_t *a);
jv_t jinja_call_global(jinja_ctx_t *c, int id, const jinja_args_t *a);
/* The method `name` of obj bound to it, or Undefined if obj has none. */
jv_t jinja_bind_method(jinja_ctx_t *c, jv_t obj, const char *name, size_t n);
jv_t jinja_call_method(jinja_ctx_t *c, const jinja_method_t *m, const jinja_args_t *a);

/* String helpers the filters share with the methods (jinja_methods.c). */
enum { JINJA_LOWER, JINJA_UPPER, JINJA_CAPITALIZE, JINJA_TITLE };
/* Python's str.strip() (which: 1 left, 2 right, 3 both); chars NULL: whitespace. */
jv_t jinja__strip(jv_t s, const jv_t *chars, int which);
/* Python's lower()/upper()/capitalize()/title() with simple case mapping. */
jv_t jinja__case(jinja_ctx_t *c, jv_t s, int mode);
/* Python's str.replace(old, new, count) (count < 0: all). */
jv_t jinja__replace(jinja_ctx_t *c, jv_t s, jv_t old, jv_t new_, int64_t count);
/* Python's printf-style fmt % args (%s %r %d %i %f %e %g %x %o %c %%, flags,
 * width, precision; no %(name)s). */
jv_t jinja__format(jinja_ctx_t *c, jv_t fmt, jv_t args);
/* Python's int(s, base) / float(s) on a string; 0 or -1 when it is not one. */
int jinja__parse_number(jv_t s, int want_int, int base, jv_t *out);

#endif
