/* server/srv_messages.c — Anthropic's Messages API: POST /v1/messages (the
 * request parsed by api/anth.h on a worker, then the chat flow of
 * srv_completions.c with an Anthropic job) and its writer (srv_writer_t),
 * and POST /v1/messages/count_tokens (the prompt rendered and counted, no
 * engine). Errors under /v1/messages are Anthropic's object (srv_main.c
 * gives http/ anth_error_body for that prefix).
 *
 * The stream is Anthropic's event sequence: message_start, a ping, then
 * content blocks, each content_block_start, its deltas (text_delta, or
 * input_json_delta for a tool_use block) and content_block_stop, then
 * message_delta (stop_reason, stop_sequence, output_tokens) and
 * message_stop. Without tools the text streams as it comes. With tools
 * (auto, any) the output may be calls, so the text streams only up to
 * where a call may begin (oai_tools_stream_safe) and the calls go out as
 * tool_use blocks once the output ends; a forced call (tool_choice tool)
 * is the output itself, so its arguments stream as input_json_delta as
 * they come.
 *
 * Thinking: a thinking model's chat (a reasoning parser on: srv_reasoning.c
 * splits each event's text before any writer sees it) streams its reasoning
 * as a "thinking" block of thinking_delta deltas before the answer's
 * blocks (the answer's first text closes it, as Anthropic orders them); the
 * whole message puts a thinking block with the choice's reasoning first.
 * Only when the request enabled thinking (enabled or adaptive; its
 * budget_tokens is the thinking budget, api/anth_request.c): otherwise the
 * template was asked not to think and any reasoning is left out.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "server/srv_internal.h"

#define MESSAGES "/v1/messages"
#define COUNT "/v1/messages/count_tokens"

void srv__anth_init(srv_job_t *j, const anth_req_t *r) {
  j->anth_thinking = r->thinking;
  j->writer = &srv_writer_anthropic;
  j->anth_open = -1;
  oai_make_id(j->id, sizeof j->id, "msg", j->srv->boot_id, (uint64_t)j->arrival_ns);
  j->id[3] = '_'; /* Anthropic's form: msg_... */
}

/* A tool call's id: "toolu_" + the job and the call's index. */
static void call_id(const srv_job_t *j, int32_t k, char *buf, size_t cap) {
  oai_make_id(buf, cap, "toolu", j->srv->boot_id ^ (uint64_t)k << 48, (uint64_t)j->arrival_ns);
  buf[5] = '_';
}

/* The message as it stands (blocks given by the caller). */
static anth_msg_t msg(const srv_job_t *j, bool done) {
  int32_t prompt = 0;
  for (int32_t i = 0; i < j->n_parts; i++) prompt += j->parts[i].prompt_tokens;
  const srv_choice_t *c = &j->choices[0];
  return (anth_msg_t){
      .id = j->id,
      .model = j->srv->cfg->served_model_name,
      .stop_reason = done ? anth_stop_reason(c->finish, c->stop_str, j->anth_called) : NULL,
      .stop_sequence = done ? c->stop_str : NULL,
      .input_tokens = prompt,
      .output_tokens = done ? (int32_t)j->completion_tokens : c->tokens,
      .cache_read_tokens = (int32_t)j->cached_tokens,
  };
}

/* Appends a malloc'd event to the job's stream buffer and frees it. */
static void put(srv_job_t *j, char *ev) {
  buf_put(&j->out, ev, strlen(ev));
  free(ev);
}

static void close_block(srv_job_t *j) {
  if (j->anth_open < 0) return;
  put(j, anth_event_block_stop(j->anth_next++));
  j->anth_open = -1;
}

/* Opens block b unless a text (thinking) block is open and b is one too:
 * it goes on; else the open block is closed first. */
static void open_block(srv_job_t *j, const anth_block_t *b) {
  if (j->anth_open == (int)b->kind && b->kind != ANTH_BLOCK_TOOL_USE) return;
  close_block(j);
  put(j, anth_event_block_start(j->anth_next, b));
  j->anth_open = (int)b->kind;
}

/* text[len] as the delta of the open block of kind (text or thinking),
 * opening one. */
static void stream_text(srv_job_t *j, anth_block_kind_t kind, const char *text, size_t len) {
  if (!len) return;
  const anth_block_t b = {.kind = kind};
  open_block(j, &b);
  put(j, anth_event_block_delta(j->anth_next, kind, text, len));
}

/* Sends the output's bytes [c->sent, end) as text. */
static void send_text(srv_job_t *j, srv_choice_t *c, size_t end) {
  if (end <= c->sent) return;
  stream_text(j, ANTH_BLOCK_TEXT, c->text.p + c->sent, end - c->sent);
  c->sent = end;
}

/* A forced call: its arguments stream as they come in one tool_use block. */
static void stream_forced(srv_job_t *j, const sched_event_t *ev) {
  if (!ev->text_len) return;
  if (j->anth_open != ANTH_BLOCK_TOOL_USE) {
    char id[64];
    call_id(j, 0, id, sizeof id);
    const anth_block_t b = {.kind = ANTH_BLOCK_TOOL_USE, .id = id, .name = j->tool_name};
    open_block(j, &b);
    j->anth_called = true;
  }
  put(j, anth_event_block_delta(j->anth_next, ANTH_BLOCK_TOOL_USE, ev->text, ev->text_len));
}

/* With tools (auto, any): text up to where a call may begin; at the end the
 * rest of the text and each call as a tool_use block. */
static void stream_tools(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev) {
  buf_put(&c->text, ev->text, ev->text_len);
  if (ev->kind != SCHED_EV_FINISHED) {
    send_text(j, c, oai_tools_stream_safe(j->tools_format, c->text.p, c->text.len));
    return;
  }
  arena_t a;
  arena_init(&a, 0, 0);
  oai_choice_t parsed = {0};
  srv__tools_parse(j, 0, c, &a, &parsed);
  if (parsed.text) send_text(j, c, (size_t)(parsed.text - c->text.p) + parsed.text_len);
  for (int32_t k = 0; k < parsed.n_tool_calls; k++) {
    char id[64];
    call_id(j, k, id, sizeof id);
    const oai_tool_call_t *t = &parsed.tool_calls[k];
    const anth_block_t b = {.kind = ANTH_BLOCK_TOOL_USE, .id = id, .name = t->name};
    open_block(j, &b);
    put(j, anth_event_block_delta(j->anth_next, ANTH_BLOCK_TOOL_USE, t->arguments, strlen(t->arguments)));
    close_block(j);
  }
  j->anth_called = parsed.n_tool_calls > 0;
  arena_free(&a);
}

static void w_stream_start(srv_job_t *j, const char *const *echo, const size_t *echo_len) {
  (void)echo, (void)echo_len;
  const anth_msg_t m = msg(j, false);
  put(j, anth_event_message_start(&m));
  put(j, anth_event_simple("ping"));
}

static void w_stream_error(srv_job_t *j, const char *message, const char *code) {
  (void)code;
  put(j, anth_event_error(500, message));
  j->anth_failed = true;
}

static void w_stream_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  (void)ci;
  const char *think;
  size_t n_think;
  if (srv__reason_pending(c, &think, &n_think) && j->anth_thinking) /* else left out, as asked */
    stream_text(j, ANTH_BLOCK_THINKING, think, n_think);
  if (ev->kind == SCHED_EV_ERROR) w_stream_error(j, ev->error ? ev->error : "generation failed", NULL);
  else if (j->tools_format == OAI_TOOLS_JSON_ARGS && !j->harmony_calls) stream_forced(j, ev);
  else if (j->tools_format) stream_tools(j, c, ev);
  else stream_text(j, ANTH_BLOCK_TEXT, ev->text, ev->text_len);
}

static void w_stream_end(srv_job_t *j) {
  if (j->anth_failed) return; /* the error event ended the stream, as Anthropic's does */
  close_block(j);
  const anth_msg_t m = msg(j, true);
  put(j, anth_event_message_delta(&m));
  put(j, anth_event_simple("message_stop"));
}

/* Whether a call's arguments are a JSON object (a whole call's are). */
static bool is_object(const char *json) {
  cJSON *v = json ? cJSON_Parse(json) : NULL;
  const bool ok = cJSON_IsObject(v);
  cJSON_Delete(v);
  return ok;
}

/* The whole message: the reasoning of a thinking model (if any), the text
 * (if any), then a tool_use block per call. A forced call cut by max_tokens
 * (arguments that are no object) is Anthropic's incomplete tool_use: the
 * last block, input {}, stop_reason max_tokens (its docs: retry with a
 * higher max_tokens); the stream has sent its partial input_json_delta.
 * Arguments that are no object for another reason (a stop sequence cut
 * them, a model's malformed call) are text, and no tool use. */
static char *w_whole(srv_job_t *j) {
  srv_choice_t *c = &j->choices[0];
  arena_t a;
  arena_init(&a, 0, 0);
  oai_choice_t parsed = {.text = c->text.p ? c->text.p : "", .text_len = c->text.len};
  if (j->tools_format) srv__tools_parse(j, 0, c, &a, &parsed);
  anth_block_t *blocks = arena_array(&a, (size_t)parsed.n_tool_calls + 2, sizeof *blocks);
  int32_t n = 0;
  if (c->reasoning.len && j->anth_thinking)
    blocks[n++] = (anth_block_t){.kind = ANTH_BLOCK_THINKING, .text = c->reasoning.p, .text_len = c->reasoning.len};
  if (parsed.text && parsed.text_len)
    blocks[n++] = (anth_block_t){.kind = ANTH_BLOCK_TEXT, .text = parsed.text, .text_len = parsed.text_len};
  for (int32_t k = 0; k < parsed.n_tool_calls; k++) {
    const oai_tool_call_t *t = &parsed.tool_calls[k];
    if (c->finish != SCHED_FINISH_LENGTH && !is_object(t->arguments)) { /* e.g. cut by a stop sequence: text */
      blocks[n++] = (anth_block_t){.kind = ANTH_BLOCK_TEXT, .text = t->arguments, .text_len = strlen(t->arguments)};
      continue;
    }
    char *id = arena_alloc(&a, 64);
    call_id(j, k, id, 64);
    blocks[n++] = (anth_block_t){.kind = ANTH_BLOCK_TOOL_USE, .id = id, .name = t->name, .input = t->arguments};
    j->anth_called = true;
  }
  anth_msg_t m = msg(j, true);
  m.blocks = blocks;
  m.n_blocks = n;
  char *json = anth_write_message(&m);
  arena_free(&a);
  return json;
}

const srv_writer_t srv_writer_anthropic = {
    .stream_start = w_stream_start,
    .stream_event = w_stream_event,
    .stream_error = w_stream_error,
    .stream_end = w_stream_end,
    .whole = w_whole,
};

/* ---- the handlers ------------------------------------------------------------------------- */

/* The start both handlers share: serving, and an anthropic-version this
 * server speaks. */
static bool begin(srv_t *s, const http_req_t *req, http_res_t *res, const char *endpoint) {
  const uint64_t rid = req->id; /* req is freed once answered */
  if (!srv__serving(s, res)) {
    srv__access(rid, endpoint, 503);
    return false;
  }
  oai_error_t e;
  if (anth_check_version(http_req_header(req, "anthropic-version"), &e) != 0) {
    srv__send_oai_error(res, &e);
    srv__access(rid, endpoint, 400);
    return false;
  }
  return true;
}

void srv__h_messages(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const int64_t arrival = clock_now_ns();
  if (begin(s, req, res, MESSAGES)) srv__offload(s, req, res, arrival, srv__messages_run, srv__messages_done);
}

/* count_tokens' work item: the parse and the prompt's token count. */
typedef struct count_out {
  int rc;              /* 0, -EINVAL (parse: e; encoding: err), -ENOSYS, -ENOMEM */
  oai_error_t e;
  const char *model;
  int32_t n;
  char err[512];
} count_out_t;

static void count_run(srv_work_t *w) {
  count_out_t *o = w->out = arena_zalloc(&w->arena, sizeof *o);
  anth_req_t r;
  if (anth_parse_count_tokens(w->body, w->body_len, &w->s->oai_lim, &w->arena, &r, &o->e) != 0) {
    o->rc = -EINVAL;
    return;
  }
  o->model = r.chat.model;
  const oai_chat_req_t *ch = &r.chat;
  int32_t *ids = NULL;
  o->rc = srv__encode_chat(w->s, ch->messages, ch->n_messages, ch->tool_choice == OAI_TOOL_CHOICE_NONE ? NULL : ch->tools,
                           ch->add_generation_prompt, ch->continue_final_message, false, &ids, &o->n, o->err,
                           sizeof o->err);
  free(ids);
}

static void count_done(srv_work_t *w) {
  count_out_t *o = w->out;
  http_res_t *res = w->res;
  if (!res) return;
  int status = 200;
  if (o->e.status) {
    status = o->e.status;
    srv__send_oai_error(res, &o->e);
  } else if (!srv__model_ok(w->s, res, o->model)) {
    status = 404;
  } else if (o->rc != 0) {
    status = o->rc == -ENOSYS ? 500 : o->rc == -ENOMEM ? 503 : 400;
    http_res_send_error(res, status, NULL, o->err, status == 400 ? "messages" : NULL, NULL);
  } else {
    srv__send_json(res, 200, anth_write_count(o->n));
  }
  srv__access(w->rid, COUNT, status);
}

void srv__h_count_tokens(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const int64_t arrival = clock_now_ns();
  if (begin(s, req, res, COUNT)) srv__offload(s, req, res, arrival, count_run, count_done);
}
