/* server/srv_responses.c — POST /v1/responses (stateless): the request is
 * read (api/oai_responses.h) into a chat request on a worker, its
 * text.format compiled and its messages rendered and tokenized there, and
 * runs the chat path (srv_completions.c); its job then answers as a Responses object, or streams
 * OpenAI's events: response.created, response.in_progress,
 * response.output_item.added, response.content_part.added,
 * response.output_text.delta ..., response.output_text.done,
 * response.content_part.done, response.output_item.done, and
 * response.completed (or response.incomplete when max_output_tokens or the
 * context ended it). Each event is `event: <type>` and `data: <json>`; no
 * [DONE], as OpenAI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "api/oai_responses.h"
#include "server/srv_internal.h"

#define RESPONSES "/v1/responses"

void srv__h_responses(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id;
  const int64_t arrival = clock_now_ns();
  if (!srv__serving(s, res)) {
    srv__access(rid, RESPONSES, 503);
    return;
  }
  srv__offload(s, req, res, arrival, srv__responses_run, srv__responses_done);
}

void srv__resp_init(srv_job_t *j, const oai_responses_req_t *r) {
  j->writer = &srv_writer_responses;
  if (r->instructions) j->resp_instructions = xstrdup(r->instructions);
  j->resp_max_output = r->max_output_tokens;
  j->resp_temperature = r->chat.params.samp.temperature;
  j->resp_top_p = r->chat.params.samp.top_p;
  const oai_grammar_kind_t k = r->chat.params.grammar.kind;
  j->resp_format = k == OAI_GRAMMAR_JSON_SCHEMA ? "json_schema" : k == OAI_GRAMMAR_JSON_OBJECT ? "json_object" : "text";
  oai_make_id(j->id, sizeof j->id, "resp", j->srv->boot_id, (uint64_t)j->arrival_ns);
  oai_make_id(j->resp_item_id, sizeof j->resp_item_id, "msg", j->srv->boot_id, (uint64_t)j->arrival_ns + 1);
}

/* The response as it stands: done adds the text, status and usage. With
 * tools, done also reads the output for calls (into arena a): the message
 * is then the text before them, if any. */
static oai_resp_info_t info(const srv_job_t *j, bool done, arena_t *a) {
  const srv_choice_t *c = &j->choices[0];
  const bool cut = done && c->finish == SCHED_FINISH_LENGTH;
  oai_resp_info_t r = {
      .id = j->id,
      .item_id = j->resp_item_id,
      .model = j->srv->cfg->served_model_name,
      .created_at = j->created,
      .status = !done ? "in_progress" : j->errored ? "failed" : cut ? "incomplete" : "completed",
      .incomplete_reason = cut ? "max_output_tokens" : NULL,
      .instructions = j->resp_instructions,
      .max_output_tokens = j->resp_max_output,
      .temperature = j->resp_temperature,
      .top_p = j->resp_top_p,
      .format = j->resp_format,
      .text = done ? (c->text.p ? c->text.p : "") : NULL,
      .text_len = done ? c->text.len : 0,
      .has_usage = done,
      .input_tokens = (int32_t)j->prompt_tokens,
      .output_tokens = (int32_t)j->completion_tokens,
      .cached_tokens = (int32_t)j->cached_tokens,
      .lp = done && j->logprobs ? c->lp : NULL,
      .n_lp = done && j->logprobs ? c->n_lp : 0,
  };
  if (done && j->tools_format && !j->errored) {
    oai_choice_t oc = {0};
    srv__tools_parse(j, 0, c, a, &oc);
    r.calls = oc.tool_calls;
    r.n_calls = oc.n_tool_calls;
    if (oc.n_tool_calls) {
      r.text = oc.text;
      r.text_len = oc.text ? oc.text_len : 0;
      r.lp = NULL; /* the logprobs were the whole output's, calls included */
      r.n_lp = 0;
    }
  }
  return r;
}

/* Appends one event to the job's stream buffer. */
static void event(srv_job_t *j, const char *type, const oai_resp_info_t *r, const char *text, size_t len) {
  char *json = oai_write_response_event(type, j->resp_seq++, r, text, len);
  buf_printf(&j->out, "event: %s\ndata: ", type);
  buf_put(&j->out, json, strlen(json));
  buf_put(&j->out, "\n\n", 2);
  free(json);
}

/* One event of function call k. */
static void call_event(srv_job_t *j, const char *type, const oai_resp_info_t *r, int32_t k) {
  char *json = oai_write_response_call_event(type, j->resp_seq++, r, k);
  buf_printf(&j->out, "event: %s\ndata: ", type);
  buf_put(&j->out, json, strlen(json));
  buf_put(&j->out, "\n\n", 2);
  free(json);
}

/* Without tools the message item opens at the start and its text streams
 * as it comes; with tools the output may be calls, so it is kept, and the
 * items go out at the end (srv__resp_stream_end). */
void srv__resp_stream_start(srv_job_t *j) {
  const oai_resp_info_t r = info(j, false, NULL);
  event(j, "response.created", &r, NULL, 0);
  event(j, "response.in_progress", &r, NULL, 0);
  if (j->tools_format) return;
  event(j, "response.output_item.added", &r, NULL, 0);
  event(j, "response.content_part.added", &r, NULL, 0);
}

void srv__resp_stream_text(srv_job_t *j, const sched_event_t *ev) {
  srv_choice_t *c = &j->choices[0];
  buf_put(&c->text, ev->text, ev->text_len);
  srv__keep_logprob(j, c, ev);
  if (j->tools_format || !ev->text_len) return;
  oai_resp_info_t r = info(j, false, NULL);
  r.delta_lp = c->n_lp > j->resp_lp_sent ? &c->lp[j->resp_lp_sent] : NULL; /* tokens since the last delta */
  r.n_delta_lp = c->n_lp - j->resp_lp_sent;
  j->resp_lp_sent = c->n_lp;
  event(j, "response.output_text.delta", &r, ev->text, ev->text_len);
}

void srv__resp_stream_end(srv_job_t *j) {
  arena_t a;
  arena_init(&a, 0, 0);
  const oai_resp_info_t r = info(j, true, &a);
  if (j->tools_format && r.text) { /* the message, whole */
    event(j, "response.output_item.added", &r, NULL, 0);
    event(j, "response.content_part.added", &r, NULL, 0);
    event(j, "response.output_text.delta", &r, r.text, r.text_len);
  }
  if (r.text) {
    event(j, "response.output_text.done", &r, NULL, 0);
    event(j, "response.content_part.done", &r, NULL, 0);
    event(j, "response.output_item.done", &r, NULL, 0);
  }
  for (int32_t k = 0; k < r.n_calls; k++) {
    call_event(j, "response.output_item.added", &r, k);
    call_event(j, "response.function_call_arguments.delta", &r, k);
    call_event(j, "response.function_call_arguments.done", &r, k);
    call_event(j, "response.output_item.done", &r, k);
  }
  event(j, r.incomplete_reason ? "response.incomplete" : "response.completed", &r, NULL, 0);
  arena_free(&a);
}

char *srv__resp_whole(const srv_job_t *j) {
  arena_t a;
  arena_init(&a, 0, 0);
  const oai_resp_info_t r = info(j, true, &a);
  char *json = oai_write_response(&r);
  arena_free(&a);
  return json;
}

/* The writer's hooks over the functions above (srv_writer_t). */
static void w_stream_start(srv_job_t *j, const char *const *echo, const size_t *echo_len) {
  (void)echo, (void)echo_len;
  srv__resp_stream_start(j);
}

static void w_stream_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  (void)c, (void)ci;
  if (ev->kind == SCHED_EV_ERROR) srv__write_openai_error(j, ev->error ? ev->error : "generation failed", NULL);
  else srv__resp_stream_text(j, ev);
}

static char *w_whole(srv_job_t *j) { return srv__resp_whole(j); }

const srv_writer_t srv_writer_responses = {
    .stream_start = w_stream_start,
    .stream_event = w_stream_event,
    .stream_error = srv__write_openai_error,
    .stream_end = srv__resp_stream_end,
    .whole = w_whole,
};
