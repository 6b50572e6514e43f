/* api/oai_tool_parse.h — reads tool calls out of a model's output text,
 * in the formats chat templates teach models:
 *
 *   OAI_TOOLS_HERMES   Hermes and Qwen2.5: text, then one or more
 *                      <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *                      (the last end tag may be missing: generation stopped)
 *   OAI_TOOLS_LLAMA3   Llama 3.x: the whole output is {"name": ...,
 *                      "parameters": {...}} (or "arguments"), maybe after
 *                      <|python_tag|>, several separated by ";"
 *   OAI_TOOLS_MISTRAL  text, then [TOOL_CALLS][{"name": ..., "arguments":
 *                      {...}}, ...]
 *   OAI_TOOLS_JSON_LIST  what tool_choice "required" constrains the output
 *                      to: [{"name": ..., "parameters": {...}}, ...]
 *   OAI_TOOLS_JSON_ARGS  a named tool_choice: the output is the arguments
 *                      object alone (a call named "", which the server names)
 *   OAI_TOOLS_HARMONY  gpt-oss: the answer side of the reasoning splitter
 *                      (text/reasoning.h, calls kept): text, then messages
 *                      <|channel|>CH to=RECIPIENT[ <|constrain|>TYPE]
 *                      <|message|>BODY<|call|>. A recipient functions.NAME is
 *                      a call of NAME (arguments: BODY, compacted when TYPE is
 *                      json or absent and it parses, else as written, as
 *                      vLLM's openai tool parser); other recipients (built-in
 *                      tools) and a message without <|call|> (cut short) are
 *                      neither calls nor content (vLLM keeps only finished
 *                      messages). The text before the first message is the
 *                      content, even when no call is read.
 *
 * Output that does not parse as calls (bad JSON, no name) is content, as
 * vLLM's parsers do: the model answered in text. Pure: no model, no I/O;
 * everything lives in the caller's arena. */
#ifndef TRAM_OAI_TOOL_PARSE_H
#define TRAM_OAI_TOOL_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"

typedef enum oai_tools_format {
  OAI_TOOLS_NONE = 0,
  OAI_TOOLS_HERMES,
  OAI_TOOLS_LLAMA3,
  OAI_TOOLS_MISTRAL,
  OAI_TOOLS_JSON_LIST, /* tool_choice "required": the whole output is [{"name", "parameters"}, ...] */
  OAI_TOOLS_JSON_ARGS, /* a named tool_choice: the whole output is the arguments object (the server
                        * names the call) */
  OAI_TOOLS_HARMONY,   /* gpt-oss: harmony messages to=functions.NAME, as the reasoning splitter writes them */
} oai_tools_format_t;

typedef struct oai_tool_call {
  const char *id;        /* "call_..." (the server names them; NULL here) */
  const char *name;      /* NUL-terminated */
  const char *arguments; /* JSON text of an object (compact), NUL-terminated */
} oai_tool_call_t;

typedef struct oai_tool_parse {
  const char *content; /* the text outside the calls, trimmed; NULL when none */
  size_t content_len;
  oai_tool_call_t *calls; /* [n_calls] */
  int32_t n_calls;
} oai_tool_parse_t;

/* The format a chat template teaches, from its source text: "<|channel|>"
 * → HARMONY, "<tool_call>" → HERMES, "[TOOL_CALLS]" → MISTRAL,
 * "<|python_tag|>" or "ipython" → LLAMA3, else NONE. */
oai_tools_format_t oai_tools_format_of(const char *template_src);

/* Parses text[len] in format f into *out (at most max_calls calls; 0: no
 * limit). Always succeeds: without calls, out->content is the text. */
void oai_tools_parse(oai_tools_format_t f, const char *text, size_t len, int32_t max_calls, arena_t *a,
                     oai_tool_parse_t *out);

/* Streaming: of the output so far, text[len], how many leading bytes are
 * content whatever follows, and can be sent now: the text before a call's
 * marker and before any tail that may begin one, or nothing while it is
 * only white space (which is no content when calls follow); Llama 3's
 * output is held whole while it may be a call (it starts with "{" or
 * <|python_tag|>). What it returns never shrinks as the text grows, and
 * never passes the end of what oai_tools_parse returns as content. */
size_t oai_tools_stream_safe(oai_tools_format_t f, const char *text, size_t len);

#endif
