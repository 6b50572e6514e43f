/* server/srv_reasoning.c — a thinking model's output in chat responses
 * (text/reasoning.h): which format is read (the reasoning_parser setting,
 * or the chat template's), each choice's splitter started from its
 * prompt's end, and each engine event's text split in two: the reasoning,
 * kept on the choice (srv_choice_t.reasoning: all of it so far;
 * reason_sent: how much of it a stream has sent), and the content, which
 * the writers see as the event's text. So every writer (OpenAI's chat,
 * the Responses API, and any later one: Anthropic's thinking blocks) reads
 * the same two sides: the event's text is answer, c->reasoning[reason_sent..]
 * is the thinking not yet written.
 *
 * The engine gets a copy of the starting splitter (sched_req_params_t), so
 * that structured output and tool-call grammars apply to the answer only,
 * and the thinking budget, with the tokens that close the reasoning. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/srv_internal.h"

reason_fmt_t srv__reason_format(const srv_t *s) {
  switch (s->cfg->reasoning_parser) {
  case CFG_REASONING_DEEPSEEK_R1: return REASON_DEEPSEEK_R1;
  case CFG_REASONING_QWEN3: return REASON_QWEN3;
  case CFG_REASONING_GPT_OSS: return REASON_GPT_OSS;
  case CFG_REASONING_NONE: return REASON_NONE;
  default: return s->tmpl ? reason_fmt_of_template(chat_tmpl_source(s->tmpl)) : REASON_NONE;
  }
}

/* The prompt's last tokens are enough to see whether it opened or closed
 * the reasoning (a tag and the whitespace after it). */
#define TAIL_TOKENS 8

void srv__reason_start(srv_job_t *j, reason_fmt_t f, int32_t part, const int32_t *ids, int32_t n,
                       reason_split_t *start) {
  const int32_t k = n < TAIL_TOKENS ? n : TAIL_TOKENS;
  const int64_t len = k > 0 ? tok_decode(j->srv->tok, ids + n - k, (size_t)k, TOK_DEC_SPECIAL, NULL, 0) : 0;
  char *tail = xmalloc(len > 0 ? (size_t)len + 1 : 1);
  tail[0] = 0;
  if (len > 0) tok_decode(j->srv->tok, ids + n - k, (size_t)k, TOK_DEC_SPECIAL, tail, (size_t)len + 1);
  reason_split_init(start, f, tail, len > 0 ? (size_t)len : 0);
  start->calls = j->harmony_calls;
  free(tail);
  j->reasoning = f != REASON_NONE;
  for (int32_t i = 0; i < j->n; i++) j->choices[part * j->n + i].split = *start;
}

int srv__reason_close_ids(srv_t *s, reason_fmt_t f, const char *close, int32_t **ids, int32_t *n,
                          int32_t *open_id) {
  char err[256];
  const char *open = reason_open_text(f);
  if (!close) close = reason_close_text(f);
  int32_t *o = NULL, n_o = 0;
  *open_id = -1;
  if (srv__encode(s, open, strlen(open), TOK_ENC_PARSE_SPECIAL, &o, &n_o, err, sizeof err) == 0 && n_o == 1)
    *open_id = o[0];
  free(o);
  return srv__encode(s, close, strlen(close), TOK_ENC_PARSE_SPECIAL, ids, n, err, sizeof err);
}

/* The splitter's pieces: reasoning onto the choice, content into the event's text. */
typedef struct sink {
  srv_choice_t *c;
  buf_t content;
} sink_t;

static void take(void *ctx, bool thinking, const char *p, size_t n) {
  sink_t *k = ctx;
  buf_put(thinking ? &k->c->reasoning : &k->content, p, n);
}

const sched_event_t *srv__reason_event(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev, sched_event_t *tmp) {
  if (!j->reasoning || ev->kind == SCHED_EV_PROMPT) return ev;
  sink_t k = {.c = c};
  if (ev->token >= 0 && reason_split_phase(&c->split) == REASON_THINK) c->reason_tokens++;
  reason_split_feed(&c->split, ev->text, ev->text_len, take, &k);
  /* ended at an end-of-generation token or one of the request's stop_token_ids (harmony's <|call|>: their
   * text is not output) or where the grammar ends (a forced call's arguments): a message open at the end is
   * finished; a stop string cut the text, so what it cut is not */
  if (ev->kind == SCHED_EV_FINISHED && ev->finish == SCHED_FINISH_STOP && !ev->stop_str)
    reason_split_stopped(&c->split, take, &k);
  if (ev->kind != SCHED_EV_TOKEN) reason_split_end(&c->split, take, &k);
  *tmp = *ev;
  tmp->text = k.content.p; /* malloc'd (NULL when empty): srv__reason_event_done frees it */
  tmp->text_len = k.content.len;
  return tmp;
}

void srv__reason_event_done(const sched_event_t *ev, const sched_event_t *tmp) {
  if (ev == tmp) free(tmp->text);
}

bool srv__reason_pending(srv_choice_t *c, const char **p, size_t *n) {
  if (c->reasoning.len <= c->reason_sent) return false;
  *p = c->reasoning.p + c->reason_sent;
  *n = c->reasoning.len - c->reason_sent;
  c->reason_sent = c->reasoning.len;
  return true;
}

bool srv__effort_refused(const srv_t *s, const char *effort, const char *param, oai_error_t *e) {
  if (!effort || !s->tmpl || strstr(chat_tmpl_source(s->tmpl), "reasoning_effort")) return false;
  *e = (oai_error_t){.status = 400, .type = "invalid_request_error", .code = "unsupported_parameter"};
  snprintf(e->param, sizeof e->param, "%s", param);
  snprintf(e->message, sizeof e->message, "%s is not supported: this model's chat template does not read reasoning_effort",
           param);
  return true;
}
