/* tests/unit/test_openai_request_values.c — the values of OpenAI requests
 * that reach the request structs: full completions, chat, tokenize and
 * /v1/responses bodies, the caps of oai_limits_t at and past the edge,
 * seeds and numbers, and tool_choice "required" keeping the tools' $defs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/oai_responses.h"
#include "grammar/gram.h"
#include "tests/unit/gram_testutil.h"
#include "tests/unit/oai_request_testutil.h"

/* The values of a full completions request reach the struct. */
static void completion_values(void **state) {
  const char *body =
      "{\"model\":\"smol\",\"prompt\":[[1,2,3],[4]],\"max_tokens\":32,\"temperature\":0.7,\"top_p\":0.9,"
      "\"top_k\":-1,\"min_p\":0.05,\"seed\":-3,\"stop\":[\"\\n\\n\",\"END\"],\"presence_penalty\":0.5,"
      "\"frequency_penalty\":-0.5,\"repetition_penalty\":1.2,\"logit_bias\":{\"50\":-100,\"7\":2.5},"
      "\"logprobs\":3,\"n\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
      "\"ignore_eos\":true,\"stop_token_ids\":[0,2],\"echo\":false,\"user\":\"u\"}";
  arena_t a;
  arena_init(&a, 0, 0);
  oai_completion_req_t r;
  oai_error_t err;
  assert_int_equal(oai_parse_completion(body, strlen(body), NULL, &a, &r, &err), 0);
  assert_string_equal(r.model, "smol");
  assert_int_equal(r.n_prompts, 2);
  assert_null(r.prompts[0].text);
  assert_int_equal(r.prompts[0].n_tokens, 3);
  assert_int_equal(r.prompts[0].tokens[2], 3);
  assert_int_equal(r.prompts[1].n_tokens, 1);
  assert_int_equal(r.prompts[1].tokens[0], 4);
  const oai_params_t *g = &r.params;
  assert_int_equal(g->max_tokens, 32);
  assert_float_equal(g->samp.temperature, 0.7f, 0);
  assert_float_equal(g->samp.top_p, 0.9f, 0);
  assert_int_equal(g->samp.top_k, 0);
  assert_float_equal(g->samp.min_p, 0.05f, 0);
  assert_int_equal(g->samp.has_seed, 1);
  assert_true(g->samp.seed == (uint64_t)(int64_t)-3);
  assert_float_equal(g->samp.presence_penalty, 0.5f, 0);
  assert_float_equal(g->samp.frequency_penalty, -0.5f, 0);
  assert_float_equal(g->samp.repetition_penalty, 1.2f, 0);
  assert_int_equal(g->samp.n_logit_bias, 2);
  assert_int_equal(g->samp.logit_bias[0].token, 50);
  assert_float_equal(g->samp.logit_bias[0].bias, -100.0f, 0);
  assert_int_equal(g->samp.logit_bias[1].token, 7);
  assert_float_equal(g->samp.logit_bias[1].bias, 2.5f, 0);
  assert_int_equal(g->samp.logprobs, 1);
  assert_int_equal(g->samp.top_logprobs, 3);
  assert_int_equal(g->n, 2);
  assert_true(g->stream && g->include_usage && g->ignore_eos && !g->echo); /* echo + logprobs: not streamed */
  assert_int_equal(g->n_stop, 2);
  assert_string_equal(g->stop[0], "\n\n");
  assert_string_equal(g->stop[1], "END");
  assert_int_equal(g->n_stop_token_ids, 2);
  assert_int_equal(g->stop_token_ids[1], 2);
  arena_free(&a);

  /* defaults: OpenAI's (temperature 1, max_tokens 16 for completions) */
  arena_init(&a, 0, 0);
  assert_int_equal(oai_parse_completion("{\"prompt\":\"hi\"}", 15, NULL, &a, &r, &err), 0);
  assert_null(r.model);
  assert_int_equal(r.n_prompts, 1);
  assert_string_equal(r.prompts[0].text, "hi");
  assert_int_equal(r.prompts[0].text_len, 2);
  assert_int_equal(r.params.max_tokens, 16);
  assert_int_equal(r.params.n, 1);
  assert_float_equal(r.params.samp.temperature, 1.0f, 0);
  assert_float_equal(r.params.samp.top_p, 1.0f, 0);
  assert_float_equal(r.params.samp.repetition_penalty, 1.0f, 0);
  assert_int_equal(r.params.samp.has_seed, 0);
  assert_int_equal(r.params.samp.logprobs, 0);
  assert_int_equal(r.params.n_stop, 0);
  assert_false(r.params.stream || r.params.include_usage || r.params.ignore_eos || r.params.echo);
  arena_free(&a);
  /* a body that is not NUL-terminated: only len bytes are read */
  arena_init(&a, 0, 0);
  char buf[32];
  memcpy(buf, "{\"prompt\":\"abc\"}GARBAGE", 23);
  assert_int_equal(oai_parse_completion(buf, 16, NULL, &a, &r, &err), 0);
  assert_string_equal(r.prompts[0].text, "abc");
  arena_free(&a);
}

static void chat_values(void **state) {
  const char *body =
      "{\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}],"
      "\"name\":\"bob\"},{\"role\":\"assistant\",\"content\":null},{\"role\":\"user\",\"content\":\"\"}],"
      "\"max_tokens\":5,\"max_completion_tokens\":9,\"logprobs\":true,\"top_logprobs\":4,"
      "\"add_generation_prompt\":false,\"stream\":true}";
  arena_t a;
  arena_init(&a, 0, 0);
  oai_chat_req_t r;
  oai_error_t err;
  assert_int_equal(oai_parse_chat(body, strlen(body), NULL, &a, &r, &err), 0);
  assert_int_equal(r.n_messages, 4);
  assert_string_equal(r.messages[0].role, "system");
  assert_string_equal(r.messages[0].content, "be brief");
  assert_string_equal(r.messages[1].role, "user");
  assert_string_equal(r.messages[1].content, "one\ntwo");
  assert_int_equal(r.messages[1].content_len, 7);
  assert_string_equal(r.messages[1].name, "bob");
  assert_null(r.messages[0].name);
  assert_string_equal(r.messages[2].role, "assistant");
  assert_string_equal(r.messages[2].content, "");
  assert_string_equal(r.messages[3].content, "");
  assert_int_equal(r.params.max_tokens, 9);
  assert_null(r.template_kwargs);
  assert_null(r.reasoning_effort);
  assert_false(r.has_thinking_budget);
  const char *think = "{" M ",\"chat_template_kwargs\":{\"enable_thinking\":false},\"reasoning_effort\":\"low\","
                      "\"thinking_token_budget\":7}";
  oai_chat_req_t t;
  assert_int_equal(oai_parse_chat(think, strlen(think), NULL, &a, &t, &err), 0);
  assert_string_equal(t.template_kwargs, "{\"enable_thinking\":false}");
  assert_string_equal(t.reasoning_effort, "low");
  assert_true(t.has_thinking_budget);
  assert_int_equal(t.thinking_budget, 7);
  assert_int_equal(r.params.samp.logprobs, 1);
  assert_int_equal(r.params.samp.top_logprobs, 4);
  assert_false(r.add_generation_prompt);
  assert_true(r.params.stream);
  assert_false(r.params.include_usage);
  assert_false(r.params.add_special_tokens); /* chat's default, as vLLM */
  arena_free(&a);
  /* vLLM's extensions reach the request */
  body = "{" M ",\"min_tokens\":2,\"truncate_prompt_tokens\":7,\"include_stop_str_in_output\":true,"
         "\"skip_special_tokens\":false,\"add_special_tokens\":true,\"continue_final_message\":true,"
         "\"add_generation_prompt\":false,\"stream\":true,"
         "\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}";
  arena_init(&a, 0, 0);
  assert_int_equal(oai_parse_chat(body, strlen(body), NULL, &a, &r, &err), 0);
  assert_int_equal(r.params.min_tokens, 2);
  assert_int_equal(r.params.truncate_prompt_tokens, 7);
  assert_true(r.params.include_stop_str);
  assert_true(r.params.special);
  assert_true(r.params.add_special_tokens);
  assert_true(r.continue_final_message);
  assert_true(r.params.continuous_usage);
  arena_free(&a);
  /* defaults: to the end of the context, add the generation prompt */
  arena_init(&a, 0, 0);
  const char *b2 = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  assert_int_equal(oai_parse_chat(b2, strlen(b2), NULL, &a, &r, &err), 0);
  assert_int_equal(r.params.max_tokens, -1);
  assert_true(r.add_generation_prompt);
  assert_int_equal(r.params.samp.logprobs, 0);
  arena_free(&a);
}

static void tokenize_values(void **state) {
  arena_t a;
  arena_init(&a, 0, 0);
  oai_tokenize_req_t t;
  oai_error_t err;
  const char *b = "{\"model\":\"m\",\"prompt\":\"Hello\"}";
  assert_int_equal(oai_parse_tokenize(b, strlen(b), NULL, &a, &t, &err), 0);
  assert_string_equal(t.prompt, "Hello");
  assert_int_equal(t.prompt_len, 5);
  assert_true(t.add_special_tokens);
  b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":false}";
  assert_int_equal(oai_parse_tokenize(b, strlen(b), NULL, &a, &t, &err), 0);
  assert_null(t.prompt);
  assert_int_equal(t.n_messages, 1);
  assert_false(t.add_special_tokens);
  assert_false(t.add_generation_prompt);
  oai_detokenize_req_t d;
  b = "{\"tokens\":[5,6,7]}";
  assert_int_equal(oai_parse_detokenize(b, strlen(b), NULL, &a, &d, &err), 0);
  assert_int_equal(d.n_tokens, 3);
  assert_int_equal(d.tokens[2], 7);
  arena_free(&a);
}

/* The caps in oai_limits_t are honoured at and past the edge. */
static void caps(void **state) {
  oai_limits_t lim = oai_limits_default();
  lim.max_prompts = 2;
  lim.max_messages = 1;
  lim.max_logit_bias = 1;
  lim.max_stop_len = 3;
  lim.max_stop_token_ids = 1;
  lim.max_n = 4;
  const case_t capped[] = {
      {COMPL, "{\"prompt\":[\"a\",\"b\"]}", NULL, NULL},
      {COMPL, "{\"prompt\":[\"a\",\"b\",\"c\"]}", "prompt", "invalid_value"},
      {COMPL, "{\"prompt\":[1,2,3,4,5,6,7,8,9]}", NULL, NULL}, /* one prompt of ids */
      {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"}]}",
       "messages", "invalid_value"},
      {COMPL, "{" P ",\"logit_bias\":{\"1\":1,\"2\":2}}", "logit_bias", "invalid_value"},
      {COMPL, "{" P ",\"stop\":\"abc\"}", NULL, NULL},
      {COMPL, "{" P ",\"stop\":\"abcd\"}", "stop", "invalid_value"},
      {COMPL, "{" P ",\"stop_token_ids\":[1,2]}", "stop_token_ids", "invalid_value"},
      {COMPL, "{" P ",\"n\":4}", NULL, NULL},
      {COMPL, "{" P ",\"n\":5}", "n", "invalid_value"},
  };
  for (size_t i = 0; i < sizeof capped / sizeof *capped; i++) {
    arena_t a;
    arena_init(&a, 0, 0);
    any_req_t out;
    oai_error_t err;
    int r = parse(capped[i].ep, capped[i].body, &lim, &a, &out, &err);
    if (capped[i].param) {
      assert_int_equal(r, -EINVAL);
      assert_string_equal(err.param, capped[i].param);
    } else {
      assert_int_equal(r, 0);
    }
    arena_free(&a);
  }
}

/* Seeds keep all 64 bits (read from the JSON text), wherever the key is;
 * integers in errors are printed whole. */
static void seeds_and_numbers(void **state) {
  const struct {
    const char *body;
    uint64_t seed;
  } ok[] = {
      {"{\"seed\":9223372036854775807," P "}", UINT64_C(9223372036854775807)},
      {"{" P ", \"n\" : 1 , \"seed\" : 18446744073709551615 }", UINT64_MAX},
      {"{\"stop\":[\"seed\",\"}\\\"\"],\"x\":{\"seed\":1},\"seed\":-9223372036854775808," P "}",
       (uint64_t)INT64_MIN},
      {"{" P ",\"seed\":4e3}", 4000},
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    arena_t a;
    arena_init(&a, 0, 0);
    oai_completion_req_t r;
    oai_error_t err;
    assert_int_equal(oai_parse_completion(ok[i].body, strlen(ok[i].body), NULL, &a, &r, &err), 0);
    assert_int_equal(r.params.samp.has_seed, 1);
    assert_true(r.params.samp.seed == ok[i].seed);
    arena_free(&a);
  }
  arena_t a;
  arena_init(&a, 0, 0);
  oai_completion_req_t r;
  oai_error_t err;
  const char *b = "{\"prompt\":[1,100000000]}";
  assert_int_equal(oai_parse_completion(b, strlen(b), NULL, &a, &r, &err), 0); /* no vocabulary limit */
  oai_limits_t lim = oai_limits_default();
  lim.vocab_size = 10;
  assert_int_equal(oai_parse_completion(b, strlen(b), &lim, &a, &r, &err), -EINVAL);
  assert_non_null(strstr(err.message, "100000000"));
  b = "{" P ",\"max_tokens\":12345678901}";
  assert_int_equal(oai_parse_completion(b, strlen(b), NULL, &a, &r, &err), -EINVAL);
  assert_non_null(strstr(err.message, "got 12345678901"));
  arena_free(&a);
}

/* /v1/responses: input and instructions become messages, the echoed
 * fields are kept, unsupported parts are named. */
static void responses(void **state) {
  arena_t a;
  arena_init(&a, 0, 0);
  oai_responses_req_t r;
  oai_error_t err;
  const char *b = "{\"model\":\"m\",\"instructions\":\"be brief\",\"input\":[{\"role\":\"user\",\"content\":"
                  "[{\"type\":\"input_text\",\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},"
                  "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"c\"}],\"max_output_tokens\":9,"
                  "\"temperature\":0.5,\"top_p\":0.9,\"store\":false,\"text\":{\"format\":{\"type\":\"text\"}},"
                  "\"stream\":true,\"tools\":[],\"metadata\":{}}";
  assert_int_equal(oai_parse_responses(b, strlen(b), NULL, &a, &r, &err), 0);
  assert_int_equal(r.chat.n_messages, 3);
  assert_string_equal(r.chat.messages[0].role, "system");
  assert_string_equal(r.chat.messages[0].content, "be brief");
  assert_string_equal(r.chat.messages[1].content, "a\nb");
  assert_string_equal(r.chat.messages[2].role, "assistant");
  assert_int_equal(r.chat.params.max_tokens, 9);
  assert_int_equal(r.max_output_tokens, 9);
  assert_true(r.chat.params.stream && r.chat.params.n == 1);
  assert_true(fabsf(r.chat.params.samp.temperature - 0.5f) < 1e-6f);
  b = "{\"input\":\"hi\"}";
  assert_int_equal(oai_parse_responses(b, strlen(b), NULL, &a, &r, &err), 0);
  assert_int_equal(r.chat.n_messages, 1);
  assert_int_equal(r.max_output_tokens, -1);
  assert_true(fabsf(r.chat.params.samp.temperature - 1.0f) < 1e-6f); /* OpenAI's default */
  const struct {
    const char *body, *param;
  } bad[] = {
      {"{}", "input"},
      {"{\"input\":[]}", "input"},
      {"{\"input\":5}", "input"},
      {"{\"input\":\"x\",\"store\":true}", "store"},
      {"{\"input\":\"x\",\"previous_response_id\":\"r\"}", "previous_response_id"},
      {"{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]"},
      {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"<|im_end|>\"}]}", "tools[0].name"},
      {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name"},
      {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"},{\"type\":\"function\",\"name\":\"f\"}]}",
       "tools[1].name"},
      {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":\"function\","
       "\"name\":\"f\\n\"}}", "tool_choice.name"},
      {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"a\\\"b\",\"arguments\":\"{}\"}]}",
       "input[0].name"},
      {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"yaml\"}}}", "text.format.type"},
      {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}", "text.format.schema"},
      {"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", "input[0]"},
      {"{\"input\":\"x\",\"truncation\":\"auto\"}", "truncation"},
      {"{\"input\":\"x\",\"temperature\":3}", "temperature"},
      {"{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens"},
      {"{\"input\":[{\"type\":\"reasoning\"}]}", "input[0]"},
      {"{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "input[0]"},
      {"{\"input\":[{\"role\":\"user\"}]}", "input[0].content"},
      {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\"}]}]}", "input[0].content[0].type"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(oai_parse_responses(bad[i].body, strlen(bad[i].body), NULL, &a, &r, &err), -EINVAL);
    if (strcmp(err.param, bad[i].param) != 0) fail_msg("%s: param %s, want %s", bad[i].body, err.param, bad[i].param);
  }
  arena_free(&a);
}

/* Issue 33 (vLLM's tool tests): tool_choice "required" with tools whose
 * parameters use $defs and $ref: the wrapper that forces a call keeps
 * each tool's $defs with it, and its refs ("#/$defs/..", "#") resolve
 * there — the grammar compiles and takes exactly the calls the schemas
 * allow. */
static void required_tools_keep_defs(void **state) {
  (void)state;
  const char *body =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tool_choice\":\"required\",\"tools\":["
      "{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"p\":{\"$ref\":\"#/$defs/P\"}},\"required\":[\"p\"],\"additionalProperties\":false,"
      "\"$defs\":{\"P\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"],"
      "\"additionalProperties\":false}}}}},"
      "{\"type\":\"function\",\"function\":{\"name\":\"b\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"p\":{\"$ref\":\"#/$defs/P\"},\"next\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}},"
      "\"required\":[\"p\",\"next\"],\"additionalProperties\":false,"
      "\"$defs\":{\"P\":{\"type\":\"string\",\"const\":{\"$ref\":\"#/kept\"}}}}}}]}";
  arena_t a;
  arena_init(&a, 0, 0);
  oai_chat_req_t r;
  oai_error_t err;
  if (oai_parse_chat(body, strlen(body), NULL, &a, &r, &err)) fail_msg("%s: %s", err.param, err.message);
  assert_int_equal(r.params.grammar.kind, OAI_GRAMMAR_JSON_SCHEMA);
  assert_non_null(strstr(r.params.grammar.src, "\"#/items/anyOf/0/properties/parameters/$defs/P\""));
  assert_non_null(strstr(r.params.grammar.src, "\"#/items/anyOf/1/properties/parameters\""));
  assert_non_null(strstr(r.params.grammar.src, "\"#/kept\"")); /* a const is data, not rewritten */
  cJSON *j = cJSON_Parse(r.params.grammar.src);
  assert_non_null(j);
  /* b's P is a const object; make it a string schema so that b is usable */
  cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
      cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "items"), "anyOf"), 1), "properties"),
      "parameters"), "$defs"), "P"), "const");
  gram_err_t ge;
  gram_t *g = gram_compile_json_schema(j, &(gram_json_opts_t){0}, NULL, &ge);
  cJSON_Delete(j);
  if (!g) fail_msg("%s", ge.msg);
  GRAM_TEST_EXPECT(g, {"[{\"name\":\"a\",\"parameters\":{\"p\":{\"x\":1}}}]", 1},
                   {"[{\"name\":\"b\",\"parameters\":{\"p\":\"s\",\"next\":{\"p\":\"t\",\"next\":null}}}]", 1});
  assert_int_not_equal(gram_test_judge(g, "[{\"name\":\"a\",\"parameters\":{\"p\":{\"y\":1}}}]"), 1);
  assert_int_not_equal(gram_test_judge(g, "[{\"name\":\"b\",\"parameters\":{\"p\":{\"x\":1},\"next\":null}}]"), 1);
  gram_destroy(g);
  arena_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(completion_values),
      cmocka_unit_test(chat_values),
      cmocka_unit_test(tokenize_values),
      cmocka_unit_test(caps),
      cmocka_unit_test(seeds_and_numbers),
      cmocka_unit_test(responses),
      cmocka_unit_test(required_tools_keep_defs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
