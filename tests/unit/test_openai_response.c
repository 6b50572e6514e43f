/* tests/unit/test_openai_response.c — the OpenAI JSON writers: each output is
 * parsed back with cJSON and its fields checked, including text that is not
 * valid UTF-8 and logprobs that are not finite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_response.h"

static const oai_meta_t META = {.id = "cmpl-abc", .model = "smol", .created = 1700000000};

/* Parses json (and frees it); fails the test if it is not valid. */
static cJSON *parse(char *json) {
  assert_non_null(json);
  cJSON *x = cJSON_Parse(json);
  if (!x) fail_msg("not JSON: %s", json);
  free(json);
  return x;
}

static const cJSON *at(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!x) fail_msg("no field %s", key);
  return x;
}

static const char *str(const cJSON *o, const char *key) {
  const cJSON *x = at(o, key);
  assert_true(cJSON_IsString(x));
  return x->valuestring;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *x = at(o, key);
  assert_true(cJSON_IsNumber(x));
  return x->valuedouble;
}

static void check_head(const cJSON *root, const char *object) {
  assert_string_equal(str(root, "id"), "cmpl-abc");
  assert_string_equal(str(root, "object"), object);
  assert_int_equal((int64_t)num(root, "created"), 1700000000);
  assert_string_equal(str(root, "model"), "smol");
}

static void check_usage(const cJSON *root, int p, int c) {
  const cJSON *u = at(root, "usage");
  assert_int_equal((int)num(u, "prompt_tokens"), p);
  assert_int_equal((int)num(u, "completion_tokens"), c);
  assert_int_equal((int)num(u, "total_tokens"), p + c);
}

static const oai_top_logprob_t TOP[] = {{" the", 4, -0.25f, 0}, {" a", 2, -1.5f, 0}, {" the", 4, -3.0f, 0}};
static const oai_token_logprob_t LP[] = {
    {.token = " the", .token_len = 4, .logprob = -0.25f, .text_offset = 5, .top = TOP, .n_top = 3},
    {.token = "\xE2\x82", .token_len = 2, .logprob = -INFINITY, .text_offset = 9, .top = NULL, .n_top = 0},
};

static void completion(void **state) {
  oai_choice_t ch[2] = {
      {.index = 0, .text = "Hello the", .text_len = 9, .finish = SCHED_FINISH_STOP, .stop_str = "\n", .stop_token = -1,
       .has_logprobs = true, .logprobs = LP, .n_logprobs = 2},
      {.index = 1, .text = "Hi", .text_len = 2, .finish = SCHED_FINISH_LENGTH, .stop_token = -1},
  };
  oai_usage_t u = {.prompt_tokens = 7, .completion_tokens = 11};
  cJSON *root = parse(oai_write_completion(&META, ch, 2, &u));
  check_head(root, "text_completion");
  check_usage(root, 7, 11);
  const cJSON *choices = at(root, "choices");
  assert_int_equal(cJSON_GetArraySize(choices), 2);
  const cJSON *c0 = cJSON_GetArrayItem(choices, 0), *c1 = cJSON_GetArrayItem(choices, 1);
  assert_int_equal((int)num(c0, "index"), 0);
  assert_string_equal(str(c0, "text"), "Hello the");
  assert_string_equal(str(c0, "finish_reason"), "stop");
  assert_string_equal(str(c0, "stop_reason"), "\n");
  assert_string_equal(str(c1, "finish_reason"), "length");
  assert_true(cJSON_IsNull(at(c1, "stop_reason")));
  assert_true(cJSON_IsNull(at(c1, "logprobs")));
  const cJSON *lp = at(c0, "logprobs");
  const cJSON *tokens = at(lp, "tokens"), *values = at(lp, "token_logprobs"), *tops = at(lp, "top_logprobs"),
              *offs = at(lp, "text_offset");
  assert_int_equal(cJSON_GetArraySize(tokens), 2);
  assert_string_equal(cJSON_GetArrayItem(tokens, 0)->valuestring, " the");
  assert_string_equal(cJSON_GetArrayItem(tokens, 1)->valuestring, "\xEF\xBF\xBD\xEF\xBF\xBD"); /* a cut char */
  assert_float_equal(cJSON_GetArrayItem(values, 0)->valuedouble, -0.25, 1e-7);
  assert_float_equal(cJSON_GetArrayItem(values, 1)->valuedouble, -9999.0, 0); /* -inf */
  const cJSON *top0 = cJSON_GetArrayItem(tops, 0);
  assert_int_equal(cJSON_GetArraySize(top0), 2); /* " the" twice: the likelier one kept */
  assert_float_equal(num(top0, " the"), -0.25, 1e-7);
  assert_float_equal(num(top0, " a"), -1.5, 1e-7);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(tops, 1)), 0);
  assert_int_equal(cJSON_GetArrayItem(offs, 1)->valueint, 9);
  cJSON_Delete(root);
}

static void chat_completion(void **state) {
  oai_choice_t ch = {.index = 0, .text = "Sure.", .text_len = 5, .finish = SCHED_FINISH_STOP, .stop_token = 2,
                     .has_logprobs = true, .logprobs = LP, .n_logprobs = 1};
  oai_usage_t u = {.prompt_tokens = 3, .completion_tokens = 2};
  cJSON *root = parse(oai_write_chat_completion(&META, &ch, 1, &u));
  check_head(root, "chat.completion");
  check_usage(root, 3, 2);
  const cJSON *c0 = cJSON_GetArrayItem(at(root, "choices"), 0);
  const cJSON *msg = at(c0, "message");
  assert_string_equal(str(msg, "role"), "assistant");
  assert_string_equal(str(msg, "content"), "Sure.");
  assert_string_equal(str(c0, "finish_reason"), "stop");
  assert_int_equal((int)num(c0, "stop_reason"), 2);
  const cJSON *content = at(at(c0, "logprobs"), "content");
  assert_int_equal(cJSON_GetArraySize(content), 1);
  const cJSON *e = cJSON_GetArrayItem(content, 0);
  assert_string_equal(str(e, "token"), " the");
  assert_float_equal(num(e, "logprob"), -0.25, 1e-7);
  const cJSON *bytes = at(e, "bytes");
  assert_int_equal(cJSON_GetArraySize(bytes), 4);
  assert_int_equal(cJSON_GetArrayItem(bytes, 1)->valueint, 't');
  const cJSON *tops = at(e, "top_logprobs");
  assert_int_equal(cJSON_GetArraySize(tops), 3); /* chat keeps the list as given */
  assert_string_equal(str(cJSON_GetArrayItem(tops, 1), "token"), " a");
  assert_float_equal(num(cJSON_GetArrayItem(tops, 2), "logprob"), -3.0, 1e-7);
  cJSON_Delete(root);
}

/* A whole chat stream: the first delta carries the role, every chunk the same
 * id, the last the finish reason, then the usage chunk. */
static void chat_stream(void **state) {
  const char *pieces[] = {"", "Hel", "lo", NULL};
  for (int i = 0; i < 4; i++) {
    oai_choice_t c = {.index = 0, .text = pieces[i], .text_len = pieces[i] ? strlen(pieces[i]) : 0,
                      .finish = i == 3 ? SCHED_FINISH_LENGTH : SCHED_FINISH_NONE, .stop_token = -1};
    cJSON *root = parse(oai_write_chat_chunk(&META, &c, i == 0, true));
    check_head(root, "chat.completion.chunk");
    assert_true(cJSON_IsNull(at(root, "usage")));
    const cJSON *c0 = cJSON_GetArrayItem(at(root, "choices"), 0);
    const cJSON *delta = at(c0, "delta");
    if (i == 0) assert_string_equal(str(delta, "role"), "assistant");
    else assert_null(cJSON_GetObjectItemCaseSensitive(delta, "role"));
    if (pieces[i]) assert_string_equal(str(delta, "content"), pieces[i]);
    else assert_int_equal(cJSON_GetArraySize(delta), 0); /* {} */
    if (i < 3) {
      assert_true(cJSON_IsNull(at(c0, "finish_reason")));
      assert_null(cJSON_GetObjectItemCaseSensitive(c0, "stop_reason"));
    } else {
      assert_string_equal(str(c0, "finish_reason"), "length");
    }
    assert_true(cJSON_IsNull(at(c0, "logprobs")));
    cJSON_Delete(root);
  }
  oai_usage_t u = {.prompt_tokens = 4, .completion_tokens = 3};
  cJSON *root = parse(oai_write_usage_chunk(&META, true, &u));
  check_head(root, "chat.completion.chunk");
  assert_int_equal(cJSON_GetArraySize(at(root, "choices")), 0);
  check_usage(root, 4, 3);
  cJSON_Delete(root);
  /* without include_usage, no usage field at all */
  oai_choice_t c = {.index = 2, .text = "x", .text_len = 1, .stop_token = -1};
  root = parse(oai_write_chat_chunk(&META, &c, false, false));
  assert_null(cJSON_GetObjectItemCaseSensitive(root, "usage"));
  assert_int_equal((int)num(cJSON_GetArrayItem(at(root, "choices"), 0), "index"), 2);
  cJSON_Delete(root);
}

/* A thinking model's message: reasoning_content and reasoning (vLLM's two
 * names), content null when the output was all reasoning; a chunk carries
 * the keys only when it has reasoning; without a parser neither is written. */
static void reasoning(void **state) {
  (void)state;
  oai_usage_t u = {.prompt_tokens = 4, .completion_tokens = 3};
  oai_choice_t c = {.text = "4", .text_len = 1, .finish = SCHED_FINISH_STOP, .stop_token = -1, .has_reasoning = true,
                    .reasoning = "2+2 is 4.", .reasoning_len = 9};
  cJSON *root = parse(oai_write_chat_completion(&META, &c, 1, &u));
  const cJSON *m = at(cJSON_GetArrayItem(at(root, "choices"), 0), "message");
  assert_string_equal(str(m, "content"), "4");
  assert_string_equal(str(m, "reasoning_content"), "2+2 is 4.");
  assert_string_equal(str(m, "reasoning"), "2+2 is 4.");
  cJSON_Delete(root);
  c = (oai_choice_t){.finish = SCHED_FINISH_LENGTH, .stop_token = -1, .has_reasoning = true, .reasoning = "Hmm",
                     .reasoning_len = 3};
  root = parse(oai_write_chat_completion(&META, &c, 1, &u));
  m = at(cJSON_GetArrayItem(at(root, "choices"), 0), "message");
  assert_true(cJSON_IsNull(at(m, "content")));
  assert_string_equal(str(m, "reasoning"), "Hmm");
  cJSON_Delete(root);
  c = (oai_choice_t){.text = "x", .text_len = 1, .stop_token = -1, .has_reasoning = true};
  root = parse(oai_write_chat_completion(&META, &c, 1, &u));
  m = at(cJSON_GetArrayItem(at(root, "choices"), 0), "message");
  assert_true(cJSON_IsNull(at(m, "reasoning_content")) && cJSON_IsNull(at(m, "reasoning")));
  cJSON_Delete(root);
  c = (oai_choice_t){.text = "x", .text_len = 1, .stop_token = -1};
  root = parse(oai_write_chat_completion(&META, &c, 1, &u));
  m = at(cJSON_GetArrayItem(at(root, "choices"), 0), "message");
  assert_null(cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"));
  cJSON_Delete(root);
  c = (oai_choice_t){.stop_token = -1, .reasoning = "Let", .reasoning_len = 3};
  root = parse(oai_write_chat_chunk(&META, &c, false, false));
  const cJSON *d = at(cJSON_GetArrayItem(at(root, "choices"), 0), "delta");
  assert_string_equal(str(d, "reasoning_content"), "Let");
  assert_string_equal(str(d, "reasoning"), "Let");
  assert_null(cJSON_GetObjectItemCaseSensitive(d, "content"));
  cJSON_Delete(root);
  c = (oai_choice_t){.text = "a", .text_len = 1, .stop_token = -1, .has_reasoning = true};
  root = parse(oai_write_chat_chunk(&META, &c, false, false));
  d = at(cJSON_GetArrayItem(at(root, "choices"), 0), "delta");
  assert_null(cJSON_GetObjectItemCaseSensitive(d, "reasoning_content"));
  cJSON_Delete(root);
}

static void completion_stream(void **state) {
  oai_choice_t c = {.index = 1, .text = " wor", .text_len = 4, .stop_token = -1, .has_logprobs = true,
                    .logprobs = LP, .n_logprobs = 1};
  cJSON *root = parse(oai_write_completion_chunk(&META, &c, false));
  check_head(root, "text_completion");
  const cJSON *c0 = cJSON_GetArrayItem(at(root, "choices"), 0);
  assert_string_equal(str(c0, "text"), " wor");
  assert_int_equal((int)num(c0, "index"), 1);
  assert_true(cJSON_IsNull(at(c0, "finish_reason")));
  assert_int_equal(cJSON_GetArraySize(at(at(c0, "logprobs"), "tokens")), 1);
  cJSON_Delete(root);
  oai_usage_t u = {.prompt_tokens = 1, .completion_tokens = 1};
  root = parse(oai_write_usage_chunk(&META, false, &u));
  check_head(root, "text_completion");
  cJSON_Delete(root);
}

/* Whatever bytes the text holds, the JSON is valid UTF-8 and valid text
 * passes through unchanged. */
static void text_is_utf8(void **state) {
  static const struct {
    const char *in;
    size_t len;
    const char *out;
  } cases[] = {
      {"plain \"quoted\" \\ \n\t", 19, "plain \"quoted\" \\ \n\t"},
      {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},
      {"a\0b", 3, "a\xEF\xBF\xBD" "b"},
      {"\xFF", 1, "\xEF\xBF\xBD"},
      {"\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},            /* overlong '/' */
      {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* a surrogate */
      {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* > U+10FFFF */
      {"ok\xE2\x82", 4, "ok\xEF\xBF\xBD\xEF\xBF\xBD"},       /* cut at the end */
      {"\x01\x1F", 2, "\x01\x1F"},                            /* control characters escape */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    cJSON *root = parse(oai_write_detokenize(cases[i].in, cases[i].len));
    assert_string_equal(str(root, "prompt"), cases[i].out);
    cJSON_Delete(root);
  }
}

/* return_token_ids: the ids on each choice; the prompt's on the choice
 * (completions) or at the top from the first choice (chat); neither
 * written unless asked. */
static void token_ids(void **state) {
  (void)state;
  const int32_t out[] = {7042, 30}, prompt[] = {504, 3575, 282};
  oai_choice_t c = {.text = " Paris.", .text_len = 7, .finish = SCHED_FINISH_LENGTH, .stop_token = -1,
                    .has_token_ids = true, .token_ids = out, .n_token_ids = 2, .prompt_token_ids = prompt,
                    .n_prompt_token_ids = 3};
  oai_usage_t u = {.prompt_tokens = 3, .completion_tokens = 2};
  for (int kind = 0; kind < 3; kind++) {
    cJSON *root = parse(kind == 0   ? oai_write_completion(&META, &c, 1, &u)
                        : kind == 1 ? oai_write_chat_completion(&META, &c, 1, &u)
                                    : oai_write_chat_chunk(&META, &c, false, false));
    const cJSON *c0 = cJSON_GetArrayItem(at(root, "choices"), 0);
    const cJSON *ids = at(c0, "token_ids");
    assert_int_equal(cJSON_GetArraySize(ids), 2);
    assert_int_equal(cJSON_GetArrayItem(ids, 1)->valueint, 30);
    const cJSON *p = at(kind == 0 ? c0 : root, "prompt_token_ids");
    assert_int_equal(cJSON_GetArraySize(p), 3);
    assert_int_equal(cJSON_GetArrayItem(p, 2)->valueint, 282);
    assert_null(cJSON_GetObjectItemCaseSensitive(kind == 0 ? root : c0, "prompt_token_ids"));
    cJSON_Delete(root);
  }
  c.prompt_token_ids = NULL; /* a later chunk: only its own ids, [] when none */
  c.n_token_ids = 0;
  cJSON *root = parse(oai_write_completion_chunk(&META, &c, false));
  const cJSON *c0 = cJSON_GetArrayItem(at(root, "choices"), 0);
  assert_int_equal(cJSON_GetArraySize(at(c0, "token_ids")), 0);
  assert_null(cJSON_GetObjectItemCaseSensitive(c0, "prompt_token_ids"));
  cJSON_Delete(root);
  c.has_token_ids = false;
  root = parse(oai_write_completion(&META, &c, 1, &u));
  assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(at(root, "choices"), 0), "token_ids"));
  cJSON_Delete(root);
}

static void errors_models_tokens(void **state) {
  cJSON *root = parse(oai_write_error("invalid_request_error", "temperature must be in [0, 2], got 3",
                                      "temperature", "invalid_value"));
  const cJSON *e = at(root, "error");
  assert_string_equal(str(e, "message"), "temperature must be in [0, 2], got 3");
  assert_string_equal(str(e, "type"), "invalid_request_error");
  assert_string_equal(str(e, "param"), "temperature");
  assert_string_equal(str(e, "code"), "invalid_value");
  cJSON_Delete(root);
  root = parse(oai_write_error(NULL, "x", NULL, NULL));
  e = at(root, "error");
  assert_true(cJSON_IsNull(at(e, "param")));
  assert_true(cJSON_IsNull(at(e, "code")));
  assert_string_equal(str(e, "type"), "invalid_request_error");
  cJSON_Delete(root);
  assert_string_equal(oai_error_type_for_status(400), "invalid_request_error");
  assert_string_equal(oai_error_type_for_status(401), "authentication_error");
  assert_string_equal(oai_error_type_for_status(500), "server_error");

  oai_model_t m = {.id = "smol", .root = "models/smol.gguf", .created = 42, .max_model_len = 8192};
  root = parse(oai_write_models(&m, 1));
  assert_string_equal(str(root, "object"), "list");
  const cJSON *d = cJSON_GetArrayItem(at(root, "data"), 0);
  assert_string_equal(str(d, "id"), "smol");
  assert_string_equal(str(d, "object"), "model");
  assert_int_equal((int)num(d, "created"), 42);
  assert_string_equal(str(d, "owned_by"), "tram");
  assert_string_equal(str(d, "root"), "models/smol.gguf");
  assert_true(cJSON_IsNull(at(d, "parent")));
  assert_int_equal((int)num(d, "max_model_len"), 8192);
  cJSON_Delete(root);

  int32_t toks[] = {1, 9906, 2};
  const char *strs[] = {"<s>", "Hello", "</s>"};
  root = parse(oai_write_tokenize(toks, 3, 2048, strs));
  assert_int_equal((int)num(root, "count"), 3);
  assert_int_equal((int)num(root, "max_model_len"), 2048);
  assert_int_equal(cJSON_GetArrayItem(at(root, "tokens"), 1)->valueint, 9906);
  assert_string_equal(cJSON_GetArrayItem(at(root, "token_strs"), 2)->valuestring, "</s>");
  cJSON_Delete(root);
  root = parse(oai_write_tokenize(toks, 0, 2048, NULL));
  assert_int_equal(cJSON_GetArraySize(at(root, "tokens")), 0);
  assert_true(cJSON_IsNull(at(root, "token_strs")));
  cJSON_Delete(root);

  root = parse(oai_write_health("ok"));
  assert_string_equal(str(root, "status"), "ok");
  cJSON_Delete(root);

  char id[64];
  oai_make_id(id, sizeof id, "chatcmpl", 0x1234, 0xabcdef);
  assert_string_equal(id, "chatcmpl-000000000000123400000000" "00abcdef");
  assert_null(oai_finish_name(SCHED_FINISH_NONE));
  assert_string_equal(oai_finish_name(SCHED_FINISH_ABORT), "abort");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(completion),
      cmocka_unit_test(chat_completion),
      cmocka_unit_test(chat_stream),
      cmocka_unit_test(reasoning),
      cmocka_unit_test(completion_stream),
      cmocka_unit_test(text_is_utf8),
      cmocka_unit_test(errors_models_tokens),
      cmocka_unit_test(token_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
