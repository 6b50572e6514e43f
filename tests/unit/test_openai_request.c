/* tests/unit/test_openai_request.c — OpenAI request validation, field by
 * field: a table of bodies for completions, chat, tokenize and detokenize,
 * each accepted or refused with the exact field and code named in the error
 * (and in its message); the shared reader of `tram generate` agreeing with
 * completions on every one. The values that reach the request struct:
 * test_openai_request_values.c; memory running out:
 * test_openai_request_oom.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/oai_request_testutil.h"

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
    /* thinking models */
    {CHAT, "{" M ",\"chat_template_kwargs\":{\"enable_thinking\":false,\"x\":[1,{\"y\":null}]}}", NULL, NULL},
    {CHAT, "{" M ",\"chat_template_kwargs\":{}}", NULL, NULL},
    {CHAT, "{" M ",\"chat_template_kwargs\":null}", NULL, NULL},
    {CHAT, "{" M ",\"chat_template_kwargs\":\"enable_thinking\"}", "chat_template_kwargs", "invalid_type"},
    {CHAT, "{" M ",\"chat_template_kwargs\":{\"bos_token\":\"x\"}}", "chat_template_kwargs", "invalid_value"},
    {CHAT, "{" M ",\"chat_template_kwargs\":{\"a\":[[[[[[[[1]]]]]]]]}}", "chat_template_kwargs", "invalid_value"},
    {CHAT, "{" M ",\"chat_template_kwargs\":{\"a\":[[[[[[[1]]]]]]]}}", NULL, NULL},
    {CHAT, "{" M ",\"reasoning_effort\":\"high\"}", NULL, NULL},
    {CHAT, "{" M ",\"reasoning_effort\":\"extreme\"}", "reasoning_effort", "invalid_value"},
    {CHAT, "{" M ",\"reasoning_effort\":3}", "reasoning_effort", "invalid_type"},
    {CHAT, "{" M ",\"thinking_token_budget\":0}", NULL, NULL},
    {CHAT, "{" M ",\"thinking_token_budget\":-1}", "thinking_token_budget", "invalid_value"},
    {CHAT, "{" M ",\"thinking_token_budget\":1.5}", "thinking_token_budget", NULL},
    {TOKENIZE, "{" M ",\"chat_template_kwargs\":[1]}", "chat_template_kwargs", "invalid_type"},
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(field_table),
      cmocka_unit_test(gen_fields_agree_with_completions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
