/* tests/unit/test_anth_request.c — Anthropic's Messages request
 * (api/anth_request.c) and its JSON (api/anth_write.c): what each accepted
 * field becomes in the chat request, the messages' blocks as chat messages
 * (system, tool_use, tool_result, consecutive turns joined, a prefill),
 * tool_choice as the tool-call grammar, every refusal naming its field,
 * memory running out at every allocation of a parse, and the message,
 * event and error JSON read back with cJSON. The end-to-end checks with the
 * official `anthropic` client are tests/integration/test_anthropic.py. */
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

#include "api/anth.h"

#define U "{\"role\":\"user\",\"content\":\"hi\"}"
#define TOOL "{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}"

static int parse(const char *body, arena_t *a, anth_req_t *r, oai_error_t *e) {
  return anth_parse_messages(body, strlen(body), NULL, a, r, e);
}

static anth_req_t ok(arena_t *a, const char *body) {
  anth_req_t r;
  oai_error_t e;
  if (parse(body, a, &r, &e)) fail_msg("%s: %s: %s", body, e.param, e.message);
  return r;
}

static void values(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  anth_req_t r = ok(&a, "{\"model\":\"m\",\"max_tokens\":7,\"system\":[{\"type\":\"text\",\"text\":\"be\"},{\"type\":"
                        "\"text\",\"text\":\"brief\",\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[" U "],"
                        "\"stop_sequences\":[\"x\",\"yz\"],\"stream\":true,\"temperature\":0.5,\"top_p\":0.9,"
                        "\"top_k\":4,\"metadata\":{\"user_id\":\"u1\"},\"thinking\":{\"type\":\"disabled\"},"
                        "\"service_tier\":\"auto\"}");
  assert_string_equal(r.chat.model, "m");
  assert_int_equal(r.chat.params.max_tokens, 7);
  assert_int_equal(r.chat.n_messages, 2);
  assert_string_equal(r.chat.messages[0].role, "system");
  assert_string_equal(r.chat.messages[0].content, "be\nbrief");
  assert_string_equal(r.chat.messages[1].role, "user");
  assert_string_equal(r.chat.messages[1].content, "hi");
  assert_int_equal(r.chat.params.n_stop, 2);
  assert_string_equal(r.chat.params.stop[1], "yz");
  assert_true(r.chat.params.stream && r.chat.params.n == 1);
  assert_true(fabsf(r.chat.params.samp.temperature - 0.5f) < 1e-6f);
  assert_true(fabsf(r.chat.params.samp.top_p - 0.9f) < 1e-6f);
  assert_int_equal(r.chat.params.samp.top_k, 4);
  assert_string_equal(r.user_id, "u1");
  assert_true(r.chat.add_generation_prompt && !r.chat.continue_final_message);
  assert_null(r.chat.tools);
  /* defaults: Anthropic's temperature 1, no stop, not streamed */
  r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "]}");
  assert_true(fabsf(r.chat.params.samp.temperature - 1.0f) < 1e-6f);
  assert_int_equal(r.chat.params.n_stop, 0);
  assert_false(r.chat.params.stream);
  assert_int_equal(r.chat.n_messages, 1);
  arena_free(&a);
}

/* Blocks into chat messages: tool_use as the assistant's tool_calls,
 * tool_result as tool messages (is_error marked), consecutive turns joined,
 * a last assistant message a prefill. */
static void blocks(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  anth_req_t r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "," U ",{\"role\":\"assistant\",\"content\":[{\"type\":"
                        "\"text\",\"text\":\"let me\"},{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":"
                        "{\"x\":1}},{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"g\",\"input\":{}}]},{\"role\":"
                        "\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"one\"},"
                        "{\"type\":\"tool_result\",\"tool_use_id\":\"t2\",\"is_error\":true,\"content\":[{\"type\":"
                        "\"text\",\"text\":\"two\"}]},{\"type\":\"text\",\"text\":\"next\"}]},{\"role\":\"assistant\","
                        "\"content\":\"The\"}]}");
  assert_int_equal(r.chat.n_messages, 6);
  assert_string_equal(r.chat.messages[0].content, "hi\nhi"); /* two user turns, one message */
  const oai_message_t *m = &r.chat.messages[1];
  assert_string_equal(m->role, "assistant");
  assert_string_equal(m->content, "let me");
  cJSON *calls = cJSON_Parse(m->tool_calls);
  assert_int_equal(cJSON_GetArraySize(calls), 2);
  cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function");
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "id")->valuestring, "t1");
  assert_string_equal(cJSON_GetObjectItem(f, "name")->valuestring, "f");
  assert_string_equal(cJSON_GetObjectItem(f, "arguments")->valuestring, "{\"x\":1}");
  cJSON_Delete(calls);
  assert_string_equal(r.chat.messages[2].role, "tool");
  assert_string_equal(r.chat.messages[2].tool_call_id, "t1");
  assert_string_equal(r.chat.messages[2].content, "one");
  assert_string_equal(r.chat.messages[3].content, "Error: two");
  assert_string_equal(r.chat.messages[4].role, "user");
  assert_string_equal(r.chat.messages[4].content, "next");
  assert_string_equal(r.chat.messages[5].role, "assistant");
  assert_true(r.chat.continue_final_message && !r.chat.add_generation_prompt); /* the prefill */
  /* two assistant turns with calls join their calls; a user turn of only results adds no user message */
  r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U ",{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
             "\"id\":\"a\",\"name\":\"f\",\"input\":{}}]},{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
             "\"id\":\"b\",\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
             "\"tool_use_id\":\"a\"}]}]}");
  assert_int_equal(r.chat.n_messages, 3);
  calls = cJSON_Parse(r.chat.messages[1].tool_calls);
  assert_int_equal(cJSON_GetArraySize(calls), 2);
  cJSON_Delete(calls);
  assert_string_equal(r.chat.messages[2].role, "tool");
  assert_string_equal(r.chat.messages[2].content, "");
  arena_free(&a);
}

/* tools in the OpenAI form (for the template) and tool_choice as the chat
 * request's (auto, none, any → required, tool → named), with the grammar
 * that forces a call. */
/* thinking enabled is the thinking budget; earlier turns' thinking blocks
 * are accepted and left out of the prompt. */
static void thinking(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  anth_req_t r = ok(&a, "{\"max_tokens\":4096,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048},"
                        "\"messages\":[" U ",{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
                        "\"hmm\",\"signature\":\"\"},{\"type\":\"redacted_thinking\",\"data\":\"x\"},{\"type\":\"text\","
                        "\"text\":\"yes\"}]}," U "]}");
  assert_true(r.chat.has_thinking_budget);
  assert_int_equal(r.chat.thinking_budget, 2048);
  assert_true(r.thinking);
  assert_string_equal(r.chat.template_kwargs, "{\"enable_thinking\":true}");
  assert_int_equal(r.chat.n_messages, 3);
  assert_string_equal(r.chat.messages[1].content, "yes");
  r = ok(&a, "{\"max_tokens\":1,\"thinking\":{\"type\":\"adaptive\"},\"messages\":[" U "]}");
  assert_false(r.chat.has_thinking_budget);
  assert_true(r.thinking);
  r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "]}"); /* Anthropic's default: no thinking */
  assert_false(r.thinking || r.chat.has_thinking_budget);
  assert_string_equal(r.chat.template_kwargs, "{\"enable_thinking\":false}");
  r = ok(&a, "{\"max_tokens\":1,\"thinking\":{\"type\":\"disabled\"},\"messages\":[" U "]}");
  assert_false(r.thinking);
  arena_free(&a);
}

static void tools(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  anth_req_t r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "]}");
  cJSON *t = cJSON_Parse(r.chat.tools);
  cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "function");
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "type")->valuestring, "function");
  assert_string_equal(cJSON_GetObjectItem(f, "name")->valuestring, "f");
  assert_string_equal(cJSON_GetObjectItem(f, "description")->valuestring, "d");
  assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "parameters"), "properties"), "x"));
  cJSON_Delete(t);
  assert_int_equal(r.chat.tool_choice, OAI_TOOL_CHOICE_AUTO);
  assert_true(r.chat.parallel_tool_calls);
  assert_int_equal(r.chat.params.grammar.kind, OAI_GRAMMAR_NONE);
  r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"any\","
             "\"disable_parallel_tool_use\":true}}");
  assert_int_equal(r.chat.tool_choice, OAI_TOOL_CHOICE_REQUIRED);
  assert_false(r.chat.parallel_tool_calls);
  assert_int_equal(r.chat.params.grammar.kind, OAI_GRAMMAR_JSON_SCHEMA);
  assert_non_null(strstr(r.chat.params.grammar.src, "\"maxItems\":1"));
  r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"tool\","
             "\"name\":\"f\"}}");
  assert_int_equal(r.chat.tool_choice, OAI_TOOL_CHOICE_NAMED);
  assert_string_equal(r.chat.tool_name, "f");
  assert_non_null(strstr(r.chat.params.grammar.src, "\"x\""));
  r = ok(&a, "{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"none\"}}");
  assert_int_equal(r.chat.tool_choice, OAI_TOOL_CHOICE_NONE);
  arena_free(&a);
}

static void refusals(void **state) {
  (void)state;
  static const struct {
    const char *body, *param;
  } bad[] = {
      {"{\"messages\":[" U "]}", "max_tokens"},
      {"{\"max_tokens\":0,\"messages\":[" U "]}", "max_tokens"},
      {"{\"max_tokens\":1}", "messages"},
      {"{\"max_tokens\":1,\"messages\":[]}", "messages"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"n\":2}", "n"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"temperature\":1.1}", "temperature"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"top_p\":0}", "top_p"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"top_k\":-1}", "top_k"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}}",
       "thinking.budget_tokens"}, /* not below max_tokens */
      {"{\"max_tokens\":4096,\"messages\":[" U "],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1023}}",
       "thinking.budget_tokens"},
      {"{\"max_tokens\":4096,\"messages\":[" U "],\"thinking\":{\"type\":\"enabled\"}}", "thinking.budget_tokens"},
      {"{\"max_tokens\":4096,\"messages\":[" U "],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1e400}}",
       "thinking.budget_tokens"},
      {"{\"max_tokens\":4096,\"messages\":[" U "],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024.5}}",
       "thinking.budget_tokens"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"thinking\":{\"type\":\"adaptive\",\"x\":1}}", "thinking.x"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"thinking\":{\"type\":\"on\"}}", "thinking"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"metadata\":{\"other\":1}}", "metadata.other"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"metadata\":{\"user_id\":5}}", "metadata.user_id"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"service_tier\":\"priority\"}", "service_tier"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"output_config\":{}}", "output_config"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"stop_sequences\":\"x\"}", "stop_sequences"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"stop_sequences\":[\"\"]}", "stop_sequences[0]"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"cache_control\":{\"type\":\"forever\"}}", "cache_control"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages[0].role"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"n\"}]}", "messages[0].name"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
       "messages[0].content[0].type"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"x\"}]}]}",
       "messages[0].content[0].type"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":5}]}]}",
       "messages[0].content[0].thinking"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":"
       "\"f\",\"input\":{}}]}]}", "messages[0].content[0].type"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
       "\"name\":\"f<\",\"input\":{}}]}]}", "messages[0].content[0].name"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
       "\"name\":\"f\",\"input\":[]}]}]}", "messages[0].content[0]"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
       "messages[0].content[0].tool_use_id"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
       "\"a\",\"content\":[{\"type\":\"image\"}]}]}]}", "messages[0].content[0].content[0]"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\","
       "\"citations\":[{}]}]}]}", "messages[0].content[0]"},
      {"{\"max_tokens\":1,\"messages\":[" U ",{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
       "\"a\",\"name\":\"f\",\"input\":{}}]}]}", "messages"},
      {"{\"max_tokens\":1,\"system\":5,\"messages\":[" U "]}", "system"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}]}", "tools[0]"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[{\"name\":\"f\"}]}", "tools[0]"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[{\"name\":\"f\",\"input_schema\":{},\"x\":1}]}", "tools[0].x"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "," TOOL "]}", "tools[1].function.name"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tool_choice\":{\"type\":\"any\"}}", "tool_choice"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":\"auto\"}", "tool_choice"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"tool\"}}",
       "tool_choice.name"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"tool\",\"name\":\"g\"}}",
       "tool_choice.name"},
      {"{\"max_tokens\":1,\"messages\":[" U "],\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"none\","
       "\"disable_parallel_tool_use\":true}}", "tool_choice.disable_parallel_tool_use"},
      {"[]", ""},
  };
  arena_t a;
  arena_init(&a, 0, 0);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    anth_req_t r;
    oai_error_t e;
    assert_int_equal(parse(bad[i].body, &a, &r, &e), -EINVAL);
    assert_int_equal(e.status, 400);
    if (strcmp(e.param, bad[i].param) != 0) fail_msg("%s: param \"%s\" (%s), want %s", bad[i].body, e.param, e.message,
                                                     bad[i].param);
  }
  /* count_tokens: the conversation's fields, not the generation's */
  anth_req_t r;
  oai_error_t e;
  const char *b = "{\"model\":\"m\",\"system\":\"s\",\"messages\":[" U "],\"tools\":[" TOOL "]}";
  assert_int_equal(anth_parse_count_tokens(b, strlen(b), NULL, &a, &r, &e), 0);
  assert_int_equal(r.chat.n_messages, 2);
  assert_non_null(r.chat.tools);
  b = "{\"messages\":[" U "],\"max_tokens\":3}";
  assert_int_equal(anth_parse_count_tokens(b, strlen(b), NULL, &a, &r, &e), -EINVAL);
  assert_string_equal(e.param, "max_tokens");
  arena_free(&a);
  /* anthropic-version */
  assert_int_equal(anth_check_version(NULL, &e), 0);
  assert_int_equal(anth_check_version("2023-06-01", &e), 0);
  assert_int_equal(anth_check_version("2026-10-21", &e), 0);
  assert_int_equal(anth_check_version("2023-01-01", &e), -EINVAL);
  assert_string_equal(e.param, "anthropic-version");
  assert_int_equal(anth_check_version("2023-06-1x", &e), -EINVAL);
  assert_int_equal(anth_check_version("latest", &e), -EINVAL);
}

/* Every arena allocation of a parse, in turn, is the first to fail: each
 * such parse is a clean 503 out_of_memory (under ASan: no leak), and the
 * cap that fits the whole parse succeeds. */
static void out_of_memory(void **state) {
  (void)state;
  static const char *const cases[] = {
      "{\"model\":\"m\",\"max_tokens\":9,\"system\":[{\"type\":\"text\",\"text\":\"s\"}],\"messages\":[" U "," U ","
      "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"t\"},{\"type\":\"tool_use\",\"id\":\"c\","
      "\"name\":\"f\",\"input\":{\"x\":1}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
      "\"c\",\"is_error\":true,\"content\":\"r\"},{\"type\":\"text\",\"text\":\"more\"}]}],\"tools\":[" TOOL "],"
      "\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\"},\"stop_sequences\":[\"q\"],\"metadata\":{\"user_id\":\"u\"}}",
      "{\"max_tokens\":1,\"messages\":[" U ",{\"role\":\"assistant\",\"content\":\"prefill\"}],\"tools\":[" TOOL "],"
      "\"tool_choice\":{\"type\":\"any\"}}",
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t cap = 16;
    for (;; cap += 16) {
      arena_t a;
      arena_init(&a, 64, cap);
      anth_req_t r;
      oai_error_t e;
      const int rc = parse(cases[i], &a, &r, &e);
      arena_free(&a);
      if (rc == 0) break;
      if (rc != -ENOMEM || e.status != 503 || strcmp(e.code, "out_of_memory") != 0)
        fail_msg("case %zu, cap %zu: %d %d %s: %s", i, cap, rc, e.status, e.param, e.message);
      if (cap > 65536) fail_msg("case %zu never parsed", i);
    }
  }
}

/* The JSON read back: the message object, the events' framing and
 * fields, the error object by status. */
static void writer(void **state) {
  (void)state;
  const anth_block_t b[] = {{.kind = ANTH_BLOCK_TEXT, .text = "hi\xff", .text_len = 3},
                            {.kind = ANTH_BLOCK_TOOL_USE, .id = "toolu_1", .name = "f", .input = "{\"x\":[1,2]}"},
                            {.kind = ANTH_BLOCK_TOOL_USE, .id = "toolu_2", .name = "f", .input = "{\"x\":[1,"}};
  const anth_msg_t m = {.id = "msg_1", .model = "m", .blocks = b, .n_blocks = 3, .stop_reason = "max_tokens",
                        .input_tokens = 5, .output_tokens = 9, .cache_read_tokens = 2};
  char *s = anth_write_message(&m);
  cJSON *j = cJSON_Parse(s);
  free(s);
  assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "message");
  assert_string_equal(cJSON_GetObjectItem(j, "role")->valuestring, "assistant");
  assert_string_equal(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "max_tokens");
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "stop_sequence")));
  cJSON *content = cJSON_GetObjectItem(j, "content");
  assert_int_equal(cJSON_GetArraySize(content), 3);
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(content, 0), "text")->valuestring, "hi\xef\xbf\xbd");
  cJSON *tu = cJSON_GetArrayItem(content, 1);
  assert_string_equal(cJSON_GetObjectItem(tu, "type")->valuestring, "tool_use");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(tu, "input"), "x")), 2);
  cJSON *cut = cJSON_GetArrayItem(content, 2); /* arguments that are no object: an incomplete tool_use, input {} */
  assert_string_equal(cJSON_GetObjectItem(cut, "type")->valuestring, "tool_use");
  assert_string_equal(cJSON_GetObjectItem(cut, "id")->valuestring, "toolu_2");
  assert_string_equal(cJSON_GetObjectItem(cut, "name")->valuestring, "f");
  assert_true(cJSON_IsObject(cJSON_GetObjectItem(cut, "input")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cut, "input")), 0);
  cJSON *u = cJSON_GetObjectItem(j, "usage");
  assert_int_equal(cJSON_GetObjectItem(u, "input_tokens")->valueint, 5);
  assert_int_equal(cJSON_GetObjectItem(u, "output_tokens")->valueint, 9);
  assert_int_equal(cJSON_GetObjectItem(u, "cache_read_input_tokens")->valueint, 2);
  cJSON_Delete(j);
  /* events: "event: <type>\ndata: <json with that type>\n\n" */
  char *ev[] = {anth_event_message_start(&m), anth_event_block_start(1, &b[1]),
                anth_event_block_delta(1, ANTH_BLOCK_TOOL_USE, "{\"x\"", 4), anth_event_block_delta(0, ANTH_BLOCK_TEXT, "a", 1),
                anth_event_block_stop(1), anth_event_message_delta(&m), anth_event_simple("message_stop"),
                anth_event_error(503, "busy")};
  static const char *const types[] = {"message_start", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta", "message_stop",
                                      "error"};
  for (int i = 0; i < 8; i++) {
    char want[64];
    snprintf(want, sizeof want, "event: %s\ndata: ", types[i]);
    assert_memory_equal(ev[i], want, strlen(want));
    assert_string_equal(ev[i] + strlen(ev[i]) - 2, "\n\n");
    cJSON *d = cJSON_Parse(ev[i] + strlen(want));
    assert_string_equal(cJSON_GetObjectItem(d, "type")->valuestring, types[i]);
    if (i == 1) assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "content_block"), "input")), 0);
    if (i == 2) assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "delta"), "partial_json")->valuestring, "{\"x\"");
    if (i == 3) assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "delta"), "type")->valuestring, "text_delta");
    if (i == 5) assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "usage"), "output_tokens")->valueint, 9);
    if (i == 7) assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "error"), "type")->valuestring,
                                    "overloaded_error");
    cJSON_Delete(d);
    free(ev[i]);
  }
  static const struct {
    int status;
    const char *type;
  } st[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {404, "not_found_error"},
            {413, "request_too_large"}, {415, "invalid_request_error"}, {429, "rate_limit_error"}, {500, "api_error"},
            {503, "overloaded_error"}};
  for (size_t i = 0; i < sizeof st / sizeof *st; i++) {
    s = anth_error_body(st[i].status, NULL, "bad", i ? NULL : "max_tokens", NULL);
    j = cJSON_Parse(s);
    free(s);
    assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "error");
    cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, st[i].type);
    assert_string_equal(cJSON_GetObjectItem(e, "message")->valuestring, i ? "bad" : "max_tokens: bad");
    cJSON_Delete(j);
  }
  /* the thinking block the reasoning split will write */
  const anth_block_t th = {.kind = ANTH_BLOCK_THINKING, .text = "hmm", .text_len = 3};
  const anth_msg_t tm = {.id = "msg_2", .blocks = &th, .n_blocks = 1};
  s = anth_write_message(&tm);
  j = cJSON_Parse(s);
  free(s);
  cJSON *tb = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "content"), 0);
  assert_string_equal(cJSON_GetObjectItem(tb, "type")->valuestring, "thinking");
  assert_string_equal(cJSON_GetObjectItem(tb, "thinking")->valuestring, "hmm");
  assert_string_equal(cJSON_GetObjectItem(tb, "signature")->valuestring, "");
  cJSON_Delete(j);
  s = anth_event_block_delta(0, ANTH_BLOCK_THINKING, "hm", 2);
  j = cJSON_Parse(strstr(s, "data: ") + 6);
  free(s);
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "delta"), "type")->valuestring, "thinking_delta");
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "delta"), "thinking")->valuestring, "hm");
  cJSON_Delete(j);
  assert_string_equal(anth_stop_reason(SCHED_FINISH_STOP, NULL, true), "tool_use");
  assert_string_equal(anth_stop_reason(SCHED_FINISH_STOP, "x", false), "stop_sequence");
  assert_string_equal(anth_stop_reason(SCHED_FINISH_LENGTH, NULL, true), "max_tokens");
  assert_string_equal(anth_stop_reason(SCHED_FINISH_STOP, NULL, false), "end_turn");
  assert_null(anth_stop_reason(SCHED_FINISH_NONE, NULL, false));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(values),   cmocka_unit_test(blocks),        cmocka_unit_test(tools),    cmocka_unit_test(thinking),
      cmocka_unit_test(refusals), cmocka_unit_test(out_of_memory), cmocka_unit_test(writer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
