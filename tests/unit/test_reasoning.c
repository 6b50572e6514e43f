/* tests/unit/test_reasoning.c — the reasoning splitter (text/reasoning.h)
 * against the formats' own texts: Qwen3's and DeepSeek-R1's <think> tags
 * (opened in the output or in the prompt, closed in the prompt, never
 * opened, cut short), harmony's channels; and the promise that holds for
 * every output: fed in any chunks, split at any byte (a tag across tokens
 * or stream chunks), the two sides come out the same as fed whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/reasoning.h"

typedef struct sides {
  char think[4096], answer[4096];
  size_t n_think, n_answer;
  int pieces;
  int last;     /* 1 thinking, 2 answer: the side of the last piece */
  int switches; /* times the side changed: reasoning strictly before the answer means <= 1 */
} sides_t;

static void collect(void *ctx, bool thinking, const char *s, size_t n) {
  sides_t *o = ctx;
  assert_true(n > 0);
  char *dst = thinking ? o->think : o->answer;
  size_t *len = thinking ? &o->n_think : &o->n_answer;
  assert_true(*len + n < sizeof o->think);
  memcpy(dst + *len, s, n);
  *len += n;
  dst[*len] = 0;
  o->pieces++;
  const int side = thinking ? 1 : 2;
  if (o->last && o->last != side) o->switches++;
  o->last = side;
}

static bool g_calls; /* reason_split_t.calls for the splitters below */

/* Splits out (given the prompt) fed in chunks of `chunk` bytes (0: whole). */
static sides_t split(reason_fmt_t f, const char *prompt, const char *out, size_t chunk, reason_phase_t *phase) {
  sides_t o;
  memset(&o, 0, sizeof o);
  reason_split_t r;
  reason_split_init(&r, f, prompt, prompt ? strlen(prompt) : 0);
  r.calls = g_calls;
  const size_t n = strlen(out);
  if (!chunk) chunk = n ? n : 1;
  for (size_t i = 0; i < n; i += chunk) reason_split_feed(&r, out + i, n - i < chunk ? n - i : chunk, collect, &o);
  if (phase) *phase = reason_split_phase(&r);
  reason_split_end(&r, collect, &o);
  return o;
}

static void expect(reason_fmt_t f, const char *prompt, const char *out, const char *think, const char *answer) {
  const size_t n = strlen(out);
  for (size_t chunk = 0; chunk <= n; chunk++) { /* whole, then every chunk size down to single bytes */
    const sides_t o = split(f, prompt, out, chunk, NULL);
    assert_string_equal(o.think, think);
    assert_string_equal(o.answer, answer);
  }
  for (size_t cut = 1; cut < n; cut++) { /* every two-piece cut */
    sides_t o;
    memset(&o, 0, sizeof o);
    reason_split_t r;
    reason_split_init(&r, f, prompt, prompt ? strlen(prompt) : 0);
    r.calls = g_calls;
  r.calls = g_calls;
    reason_split_feed(&r, out, cut, collect, &o);
    reason_split_feed(&r, out + cut, n - cut, collect, &o);
    reason_split_end(&r, collect, &o);
    assert_string_equal(o.think, think);
    assert_string_equal(o.answer, answer);
  }
}

/* Qwen3-8B's output for "What is 2+2?" with its own template (enable_thinking true). */
static void qwen3_tags_in_output(void **state) {
  (void)state;
  const char *prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
  expect(REASON_QWEN3, prompt,
         "<think>\nOkay, the user asks 2+2. That is 4.\n</think>\n\n2 + 2 = **4**.",
         "Okay, the user asks 2+2. That is 4.\n", "2 + 2 = **4**.");
  /* a Qwen3 output that does not think is all answer */
  expect(REASON_QWEN3, prompt, "Hello! How can I help?", "", "Hello! How can I help?");
  /* text that only looks like a tag stays text */
  expect(REASON_QWEN3, prompt, "<thinking>no</thinking>", "", "<thinking>no</thinking>");
  expect(REASON_QWEN3, prompt, "<thin", "", "<thin");
  /* after the answer began, tags are answer text */
  expect(REASON_QWEN3, prompt, "<think>a</think>b</think><think>c", "a", "b</think><think>c");
}

static void tags_in_prompt(void **state) {
  (void)state;
  /* DeepSeek-R1's template (and Qwen3-Thinking-2507's) opens the turn */
  const char *opened = "<｜User｜>2+2?<｜Assistant｜><think>\n";
  expect(REASON_DEEPSEEK_R1, opened, "Two and two.\n</think>\n\nFour.", "Two and two.\n", "Four.");
  expect(REASON_QWEN3, opened, "Two and two.\n</think>\n\nFour.", "Two and two.\n", "Four.");
  /* Qwen3 with enable_thinking false closes an empty block in the prompt */
  const char *closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  expect(REASON_QWEN3, closed, "Four.", "", "Four.");
  expect(REASON_QWEN3, closed, "<think>x</think>y", "", "<think>x</think>y");
  expect(REASON_DEEPSEEK_R1, closed, "Four.", "", "Four.");
}

/* deepseek_r1: reasoning until </think> even without <think> (R1 distills). */
static void deepseek_r1_no_open(void **state) {
  (void)state;
  expect(REASON_DEEPSEEK_R1, "<｜Assistant｜>", "Let me see.</think>Four.", "Let me see.", "Four.");
  expect(REASON_DEEPSEEK_R1, "<｜Assistant｜>", "<think>Let me see.</think>Four.", "Let me see.", "Four.");
  expect(REASON_DEEPSEEK_R1, NULL, "  <thx</think>ok", "<thx", "ok");
}

/* A stream cut by max_tokens inside the reasoning: the reasoning only. */
static void cut_inside_reasoning(void **state) {
  (void)state;
  expect(REASON_QWEN3, NULL, "<think>\nStill thinking about", "Still thinking about", "");
  expect(REASON_QWEN3, NULL, "<think>abc</thi", "abc</thi", ""); /* a close tag cut in half is reasoning text */
  expect(REASON_DEEPSEEK_R1, NULL, "abc", "abc", "");
  reason_phase_t ph;
  sides_t o = split(REASON_QWEN3, NULL, "<think>abc", 0, &ph);
  assert_int_equal(ph, REASON_THINK);
  assert_int_equal(o.n_answer, 0);
  o = split(REASON_QWEN3, NULL, "<think>abc</think>", 0, &ph);
  assert_int_equal(ph, REASON_ANSWER);
  o = split(REASON_QWEN3, NULL, " \n<thi", 0, &ph);
  assert_int_equal(ph, REASON_START);
  o = split(REASON_QWEN3, "<think>", "", 0, &ph);
  assert_int_equal(ph, REASON_THINK);
}

/* gpt-oss-20b's harmony output (special tokens rendered). */
static void harmony_channels(void **state) {
  (void)state;
  const char *prompt = "<|start|>user<|message|>2+2?<|end|><|start|>assistant";
  expect(REASON_GPT_OSS, prompt,
         "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>final<|message|>"
         "2 + 2 = 4.",
         "User asks 2+2. Answer 4.", "2 + 2 = 4.");
  /* a call (a message with a recipient): no side's text unless calls are read */
  expect(REASON_GPT_OSS, prompt,
         "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
         "Need weather.", "");
  /* not harmony at all: the answer */
  expect(REASON_GPT_OSS, prompt, "Just text <|end|>", "", "Just text <|end|>");
  /* cut inside the analysis */
  expect(REASON_GPT_OSS, prompt, "<|channel|>analysis<|message|>Hmm", "Hmm", "");
}

/* With reason_split_t.calls, harmony's tool calls reach the answer side in
 * one form, wherever the model put the recipient and the content type
 * (the forms of OpenAI's harmony guide and of llama.cpp's gpt-oss grammar). */
static void harmony_calls(void **state) {
  (void)state;
  const char *prompt = "<|start|>user<|message|>Weather?<|end|><|start|>assistant";
  g_calls = true;
  /* recipient in the channel header, cut before <|call|> */
  expect(REASON_GPT_OSS, prompt,
         "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
         "Need weather.",
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}");
  /* recipient in the role header of the output's first message, the type without <|constrain|> */
  expect(REASON_GPT_OSS, prompt, " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}<|call|>", "",
         "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>");
  /* a preamble, then two calls (one to=, in the role header of a later message), no content type */
  expect(REASON_GPT_OSS, prompt,
         "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.a<|message|>{}<|call|><|start|>assistant to=functions.b<|channel|>analysis"
         "<|message|>{\"x\":2}<|call|>",
         "", "Let me check.<|channel|>commentary to=functions.a<|message|>{}<|call|>"
             "<|channel|>analysis to=functions.b<|message|>{\"x\":2}<|call|>");
  /* another recipient (a built-in tool): the same form, the parser decides */
  expect(REASON_GPT_OSS, prompt, "<|channel|>analysis to=browser.search code<|message|>{\"q\":1}<|end|>", "",
         "<|channel|>analysis to=browser.search <|constrain|>code<|message|>{\"q\":1}<|call|>");
  /* a header too long to keep names no recipient: its body is a plain message's */
  char out[512];
  snprintf(out, sizeof out, "<|channel|>commentary %0*d to=functions.f<|message|>body", REASON_MAX_HEAD, 0);
  expect(REASON_GPT_OSS, prompt, out, "", "body");
  g_calls = false;
  expect(REASON_GPT_OSS, prompt, " to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "", "");

  /* stopped at <|call|> (its text not output): the open call ends there */
  for (int calls = 0; calls < 2; calls++) {
    sides_t o;
    memset(&o, 0, sizeof o);
    reason_split_t r;
    reason_split_init(&r, REASON_GPT_OSS, prompt, strlen(prompt));
    r.calls = calls;
    const char *s = "<|channel|>commentary to=functions.f<|message|>{}<|";
    reason_split_feed(&r, s, strlen(s), collect, &o);
    assert_int_equal(reason_split_phase(&r), REASON_CALL);
    reason_split_stopped(&r, collect, &o);
    reason_split_end(&r, collect, &o);
    assert_string_equal(o.answer, calls ? "<|channel|>commentary to=functions.f<|message|>{}<|<|call|>" : "");
  }
  /* stopped inside the final channel, or before any harmony: nothing added */
  sides_t o;
  memset(&o, 0, sizeof o);
  reason_split_t r;
  reason_split_init(&r, REASON_GPT_OSS, prompt, strlen(prompt));
  r.calls = true;
  reason_split_feed(&r, "<|channel|>final<|message|>Hi", 29, collect, &o);
  reason_split_stopped(&r, collect, &o);
  reason_split_end(&r, collect, &o);
  assert_string_equal(o.answer, "Hi");
}

/* What the engine forces when a budget is spent ends the reasoning of its
 * own format, whatever came before. */
static void open_close_texts(void **state) {
  (void)state;
  const reason_fmt_t fs[] = {REASON_DEEPSEEK_R1, REASON_QWEN3, REASON_GPT_OSS};
  for (size_t i = 0; i < 3; i++) {
    char out[512];
    snprintf(out, sizeof out, "%sthe reasoning%sthe answer", reason_open_text(fs[i]), reason_close_text(fs[i]));
    expect(fs[i], NULL, out, fs[i] == REASON_GPT_OSS ? "the reasoning" : "the reasoning\n", "the answer");
  }
  assert_string_equal(reason_close_text(REASON_NONE), "");
  expect(REASON_NONE, "<think>", "<think>a</think>b", "", "<think>a</think>b");
}

static void template_detection(void **state) {
  (void)state;
  assert_int_equal(reason_fmt_of_template(NULL), REASON_NONE);
  assert_int_equal(reason_fmt_of_template("{% for m in messages %}{{ m.content }}{% endfor %}"), REASON_NONE);
  assert_int_equal(reason_fmt_of_template("{{'<|im_start|>assistant\\n<think>\\n'}}{% if enable_thinking %}"),
                   REASON_QWEN3);
  assert_int_equal(reason_fmt_of_template("{{'<｜Assistant｜><think>\\n'}}"), REASON_DEEPSEEK_R1);
  assert_int_equal(reason_fmt_of_template("{{'<|start|>assistant<|channel|>final<|message|>'}}"), REASON_GPT_OSS);
  assert_string_equal(reason_fmt_name(REASON_GPT_OSS), "gpt_oss");
  assert_string_equal(reason_fmt_name(REASON_DEEPSEEK_R1), "deepseek_r1");
}

/* Random outputs built from tag pieces and text, fed in random chunks:
 * the same split as fed whole, the reasoning strictly before the answer,
 * and every byte accounted for (nothing but tags and the whitespace right
 * after them dropped). */
static void random_chunks(void **state) {
  (void)state;
  static const char *const parts[] = {"<think>", "</think>", "<", "</", "<th", "</thi", "x", "yz", " ", "\n",
                                      "<|channel|>", "analysis", "final", "<|message|>", "<|end|>", "<|start|>",
                                      "assistant", "<|", "|>", "é"};
  uint64_t seed = 12345;
  for (int it = 0; it < 3000; it++) {
    char out[600] = "";
    size_t n = 0;
    for (int k = 0; k < 24; k++) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      const char *p = parts[(seed >> 33) % (sizeof parts / sizeof parts[0])];
      memcpy(out + n, p, strlen(p) + 1);
      n += strlen(p);
    }
    const reason_fmt_t f = (reason_fmt_t)(1 + it % 3);
    const char *prompt = it % 5 == 0 ? "<think>\n" : it % 5 == 1 ? "</think>" : "";
    const sides_t whole = split(f, prompt, out, 0, NULL);
    assert_true(whole.switches <= (f == REASON_GPT_OSS ? 24 : 1));
    if (f != REASON_GPT_OSS) assert_true(whole.n_think + whole.n_answer <= n);
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const size_t chunk = 1 + (seed >> 40) % 9;
    const sides_t parts_fed = split(f, prompt, out, chunk, NULL);
    assert_string_equal(whole.think, parts_fed.think);
    assert_string_equal(whole.answer, parts_fed.answer);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(qwen3_tags_in_output), cmocka_unit_test(tags_in_prompt),
      cmocka_unit_test(deepseek_r1_no_open),  cmocka_unit_test(cut_inside_reasoning),
      cmocka_unit_test(harmony_channels),     cmocka_unit_test(harmony_calls),     cmocka_unit_test(open_close_texts),
      cmocka_unit_test(template_detection),   cmocka_unit_test(random_chunks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
