/* api/oai_responses.h — OpenAI's Responses API (POST /v1/responses),
 * stateless: the request read into a chat request (instructions, then the
 * input's messages) plus what the response echoes, and the JSON of the
 * response object and of its stream events.
 *
 * Accepted: `model`, `input` (a string, or message items {"role", "content"}
 * with "type": "message" or none, content a string or input_text /
 * output_text parts), `instructions`, `max_output_tokens`, `temperature`,
 * `top_p`, `stream`, `store` false, `text.format` (text, json_object,
 * json_schema: structured output, api/oai_structured.c),
 * `truncation` "disabled", `parallel_tool_calls`, function `tools` and
 * `tool_choice` (oai_responses_tools.c), input items `function_call` and
 * `function_call_output`, `user`, empty `metadata`, `include`
 * ["message.output_text.logprobs"] with `top_logprobs` (0..20). Anything
 * else the API defines (other tools, previous_response_id, reasoning, other
 * include values,
 * background, other item types, ...) is refused (400) naming it. */
#ifndef TRAM_OAI_RESPONSES_H
#define TRAM_OAI_RESPONSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/oai_request.h"
#include "api/oai_response.h"
#include "api/oai_tool_parse.h"

typedef struct oai_responses_req {
  oai_chat_req_t chat;      /* messages and parameters (n 1) */
  const char *instructions; /* NULL when absent */
  int32_t max_output_tokens; /* -1: none given */
} oai_responses_req_t;

int oai_parse_responses(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                        oai_responses_req_t *out, oai_error_t *err);

/* What a response object says besides its output. */
typedef struct oai_resp_info {
  const char *id;      /* "resp_..." */
  const char *item_id; /* "msg_..." */
  const char *model;
  int64_t created_at;
  const char *status;  /* "in_progress", "completed", "incomplete", "failed" */
  const char *incomplete_reason; /* "max_output_tokens", or NULL */
  const char *instructions;
  int32_t max_output_tokens;     /* -1: null */
  float temperature, top_p;
  const char *format;            /* text.format.type: "text" (NULL too), "json_object", "json_schema" */
  const char *text;              /* the output message's text, or NULL: no message item (not yet, or
                                  * only function calls) */
  size_t text_len;
  const oai_tool_call_t *calls;  /* [n_calls] function_call items after the message (ids set) */
  int32_t n_calls;
  bool has_usage;
  int32_t input_tokens, output_tokens, cached_tokens;
  const oai_token_logprob_t *lp; /* [n_lp] the text's logprobs (include message.output_text.logprobs), or NULL */
  int32_t n_lp;
  const oai_token_logprob_t *delta_lp; /* [n_delta_lp] an output_text.delta's, or NULL */
  int32_t n_delta_lp;
} oai_resp_info_t;

/* The response object. */
char *oai_write_response(const oai_resp_info_t *r);

/* A stream event {"type": type, "sequence_number": seq, ...}:
 *   response.created, response.in_progress, response.completed,
 *   response.incomplete: with "response" (r);
 *   response.output_item.added/done: "output_index", "item" (the message,
 *     its text r->text, "" when added);
 *   response.content_part.added/done: "item_id", "output_index",
 *     "content_index", "part";
 *   response.output_text.delta: "delta" (text[len]);
 *   response.output_text.done: "text" (r->text). */
char *oai_write_response_event(const char *type, int64_t seq, const oai_resp_info_t *r, const char *text,
                               size_t len);

/* oai_responses_tools.c: an event of function call k (output_index after
 * the message, if any): response.output_item.added/done ("item": the
 * function_call, its arguments "" until done),
 * response.function_call_arguments.delta ("delta": all of them) and .done
 * ("arguments"). */
char *oai_write_response_call_event(const char *type, int64_t seq, const oai_resp_info_t *r, int32_t k);

#endif
