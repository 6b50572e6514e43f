/* tests/unit/test_openai_request_oom.c — memory running out in the OpenAI
 * request parsers (completions, chat, tokenize, detokenize, responses): a
 * clean 503 at every allocation, never a crash or a half-filled request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/oai_responses.h"
#include "tests/unit/oai_request_testutil.h"

/* Memory running out in the parsers: every arena allocation of a parse, in
 * turn, is the first to fail (a cap swept upward 16 bytes at a time, the
 * arena's alignment), and every such parse must fail cleanly — a 503
 * out_of_memory, never a crash, a 400, or a "success" holding a NULL —
 * while the cap that fits the whole parse succeeds. Under ASan (make
 * sanitize) a leak on any of those paths fails the test too. */
static void out_of_memory(void **state) {
  (void)state;
  enum { RESPONSES = 9 };
  const struct {
    int ep;
    const char *body;
  } oom_cases[] = {
      {COMPL, "{\"model\":\"m\",\"prompt\":[\"a b\",\"c\"],\"stop\":[\"x\",\"yy\"],\"logit_bias\":{\"5\":1,\"7\":-2},"
              "\"stop_token_ids\":[1,2],\"structured_outputs\":{\"json\":{\"type\":\"object\"}}}"},
      {COMPL, "{\"prompt\":[[1,2,3],[4,5]],\"n\":2,\"guided_choice\":[\"yes\",\"no\"]}"},
      {COMPL, "{\"prompt\":[1,2,3],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
              "\"schema\":{\"type\":\"integer\"}}}}"},
      {CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\",\"name\":\"x\"},"
             "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
             "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
             "\"content\":\"r\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
             "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}}],\"tool_choice\":{\"type\":"
             "\"function\",\"function\":{\"name\":\"f\"}},\"stop\":\"q\"}"},
      {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\",\"function\":"
             "{\"name\":\"f\"}}],\"tool_choice\":\"required\"}"},
      {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"structured_outputs\":{\"regex\":\"[a-z]+\"}}"},
      {TOKENIZE, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\","
                 "\"function\":{\"name\":\"f\"}}]}"},
      {TOKENIZE, "{\"prompt\":\"hello there\",\"model\":\"m\"}"},
      {DETOKENIZE, "{\"tokens\":[1,2,3,4]}"},
      {RESPONSES, "{\"model\":\"m\",\"instructions\":\"i\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
                  "\"input_text\",\"text\":\"a\"}]},{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\","
                  "\"arguments\":\"{}\"},{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"o\"}],"
                  "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}],"
                  "\"text\":{\"format\":{\"type\":\"json_object\"}}}"},
  };
  for (size_t i = 0; i < sizeof oom_cases / sizeof *oom_cases; i++) {
    const char *b = oom_cases[i].body;
    size_t need = 0;
    for (size_t cap = 16;; cap += 16) {
      arena_t a;
      arena_init(&a, 0, cap);
      any_req_t out;
      oai_responses_req_t resp;
      oai_error_t err;
      int r = oom_cases[i].ep == RESPONSES ? oai_parse_responses(b, strlen(b), NULL, &a, &resp, &err)
                                       : parse(oom_cases[i].ep, b, NULL, &a, &out, &err);
      if (r == 0) {
        need = a.used;
        arena_free(&a);
        break;
      }
      if (err.status != 503 || strcmp(err.code, "out_of_memory") != 0)
        fail_msg("case %zu, cap %zu: %d %s: %s", i, cap, err.status, err.code, err.message);
      arena_free(&a);
      if (cap > 65536) fail_msg("case %zu never parsed", i);
    }
    /* the whole parse fits exactly: nothing below its size succeeded */
    arena_t a;
    arena_init(&a, 0, 0);
    any_req_t out;
    oai_responses_req_t resp;
    oai_error_t err;
    int r = oom_cases[i].ep == RESPONSES ? oai_parse_responses(b, strlen(b), NULL, &a, &resp, &err)
                                     : parse(oom_cases[i].ep, b, NULL, &a, &out, &err);
    if (r != 0) fail_msg("case %zu: %s", i, err.message);
    assert_int_equal(a.used, need);
    assert_false(a.oom);
    arena_free(&a);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
