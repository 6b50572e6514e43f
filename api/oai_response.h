/* api/oai_response.h — JSON writers for OpenAI-compatible responses.
 *
 * Pure functions from plain structs (text and tokens come from the engine) to
 * JSON text, built with cJSON. Each returns a malloc'd NUL-terminated string
 * the caller free()s; allocation failure aborts. Text is written as valid
 * UTF-8 whatever it holds: invalid or truncated sequences and NUL bytes become
 * U+FFFD (the engine's incremental detokenizer should hold back an incomplete
 * character; this is the last line of defence). A logprob that is not finite
 * is written as -9999.0, as vLLM does.
 *
 * Streaming (SSE, one http_res_sse() per string):
 *   chat:        oai_write_chat_chunk(first=true) carries the role, every chunk
 *                the same id/created/model, finish_reason on the last; then
 *                oai_write_usage_chunk() when stream_options.include_usage;
 *                then "[DONE]".
 *   completions: oai_write_completion_chunk() per piece, same rules.
 *   errors:      oai_write_error() as an event: data: {"error": {...}}. */
#ifndef TRAM_OAI_RESPONSE_H
#define TRAM_OAI_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scheduler/sched.h"
#include "api/oai_tool_parse.h"

/* The engine's finish reason (sched_finish_t, decided once, in the engine)
 * as OpenAI's finish_reason: "stop", "length", "abort" (vLLM's name, for
 * SCHED_FINISH_ABORT and SCHED_FINISH_ERROR alike), or NULL (JSON null) for
 * SCHED_FINISH_NONE. */
const char *oai_finish_name(sched_finish_t f);

typedef struct oai_top_logprob {
  const char *token; /* the token's bytes (may be a partial UTF-8 character) */
  size_t token_len;
  float logprob;
  int32_t id;        /* the token id (vLLM's prompt_logprobs are keyed by it) */
} oai_top_logprob_t;

typedef struct oai_token_logprob {
  const char *token; /* the chosen token's bytes */
  size_t token_len;
  float logprob;
  int32_t text_offset;          /* completions: where it starts in the choice text */
  const oai_top_logprob_t *top; /* [n_top] alternatives, most likely first */
  int32_t n_top;
  int32_t id;                   /* the token id (prompt logprobs) */
  int32_t rank;                 /* prompt logprobs: 1 + tokens the model found likelier */
  bool no_logprob;              /* a prompt's first token: "token_logprobs"/"top_logprobs" null */
} oai_token_logprob_t;

typedef struct oai_choice {
  int32_t index;
  const char *text; /* completion text / message content / delta; NULL: none */
  size_t text_len;
  sched_finish_t finish;
  const char *stop_str; /* vLLM "stop_reason": the stop string that matched, or */
  int32_t stop_token;   /* the stop token id (-1: none); both unset: null */
  bool has_logprobs;    /* false: "logprobs": null */
  const oai_token_logprob_t *logprobs; /* [n_logprobs], one per generated token (after the
                                        * prompt's with echo and logprobs) */
  int32_t n_logprobs;
  const oai_token_logprob_t *prompt_lp; /* [n_prompt_lp] vLLM's "prompt_logprobs" (entry 0: null);
                                         * NULL: not written (chat: written at the top level from
                                         * the first choice) */
  int32_t n_prompt_lp;
  /* chat tool calls (message.tool_calls, or delta.tool_calls in a chunk) */
  const oai_tool_call_t *tool_calls; /* [n_tool_calls], each with its id */
  int32_t n_tool_calls;
  int32_t tool_index;   /* chunks: the first call's "index" */
  int tool_delta;       /* chunks: 1 the calls' id, type, name and "arguments": ""; 2 only their arguments */
  bool finish_tool_calls; /* finish_reason "tool_calls" (the model called tools) instead of "stop" */
  /* chat, a thinking model's reasoning (text/reasoning.h): message.reasoning_content and
   * message.reasoning (vLLM's newer name), or the delta's in a chunk */
  bool has_reasoning;     /* message: write both (null when reasoning is NULL); content null when empty */
  const char *reasoning;  /* [reasoning_len]; NULL: none (a chunk writes the keys only when set) */
  size_t reasoning_len;
  /* vLLM's return_token_ids: "token_ids" (the output's ids, or a chunk's) on the choice, and
   * "prompt_token_ids" on the choice (completions) or at the top level from the first choice (chat) */
  bool has_token_ids;                /* false: "token_ids" is not written */
  const int32_t *token_ids;          /* [n_token_ids] */
  int32_t n_token_ids;
  const int32_t *prompt_token_ids;   /* [n_prompt_token_ids]; NULL: not written (a later chunk) */
  int32_t n_prompt_token_ids;
} oai_choice_t;

typedef struct oai_usage {
  int32_t prompt_tokens;
  int32_t completion_tokens;
  int32_t cached_tokens; /* prompt tokens found in the prefix cache: "prompt_tokens_details" */
} oai_usage_t;

/* What every object of one response shares. */
typedef struct oai_meta {
  const char *id; /* "cmpl-..." / "chatcmpl-..." (oai_make_id) */
  const char *model;
  int64_t created; /* Unix seconds */
  const char *fingerprint; /* "system_fingerprint" (NULL: none written) */
  const oai_usage_t *chunk_usage; /* chunks: written in place of "usage": null (vLLM's
                                   * continuous_usage_stats); NULL: null as usual */
} oai_meta_t;

typedef struct oai_model {
  const char *id;
  const char *root; /* the weights it serves (a path or name) */
  const char *owned_by;
  int64_t created;
  int32_t max_model_len;
} oai_model_t;

/* Writes "<prefix>-<32 hex digits>" into buf (at least 48 bytes) from two
 * 64-bit values the caller makes unique (e.g. a random boot value and the
 * request id). */
void oai_make_id(char *buf, size_t size, const char *prefix, uint64_t a, uint64_t b);

/* {"id","object":"text_completion","created","model","choices":[{"index",
 * "text","logprobs":null|{"tokens","token_logprobs","top_logprobs",
 * "text_offset"},"finish_reason","stop_reason"[,"token_ids","prompt_token_ids"]}],"usage":{...}} */
char *oai_write_completion(const oai_meta_t *m, const oai_choice_t *choices, int32_t n,
                           const oai_usage_t *usage);

/* {"id","object":"chat.completion","created","model","choices":[{"index",
 * "message":{"role":"assistant","content"},"logprobs":null|{"content":[{
 * "token","logprob","bytes","top_logprobs":[...]}]},"finish_reason",
 * "stop_reason"[,"token_ids"]}][,"prompt_token_ids"],"usage":{...}} */
char *oai_write_chat_completion(const oai_meta_t *m, const oai_choice_t *choices, int32_t n,
                                const oai_usage_t *usage);

/* A streamed completion piece: object "text_completion", one choice with the
 * new text (logprobs as in oai_write_completion), finish_reason null until the
 * last. usage_null adds "usage": null (when include_usage is on). */
char *oai_write_completion_chunk(const oai_meta_t *m, const oai_choice_t *c, bool usage_null);

/* A streamed chat piece: object "chat.completion.chunk"; delta has "role":
 * "assistant" when first, "content" when c->text is not NULL; logprobs as in
 * oai_write_chat_completion; finish_reason null until the last. */
char *oai_write_chat_chunk(const oai_meta_t *m, const oai_choice_t *c, bool first,
                           bool usage_null);

/* The final usage chunk: "choices": [] and "usage". chat picks the object
 * name ("chat.completion.chunk" or "text_completion"). */
char *oai_write_usage_chunk(const oai_meta_t *m, bool chat, const oai_usage_t *usage);

/* {"error":{"message","type","param","code"}}; param/code NULL → null. */
char *oai_write_error(const char *type, const char *message, const char *param, const char *code);

/* The error body the transport writes (http/http.h's http_error_body_fn,
 * which tram serve gives the HTTP server): oai_write_error with type, or
 * oai_error_type_for_status(status) when type is NULL. */
char *oai_error_body(int status, const char *type, const char *message, const char *param, const char *code);

/* "invalid_request_error" for 4xx but 401 ("authentication_error"), 404
 * ("not_found_error"), 429 ("rate_limit_error"); "server_error" for 5xx, 503
 * ("service_unavailable"). */
const char *oai_error_type_for_status(int status);

/* {"object":"list","data":[{"id","object":"model","created","owned_by",
 * "root","parent":null,"max_model_len","permission":[]}]} */
char *oai_write_models(const oai_model_t *models, int n);

/* One model object, as in the list (GET /v1/models/{id}). */
char *oai_write_model(const oai_model_t *m);

/* vLLM /tokenize: {"count","max_model_len","tokens":[...],"token_strs":null
 * or [...]}; token_strs may be NULL. */
char *oai_write_tokenize(const int32_t *tokens, int32_t n, int32_t max_model_len,
                         const char *const *token_strs);

/* vLLM /detokenize: {"prompt": text}. */
char *oai_write_detokenize(const char *text, size_t len);

/* {"status": status}, e.g. "ok", "loading", "draining". */
char *oai_write_health(const char *status);

#endif
