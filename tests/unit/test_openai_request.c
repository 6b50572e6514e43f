/* tests/unit/test_openai_request.c — OpenAI request validation: every field's
 * accepted and refused values, with the exact field named in the error, and
 * the values that reach the request struct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/oai_request.h"
#include "api/oai_responses.h"
#include "grammar/gram.h"
#include "tests/unit/gram_testutil.h"

enum { COMPL, CHAT, TOKENIZE, DETOKENIZE };

/* Parses body for endpoint `ep` under lim (NULL: defaults). */
static int parse(int ep, const char *body, const oai_limits_t *lim, arena_t *a, void *out,
                 oai_error_t *err) {
  size_t n = strlen(body);
  switch (ep) {
  case COMPL: return oai_parse_completion(body, n, lim, a, out, err);
  case CHAT: return oai_parse_chat(body, n, lim, a, out, err);
  case TOKENIZE: return oai_parse_tokenize(body, n, lim, a, out, err);
  default: return oai_parse_detokenize(body, n, lim, a, out, err);
  }
}

typedef union {
  oai_completion_req_t c;
  oai_chat_req_t h;
  oai_tokenize_req_t t;
  oai_detokenize_req_t d;
} any_req_t;

typedef struct {
  int ep;
  const char *body;
  const char *param; /* NULL: must parse; else the field the error names ("" = none) */
  const char *code;  /* NULL: any */
} case_t;

#define P "\"prompt\":\"hi\""
#define M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define N64 "a123456789b123456789c123456789d123456789e123456789f123456789_-AZ" /* 64 characters */

static const case_t cases[] = {
    /* the body itself */
    {COMPL, "", "", "invalid_json"},
    {COMPL, "   ", "", "invalid_json"},
    {COMPL, "{", "", "invalid_json"},
    {COMPL, "{\"prompt\":\"a\",}", "", "invalid_json"},
    {COMPL, "[1,2]", "", "invalid_type"},
    {COMPL, "\"prompt\"", "", "invalid_type"},
    {COMPL, "{" P "} x", "", "invalid_json"},
    {COMPL, "{" P "}\n", NULL, NULL},
    {COMPL, "{" P ",\"unknown_field\":{\"x\":[1]},\"user\":\"u1\"}", NULL, NULL},
    /* prompt */
    {COMPL, "{}", "prompt", "missing_required_parameter"},
    {COMPL, "{\"prompt\":null}", "prompt", "missing_required_parameter"},
    {COMPL, "{\"prompt\":\"\"}", "prompt", "invalid_value"},
    {COMPL, "{\"prompt\":[]}", "prompt", "invalid_value"},
    {COMPL, "{\"prompt\":5}", "prompt", "invalid_type"},
    {COMPL, "{\"prompt\":{\"a\":1}}", "prompt", "invalid_type"},
    {COMPL, "{\"prompt\":[\"a\",\"b\"]}", NULL, NULL},
    {COMPL, "{\"prompt\":[\"a\",3]}", "prompt[1]", "invalid_type"},
    {COMPL, "{\"prompt\":[\"a\",\"\"]}", "prompt[1]", "invalid_value"},
    {COMPL, "{\"prompt\":[1,2,3]}", NULL, NULL},
    {COMPL, "{\"prompt\":[1,-2,3]}", "prompt[1]", "invalid_value"},
    {COMPL, "{\"prompt\":[1,2.5]}", "prompt[1]", "invalid_value"},
    {COMPL, "{\"prompt\":[1,\"x\"]}", "prompt[1]", "invalid_type"},
    {COMPL, "{\"prompt\":[1,49152]}", "prompt[1]", "invalid_value"}, /* vocab 49152 */
    {COMPL, "{\"prompt\":[[1,2],[3]]}", NULL, NULL},
    {COMPL, "{\"prompt\":[[1,2],[]]}", "prompt[1]", "invalid_value"},
    {COMPL, "{\"prompt\":[[1,2],[3,\"a\"]]}", "prompt[1][1]", "invalid_type"},
    {COMPL, "{\"prompt\":[[1,2],5]}", "prompt[1]", "invalid_type"},
    /* model */
    {COMPL, "{" P ",\"model\":\"m\"}", NULL, NULL},
    {COMPL, "{" P ",\"model\":7}", "model", "invalid_type"},
    /* sampling */
    {COMPL, "{" P ",\"temperature\":0}", NULL, NULL},
    {COMPL, "{" P ",\"temperature\":2}", NULL, NULL},
    {COMPL, "{" P ",\"temperature\":2.01}", "temperature", "invalid_value"},
    {COMPL, "{" P ",\"temperature\":-0.1}", "temperature", "invalid_value"},
    {COMPL, "{" P ",\"temperature\":\"0.5\"}", "temperature", "invalid_type"},
    {COMPL, "{" P ",\"temperature\":1e999}", "temperature", "invalid_value"},
    {COMPL, "{" P ",\"temperature\":null}", NULL, NULL},
    {COMPL, "{" P ",\"top_p\":1}", NULL, NULL},
    {COMPL, "{" P ",\"top_p\":0}", "top_p", "invalid_value"},
    {COMPL, "{" P ",\"top_p\":1.5}", "top_p", "invalid_value"},
    {COMPL, "{" P ",\"top_p\":true}", "top_p", "invalid_type"},
    {COMPL, "{" P ",\"top_k\":-1}", NULL, NULL},
    {COMPL, "{" P ",\"top_k\":40}", NULL, NULL},
    {COMPL, "{" P ",\"top_k\":-2}", "top_k", "invalid_value"},
    {COMPL, "{" P ",\"top_k\":4.5}", "top_k", "invalid_type"},
    {COMPL, "{" P ",\"min_p\":0.05}", NULL, NULL},
    {COMPL, "{" P ",\"min_p\":1.01}", "min_p", "invalid_value"},
    {COMPL, "{" P ",\"seed\":-5}", NULL, NULL},
    {COMPL, "{" P ",\"seed\":1.5}", "seed", "invalid_type"},
    {COMPL, "{" P ",\"seed\":1e300}", "seed", "invalid_value"},
    {COMPL, "{" P ",\"seed\":\"42\"}", "seed", "invalid_type"},
    {COMPL, "{" P ",\"seed\":18446744073709551616}", "seed", "invalid_value"}, /* 2^64 */
    {COMPL, "{" P ",\"seed\":-9223372036854775809}", "seed", "invalid_value"}, /* -2^63 - 1 */
    {COMPL, "{" P ",\"seed\":1e20}", "seed", "invalid_value"},
    {COMPL, "{" P ",\"presence_penalty\":-2}", NULL, NULL},
    {COMPL, "{" P ",\"presence_penalty\":2.5}", "presence_penalty", "invalid_value"},
    {COMPL, "{" P ",\"frequency_penalty\":-2.5}", "frequency_penalty", "invalid_value"},
    {COMPL, "{" P ",\"repetition_penalty\":1.1}", NULL, NULL},
    {COMPL, "{" P ",\"repetition_penalty\":0}", "repetition_penalty", "invalid_value"},
    {COMPL, "{" P ",\"repetition_penalty\":11}", "repetition_penalty", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":{\"5\":-100,\"7\":100,\"9\":0.5}}", NULL, NULL},
    {COMPL, "{" P ",\"logit_bias\":{}}", NULL, NULL},
    {COMPL, "{" P ",\"logit_bias\":{\"5\":101}}", "logit_bias.5", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":{\"5\":\"1\"}}", "logit_bias.5", "invalid_type"},
    {COMPL, "{" P ",\"logit_bias\":{\"x5\":1}}", "logit_bias.x5", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":{\"-5\":1}}", "logit_bias.-5", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":{\"\":1}}", "logit_bias.", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":{\"99999999999\":1}}", "logit_bias.99999999999", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":{\"49152\":1}}", "logit_bias.49152", "invalid_value"},
    {COMPL, "{" P ",\"logit_bias\":[1]}", "logit_bias", "invalid_type"},
    /* limits and counts */
    {COMPL, "{" P ",\"max_tokens\":1}", NULL, NULL},
    {COMPL, "{" P ",\"max_tokens\":0}", "max_tokens", "invalid_value"},
    {COMPL, "{" P ",\"max_tokens\":-1}", "max_tokens", "invalid_value"},
    {COMPL, "{" P ",\"max_tokens\":3000000000}", "max_tokens", "invalid_value"},
    {COMPL, "{" P ",\"max_tokens\":\"10\"}", "max_tokens", "invalid_type"},
    {COMPL, "{" P ",\"n\":16}", NULL, NULL},
    {COMPL, "{" P ",\"n\":17}", "n", "invalid_value"},
    {COMPL, "{" P ",\"n\":0}", "n", "invalid_value"},
    {COMPL, "{" P ",\"n\":2,\"best_of\":2}", NULL, NULL},
    {COMPL, "{" P ",\"n\":2,\"best_of\":3}", "best_of", "unsupported_parameter"},
    /* stop conditions */
    {COMPL, "{" P ",\"stop\":\"\\n\"}", NULL, NULL},
    {COMPL, "{" P ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", NULL, NULL},
    {COMPL, "{" P ",\"stop\":[]}", NULL, NULL},
    {COMPL, "{" P ",\"stop\":\"\"}", "stop", "invalid_value"},
    {COMPL, "{" P ",\"stop\":[\"a\",\"\"]}", "stop[1]", "invalid_value"},
    {COMPL, "{" P ",\"stop\":[\"a\",1]}", "stop[1]", "invalid_type"},
    {COMPL, "{" P ",\"stop\":5}", "stop", "invalid_type"},
    {COMPL, "{" P ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\","
            "\"15\",\"16\",\"17\"]}", "stop", "invalid_value"},
    {COMPL, "{" P ",\"stop_token_ids\":[2,0]}", NULL, NULL},
    {COMPL, "{" P ",\"stop_token_ids\":[]}", NULL, NULL},
    {COMPL, "{" P ",\"stop_token_ids\":[2,-1]}", "stop_token_ids[1]", "invalid_value"},
    {COMPL, "{" P ",\"stop_token_ids\":7}", "stop_token_ids", "invalid_type"},
    {COMPL, "{" P ",\"ignore_eos\":true}", NULL, NULL},
    {COMPL, "{" P ",\"ignore_eos\":1}", "ignore_eos", "invalid_type"},
    /* output */
    {COMPL, "{" P ",\"logprobs\":0}", NULL, NULL},
    {COMPL, "{" P ",\"logprobs\":20}", NULL, NULL},
    {COMPL, "{" P ",\"logprobs\":21}", "logprobs", "invalid_value"},
    {COMPL, "{" P ",\"logprobs\":true}", "logprobs", "invalid_type"},
    {COMPL, "{" P ",\"echo\":true}", NULL, NULL},
    {COMPL, "{" P ",\"echo\":\"yes\"}", "echo", "invalid_type"},
    {COMPL, "{" P ",\"stream\":true}", NULL, NULL},
    {COMPL, "{" P ",\"stream\":\"true\"}", "stream", "invalid_type"},
    {COMPL, "{" P ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}", NULL, NULL},
    {COMPL, "{" P ",\"stream_options\":{\"include_usage\":true}}", "stream_options", "invalid_value"},
    {COMPL, "{" P ",\"stream\":true,\"stream_options\":[]}", "stream_options", "invalid_type"},
    {COMPL, "{" P ",\"stream\":true,\"stream_options\":{\"include_usage\":1}}", "stream_options.include_usage",
     "invalid_type"},
    {COMPL, "{" P ",\"suffix\":\"end\"}", "suffix", "unsupported_parameter"},
    {COMPL, "{" P ",\"suffix\":\"\"}", NULL, NULL},
    /* chat: messages */
    {CHAT, "{" M "}", NULL, NULL},
    {CHAT, "{}", "messages", "missing_required_parameter"},
    {CHAT, "{\"messages\":[]}", "messages", "invalid_value"},
    {CHAT, "{\"messages\":{}}", "messages", "invalid_type"},
    {CHAT, "{\"messages\":[\"hi\"]}", "messages[0]", "invalid_type"},
    {CHAT, "{\"messages\":[{\"content\":\"hi\"}]}", "messages[0].role", "missing_required_parameter"},
    {CHAT, "{\"messages\":[{\"role\":5,\"content\":\"hi\"}]}", "messages[0].role", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"hi\"}]}", "messages[0].role", "invalid_value"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"tool\",\"content\":\"x\"}]}", NULL,
     NULL},
    {CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content", "missing_required_parameter"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null}]}", NULL,
     NULL},
    {CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"x\"}]}]}",
     "messages[0].tool_calls[0]", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]}", NULL, NULL},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}",
     "messages[0].content[0].type", "unsupported_value"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"text\":\"b\"}]}]}",
     "messages[0].content[1].type", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":3}]}]}",
     "messages[0].content[0].text", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[\"a\"]}]}", "messages[0].content[0]", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"name\":1}]}", "messages[0].name", "invalid_type"},
    /* chat: options */
    {CHAT, "{" M ",\"max_tokens\":5,\"max_completion_tokens\":7}", NULL, NULL},
    {CHAT, "{" M ",\"max_completion_tokens\":0}", "max_completion_tokens", "invalid_value"},
    {CHAT, "{" M ",\"logprobs\":true,\"top_logprobs\":20}", NULL, NULL},
    {CHAT, "{" M ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs", "invalid_value"},
    {CHAT, "{" M ",\"top_logprobs\":2}", "top_logprobs", "invalid_value"},
    {CHAT, "{" M ",\"logprobs\":false,\"top_logprobs\":2}", "top_logprobs", "invalid_value"},
    {CHAT, "{" M ",\"logprobs\":3}", "logprobs", "invalid_type"},
    {CHAT, "{" M ",\"temperature\":3}", "temperature", "invalid_value"},
    {CHAT, "{" M ",\"stop\":[\"x\"],\"seed\":1,\"n\":3,\"stream\":true}", NULL, NULL},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\"}]}", "tools[0].function", "invalid_type"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]}", NULL, NULL},
    /* function names as OpenAI takes them: ^[a-zA-Z0-9_-]{1,64}$, unique among the tools */
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}", "tools[0].function.name",
     "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{}}]}", "tools[0].function.name",
     "missing_required_parameter"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":7}}]}", "tools[0].function.name",
     "invalid_type"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"<|im_end|>\"}}]}",
     "tools[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"<tool_call>\"}}]}",
     "tools[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\\\"\\n}\"}}]}",
     "tools[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f g\"}}]}",
     "tools[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"caf\u00e9\"}}]}",
     "tools[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"" N64 "\"}}]}", NULL, NULL},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"" N64 "x\"}}]}",
     "tools[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"Get_weather-2\"}},"
     "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]}", NULL, NULL},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
     "{\"type\":\"function\",\"function\":{\"name\":\"g\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
     "tools[2].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":"
     "{\"type\":\"function\",\"function\":{\"name\":\"f.g\"}}}", "tool_choice.function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":"
     "{\"type\":\"function\",\"function\":{}}}", "tool_choice.function.name", "missing_required_parameter"},
    {CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"x\",\"type\":"
     "\"function\",\"function\":{\"name\":\"f<|im_end|>\",\"arguments\":\"{}\"}}]}]}",
     "messages[0].tool_calls[0].function.name", "invalid_value"},
    {CHAT, "{" M ",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]", "unsupported_value"},
    {CHAT, "{" M ",\"tools\":{}}", "tools", "invalid_type"},
    {CHAT, "{" M ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}", "tool_choice.function.name",
     "invalid_value"}, /* no such tool */
    {CHAT, "{" M ",\"tool_choice\":\"sometimes\"}", "tool_choice", "invalid_value"},
    {CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"x\",\"type\":"
     "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
     "\"x\",\"content\":\"42\"}]}", NULL, NULL},
    {CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":"
     "\"f\",\"arguments\":{}}}]}]}", "messages[0].tool_calls[0].function", "invalid_type"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}]}",
     "messages[0].tool_calls", "invalid_value"},
    {CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_call_id\":\"x\"}]}",
     "messages[0].tool_call_id", "invalid_value"},
    {CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"a\"}]}", "messages[0].role", "unsupported_value"},
    {CHAT, "{" M ",\"tools\":[]}", NULL, NULL},
    {CHAT, "{" M ",\"tool_choice\":\"none\"}", NULL, NULL},
    {CHAT, "{" M ",\"tool_choice\":\"required\"}", "tool_choice", "invalid_value"}, /* without tools */
    {CHAT, "{" M ",\"response_format\":{\"type\":\"text\"}}", NULL, NULL},
    {CHAT, "{" M ",\"response_format\":{\"type\":\"json_object\"}}", NULL, NULL},
    {CHAT, "{" M ",\"response_format\":{\"type\":\"yaml\"}}", "response_format.type", "invalid_value"},
    {CHAT, "{" M ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}}",
     "response_format.json_schema.schema", "missing_required_parameter"},
    {COMPL, "{" P ",\"response_format\":{\"type\":\"json_object\"}}", NULL, NULL},
    {CHAT, "{" M ",\"add_generation_prompt\":\"no\"}", "add_generation_prompt", "invalid_type"},
    {CHAT, "{" M ",\"echo\":true}", "echo", "unsupported_parameter"},
    {CHAT, "{" M ",\"echo\":false}", NULL, NULL},
    /* vLLM's extensions: taken, or refused by name when they ask for something (oai_extras.c) */
    {COMPL, "{" P ",\"min_tokens\":3,\"max_tokens\":3}", NULL, NULL},
    {COMPL, "{" P ",\"min_tokens\":4,\"max_tokens\":3}", "min_tokens", "invalid_value"},
    {COMPL, "{" P ",\"min_tokens\":-1}", "min_tokens", "invalid_value"},
    {COMPL, "{" P ",\"truncate_prompt_tokens\":0}", "truncate_prompt_tokens", "invalid_value"},
    {COMPL, "{" P ",\"include_stop_str_in_output\":1}", "include_stop_str_in_output", "invalid_type"},
    {COMPL, "{" P ",\"skip_special_tokens\":\"no\"}", "skip_special_tokens", "invalid_type"},
    {COMPL, "{" P ",\"use_beam_search\":false,\"length_penalty\":1,\"priority\":0}", NULL, NULL},
    {COMPL, "{" P ",\"use_beam_search\":true}", "use_beam_search", "unsupported_parameter"},
    {COMPL, "{" P ",\"length_penalty\":0.5}", "length_penalty", "unsupported_parameter"},
    {COMPL, "{" P ",\"prompt_logprobs\":0}", NULL, NULL},
    {COMPL, "{" P ",\"prompt_logprobs\":21}", "prompt_logprobs", "invalid_value"},
    {COMPL, "{" P ",\"prompt_logprobs\":-1}", "prompt_logprobs", "invalid_value"},
    {COMPL, "{" P ",\"prompt_logprobs\":1,\"stream\":true}", "prompt_logprobs", "unsupported_parameter"},
    {COMPL, "{" P ",\"echo\":true,\"logprobs\":0,\"stream\":true}", "echo", "unsupported_parameter"},
    {COMPL, "{" P ",\"echo\":true,\"logprobs\":0,\"max_tokens\":0}", NULL, NULL},
    {COMPL, "{" P ",\"max_tokens\":0}", "max_tokens", "invalid_value"},
    {CHAT, "{" M ",\"max_tokens\":0}", "max_tokens", "invalid_value"},
    {COMPL, "{" P ",\"return_tokens_as_token_ids\":true}", "return_tokens_as_token_ids", "unsupported_parameter"},
    {COMPL, "{" P ",\"return_token_ids\":true}", NULL, NULL},
    {COMPL, "{" P ",\"return_token_ids\":\"yes\"}", "return_token_ids", "invalid_type"},
    {COMPL, "{" P ",\"guided_json\":{}}", NULL, NULL},
    {COMPL, "{" P ",\"guided_choice\":[\"a\"]}", NULL, NULL},
    {COMPL, "{" P ",\"guided_choice\":[]}", "guided_choice", "invalid_value"},
    {COMPL, "{" P ",\"guided_choice\":[\"a\"],\"guided_regex\":\"a\"}", "guided_choice", "invalid_value"},
    {COMPL, "{" P ",\"structured_outputs\":{\"regex\":1}}", "structured_outputs.regex", "invalid_type"},
    {COMPL, "{" P ",\"structured_outputs\":{\"backend\":\"x\"}}", "structured_outputs.backend",
     "unsupported_parameter"},
    {COMPL, "{" P ",\"spaces_between_special_tokens\":false}", "spaces_between_special_tokens",
     "unsupported_parameter"},
    {COMPL, "{" P ",\"stream\":true,\"stream_options\":{\"continuous_usage_stats\":true}}",
     "stream_options.continuous_usage_stats", "invalid_value"},
    {COMPL, "{" P ",\"stream\":true,\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":3}}",
     "stream_options.continuous_usage_stats", "invalid_type"},
    {CHAT, "{" M ",\"continue_final_message\":true}", "continue_final_message", "invalid_value"},
    {CHAT, "{" M ",\"continue_final_message\":true,\"add_generation_prompt\":false}", NULL, NULL},
    {CHAT, "{" M ",\"parallel_tool_calls\":false}", NULL, NULL},
    {CHAT, "{" M ",\"parallel_tool_calls\":1}", "parallel_tool_calls", "invalid_type"},
    {CHAT, "{" M ",\"chat_template\":\"{{x}}\"}", "chat_template", "unsupported_parameter"},
    {CHAT, "{" M ",\"modalities\":[\"text\"],\"service_tier\":\"auto\",\"store\":false}", NULL, NULL},
    {CHAT, "{" M ",\"modalities\":[\"audio\"]}", "modalities", "unsupported_parameter"},
    {CHAT, "{" M ",\"service_tier\":\"flex\"}", "service_tier", "unsupported_parameter"},
    {CHAT, "{" M ",\"store\":true}", "store", "unsupported_parameter"},
    {TOKENIZE, "{\"prompt\":\"a\",\"return_token_strs\":\"y\"}", "return_token_strs", "invalid_type"},
    {TOKENIZE, "{\"prompt\":\"a\",\"continue_final_message\":true,\"add_generation_prompt\":false}",
     "continue_final_message", "invalid_value"},
    /* tokenize / detokenize */
    {TOKENIZE, "{\"prompt\":\"hello\"}", NULL, NULL},
    {TOKENIZE, "{" M "}", NULL, NULL},
    {TOKENIZE, "{}", "prompt", "missing_required_parameter"},
    {TOKENIZE, "{\"prompt\":\"a\"," M "}", "prompt", "invalid_value"},
    {TOKENIZE, "{\"prompt\":[1]}", "prompt", "invalid_type"},
    {TOKENIZE, "{\"prompt\":\"a\",\"add_special_tokens\":0}", "add_special_tokens", "invalid_type"},
    {DETOKENIZE, "{\"tokens\":[1,2]}", NULL, NULL},
    {DETOKENIZE, "{\"tokens\":[]}", NULL, NULL},
    {DETOKENIZE, "{}", "tokens", "missing_required_parameter"},
    {DETOKENIZE, "{\"tokens\":\"abc\"}", "tokens", "invalid_type"},
    {DETOKENIZE, "{\"tokens\":[1,-1]}", "tokens[1]", "invalid_value"},
};

/* Every case: success or the named field and code, a message that names it. */
static void field_table(void **state) {
  oai_limits_t lim = oai_limits_default();
  lim.vocab_size = 49152;
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const case_t *t = &cases[i];
    arena_t a;
    arena_init(&a, 0, 0);
    any_req_t out;
    oai_error_t err;
    int r = parse(t->ep, t->body, &lim, &a, &out, &err);
    bool ok;
    if (!t->param) {
      ok = r == 0;
    } else {
      ok = r == -EINVAL && err.status == 400 && strcmp(err.param, t->param) == 0 &&
           strcmp(err.type, "invalid_request_error") == 0 && (!t->code || (err.code && strcmp(err.code, t->code) == 0)) &&
           err.message[0] && (!t->param[0] || strstr(err.message, t->param) || strstr(err.message, "logit_bias"));
    }
    if (!ok) {
      fprintf(stderr, "case %zu: %s\n  want %s%s%s, got r=%d param=\"%s\" code=%s message=\"%s\"\n", i, t->body,
              t->param ? "error on \"" : "success", t->param ? t->param : "", t->param ? "\"" : "", r,
              r ? err.param : "", r && err.code ? err.code : "-", r ? err.message : "");
      failed++;
    }
    arena_free(&a);
  }
  assert_int_equal(failed, 0);
}

/* Whether param names a field of the table both readers share
 * (oai_parse_gen_fields): "stop", "stop[1]", "temperature", ... */
static bool shared_field(const char *param) {
  static const char *const names[] = {"temperature", "top_p", "top_k", "min_p", "presence_penalty",
                                      "frequency_penalty", "repetition_penalty", "seed", "max_tokens", "n",
                                      "stop", "stop_token_ids", "ignore_eos"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const size_t n = strlen(names[i]);
    if (strncmp(param, names[i], n) == 0 && (param[n] == '\0' || param[n] == '[')) return true;
  }
  return false;
}

/* `tram generate`'s reader of the shared fields and the completions parser
 * read them from one table: for every completions case of the table above,
 * where the completions parser fails on the body or on a shared field, the
 * shared reader fails with the same field, code and message; where it
 * succeeds, the shared reader gives the same values. */
static void gen_fields_agree_with_completions(void **state) {
  (void)state;
  oai_limits_t lim = oai_limits_default();
  lim.vocab_size = 49152;
  int compared = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (cases[i].ep != COMPL) continue;
    const char *body = cases[i].body;
    arena_t a, b;
    arena_init(&a, 0, 0);
    arena_init(&b, 0, 0);
    oai_completion_req_t want;
    oai_error_t want_err, got_err;
    const int wr = oai_parse_completion(body, strlen(body), &lim, &a, &want, &want_err);
    oai_params_t got = {.samp = oai_samp_defaults(), .max_tokens = 16, .n = 1};
    cJSON *root;
    const int gr = oai_parse_gen_fields(body, strlen(body), &lim, &b, &got, &root, &got_err);
    if (wr != 0 && (!want_err.param[0] || shared_field(want_err.param)) &&
        !strstr(want_err.message, "only with echo")) { /* the completions-only rule on max_tokens 0 */
      if (gr == 0) fail_msg("case %zu: %s: the shared reader accepts what completions refuses: %s", i, body,
                            want_err.message);
      assert_string_equal(got_err.param, want_err.param);
      assert_string_equal(got_err.code, want_err.code);
      assert_string_equal(got_err.message, want_err.message);
      compared++;
    } else if (wr == 0) {
      if (gr != 0) fail_msg("case %zu: %s: %s", i, body, got_err.message);
      const oai_params_t *w = &want.params;
      assert_memory_equal(&got.samp.temperature, &w->samp.temperature, offsetof(samp_params_t, logit_bias) -
                                                                            offsetof(samp_params_t, temperature));
      assert_int_equal(got.max_tokens, w->max_tokens);
      assert_int_equal(got.n, w->n);
      assert_int_equal(got.ignore_eos, w->ignore_eos);
      assert_int_equal(got.n_stop, w->n_stop);
      for (int32_t k = 0; k < w->n_stop; k++) assert_string_equal(got.stop[k], w->stop[k]);
      assert_int_equal(got.n_stop_token_ids, w->n_stop_token_ids);
      if (w->n_stop_token_ids)
        assert_memory_equal(got.stop_token_ids, w->stop_token_ids, (size_t)w->n_stop_token_ids * sizeof(int32_t));
      cJSON_Delete(root);
      compared++;
    } else if (gr == 0) {
      cJSON_Delete(root);
    }
    arena_free(&a);
    arena_free(&b);
  }
  assert_true(compared > 40);
}

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
      cmocka_unit_test(field_table),
      cmocka_unit_test(gen_fields_agree_with_completions),
      cmocka_unit_test(completion_values),
      cmocka_unit_test(chat_values),
      cmocka_unit_test(tokenize_values),
      cmocka_unit_test(caps),
      cmocka_unit_test(seeds_and_numbers),
      cmocka_unit_test(responses),
      cmocka_unit_test(required_tools_keep_defs),
      cmocka_unit_test(out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
