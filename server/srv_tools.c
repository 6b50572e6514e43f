/* server/srv_tools.c — tool calls in chat responses: which format the
 * model's output is read in (the tool_call_parser setting, or the chat
 * template's text), and a finished choice's text turned into content and
 * tool_calls (oai_tool_parse.h) with their ids (a forced call cut by
 * max_tokens keeps its partial arguments, as vLLM). srv_events.c writes them,
 * whole or as OpenAI's stream of deltas. */
#include <stdio.h>
#include <string.h>

#include "server/srv_internal.h"

oai_tools_format_t srv__tools_format(const srv_t *s) {
  switch (s->cfg->tool_call_parser) {
  case CFG_TOOL_PARSER_HERMES: return OAI_TOOLS_HERMES;
  case CFG_TOOL_PARSER_LLAMA3: return OAI_TOOLS_LLAMA3;
  case CFG_TOOL_PARSER_MISTRAL: return OAI_TOOLS_MISTRAL;
  case CFG_TOOL_PARSER_NONE: return OAI_TOOLS_NONE;
  default: return s->tmpl ? oai_tools_format_of(chat_tmpl_source(s->tmpl)) : OAI_TOOLS_NONE;
  }
}

void srv__tools_parse(const srv_job_t *j, int32_t ci, const srv_choice_t *c, arena_t *a, oai_choice_t *oc) {
  oai_tool_parse_t p;
  oai_tools_parse(j->tools_format, c->text.p ? c->text.p : "", c->text.len, j->parallel_tool_calls ? 0 : 1, a, &p);
  if (j->tools_format == OAI_TOOLS_JSON_ARGS && p.n_calls == 0 && c->finish == SCHED_FINISH_LENGTH) {
    /* a forced call cut by max_tokens: its partial arguments are still the
     * call's (vLLM's test_named_tool_use), finish_reason "length" */
    p.calls = arena_zalloc(a, sizeof *p.calls);
    p.calls[0].arguments = arena_strndup(a, c->text.p ? c->text.p : "", c->text.len);
    p.n_calls = 1;
    p.content = NULL;
    p.content_len = 0;
  }
  oc->text = p.content;
  oc->text_len = p.content_len;
  oc->tool_calls = p.calls;
  oc->n_tool_calls = p.n_calls;
  oc->finish_tool_calls = p.n_calls > 0 && c->finish == SCHED_FINISH_STOP;
  if (j->tools_format == OAI_TOOLS_JSON_ARGS && p.n_calls == 1) p.calls[0].name = j->tool_name;
  for (int32_t k = 0; k < p.n_calls; k++) {
    char *id = arena_alloc(a, 64);
    oai_make_id(id, 64, "chatcmpl-tool", j->srv->boot_id ^ (uint64_t)ci << 32, (uint64_t)j->arrival_ns + (uint64_t)k);
    p.calls[k].id = id;
  }
}
