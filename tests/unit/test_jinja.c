/* tests/unit/test_jinja.c — the chat-template interpreter: expressions,
 * filters, loops and scopes, whitespace control, errors and limits, message
 * normalisation, and random hostile templates. Byte-for-byte parity with
 * Python's jinja2 on real templates is tests/integration/test_chat_template.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_chat_val.h"
#include "text/chat_template.h"
#include "text/jinja/jinja.h"
#include "tests/unit/testutil.h"

static const char *MESSAGES =
    "[{\"role\": \"system\", \"content\": \"  be brief \"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\": \"Bye\"}]";

/* Renders src with MESSAGES (or `messages`) and extra; returns the status,
 * the output in out (or the message). */
static int render_with(const char *src, const char *messages, const char *extra, char *out, size_t size,
                       size_t max_output, uint64_t max_steps) {
  char err[512] = "";
  chat_tmpl_t *t = chat_tmpl_compile(src, strlen(src), err, sizeof err);
  if (!t) {
    snprintf(out, size, "%s", err);
    return 1;
  }
  cJSON *m = cJSON_Parse(messages ? messages : MESSAGES);
  cJSON *x = extra ? cJSON_Parse(extra) : NULL;
  arena_t a;
  arena_init(&a, 0, 0);
  chat_tmpl_input_t in = {.messages = oai_chat_val(&a, m), .add_generation_prompt = 1, .bos_token = "<s>",
                          .eos_token = "</s>", .extra = x ? oai_chat_val(&a, x) : NULL, .max_output = max_output,
                          .max_steps = max_steps};
  char *text = NULL;
  size_t n = 0;
  int rc = chat_tmpl_render(t, &in, &text, &n, err, sizeof err);
  if (rc == 0) {
    assert_non_null(text);
    assert_int_equal(strlen(text), n);
    snprintf(out, size, "%s", text);
  } else {
    assert_null(text);
    snprintf(out, size, "%s", err);
  }
  free(text);
  arena_free(&a);
  cJSON_Delete(m);
  cJSON_Delete(x);
  chat_tmpl_free(t);
  return rc;
}

static int render(const char *src, char *out, size_t size) { return render_with(src, NULL, NULL, out, size, 0, 0); }

typedef struct {
  const char *src, *want;
} case_t;

static void run_cases(const case_t *cases, size_t n) {
  char out[4096];
  for (size_t i = 0; i < n; i++) {
    int rc = render(cases[i].src, out, sizeof out);
    if (rc != 0 || strcmp(out, cases[i].want) != 0)
      fail_msg("template %s\n  want %s\n  got  %s (rc %d)", cases[i].src, cases[i].want, out, rc);
  }
}

static void expressions(void **state) {
  (void)state;
  static const case_t cases[] = {
      {"{{ 1 + 2 * 3 }}", "7"},
      {"{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}", "9|64"}, /* ** is left-associative in Jinja */
      {"{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}", "3.5|3|-4|2|-2"},
      {"{{ 1.0 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 123.5 }}", "1.0|1e-05|0.30000000000000004|1e+16|123.5"},
      {"{{ 'a' ~ 1 ~ none ~ true }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}|{{ 'ab' * 2 }}", "a1NoneTrue|ab|[1, 2]|abab"},
      {"{{ [1, 'a', none, 2.5, {'k': (1,)}] }}", "[1, 'a', None, 2.5, {'k': (1,)}]"},
      {"{{ \"it's\" }}|{{ ['it\\'s', 'a\"b', 'x\\ny'] }}", "it's|[\"it's\", 'a\"b', 'x\\ny']"},
      {"{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ [1,2] == [1,2] }}", "TrueFalseTrueTrueTrue"},
      {"{{ 'ell' in 'hello' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 0} }}{{ 3 not in [3] }}", "TrueTrueTrueFalse"},
      {"{{ none or 'x' }}|{{ 0 and 'y' }}|{{ 'a' and 'b' }}|{{ not [] }}", "x|0|b|True"},
      {"{{ 'y' if messages else 'n' }}|{{ 'z' if false }}|{{ 1 if false else 2 if false else 3 }}", "y||3"},
      {"{{ messages[0].role }}|{{ messages[0]['role'] }}|{{ messages[-1].content }}|{{ messages|length }}",
       "system|system|Bye|4"},
      {"{{ messages[1:]|length }}|{{ [1,2,3,4][::-1] }}|{{ [1,2,3,4][1:3] }}|{{ 'héllo'[1:4] }}|{{ 'abc'[::-1] }}",
       "3|[4, 3, 2, 1]|[2, 3]|éll|cba"},
      {"{{ 'abc'[5] }}|{{ [1][3] }}|{{ {'a': 1}.b }}|{{ nothing }}|", "||||"},
      {"{{ x is defined }}{{ messages is defined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}"
       "{{ {} is mapping }}{{ 'a' is iterable }}{{ 1 is integer }}{{ 1.5 is float }}{{ 3 is odd }}",
       "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrue"},
      {"{{ x is not defined }}{{ not x is defined }}{{ 4 is divisibleby 2 }}{{ 'a' is sameas 'b' }}",
       "TrueTrueTrueFalse"},
      {"{{ 0x1f }}|{{ 1_000 }}|{{ 2E3 }}|{{ -(3) }}|{{ +4 }}|{{ 'a' 'b' }}", "31|1000|2000.0|-3|4|ab"},
      {"{{ '\\u00e9\\t\\x41\\101' }}", "é\tAA"},
  };
  run_cases(cases, sizeof cases / sizeof *cases);
}

static void filters_and_methods(void **state) {
  (void)state;
  static const case_t cases[] = {
      {"[{{ '  a b \\n'|trim }}]{{ 'aB'|upper }}{{ 'aB'|lower }}{{ 'hello wORLD'|title }}{{ 'hELLO'|capitalize }}",
       "[a b]ABabHello WorldHello"},
      {"{{ [3, 1]|first }}{{ [3, 1]|last }}{{ [1, 2]|join('-') }}{{ 'a-b'|replace('-', '+') }}{{ 5|string }}",
       "311-2a+b5"},
      {"{{ '42'|int + 1 }}|{{ '3.9'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ '2.5'|float }}|{{ 3|float }}",
       "43|3|0|7|2.5|3.0"},
      {"{{ none|default('d') }}|{{ x|default('d') }}|{{ ''|default('e', true) }}|{{ x|d('f') }}", "None|d|e|f"},
      {"{{ 'héllo'|length }}{{ [1, 2]|count }}{{ {'a': 1}|length }}{{ x|length }}", "5210"},
      {"{{ {'b': [1, 2.5, none, true], 'a': 'é\"'}|tojson }}", "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\"}"},
      {"{{ {'a': [1, {}], 'b': []}|tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"},
      {"{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}{{ [1, 2]|tojson(separators=(',', ':')) }}",
       "{\"a\": 2, \"b\": 1}[1,2]"},
      {"{{ 'é'|tojson(ensure_ascii=true) }}{{ '\\x01'|tojson }}", "\"\\u00e9\"\"\\u0001\""},
      {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}", "Hi,Bye"},
      {"{{ messages|rejectattr('role', 'in', ['user', 'system'])|list|length }}", "1"},
      {"{{ [1, 2, 3, 4]|select('even')|list }}{{ [1, 2, 3]|reject('odd')|list }}{{ ['a', 'B']|map('upper')|list }}",
       "[2, 4][2]['A', 'B']"},
      {"{% for k, v in {'x': 1, 'y': 2}|items %}{{ k }}{{ v }}{% endfor %}|{{ {'x': 1}.items()|list }}",
       "x1y2|[('x', 1)]"},
      {"{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'a']|sort }}{{ [1, 1, 2]|unique|list }}{{ [1, 2]|sum }}{{ [4, 9, 2]|max }}",
       "[1, 2, 3]['A', 'a', 'b'][1, 2]39"},
      {"{{ 'abc'|reverse }}{{ [1, 2]|reverse|list }}{{ -3|abs }}{{ '<&>'|e }}", "cba[2, 1]3&lt;&amp;&gt;"},
      {"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}", "a\n  b\n\n  c|  a\n  b"},
      {"{{ 'a,b,,c'.split(',') }}{{ '  a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}",
       "['a', 'b', '', 'c']['a', 'b']['a', 'b c']['a b', 'c']"},
      {"{{ ' x '.strip() }}{{ 'xxaxx'.strip('x') }}{{ 'xa'.lstrip('x') }}{{ 'ax'.rstrip('x') }}", "xaaa"},
      {"{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}",
       "TrueTrueHIhi"},
      {"{{ 'abcabc'.find('c') }}{{ 'abcabc'.rfind('c') }}{{ 'abcabc'.count('bc') }}{{ ', '.join(['x', 'y']) }}",
       "252x, y"},
      {"{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('z', 5) }}{{ {'a': 1}.get('z') }}{{ {'a': 1}.keys()|list }}",
       "15None['a']"},
      {"{{ range(3)|list }}{{ range(1, 8, 3)|list }}{{ dict(a=1) }}{{ namespace(x=2).x }}", "[0, 1, 2][1, 4, 7]{'a': 1}2"},
  };
  run_cases(cases, sizeof cases / sizeof *cases);
}

static void statements_and_scopes(void **state) {
  (void)state;
  static const case_t cases[] = {
      {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
       "{{ loop.revindex }};{% endfor %}",
       "10TrueFalse44;21FalseFalse43;32FalseFalse42;43FalseTrue41;"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1, 2, 3] if x != 2 %}{{ x }}/{{ loop.length }}"
       "{% endfor %}",
       "empty|1/23/2"},
      {"{% for x in range(6) %}{% if x == 4 %}{% break %}{% elif x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
       "023"},
      {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}{% set p, q = 'xy' %}{{ q }}{{ p }}", "37yx"},
      {"{% for x in [1, 2] %}{{ loop.previtem is defined }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') }}{% endfor %}",
       "False2aTrueb"},
      /* set in a loop does not leak; set in an if does; namespace escapes */
      {"{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", "12121"},
      {"{% if true %}{% set z = 3 %}{% endif %}{{ z }}", "3"},
      {"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "4"},
      {"{% set messages = messages[1:] %}{{ messages[0].role }}", "user"},
      {"{% set x %}a{{ 1 }}{% endset %}[{{ x }}]{% set y | upper %} b {% endset %}[{{ y }}]", "[a1][ B ]"},
      {"{% macro f(a, b=2) %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(1, b=3) }}{{ f(a=4) }}{{ f() }}",
       "<12><13><42><2>"},
      {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
       "120"},
      {"{% generation %}x{% endgeneration %}{% raw %}{{ y }}{% endraw %}", "x{{ y }}"},
      {"{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}", "<s></s>TrueNone"},
  };
  run_cases(cases, sizeof cases / sizeof *cases);
}

static void whitespace_control(void **state) {
  (void)state;
  static const case_t cases[] = {
      {"a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
      {"{% if true %}\nx\n{% endif %}\ny", "x\ny"},             /* trim_blocks */
      {"  {% if true %}\n  x\n  {% endif %}\n  y", "  x\n  y"}, /* lstrip_blocks */
      {"  {{ 1 }}\n  {# c #}\n.", "  1\n."},                    /* not before {{; comments too */
      {"{%+ if true %}a{% endif +%}\nb", "a\nb"},
      {"  {%+ if true %}a{% endif %}", "  a"},
      {"{{- '  x  ' -}}   {{- ' y ' }}", "  x   y "},
      {"a\r\nb\rc\n", "a\nb\nc"}, /* newlines normalised, one trailing newline dropped */
      {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", "  1\n  2\n"},
  };
  run_cases(cases, sizeof cases / sizeof *cases);
}

static void compile_errors_name_the_problem(void **state) {
  (void)state;
  static const struct {
    const char *src, *want;
  } cases[] = {
      {"{% extends 'base' %}", "'extends' tag is not supported"},
      {"{% include 'x' %}", "'include' tag is not supported"},
      {"{{ x|nosuchfilter }}", "no filter named 'nosuchfilter'"},
      {"{{ x is nosuchtest }}", "no test named 'nosuchtest'"},
      {"ok\n{% if x %}", "or 'endif'"},
      {"{{ 'abc }}", "unterminated string"},
      {"{% for x in y recursive %}{% endfor %}", "recursive loops are not supported"},
      {"{% break %}", "outside a loop"},
      {"{{ f(*args) }}", "not supported"},
      {"{# no end", "missing end of comment"},
      {"{% bogus %}", "unknown tag 'bogus'"},
      {"{{ 1 + }}", "expected an expression"},
      {"line1\nline2\n{{ ) }}", "line 3"},
  };
  char out[512];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    assert_int_equal(render(cases[i].src, out, sizeof out), 1);
    if (!strstr(out, cases[i].want)) fail_msg("%s: message '%s' lacks '%s'", cases[i].src, out, cases[i].want);
  }
}

static void render_errors(void **state) {
  (void)state;
  char out[512];
  assert_int_equal(render("a{{ raise_exception('Roles must alternate: ' ~ messages|length) }}", out, sizeof out), -EBADMSG);
  assert_string_equal(out, "Roles must alternate: 4");
  assert_int_equal(render("{{ x.y }}", out, sizeof out), -EINVAL);
  assert_string_equal(out, "'x' is undefined");
  assert_int_equal(render("{{ messages[0].nope.deeper }}", out, sizeof out), -EINVAL);
  assert_string_equal(out, "'dict object' has no attribute 'nope'");
  assert_int_equal(render("{{ 'a' + 1 }}", out, sizeof out), -EINVAL);
  assert_int_equal(render("{{ 1 // 0 }}", out, sizeof out), -EDOM);
  assert_int_equal(render("{% for x in 3 %}{% endfor %}", out, sizeof out), -EINVAL);
  assert_int_equal(render("{% set x = 1 %}{% set x.a = 2 %}", out, sizeof out), -EINVAL);
  assert_int_equal(render("{{ 9223372036854775807 + 1 }}", out, sizeof out), -ERANGE);
  assert_int_equal(render("{{ undefined_fn() }}", out, sizeof out), -EINVAL);
}

/* Hostile templates stop at a limit with a clear error. */
static void limits_hold(void **state) {
  (void)state;
  char out[512];
  assert_int_equal(render_with("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", NULL, NULL, out,
                               sizeof out, 1 << 16, 0), -E2BIG);
  assert_true(strstr(out, "exceeds") != NULL);
  assert_int_equal(render_with("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                               NULL, NULL, out, sizeof out, 0, 100000), -E2BIG);
  assert_int_equal(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", out, sizeof out), -E2BIG);
  assert_int_equal(render("{{ range(1000000)|length }}", out, sizeof out), -E2BIG);
  assert_int_equal(render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                          "{% endfor %}", out, sizeof out), -E2BIG);
  /* deep nesting fails to compile instead of exhausting the stack */
  size_t depth = 5000;
  char *deep = malloc(2 * depth + 16);
  strcpy(deep, "{{ ");
  for (size_t i = 0; i < depth; i++) strcat(deep, "(");
  strcat(deep, "1");
  for (size_t i = 0; i < depth; i++) strcat(deep, ")");
  strcat(deep, " }}");
  assert_int_equal(render(deep, out, sizeof out), 1);
  assert_true(strstr(out, "nested too deeply") != NULL);
  strcpy(deep, "{{ ");
  for (size_t i = 0; i < depth; i++) strcat(deep, "-");
  strcat(deep, "1 }}");
  assert_int_equal(render(deep, out, sizeof out), 1);
  free(deep);
  /* deeply nested messages are refused */
  char *nested = malloc(4 * 200 + 100);
  strcpy(nested, "[{\"role\": \"user\", \"content\": \"x\", \"deep\": ");
  for (int i = 0; i < 200; i++) strcat(nested, "[");
  for (int i = 0; i < 200; i++) strcat(nested, "]");
  strcat(nested, "}]");
  assert_int_equal(render_with("{{ messages[0].content }}", nested, NULL, out, sizeof out, 0, 0), -EINVAL);
  free(nested);
}

static void messages_are_normalised(void **state) {
  (void)state;
  char out[512];
  const char *parts = "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"one\"}, "
                      "{\"type\": \"text\", \"text\": \"two\"}]}, {\"role\": \"assistant\", \"content\": null}]";
  assert_int_equal(render_with("{{ messages[0].content }}|{{ messages[1].content }}|{{ messages[1].content is none }}",
                               parts, NULL, out, sizeof out, 0, 0), 0);
  assert_string_equal(out, "one\ntwo|None|True");
  const char *image = "[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]";
  assert_int_equal(render_with("{{ 1 }}", image, NULL, out, sizeof out, 0, 0), -EINVAL);
  assert_true(strstr(out, "image_url") != NULL);
  assert_int_equal(render_with("{{ 1 }}", "{\"role\": \"user\"}", NULL, out, sizeof out, 0, 0), -EINVAL);
  assert_int_equal(render_with("{{ 1 }}", "[1]", NULL, out, sizeof out, 0, 0), -EINVAL);
  assert_int_equal(render_with("{{ tools[0].name }}{{ n + 1 }}{{ f }}", "[]",
                               "{\"tools\": [{\"name\": \"get\"}], \"n\": 41, \"f\": 2.5}", out, sizeof out, 0, 0), 0);
  assert_string_equal(out, "get422.5");
}

/* ChatML, with the BOS and EOS the tokenizer's add_bos_token and
 * add_eos_token ask for (as llama.cpp's tokenization of its own ChatML
 * fallback gives them); a model's own template is used as it is. */
static void chatml_for_models_without_template(void **state) {
  (void)state;
  static const char *const want[2][2] = {
      {"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
       "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n</s>"},
      {"<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
       "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n</s>"},
  };
  cJSON *m = cJSON_Parse("[{\"role\": \"user\", \"content\": \"Hi\"}]");
  arena_t a;
  arena_init(&a, 0, 0);
  chat_tmpl_input_t in = {
      .messages = oai_chat_val(&a, m), .add_generation_prompt = 1, .bos_token = "<s>", .eos_token = "</s>"};
  for (int bos = 0; bos < 2; bos++) {
    for (int eos = 0; eos < 2; eos++) {
      chat_tmpl_t *t = chat_tmpl_from_model(NULL, 0, bos, eos);
      assert_non_null(t);
      if (!bos && !eos) assert_string_equal(chat_tmpl_source(t), CHAT_TMPL_CHATML);
      char *out;
      size_t n;
      assert_int_equal(chat_tmpl_render(t, &in, &out, &n, NULL, 0), 0);
      assert_string_equal(out, want[bos][eos]);
      free(out);
      chat_tmpl_free(t);
    }
  }
  chat_tmpl_t *own = chat_tmpl_from_model("{{ messages[0].content }}", 25, 1, 1);
  char *out;
  size_t n;
  assert_int_equal(chat_tmpl_render(own, &in, &out, &n, NULL, 0), 0);
  assert_string_equal(out, "Hi");
  free(out);
  chat_tmpl_free(own);
  arena_free(&a);
  cJSON_Delete(m);
  assert_null(chat_tmpl_from_model("{% if %}", 8, 1, 0));
  chat_tmpl_free(NULL);
}

/* oai_chat_val_map rewrites every string of a value, dict keys included, at
 * any depth, and leaves the rest (and the input) as they are. The rewrite
 * here writes each 'x' as "<x>"; jinja renders both trees. */
static size_t angle_x(const void *ctx, const char *s, size_t n, char *out) {
  (void)ctx;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == 'x') out[k++] = '<';
    out[k++] = s[i];
    if (s[i] == 'x') out[k++] = '>';
  }
  return k;
}
static size_t angle_x_cap(size_t n) { return 3 * n; }

static void values_map_every_string(void **state) {
  (void)state;
  const char *json = "{\"tools\": [{\"dx\": \"x\", \"p\": {\"kx\": [\"yx\", 3, 2.5, true, null]}}], \"s\": \"xx\"}";
  const char *src = "{{ tools | tojson }}|{{ s | length }}";
  chat_tmpl_t *t = chat_tmpl_compile(src, strlen(src), NULL, 0);
  assert_non_null(t);
  cJSON *x = cJSON_Parse(json), *m = cJSON_Parse("[]");
  arena_t a;
  arena_init(&a, 0, 0);
  const chat_val_t *plain = oai_chat_val(&a, x);
  const oai_text_map_t map = {.cap = angle_x_cap, .fn = angle_x, .ctx = NULL};
  const chat_val_t *vals[2] = {oai_chat_val_map(&a, plain, &map), plain}; /* the input after the map: as it was */
  const char *want[2] = {"[{\"d<x>\": \"<x>\", \"p\": {\"k<x>\": [\"y<x>\", 3, 2.5, true, null]}}]|6",
                         "[{\"dx\": \"x\", \"p\": {\"kx\": [\"yx\", 3, 2.5, true, null]}}]|2"};
  for (int i = 0; i < 2; i++) {
    chat_tmpl_input_t in = {.messages = oai_chat_val(&a, m), .extra = vals[i]};
    char *out;
    size_t n;
    assert_int_equal(chat_tmpl_render(t, &in, &out, &n, NULL, 0), 0);
    assert_string_equal(out, want[i]);
    free(out);
  }
  assert_int_equal(oai_chat_val_get(vals[0], "s")->n, 6);
  assert_null(oai_chat_val_get(plain, "t"));
  assert_null(oai_chat_val_get(oai_chat_val_get(plain, "tools"), "p")); /* a list, not a dict */
  arena_free(&a);
  cJSON_Delete(x);
  cJSON_Delete(m);
  chat_tmpl_free(t);
}

/* repr(float) is the shortest string that reads back as the same double. */
static void float_repr_round_trips(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 11);
  char buf[40], shorter[40];
  for (int i = 0; i < 20000; i++) {
    uint64_t bits = tu_next(&r);
    double d;
    memcpy(&d, &bits, sizeof d);
    if (!isfinite(d)) continue;
    if (i % 2) d = tu_normal(&r) * pow(10, (double)(int)tu_uniform(&r, -8, 20));
    jinja_float_repr(d, buf);
    assert_true(strtod(buf, NULL) == d);
    assert_true(strchr(buf, '.') || strchr(buf, 'e'));
    /* significant digits: the mantissa without sign, point, leading and trailing zeros */
    char sig[40];
    size_t ns = 0;
    for (const char *p = buf; *p && *p != 'e'; p++)
      if (*p >= '0' && *p <= '9' && (ns || *p != '0')) sig[ns++] = *p;
    while (ns > 1 && sig[ns - 1] == '0') ns--;
    if (ns >= 2) { /* one digit fewer must not read back as d */
      snprintf(shorter, sizeof shorter, "%.*e", (int)ns - 2, d);
      if (strtod(shorter, NULL) == d) fail_msg("%s is not the shortest repr (%s)", buf, shorter);
    }
  }
  jinja_float_repr(1e22, buf);
  assert_string_equal(buf, "1e+22");
  jinja_float_repr(-0.0001, buf);
  assert_string_equal(buf, "-0.0001");
  jinja_float_repr(123456789.0, buf);
  assert_string_equal(buf, "123456789.0");
}

typedef struct gen {
  tu_rng_t *r;
  char *dst;
  size_t size;
} gen_t;

static void put(gen_t *g, const char *s) {
  if (strlen(g->dst) + strlen(s) + 1 < g->size) strcat(g->dst, s);
}
static const char *pick(gen_t *g, const char *const *list, size_t n) { return list[tu_below(g->r, n)]; }
#define PICK(g, ...) pick(g, (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

/* A random expression: mostly well-formed, sometimes a stray token. */
static void gen_expr(gen_t *g, int depth) {
  switch (depth > 3 ? 0 : tu_below(g->r, 12)) {
  case 0:
    put(g, PICK(g, "x", "messages", "m", "loop.index", "m.role", "m['content']", "1", "0", "-1", "2.5", "'a'",
                "\"b\"", "none", "true", "ns.x", "y", "messages[0]", "x[1].role", "range(3)", "namespace(x=1)"));
    return;
  case 1: case 2:
    gen_expr(g, depth + 1);
    put(g, PICK(g, " + ", " - ", " * ", " / ", " // ", " % ", " ~ ", " == ", " != ", " < ", " in ", " not in ",
                " and ", " or ", " ** "));
    gen_expr(g, depth + 1);
    return;
  case 3: put(g, "not "); gen_expr(g, depth + 1); return;
  case 4:
    gen_expr(g, depth + 1);
    put(g, PICK(g, "|trim", "|length", "|tojson", "|items", "|first", "|last", "|join(',')", "|list", "|string",
                "|int", "|upper", "|default('d')", "|selectattr('role', 'equalto', 'user')", "|map(attribute='role')",
                "|tojson(indent=2)", "|reverse", "|sort", "|replace('a', 'b')"));
    return;
  case 5:
    gen_expr(g, depth + 1);
    put(g, PICK(g, " is defined", " is not none", " is string", " is mapping", " is iterable", " is odd",
                " is equalto 1"));
    return;
  case 6:
    gen_expr(g, depth + 1);
    put(g, PICK(g, ".strip()", ".split()", ".startswith('a')", ".items()", ".get('role')", "[0]", "[1:]", "[::-1]",
                "[-1]", ".role", "['content']", ".upper()"));
    return;
  case 7:
    gen_expr(g, depth + 1);
    put(g, " if ");
    gen_expr(g, depth + 1);
    put(g, " else ");
    gen_expr(g, depth + 1);
    return;
  case 8: put(g, "["); gen_expr(g, depth + 1); put(g, ", "); gen_expr(g, depth + 1); put(g, "]"); return;
  case 9: put(g, "{'role': "); gen_expr(g, depth + 1); put(g, "}"); return;
  case 10: put(g, "("); gen_expr(g, depth + 1); put(g, ")"); return;
  default:
    put(g, PICK(g, "(", ")", "]", "|", ".", "'", "}}", "%}", "raise_exception('r')", "é", "\\", ","));
    return;
  }
}

/* A random body: text, outputs and nested statements, mostly balanced. */
static void gen_body(gen_t *g, int depth) {
  size_t n = 1 + tu_below(g->r, 4);
  for (size_t k = 0; k < n; k++) {
    const char *open = tu_below(g->r, 2) ? "{%- " : "{% ", *close = tu_below(g->r, 2) ? " -%}" : " %}";
    switch (depth > 2 ? tu_below(g->r, 3) : tu_below(g->r, 8)) {
    case 0: put(g, PICK(g, "text", "\n  ", " ", "\n", "  x  \n")); break;
    case 1: case 2: put(g, tu_below(g->r, 2) ? "{{- " : "{{ "); gen_expr(g, 0); put(g, " }}"); break;
    case 3:
      put(g, open); put(g, "if "); gen_expr(g, 0); put(g, close);
      gen_body(g, depth + 1);
      if (tu_below(g->r, 2)) { put(g, "{% else %}"); gen_body(g, depth + 1); }
      if (tu_below(g->r, 20)) put(g, "{% endif %}");
      break;
    case 4:
      put(g, open); put(g, "for m in "); gen_expr(g, 0); put(g, close);
      gen_body(g, depth + 1);
      if (tu_below(g->r, 4) == 0) put(g, PICK(g, "{% break %}", "{% continue %}"));
      if (tu_below(g->r, 20)) put(g, "{% endfor %}");
      break;
    case 5: put(g, open); put(g, PICK(g, "set x = ", "set ns.x = ", "set y = ")); gen_expr(g, 0); put(g, close); break;
    case 6: put(g, "{#- c -#}"); break;
    default: put(g, "{% macro f(a, b=1) %}"); gen_body(g, depth + 1); put(g, "{% endmacro %}{{ f(x) }}"); break;
    }
  }
}

/* Random templates from a small grammar (mostly valid, sometimes broken):
 * they compile or fail to, render or fail cleanly, never crash (run under
 * ASan/UBSan by `make test`). */
static void hostile_templates_never_crash(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 12);
  char src[2048], out[512];
  gen_t g = {.r = &r, .dst = src, .size = sizeof src};
  int compiled = 0, rendered = 0, failed = 0;
  for (int iter = 0; iter < 3000; iter++) {
    src[0] = 0;
    put(&g, "{% set ns = namespace(x=0) %}");
    gen_body(&g, 0);
    int rc = render_with(src, NULL, "{\"x\": [1, {\"role\": \"r\"}], \"y\": \" s \"}", out, sizeof out, 1 << 16,
                         200000);
    compiled += rc != 1;
    rendered += rc == 0;
    failed += rc < 0;
  }
  print_message("hostile templates: %d compiled, %d rendered, %d failed to render\n", compiled, rendered, failed);
  assert_true(rendered > 150 && failed > 150);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(expressions),
      cmocka_unit_test(filters_and_methods),
      cmocka_unit_test(statements_and_scopes),
      cmocka_unit_test(whitespace_control),
      cmocka_unit_test(compile_errors_name_the_problem),
      cmocka_unit_test(render_errors),
      cmocka_unit_test(limits_hold),
      cmocka_unit_test(messages_are_normalised),
      cmocka_unit_test(chatml_for_models_without_template),
      cmocka_unit_test(values_map_every_string),
      cmocka_unit_test(float_repr_round_trips),
      cmocka_unit_test(hostile_templates_never_crash),
  };
  return cmocka_run_group_tests_name("jinja", tests, NULL, NULL);
}
