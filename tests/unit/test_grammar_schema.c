/* tests/unit/test_grammar_schema.c — the JSON Schema compiler
 * (grammar/gram_schema.c): integer ranges checked against arithmetic over
 * every value near the bounds, the output forms, and the errors that name a
 * keyword and its JSON pointer. Outputs against Python's jsonschema over the
 * schema corpus: tests/integration/test_grammar_engine.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "tests/unit/gram_testutil.h"

static gram_t *schema(const char *text, int flexible, gram_err_t *err) {
  cJSON *j = cJSON_Parse(text);
  assert_non_null(j);
  gram_json_opts_t o = {.flexible_ws = flexible, .ws_max = 2};
  gram_t *g = gram_compile_json_schema(j, &o, NULL, err);
  cJSON_Delete(j);
  return g;
}

static gram_t *ok(const char *text) {
  gram_err_t err;
  gram_t *g = schema(text, 0, &err);
  if (!g) fail_msg("%s: %s", text, err.msg);
  return g;
}

static void integer_ranges_exact(void **state) {
  static const long long bounds[][2] = {{18, 120}, {-273, 42}, {0, 0}, {-9, -1}, {99, 1001}, {-1000, -999}, {7, 7}, {5, 12345}};
  for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
    char text[200];
    snprintf(text, sizeof text, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", bounds[i][0], bounds[i][1]);
    gram_t *g = ok(text);
    for (long long x = bounds[i][0] - 120; x <= bounds[i][1] + 120; x++) {
      char num[32];
      snprintf(num, sizeof num, "%lld", x);
      int want = x >= bounds[i][0] && x <= bounds[i][1];
      if ((gram_test_judge(g, num) == 1) != want) fail_msg("%s: %s gives %d", text, num, gram_test_judge(g, num));
    }
    assert_int_not_equal(gram_test_judge(g, "-0"), 1);
    assert_int_not_equal(gram_test_judge(g, "018"), 1);
    gram_destroy(g);
  }
  gram_t *g = ok("{\"type\":\"integer\",\"exclusiveMinimum\":-3.5,\"exclusiveMaximum\":10}");
  GRAM_TEST_EXPECT(g, {"-3", 1},
                   {"-4", -1},
                   {"9", 1});
  assert_int_not_equal(gram_test_judge(g, "10"), 1);
  gram_destroy(g);
  g = ok("{\"type\":\"integer\",\"minimum\":100}"); /* the open side ends at 2^63 - 1 */
  GRAM_TEST_EXPECT(g, {"9223372036854775807", 1}, {"1000000000000000000", 1});
  assert_int_not_equal(gram_test_judge(g, "9223372036854775808"), 1);
  assert_int_not_equal(gram_test_judge(g, "123456789012345678901234567890"), 1);
  assert_int_not_equal(gram_test_judge(g, "99"), 1);
  gram_destroy(g);
}

/* Issue 33 (a Gemma checkpoint wrote digits until max_tokens): an integer
 * without bounds is the int64 range, exactly at both ends; a number
 * without bounds has at most 16 integral, fraction and exponent digits
 * (llama.cpp's), and one bounded on one side stops at 1e15 on the other. */
static void unbounded_numbers_end(void **state) {
  (void)state;
  gram_t *g = ok("{\"type\":\"integer\"}");
  GRAM_TEST_EXPECT(g, {"0", 1}, {"-0", 1}, {"-1", 1}, {"9223372036854775807", 1}, {"-9223372036854775808", 1},
                   {"-9223372036854775807", 1}, {"1234567890123456789", 1}, {"-999999999999999999", 1});
  static const char *const out[] = {"9223372036854775808", "9223372036854775810", "-9223372036854775809",
                                    "99999999999999999999", "12345678901234567890", "-01", "01"};
  for (size_t i = 0; i < sizeof out / sizeof *out; i++)
    if (gram_test_judge(g, out[i]) == 1) fail_msg("an unbounded integer takes %s", out[i]);
  gram_destroy(g);
  /* an integer inside any JSON value (json_object's "value") is a number */
  g = ok("{\"type\":\"number\"}");
  GRAM_TEST_EXPECT(g, {"1234567890123456", 1}, {"-0.1234567890123456", 1}, {"1.5e-10", 1},
                   {"1e1234567890123456", 1});
  static const char *const nout[] = {"12345678901234567", "0.12345678901234567", "1e12345678901234567", "00"};
  for (size_t i = 0; i < sizeof nout / sizeof *nout; i++)
    if (gram_test_judge(g, nout[i]) == 1) fail_msg("an unbounded number takes %s", nout[i]);
  gram_destroy(g);
  g = ok("{\"type\":\"number\",\"minimum\":0}");
  GRAM_TEST_EXPECT(g, {"1000000000000000", 1}, {"999999999999999.5", 1}, {"0", 1});
  assert_int_not_equal(gram_test_judge(g, "1000000000000001"), 1);
  assert_int_not_equal(gram_test_judge(g, "-1"), 1);
  gram_destroy(g);
  g = ok("{\"type\":\"object\",\"additionalProperties\":true}"); /* any value: the same numbers */
  assert_int_equal(gram_test_judge(g, "{\"a\":1234567890123456}"), 1);
  assert_int_not_equal(gram_test_judge(g, "{\"a\":12345678901234567}"), 1);
  gram_destroy(g);
}

/* Issue 33 (llama.cpp's test_completion_with_response_format[items
 * array]): the old tuple form, items as an array, is prefixItems, and
 * additionalItems the elements after it (absent: any; false: none). */
static void items_array_is_a_tuple(void **state) {
  (void)state;
  gram_t *g = ok("{\"items\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}");
  GRAM_TEST_EXPECT(g, {"[1,\"a\"]", 1}, {"[1,\"a\",null]", 1}, {"[]", 1}, {"[1]", 1});
  assert_int_not_equal(gram_test_judge(g, "[\"a\",1]"), 1);
  gram_destroy(g);
  g = ok("{\"type\":\"array\",\"items\":[{\"type\":\"integer\"}],\"additionalItems\":false,\"minItems\":1}");
  GRAM_TEST_EXPECT(g, {"[-3000]", 1});
  assert_int_not_equal(gram_test_judge(g, "[1,2]"), 1);
  assert_int_not_equal(gram_test_judge(g, "[]"), 1);
  gram_destroy(g);
  g = ok("{\"items\":[{\"type\":\"integer\"}],\"additionalItems\":{\"type\":\"boolean\"}}");
  GRAM_TEST_EXPECT(g, {"[1,true,false]", 1});
  assert_int_not_equal(gram_test_judge(g, "[1,2]"), 1);
  gram_destroy(g);
  gram_err_t err;
  assert_null(schema("{\"items\":[{}],\"prefixItems\":[{}]}", 0, &err));
  assert_non_null(strstr(err.msg, "prefixItems"));
  assert_null(schema("{\"type\":\"array\",\"additionalItems\":false}", 0, &err));
  assert_non_null(strstr(err.msg, "additionalItems"));
}

/* Numbers with bounds: every value the grammar takes is within the bounds
 * (checked over a grid of decimals), and the integers within are taken. */
static void number_bounds_sound(void **state) {
  static const double b[][4] = {/* lo, hi, exclusive lo, exclusive hi */
                                {-1.5, 2.5, 0, 0}, {0, 1, 0, 0}, {0, 1, 1, 1}, {-3, -1, 0, 1}, {0.5, 4, 1, 0}};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) {
    char text[256];
    snprintf(text, sizeof text, "{\"type\":\"number\",\"%s\":%g,\"%s\":%g}", b[i][2] ? "exclusiveMinimum" : "minimum",
             b[i][0], b[i][3] ? "exclusiveMaximum" : "maximum", b[i][1]);
    gram_t *g = ok(text);
    int taken = 0;
    for (int k = -500; k <= 500; k++) {
      char num[32];
      double x = k / 100.0;
      for (int form = 0; form < 2; form++) {
        if (form) snprintf(num, sizeof num, "%d", k / 100);
        else snprintf(num, sizeof num, "%.2f", x);
        if (form) x = k / 100;
        int in = (b[i][2] ? x > b[i][0] : x >= b[i][0]) && (b[i][3] ? x < b[i][1] : x <= b[i][1]);
        int got = gram_test_judge(g, num) == 1;
        taken += got;
        if (got && !in) fail_msg("%s takes %s", text, num);
        if (form && in && !got) fail_msg("%s refuses the integer %s", text, num);
      }
    }
    assert_true(taken > 0);
    gram_destroy(g);
  }
}

/* Fractional and exclusive bounds, exactly: every number k/1000 in a range,
 * written with 1 to 4 decimals where that is exact, is taken iff it lies
 * within the bounds (compared as integers in thousandths: no float). Issue
 * 35: exclusiveMinimum 0.1 with exclusiveMaximum 0.2 was "unsatisfiable". */
static void number_bounds_exact_decimals(void **state) {
  (void)state;
  static const struct {
    const char *lo, *hi;
    int lo_k, hi_k; /* the bounds in thousandths */
    int xlo, xhi;
  } b[] = {{"0.1", "0.2", 100, 200, 1, 1},     {"0.1", "0.2", 100, 200, 0, 0},  {"-0.25", "0.5", -250, 500, 1, 0},
           {"-1.5", "-1.25", -1500, -1250, 0, 1}, {"0", "0.001", 0, 1, 1, 0},   {"2.5", "7", 2500, 7000, 1, 1},
           {"-2", "0", -2000, 0, 1, 1}};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) {
    char text[256];
    snprintf(text, sizeof text, "{\"type\":\"number\",\"%s\":%s,\"%s\":%s}", b[i].xlo ? "exclusiveMinimum" : "minimum",
             b[i].lo, b[i].xhi ? "exclusiveMaximum" : "maximum", b[i].hi);
    gram_t *g = ok(text);
    int taken = 0;
    for (int k = -3000; k <= 8000; k++) {
      const int in = (b[i].xlo ? k > b[i].lo_k : k >= b[i].lo_k) && (b[i].xhi ? k < b[i].hi_k : k <= b[i].hi_k);
      for (int dec = 1; dec <= 4; dec++) {
        if (dec < 3 && k % (dec == 1 ? 100 : 10)) continue; /* not exact with so few decimals */
        char num[32];
        const int a = k < 0 ? -k : k;
        if (dec == 4) snprintf(num, sizeof num, "%s%d.%03d0", k < 0 ? "-" : "", a / 1000, a % 1000);
        else if (dec == 3) snprintf(num, sizeof num, "%s%d.%03d", k < 0 ? "-" : "", a / 1000, a % 1000);
        else if (dec == 2) snprintf(num, sizeof num, "%s%d.%02d", k < 0 ? "-" : "", a / 1000, a % 1000 / 10);
        else snprintf(num, sizeof num, "%s%d.%d", k < 0 ? "-" : "", a / 1000, a % 1000 / 100);
        if (k < 0 && k > -1000 && num[0] != '-') continue;
        const int got = gram_test_judge(g, num) == 1;
        taken += got;
        if (got != in) fail_msg("%s: %s is %s, grammar says %s", text, num, in ? "in" : "out", got ? "in" : "out");
      }
    }
    assert_true(taken > 0);
    gram_destroy(g);
  }
}

static void forms(void **state) {
  gram_t *g = ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":2},"
                 "\"b\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2}},\"required\":[\"b\"]}");
  GRAM_TEST_EXPECT(g, {"{\"a\":\"xy\",\"b\":[true,false]}", 1},
                   {"{\"b\":[]}", 1},
                   {"{\"a\":\"xyz\",\"b\":[]}", -1}, /* maxLength */
                   {"{\"b\":[true,true,true]}", -1}, /* maxItems */
                   {"{\"a\":\"x\"}", -1}, /* b required */
                   {"{\"b\":[],\"a\":\"x\"}", -1}, /* schema order */
                   {"{\"b\":[],\"c\":1}", -1}, /* no other keys (strict default) */
                   {"{ \"b\":[]}", -1}, /* compact */
                   {"{\"a\":\"\\u00e9\\n\",\"b\":[]}", 1});
  gram_destroy(g);
  gram_err_t err;
  g = schema("{\"type\":\"array\",\"items\":{\"type\":\"null\"}}", 1, &err);
  assert_non_null(g);
  GRAM_TEST_EXPECT(g, {"[ null ,\n null]", 1},
                   {"[   null]", -1}, /* whitespace runs are bounded (ws_max 2) */);
  gram_destroy(g);
  /* additional keys: any name but the declared ones */
  g = ok("{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"null\"}}");
  GRAM_TEST_EXPECT(g, {"{\"ab\":1,\"a\":null,\"abc\":null,\"\":null}", 1},
                   {"{\"ab\":1,\"ab\":null}", -1});
  gram_destroy(g);
  g = ok("{\"$defs\":{\"t\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"}}},\"$ref\":\"#/$defs/t\"}");
  GRAM_TEST_EXPECT(g, {"[[],[[[]]]]", 1});
  gram_destroy(g);
  g = ok("{\"type\":\"string\",\"pattern\":\"a\\\"b\"}"); /* search semantics, escaped output */
  GRAM_TEST_EXPECT(g, {"\"xxa\\\"byy\"", 1},
                   {"\"ab\"", -1});
  gram_destroy(g);
  g = ok("{\"type\":\"string\",\"format\":\"date\"}");
  GRAM_TEST_EXPECT(g, {"\"2024-02-28\"", 1},
                   {"\"2024-02-30\"", -1},
                   {"\"2024-13-01\"", -1});
  gram_destroy(g);
  g = gram_compile_json_object(NULL, NULL, &err);
  GRAM_TEST_EXPECT(g, {"{\"k\":[1,{\"x\":null}],\"z\":-0.5e+3}", 1},
                   {"[]", -1});
  gram_destroy(g);
}

static void errors_name_keyword_and_path(void **state) {
  static const char *const cases[][2] = {
      {"{\"type\":\"object\",\"properties\":{\"a b\":{\"items\":{\"uniqueItems\":true}}}}",
       "keyword 'uniqueItems' is not supported (at /properties/a b/items/uniqueItems)"},
      {"{\"anyOf\":[{\"type\":\"string\"},{\"not\":{}}]}", "keyword 'not' is not supported (at /anyOf/1/not)"},
      {"{\"$defs\":{\"x\":{\"type\":\"string\",\"format\":\"uri\"}},\"$ref\":\"#/$defs/x\"}", "format 'uri' is not supported (at /$defs/x/format)"},
      {"{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookahead"},
      {"{\"type\":\"string\",\"minLength\":-1}", "'minLength' must be a non-negative integer (at /minLength)"},
      {"{\"type\":\"integer\",\"minimum\":\"3\"}", "'minimum' must be a number (at /minimum)"},
      {"{\"enum\":[]}", "'enum' must be a non-empty array (at /enum)"},
      {"false", "accepts nothing"},
      {"{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", "accepts nothing"},
      {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"],\"additionalProperties\":false}",
       "required property 'b' is refused"},
      {"{\"type\":\"string\",\"maxLength\":100000}", "above"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    gram_err_t err;
    gram_t *g = schema(cases[i][0], 0, &err);
    if (g || !strstr(err.msg, cases[i][1])) fail_msg("%s: got '%s', want '%s'", cases[i][0], g ? "(compiled)" : err.msg, cases[i][1]);
  }
  /* deep nesting fails cleanly */
  char *deep = malloc(20000);
  size_t n = 0;
  for (int i = 0; i < 300; i++) n += (size_t)sprintf(deep + n, "{\"items\":");
  n += (size_t)sprintf(deep + n, "{}");
  for (int i = 0; i < 300; i++) deep[n++] = '}';
  deep[n] = 0;
  gram_err_t err;
  assert_null(schema(deep, 0, &err));
  assert_non_null(strstr(err.msg, "deeper"));
  free(deep);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(integer_ranges_exact),
      cmocka_unit_test(unbounded_numbers_end),
      cmocka_unit_test(items_array_is_a_tuple),
      cmocka_unit_test(number_bounds_sound),
      cmocka_unit_test(number_bounds_exact_decimals),
      cmocka_unit_test(forms),
      cmocka_unit_test(errors_name_keyword_and_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
