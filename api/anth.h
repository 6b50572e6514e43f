/* api/anth.h — Anthropic's Messages API (POST /v1/messages and
 * /v1/messages/count_tokens, anthropic-version 2023-06-01): the request
 * read into a chat request (anth_request.c), and the JSON of the message
 * object, its stream events and Anthropic's error object (anth_write.c).
 * Pure functions, as the OpenAI parsers and writers beside them; the
 * server drives them (server/srv_messages.c).
 *
 * The request, as Anthropic documents it (docs/api.md lists the details):
 *   model; max_tokens (required, >= 1); messages (1 .. limits.max_messages,
 *   role "user", "assistant" or "system", content a string or blocks: text,
 *   tool_use (assistant), tool_result (user; its content a string or text
 *   blocks; is_error true marks it "Error: ..."), consecutive same-role turns
 *   joined into one, as Anthropic does; a last assistant message is a
 *   prefill the output continues); system (a string or text blocks); tools
 *   (custom tools {name, description, input_schema}); tool_choice ({type:
 *   auto | any | tool (name) | none}, disable_parallel_tool_use);
 *   stop_sequences; stream; temperature 0..1, top_p (0, 1], top_k >= 0 (0:
 *   off); metadata {user_id}; thinking {type: "disabled"}; service_tier;
 *   cache_control wherever Anthropic allows it (tram's prefix cache reuses
 *   any repeated prefix by itself: the hint asks nothing more).
 * Refused with a 400 naming the field: any other field, other block types
 * (images, documents, thinking...), server tools, thinking enabled or
 * adaptive (not yet: the reasoning split is another change; see
 * srv_messages.c for where thinking blocks will be written). Errors are
 * oai_error_t (status, param, message), written as Anthropic's object by
 * anth_error_body. */
#ifndef TRAM_ANTH_H
#define TRAM_ANTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/oai_request.h"
#include "scheduler/sched.h"

typedef struct anth_req {
  oai_chat_req_t chat;     /* messages (system first), tools in the OpenAI form (for the template and
                            * the tool-call grammar), tool_choice, params (n 1) */
  const char *user_id;     /* metadata.user_id, or NULL (logged by nobody: accepted as Anthropic's) */
  bool thinking;           /* thinking enabled or adaptive: a thinking model's reasoning comes back as
                            * thinking blocks; else the template is asked not to think
                            * (enable_thinking false) and any reasoning is left out */
} anth_req_t;

/* POST /v1/messages: body[0..len) into *out (in arena), as oai_parse_chat.
 * Returns 0, or -EINVAL (-ENOMEM) with *err filled. */
int anth_parse_messages(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena, anth_req_t *out,
                        oai_error_t *err);
/* POST /v1/messages/count_tokens: the same fields but those of the
 * generation (max_tokens, stop_sequences, stream, sampling, metadata) are
 * not part of it (refused, as Anthropic's). */
int anth_parse_count_tokens(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                            anth_req_t *out, oai_error_t *err);

/* The anthropic-version header's value (NULL: absent): 0 when tram speaks
 * it — 2023-06-01 or a later date (the SDKs send their own; each keeps
 * 2023-06-01's message and event format, which is what tram writes), or
 * absent, as llama.cpp and vLLM take requests without it — else -EINVAL
 * with the 400 in *err (2023-01-01's older stream format, or no date). */
int anth_check_version(const char *version, oai_error_t *err);

/* ---- the JSON (anth_write.c) ---------------------------------------------------- */

/* One content block of the answer. THINKING is for the reasoning split
 * once it reaches this API (server/srv_messages.c says where): a
 * {"type": "thinking", "thinking", "signature": ""} block, streamed as
 * thinking_delta. */
typedef enum anth_block_kind { ANTH_BLOCK_TEXT = 0, ANTH_BLOCK_TOOL_USE, ANTH_BLOCK_THINKING } anth_block_kind_t;

typedef struct anth_block {
  anth_block_kind_t kind;
  const char *text;   /* TEXT, THINKING: text[text_len] */
  size_t text_len;
  const char *id;     /* TOOL_USE: "toolu_..." */
  const char *name;
  const char *input;  /* TOOL_USE: the arguments, JSON text of an object (text that is no object,
                       * a forced call cut by max_tokens, is written as input {}: an incomplete tool_use) */
} anth_block_t;

/* What a message object says. */
typedef struct anth_msg {
  const char *id;           /* "msg_..." */
  const char *model;
  const anth_block_t *blocks; /* [n_blocks] */
  int32_t n_blocks;
  const char *stop_reason;  /* "end_turn", "max_tokens", "stop_sequence", "tool_use", or NULL (null) */
  const char *stop_sequence; /* the stop sequence that matched, or NULL */
  int32_t input_tokens, output_tokens, cache_read_tokens;
} anth_msg_t;

/* The stop_reason of a finished sequence: a stop string (stop_sequence), a
 * tool call (called), the length (max_tokens), else end_turn. */
const char *anth_stop_reason(sched_finish_t f, const char *stop_str, bool called);

/* The message object (malloc'd JSON). */
char *anth_write_message(const anth_msg_t *m);
/* {"input_tokens": n}: count_tokens' answer. */
char *anth_write_count(int32_t n);

/* Stream events, each "event: <type>\ndata: <json>\n\n" (malloc'd):
 *   message_start (m with no blocks, stop_reason null, usage so far),
 *   content_block_start (block i of kind b: text "" or tool_use with
 *   input {}, or thinking ""), content_block_delta (text_delta of
 *   text[len], input_json_delta with partial_json text[len], or
 *   thinking_delta), content_block_stop,
 *   message_delta (stop_reason, stop_sequence, usage.output_tokens), the
 *   message_stop, ping and error events. */
char *anth_event_message_start(const anth_msg_t *m);
char *anth_event_block_start(int32_t i, const anth_block_t *b);
char *anth_event_block_delta(int32_t i, anth_block_kind_t kind, const char *text, size_t len);
char *anth_event_block_stop(int32_t i);
char *anth_event_message_delta(const anth_msg_t *m);
char *anth_event_simple(const char *type); /* "message_stop", "ping" */
char *anth_event_error(int status, const char *message);

/* Anthropic's error object {"type": "error", "error": {"type", "message"}}
 * for an HTTP status (400 invalid_request_error, 401
 * authentication_error, 403 permission_error, 404 not_found_error, 413
 * request_too_large, 429 rate_limit_error, 503 and 529 overloaded_error,
 * 504 timeout_error, other 5xx api_error); a param is named in the message
 * when the message does not already start with it. http_error_body_fn's
 * shape (type and code unused: Anthropic's type follows the status). */
char *anth_error_body(int status, const char *type, const char *message, const char *param, const char *code);

#endif
