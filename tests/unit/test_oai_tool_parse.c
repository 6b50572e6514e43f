/* tests/unit/test_oai_tool_parse.c — tool calls read out of model output in
 * the formats real models produce (Hermes/Qwen2.5 <tool_call>, Llama 3.x
 * JSON with and without <|python_tag|>, Mistral [TOOL_CALLS]), the content
 * around them, several calls, the parallel limit, and output that is not a
 * call (text, broken JSON, no name) left as content. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/oai_tool_parse.h"
#include "oai_tool_testutil.h"

static oai_tool_parse_t parse(arena_t *a, oai_tools_format_t f, const char *text, int32_t max) {
  oai_tool_parse_t p;
  oai_tools_parse(f, text, strlen(text), max, a, &p);
  return p;
}

static void hermes(void **state) {
  arena_t a;
  arena_init(&a, 0, 0);
  /* Qwen2.5-7B-Instruct's output for a weather question */
  oai_tool_parse_t p = parse(&a, OAI_TOOLS_HERMES,
                             "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": "
                             "\"San Francisco, CA, USA\", \"unit\": \"celsius\"}}\n</tool_call>",
                             0);
  assert_int_equal(p.n_calls, 1);
  content_is(&p, NULL);
  assert_string_equal(p.calls[0].name, "get_current_temperature");
  assert_string_equal(p.calls[0].arguments, "{\"location\":\"San Francisco, CA, USA\",\"unit\":\"celsius\"}");
  /* text first, two calls, the last end tag cut off by max_tokens */
  p = parse(&a, OAI_TOOLS_HERMES,
            "Let me check both.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"y\\\": [2]}\"}\n",
            0);
  assert_int_equal(p.n_calls, 2);
  content_is(&p, "Let me check both.\n"); /* as generated, as vLLM */
  assert_string_equal(p.calls[1].name, "g");
  assert_string_equal(p.calls[1].arguments, "{\"y\":[2]}");
  p = parse(&a, OAI_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>"
                                  "{\"name\": \"g\"}</tool_call>", 1);
  assert_int_equal(p.n_calls, 1); /* parallel_tool_calls false */
  assert_string_equal(p.calls[0].arguments, "{}");
  /* not calls: the text stays as it was */
  const char *plain[] = {"It is sunny in Paris.", "<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call>",
                         "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1, 2]</tool_call>",
                         "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"};
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
    p = parse(&a, OAI_TOOLS_HERMES, plain[i], 0);
    assert_int_equal(p.n_calls, 0);
    content_is(&p, plain[i]);
  }
  arena_free(&a);
}

static void llama3(void **state) {
  arena_t a;
  arena_init(&a, 0, 0);
  /* Llama-3.1-8B-Instruct's JSON tool call (custom tools) */
  oai_tool_parse_t p = parse(&a, OAI_TOOLS_LLAMA3,
                             "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, "
                             "CA\", \"unit\": \"Fahrenheit\"}}",
                             0);
  assert_int_equal(p.n_calls, 1);
  content_is(&p, NULL);
  assert_string_equal(p.calls[0].arguments, "{\"location\":\"San Francisco, CA\",\"unit\":\"Fahrenheit\"}");
  p = parse(&a, OAI_TOOLS_LLAMA3,
            "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"x\"}}; {\"name\": \"b\", \"arguments\": {}}", 0);
  assert_int_equal(p.n_calls, 2);
  assert_string_equal(p.calls[0].name, "a");
  assert_string_equal(p.calls[1].name, "b");
  p = parse(&a, OAI_TOOLS_LLAMA3, "The answer is {\"name\": \"a\"}", 0);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, "The answer is {\"name\": \"a\"}");
  p = parse(&a, OAI_TOOLS_LLAMA3, "{\"name\": \"a\", \"parameters\": {}} trailing words", 0);
  assert_int_equal(p.n_calls, 0);
  arena_free(&a);
}

static void mistral(void **state) {
  arena_t a;
  arena_init(&a, 0, 0);
  /* Mistral-Nemo-Instruct-2407's tool call */
  oai_tool_parse_t p = parse(&a, OAI_TOOLS_MISTRAL,
                             "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
                             "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]",
                             0);
  assert_int_equal(p.n_calls, 2);
  content_is(&p, NULL);
  assert_string_equal(p.calls[1].arguments, "{\"tz\":\"CET\"}");
  p = parse(&a, OAI_TOOLS_MISTRAL, "Sure. [TOOL_CALLS] {\"name\": \"f\", \"arguments\": {}}", 0);
  assert_int_equal(p.n_calls, 1);
  content_is(&p, "Sure. ");
  p = parse(&a, OAI_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": ", 0);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, "[TOOL_CALLS][{\"name\": ");
  arena_free(&a);
}

/* The forms tool_choice "required" and a named function constrain output to. */
static void forced_json(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  oai_tool_parse_t p = parse(&a, OAI_TOOLS_JSON_LIST,
                             "[{\"name\":\"get_weather\",\"parameters\":{\"city\": \"Paris\"}},"
                             "{\"name\":\"get_time\",\"parameters\":{}}]", 0);
  assert_int_equal(p.n_calls, 2);
  content_is(&p, NULL);
  assert_string_equal(p.calls[0].name, "get_weather");
  assert_string_equal(p.calls[0].arguments, "{\"city\":\"Paris\"}");
  assert_string_equal(p.calls[1].arguments, "{}");
  p = parse(&a, OAI_TOOLS_JSON_LIST, "[{\"name\":\"a\",\"parameters\":{}},{\"name\":\"b\",\"parameters\":{}}]", 1);
  assert_int_equal(p.n_calls, 1);
  p = parse(&a, OAI_TOOLS_JSON_LIST, "[{\"name\":\"get_wea", 0); /* cut by max_tokens: text */
  assert_int_equal(p.n_calls, 0);
  content_is(&p, "[{\"name\":\"get_wea");
  p = parse(&a, OAI_TOOLS_JSON_ARGS, "{\"city\": \"Rome\"}", 0);
  assert_int_equal(p.n_calls, 1);
  assert_string_equal(p.calls[0].name, "");
  assert_string_equal(p.calls[0].arguments, "{\"city\":\"Rome\"}");
  p = parse(&a, OAI_TOOLS_JSON_ARGS, "{\"city\": \"Ro", 0);
  assert_int_equal(p.n_calls, 0);
  arena_free(&a);
}

/* Streaming: over every prefix of real outputs, the bytes safe to send never
 * shrink and never pass the content the whole output parses to; at the end
 * what was sent is a prefix of that content. */
static void stream_safe_prefixes(void **state) {
  (void)state;
  static const struct {
    oai_tools_format_t f;
    const char *text;
  } cases[] = {
      {OAI_TOOLS_HERMES, "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
      {OAI_TOOLS_HERMES, "  \n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"},
      {OAI_TOOLS_HERMES, "It is sunny; a <tool is not a <tool_call> here"},
      {OAI_TOOLS_HERMES, "Plain text < and <tool_"},
      {OAI_TOOLS_MISTRAL, "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"},
      {OAI_TOOLS_LLAMA3, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}"},
      {OAI_TOOLS_LLAMA3, "The answer is 4."},
      {OAI_TOOLS_LLAMA3, " {\"not\": \"a call\"}"},
      {OAI_TOOLS_JSON_LIST, "[{\"name\":\"f\",\"parameters\":{}}]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    arena_t a;
    arena_init(&a, 0, 0);
    const char *t = cases[i].text;
    const size_t len = strlen(t);
    oai_tool_parse_t p = parse(&a, cases[i].f, t, 0);
    const size_t content_end = p.content ? (size_t)(p.content - t) + p.content_len : 0;
    size_t prev = 0;
    for (size_t k = 0; k <= len; k++) {
      const size_t safe = oai_tools_stream_safe(cases[i].f, t, k);
      if (safe < prev || safe > content_end) fail_msg("case %zu, prefix %zu: safe %zu (before %zu, content %zu)", i, k, safe, prev, content_end);
      prev = safe;
    }
    if (p.content) assert_ptr_equal(p.content, t); /* content starts at the output's start */
    arena_free(&a);
  }
}

static void format_of_templates(void **state) {
  assert_int_equal(oai_tools_format_of("{% for t in tools %}<tool_call>{% endfor %}"), OAI_TOOLS_HERMES);
  assert_int_equal(oai_tools_format_of("{{ '[TOOL_CALLS]' }}"), OAI_TOOLS_MISTRAL);
  assert_int_equal(oai_tools_format_of("<|start_header_id|>ipython<|end_header_id|>"), OAI_TOOLS_LLAMA3);
  assert_int_equal(oai_tools_format_of("{{ messages }}"), OAI_TOOLS_NONE);
  assert_int_equal(oai_tools_format_of(NULL), OAI_TOOLS_NONE);
  arena_t a;
  arena_init(&a, 0, 0);
  oai_tool_parse_t p = parse(&a, OAI_TOOLS_NONE, "<tool_call>{\"name\": \"f\"}</tool_call>", 0);
  assert_int_equal(p.n_calls, 0);
  arena_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hermes),
      cmocka_unit_test(llama3),
      cmocka_unit_test(mistral),
      cmocka_unit_test(forced_json),
      cmocka_unit_test(stream_safe_prefixes),
      cmocka_unit_test(format_of_templates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
