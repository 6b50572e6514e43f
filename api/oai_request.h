/* api/oai_request.h — OpenAI request parsing and validation.
 *
 * Pure functions from a JSON body to an engine-independent request: the
 * prompt (text or token ids) or chat messages, sampling parameters
 * (samp_params_t), limits, stop conditions and streaming options. Nothing
 * here knows the model beyond the limits passed in (vocab size for token-id
 * checks); tokenizing, the chat template and the context-length check are the
 * integration's. Every string and array of the result lives in the arena the
 * caller passes (the request's arena in the server); the JSON tree itself is
 * freed before returning.
 *
 * Unknown fields are ignored (as OpenAI does); null means "not given" for
 * every optional field. On bad input the functions return -EINVAL and fill an
 * oai_error_t naming the field ("temperature", "messages[2].content[0].type",
 * "logit_bias.50256") and the reason, for a 400 with an OpenAI error object.
 *
 * Accepted values (OpenAI's ranges unless said otherwise):
 *   max_tokens >= 1 (completions default 16, chat default: up to the
 *   context); chat max_completion_tokens wins over max_tokens;
 *   temperature 0..2; top_p (0, 1]; top_k -1, 0 (off) or >= 1; min_p 0..1
 *   (these sampling ranges come from one table, sample/samp_params.h);
 *   seed any integer in [-2^63, 2^64 - 1] (taken modulo 2^64); presence_penalty and
 *   frequency_penalty -2..2; repetition_penalty (0, 10];
 *   stop: a string or an array of up to limits.max_stop non-empty strings of
 *   at most limits.max_stop_len bytes each; stop_token_ids: up to
 *   limits.max_stop_token_ids token ids;
 *   logit_bias: up to limits.max_logit_bias entries "<token id>": -100..100;
 *   completions logprobs 0..20 (return the chosen token's logprob and that
 *   many alternatives); chat logprobs true/false, top_logprobs 0..20 (needs
 *   logprobs true);
 *   n 1..limits.max_n; best_of absent or equal to n; stream bool;
 *   stream_options {include_usage: bool} only with stream true;
 *   ignore_eos bool; echo bool (completions); user accepted, not used;
 *   suffix and functions are refused (400) rather than silently ignored;
 *   structured output (response_format, structured_outputs, guided_*,
 *   grammar, json_schema) is oai_structured.c's; vLLM's extensions and the table of refused
 *   fields are api/oai_extras.c's (docs/api.md lists them all). */
#ifndef TRAM_OAI_REQUEST_H
#define TRAM_OAI_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "sample/samp_params.h"

typedef struct oai_limits {
  int32_t vocab_size;         /* token ids must be < this; 0: only >= 0 is checked */
  int32_t max_n;              /* n; default 16 */
  int32_t max_prompts;        /* prompts in one completions request; default 64 */
  int32_t max_stop;           /* stop strings; default 16 */
  int32_t max_stop_len;       /* bytes per stop string; default 512 */
  int32_t max_stop_token_ids; /* default 64 */
  int32_t max_logit_bias;     /* entries; default 1024 */
  int32_t max_messages;       /* chat messages; default 4096 */
  bool seed_string;           /* seed may also be a decimal string of 0..2^64-1 (`tram generate` reads back
                               * the seeds its --json output writes as strings); default false */
  const samp_gen_defaults_t *gen; /* the model's sampling defaults, taken by the sampling fields a request
                                   * leaves out (OpenAI's otherwise); NULL: none (not owned) */
} oai_limits_t;

oai_limits_t oai_limits_default(void);

typedef struct oai_error {
  int status;          /* HTTP status: 400 */
  const char *type;    /* "invalid_request_error" */
  const char *code;    /* "invalid_value", "invalid_type", "missing_required_parameter",
                          "unsupported_parameter", "invalid_json"; NULL: null */
  char param[128];     /* the field; "" when none (null) */
  char message[512];
} oai_error_t;

/* One prompt: text, or token ids (exactly one of the two). */
typedef struct oai_prompt {
  const char *text; /* NUL-terminated UTF-8 (may hold NUL bytes up to text_len) */
  size_t text_len;
  const int32_t *tokens; /* [n_tokens] */
  int32_t n_tokens;
} oai_prompt_t;

/* Structured output (api/oai_structured.c): the one form a request asked
 * for, as source text; the server compiles it (srv_grammar.c). */
typedef enum oai_grammar_kind {
  OAI_GRAMMAR_NONE = 0,
  OAI_GRAMMAR_JSON_SCHEMA, /* src: the schema's JSON text (compact) */
  OAI_GRAMMAR_JSON_OBJECT, /* any JSON object; src "" */
  OAI_GRAMMAR_REGEX,       /* src: the pattern */
  OAI_GRAMMAR_CHOICE,      /* src: the JSON array of strings */
  OAI_GRAMMAR_GBNF,        /* src: the grammar text */
} oai_grammar_kind_t;

typedef struct oai_grammar {
  oai_grammar_kind_t kind;
  const char *field;  /* the request field it came from ("response_format.json_schema.schema"), for errors */
  const char *src;    /* in the arena */
  size_t src_len;
  bool flexible_ws;   /* JSON: bounded whitespace allowed (structured_outputs.disable_any_whitespace false) */
  bool additional;    /* JSON: objects take other keys by JSON Schema's default
                       * (structured_outputs.disable_additional_properties false) */
} oai_grammar_t;

/* What both endpoints share: sampling, limits, stop conditions, output. */
typedef struct oai_params {
  samp_params_t samp;  /* logit_bias points into the arena */
  int32_t max_tokens;  /* -1: until the context is full; 0 (completions with echo): score the
                        * prompt, generate nothing */
  int32_t n;           /* choices per prompt */
  const char *const *stop; /* [n_stop] NUL-terminated strings */
  int32_t n_stop;
  const int32_t *stop_token_ids; /* [n_stop_token_ids] */
  int32_t n_stop_token_ids;
  bool ignore_eos;
  bool stream;
  bool include_usage; /* stream_options.include_usage */
  bool echo;          /* completions: output starts with the prompt */
  /* vLLM's extensions (api/oai_extras.c) */
  int32_t min_tokens;             /* end-of-generation and stop tokens and stop strings are
                                   * ignored until this many tokens are out; 0: off */
  int32_t truncate_prompt_tokens; /* keep only the prompt's last this many tokens; 0: off */
  bool include_stop_str;          /* include_stop_str_in_output: the matched stop string ends the text */
  bool special;                   /* skip_special_tokens false: control tokens' text is output */
  bool add_special_tokens;        /* BOS etc. added to the prompt; default: completions true, chat false */
  bool continuous_usage;          /* stream_options.continuous_usage_stats: usage on every chunk */
  int32_t prompt_logprobs;        /* vLLM's prompt_logprobs: -1 off, else the alternatives (0..20) */
  bool return_token_ids;          /* vLLM's return_token_ids: the output's and the prompt's token ids */
  oai_grammar_t grammar;          /* structured output (kind NONE: none) */
  int speculative;                /* tram's `speculative`: -1 not given, 0 false (plain decoding), 1 true */
} oai_params_t;

typedef struct oai_completion_req {
  const char *model; /* NULL when absent */
  oai_prompt_t *prompts; /* [n_prompts] >= 1 */
  int32_t n_prompts;
  oai_params_t params;
} oai_completion_req_t;

typedef struct oai_message {
  const char *role;    /* "system" ("developer" maps here), "user" or "assistant" */
  const char *content; /* text parts joined with "\n"; "" for none */
  size_t content_len;
  const char *name;    /* NULL when absent */
  const char *tool_calls;   /* assistant: its tool_calls as JSON text (checked), or NULL */
  const char *tool_call_id; /* tool: the call it answers, or NULL */
} oai_message_t;

typedef enum oai_tool_choice {
  OAI_TOOL_CHOICE_AUTO = 0, /* the default with tools: the model may call them */
  OAI_TOOL_CHOICE_NONE,     /* tools are not shown to the model */
  OAI_TOOL_CHOICE_REQUIRED, /* at least one call: the output is constrained to a JSON array of
                             * {"name", "parameters"} calls (as vLLM); params.grammar holds its schema */
  OAI_TOOL_CHOICE_NAMED,    /* a call of tool_name: the output is constrained to its arguments
                             * (the function's parameters schema, as vLLM) */
} oai_tool_choice_t;

#define OAI_MAX_TOOL_NAME 64 /* OpenAI's limit on a function name */

typedef struct oai_chat_req {
  const char *model;
  oai_message_t *messages; /* [n_messages] >= 1 */
  int32_t n_messages;
  bool add_generation_prompt; /* vLLM extension; default true */
  bool continue_final_message; /* vLLM: the output continues the last message (no end-of-turn
                                * after it); needs add_generation_prompt false */
  const char *tools;           /* the tools as JSON text (checked: function tools), or NULL */
  oai_tool_choice_t tool_choice;
  const char *tool_name;       /* NAMED: the function (one of tools) */
  bool parallel_tool_calls;    /* false: at most one call is returned */
  /* thinking models (api/oai_reasoning.c) */
  const char *template_kwargs; /* chat_template_kwargs: the template's extra variables as JSON text (an
                                * object of at most OAI_MAX_TEMPLATE_KWARGS entries), or NULL */
  const char *reasoning_effort; /* "none", "minimal", "low", "medium", "high", "xhigh", or NULL */
  bool has_thinking_budget;    /* thinking_token_budget given: */
  int32_t thinking_budget;     /* thinking tokens before the server closes the reasoning */
  const char *budget_param;    /* the budget's name in the request's API, for errors (NULL: thinking_token_budget) */
  oai_params_t params;
} oai_chat_req_t;

#define OAI_MAX_TEMPLATE_KWARGS 64             /* chat_template_kwargs: variables */
#define OAI_MAX_TEMPLATE_KWARGS_DEPTH 8        /* its nesting */
#define OAI_MAX_TEMPLATE_KWARGS_BYTES (64 << 10) /* its JSON text */

/* vLLM /tokenize: {"prompt": text} or {"messages": [...]}, with
 * add_special_tokens (default true for prompt, false for messages) and
 * add_generation_prompt (default true). */
typedef struct oai_tokenize_req {
  const char *model;
  const char *prompt; /* NULL when messages are given */
  size_t prompt_len;
  oai_message_t *messages;
  int32_t n_messages;
  bool add_special_tokens;
  bool add_generation_prompt;
  bool continue_final_message; /* as in chat */
  bool return_token_strs;      /* answer each token's text too */
  const char *tools;           /* with messages: tools for the template (as chat), or NULL */
  const char *template_kwargs; /* with messages: chat_template_kwargs (as chat), or NULL */
  const char *reasoning_effort; /* with messages: as chat, or NULL */
} oai_tokenize_req_t;

/* vLLM /detokenize: {"tokens": [ids]}. */
typedef struct oai_detokenize_req {
  const char *model;
  const int32_t *tokens;
  int32_t n_tokens;
} oai_detokenize_req_t;

/* Each parses body[0..len) (need not be NUL-terminated) into *out, allocating
 * from arena. Returns 0, or -EINVAL with *err filled (out is then partly
 * filled and must not be used). lim NULL: oai_limits_default(). */
int oai_parse_completion(const char *body, size_t len, const oai_limits_t *lim,
                         arena_t *arena, oai_completion_req_t *out, oai_error_t *err);
int oai_parse_chat(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                   oai_chat_req_t *out, oai_error_t *err);
int oai_parse_tokenize(const char *body, size_t len, const oai_limits_t *lim,
                       arena_t *arena, oai_tokenize_req_t *out, oai_error_t *err);
int oai_parse_detokenize(const char *body, size_t len, const oai_limits_t *lim,
                         arena_t *arena, oai_detokenize_req_t *out, oai_error_t *err);

/* The generation fields `tram generate`'s JSON lines share with the
 * OpenAI parsers, read from the same table (oai_gen_fields.c) with the same
 * ranges and messages: the sampling fields (sample/samp_params.h), seed,
 * max_tokens (>= 0), n, stop, stop_token_ids and ignore_eos. Parses
 * body[0..len) as a request does (strict JSON, one object); each field it
 * gives is checked against lim (NULL: oai_limits_default()) and written
 * into *g, the ones it leaves out leave *g alone. Returns 0 with the object
 * in *root (the caller deletes it; strings and arrays of *g live in arena),
 * or -EINVAL (-ENOMEM) with *err filled and *root NULL. */
struct cJSON;
int oai_parse_gen_fields(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena, oai_params_t *g,
                         struct cJSON **root, oai_error_t *err);

/* The sampling defaults the parsers start from: the values
 * samp_params_default() documents (greedy, every filter off). */
samp_params_t oai_samp_defaults(void);

#endif
