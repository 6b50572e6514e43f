/* server/srv_tools.c — tool calls in chat responses: which format the
 * model's output is read in (the tool_call_parser setting, or the chat
 * template's text), and a finished choice's text turned into content and
 * tool_calls (oai_tool_parse.h) with their ids (a forced call cut by
 * max_tokens keeps its partial arguments, as vLLM). srv_events.c writes them,
 * whole or as OpenAI's stream of deltas. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/srv_internal.h"

oai_tools_format_t srv__tools_format(const srv_t *s) {
  switch (s->cfg->tool_call_parser) {
  case CFG_TOOL_PARSER_HERMES: return OAI_TOOLS_HERMES;
  case CFG_TOOL_PARSER_LLAMA3: return OAI_TOOLS_LLAMA3;
  case CFG_TOOL_PARSER_MISTRAL: return OAI_TOOLS_MISTRAL;
  case CFG_TOOL_PARSER_OPENAI: return OAI_TOOLS_HARMONY;
  case CFG_TOOL_PARSER_NONE: return OAI_TOOLS_NONE;
  default: return s->tmpl ? oai_tools_format_of(chat_tmpl_source(s->tmpl)) : OAI_TOOLS_NONE;
  }
}

/* gpt-oss with a forced tool_choice: the model's own harmony calls (a named
 * tool_choice keeps those of its function); else the grammar's JSON, which
 * the final channel's text is. */
static void harmony_forced(const srv_job_t *j, const char *text, size_t len, int32_t max, arena_t *a,
                           oai_tool_parse_t *p) {
  oai_tools_parse(OAI_TOOLS_HARMONY, text, len, j->tools_format == OAI_TOOLS_JSON_ARGS ? 0 : max, a, p);
  int32_t kept = 0;
  for (int32_t k = 0; k < p->n_calls; k++)
    if ((j->tools_format != OAI_TOOLS_JSON_ARGS || !strcmp(p->calls[k].name, j->tool_name)) &&
        (max <= 0 || kept < max))
      p->calls[kept++] = p->calls[k];
  p->n_calls = kept;
  if (kept) return;
  oai_tool_parse_t g;
  oai_tools_parse(j->tools_format, p->content ? p->content : "", p->content_len, max, a, &g);
  *p = g;
}

void srv__tools_parse(const srv_job_t *j, int32_t ci, const srv_choice_t *c, arena_t *a, oai_choice_t *oc) {
  oai_tool_parse_t p;
  const char *text = c->text.p ? c->text.p : "";
  size_t len = c->text.len;
  const int32_t max = j->parallel_tool_calls ? 0 : 1;
  if (j->harmony_calls && j->tools_format != OAI_TOOLS_HARMONY) harmony_forced(j, text, len, max, a, &p);
  else oai_tools_parse(j->tools_format, text, len, max, a, &p);
  if (j->tools_format == OAI_TOOLS_JSON_ARGS && p.n_calls == 0 && c->finish == SCHED_FINISH_LENGTH) {
    /* a forced call cut by max_tokens: its partial arguments are still the
     * call's (vLLM's test_named_tool_use), finish_reason "length"; with
     * harmony, those the final channel holds */
    if (j->harmony_calls) text = p.content ? p.content : "", len = p.content_len;
    p.calls = arena_zalloc(a, sizeof *p.calls);
    p.calls[0].arguments = arena_strndup(a, text, len);
    p.n_calls = 1;
    p.content = NULL;
    p.content_len = 0;
  }
  oc->text = p.content;
  oc->text_len = p.content_len;
  oc->tool_calls = p.calls;
  oc->n_tool_calls = p.n_calls;
  oc->finish_tool_calls = p.n_calls > 0 && c->finish == SCHED_FINISH_STOP;
  if (j->tools_format == OAI_TOOLS_JSON_ARGS && p.n_calls == 1 && (!p.calls[0].name || !p.calls[0].name[0]))
    p.calls[0].name = j->tool_name; /* the grammar's arguments alone (not a harmony call, named) */
  for (int32_t k = 0; k < p.n_calls; k++) {
    char *id = arena_alloc(a, 64);
    oai_make_id(id, 64, "chatcmpl-tool", j->srv->boot_id ^ (uint64_t)ci << 32, (uint64_t)j->arrival_ns + (uint64_t)k);
    p.calls[k].id = id;
  }
}

void srv__tools_harmony(srv_t *s, reason_fmt_t rf, oai_tools_format_t tools, const char *tool_name,
                        sched_req_params_t *p, int32_t **lead, char *close, size_t cap) {
  if (rf != REASON_GPT_OSS || (tools != OAI_TOOLS_JSON_ARGS && tools != OAI_TOOLS_JSON_LIST)) return;
  char err[256];
  const char *open = reason_open_text(rf); /* <|channel|>analysis<|message|>: what gpt-oss's output opens with */
  if (srv__encode(s, open, strlen(open), TOK_ENC_PARSE_SPECIAL, lead, &p->n_think_lead, err, sizeof err) == 0)
    p->think_lead = *lead;
  if (tools != OAI_TOOLS_JSON_ARGS) return;
  snprintf(close, cap, "<|end|><|start|>assistant<|channel|>commentary to=functions.%s <|constrain|>json<|message|>",
           tool_name);
  p->grammar_in_calls = true; /* the grammar (the function's parameters) constrains its arguments */
}
