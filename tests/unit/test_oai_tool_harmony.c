/* tests/unit/test_oai_tool_harmony.c — gpt-oss's harmony tool calls, from
 * the model's raw output (its special tokens rendered as text, as
 * tok_decode writes them) through the two pieces the server chains: the
 * reasoning splitter with calls kept (text/reasoning.h) and the tool-call
 * parser's OAI_TOOLS_HARMONY (api/oai_tool_parse.h). The outputs are the
 * forms of OpenAI's harmony guide (docs/format.md: "commentary
 * to=functions.get_weather <|constrain|>json") and of llama.cpp's gpt-oss
 * grammar (the recipient in the role header, a content type without
 * <|constrain|>); what comes out is what vLLM's openai tool parser gives
 * for them (arguments re-serialized when they are JSON, kept as written
 * when not; only finished messages; only functions.* recipients). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/oai_tool_parse.h"
#include "oai_tool_testutil.h"
#include "base/buf.h"
#include "text/reasoning.h"

typedef struct sides {
  buf_t think, answer;
} sides_t;

static void collect(void *ctx, bool thinking, const char *s, size_t n) {
  sides_t *o = ctx;
  buf_put(thinking ? &o->think : &o->answer, s, n);
}

/* The output raw, split with calls kept (stopped: it ended at <|call|>, whose
 * text is not output), its answer parsed; the reasoning in *think. */
static oai_tool_parse_t run(arena_t *a, const char *raw, bool stopped, int32_t max, const char **think) {
  sides_t o = {0};
  reason_split_t r;
  const char *prompt = "<|start|>user<|message|>What is the weather in Paris?<|end|><|start|>assistant";
  reason_split_init(&r, REASON_GPT_OSS, prompt, strlen(prompt));
  r.calls = true;
  for (const char *p = raw; *p; p++) reason_split_feed(&r, p, 1, collect, &o); /* a byte at a time */
  if (stopped) reason_split_stopped(&r, collect, &o);
  reason_split_end(&r, collect, &o);
  oai_tool_parse_t p;
  const size_t n = o.answer.len;
  char *answer = arena_strndup(a, o.answer.p ? o.answer.p : "", n);
  oai_tools_parse(OAI_TOOLS_HARMONY, answer, n, max, a, &p);
  *think = arena_strndup(a, o.think.p ? o.think.p : "", o.think.len);
  buf_free(&o.think);
  buf_free(&o.answer);
  return p;
}

static void call_is(const oai_tool_parse_t *p, int k, const char *name, const char *args) {
  assert_true(k < p->n_calls);
  assert_string_equal(p->calls[k].name, name);
  assert_string_equal(p->calls[k].arguments, args);
}

#define ANALYSIS "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant"

static void guide_call(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  const char *think;
  /* the harmony guide's call, with its <|call|> in the text */
  oai_tool_parse_t p = run(&a, ANALYSIS "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                        "<|message|>{\"location\":\"San Francisco\"}<|call|>", false, 0, &think);
  assert_string_equal(think, "Need to use function get_weather.");
  assert_int_equal(p.n_calls, 1);
  call_is(&p, 0, "get_weather", "{\"location\":\"San Francisco\"}");
  content_is(&p, NULL);
  /* as the server sees it: the engine stopped at <|call|>, whose text is not output */
  p = run(&a, ANALYSIS "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                       "{\"location\": \"San Francisco\", \"unit\": \"celsius\"}", true, 0, &think);
  assert_int_equal(p.n_calls, 1);
  call_is(&p, 0, "get_weather", "{\"location\":\"San Francisco\",\"unit\":\"celsius\"}"); /* compacted */
  /* cut by max_tokens inside the arguments: no call (vLLM reads finished messages), no content */
  p = run(&a, ANALYSIS "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"loc",
          false, 0, &think);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, NULL);
  arena_free(&a);
}

static void recipient_forms(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  const char *think;
  /* the recipient in the role header of the output's first message, "json" without <|constrain|> */
  oai_tool_parse_t p = run(&a, " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
                           true, 0, &think);
  assert_string_equal(think, "");
  assert_int_equal(p.n_calls, 1);
  call_is(&p, 0, "get_weather", "{\"city\":\"Paris\"}");
  /* ... and of a later message, on the analysis channel (llama.cpp's grammar allows both channels) */
  p = run(&a, ANALYSIS " to=functions.lookup<|channel|>analysis<|constrain|>json<|message|>{}", true, 0, &think);
  assert_int_equal(p.n_calls, 1);
  call_is(&p, 0, "lookup", "{}");
  /* no content type: JSON is assumed */
  p = run(&a, "<|channel|>commentary to=functions.f<|message|> [1, 2] ", true, 0, &think);
  call_is(&p, 0, "f", "[1,2]");
  arena_free(&a);
}

static void several_and_content(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  const char *think;
  const char *two = ANALYSIS "<|channel|>commentary<|message|>Checking both cities.<|end|><|start|>assistant"
                             "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                             "{\"city\":\"Paris\"}<|call|><|start|>assistant<|channel|>commentary "
                             "to=functions.get_time <|constrain|>json<|message|>{\"city\":\"Rome\"}";
  oai_tool_parse_t p = run(&a, two, true, 0, &think);
  assert_int_equal(p.n_calls, 2);
  call_is(&p, 0, "get_weather", "{\"city\":\"Paris\"}");
  call_is(&p, 1, "get_time", "{\"city\":\"Rome\"}");
  content_is(&p, "Checking both cities."); /* the preamble (commentary without a recipient) */
  p = run(&a, two, true, 1, &think); /* parallel_tool_calls false: the first */
  assert_int_equal(p.n_calls, 1);
  call_is(&p, 0, "get_weather", "{\"city\":\"Paris\"}");
  /* no call: the final channel is the content */
  p = run(&a, ANALYSIS "<|channel|>final<|message|>It is sunny in Paris.", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, "It is sunny in Paris.");
  arena_free(&a);
}

/* Output that is not a well-formed call: what vLLM's parser does. */
static void malformed(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  const char *think;
  /* arguments that are not JSON: kept as written */
  oai_tool_parse_t p = run(&a, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"city\": Paris",
                           true, 0, &think);
  call_is(&p, 0, "f", "{\"city\": Paris");
  p = run(&a, "<|channel|>commentary to=functions.f json<|message|>{\"a\":1} and more", true, 0, &think);
  call_is(&p, 0, "f", "{\"a\":1} and more"); /* a value with text after it is not JSON either */
  /* another content type: as written */
  p = run(&a, "<|channel|>commentary to=functions.run <|constrain|>code<|message|>print( 1 )", true, 0, &think);
  call_is(&p, 0, "run", "print( 1 )");
  /* a built-in tool's recipient, and "functions." with no name: neither calls nor content */
  p = run(&a, "<|channel|>analysis to=browser.search code<|message|>{\"query\":\"x\"}", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, NULL);
  p = run(&a, "<|channel|>commentary to=functions. json<|message|>{}", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  /* a control byte in the name (a NUL would cut it short): not a call */
  p = run(&a, "<|channel|>commentary to=functions.get\x01weather json<|message|>{}", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  /* a function the request did not give is still a call (vLLM too): the client sees the name */
  p = run(&a, "<|channel|>commentary to=functions.not_a_tool json<|message|>{}", true, 0, &think);
  call_is(&p, 0, "not_a_tool", "{}");
  /* a header never finished, a stray <|call|>, empty output: no call, nothing broken */
  p = run(&a, "<|channel|>commentary to=functions.f json", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, NULL);
  p = run(&a, "<|call|>", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, "<|call|>"); /* not harmony: the answer, as the splitter gives it */
  p = run(&a, "", true, 0, &think);
  assert_int_equal(p.n_calls, 0);
  content_is(&p, NULL);
  arena_free(&a);
}

/* Streaming: content goes out up to where a message may begin. */
static void stream_safe(void **state) {
  (void)state;
  const char *t = "Checking.<|channel|>commentary to=functions.f<|message|>{}<|call|>";
  const size_t len = strlen(t);
  size_t prev = 0;
  for (size_t k = 0; k <= len; k++) {
    const size_t safe = oai_tools_stream_safe(OAI_TOOLS_HARMONY, t, k);
    assert_true(safe >= prev && safe <= 9);
    if (k >= 9 && k < 10) assert_int_equal(safe, 9);
    prev = safe;
  }
  assert_int_equal(oai_tools_stream_safe(OAI_TOOLS_HARMONY, "Checking.<|chan", 15), 9);
  assert_int_equal(oai_tools_stream_safe(OAI_TOOLS_HARMONY, "All text", 8), 8);
  assert_int_equal(oai_tools_format_of("{{- '<|start|>assistant<|channel|>final<|message|>' }}"), OAI_TOOLS_HARMONY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(guide_call),       cmocka_unit_test(recipient_forms), cmocka_unit_test(several_and_content),
      cmocka_unit_test(malformed),        cmocka_unit_test(stream_safe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
