/* server/srv_completions.c — POST /v1/completions and /v1/chat/completions: parse
 * and validate (api/oai_request.h), tokenize each prompt (the chat
 * template for chat), check it against the context length, then make one
 * engine request per prompt (n sequences each) and submit them all. If any
 * submit is refused (429 queue full, 400, 503 draining) the ones already
 * submitted are cancelled and the client gets the error; otherwise the
 * response starts (srv_events.c takes over). Two flows, one per endpoint
 * (srv__h_completions, srv__h_chat), that differ in parsing and encoding
 * and share the context check, the submit and the one mapping from a
 * refused submit to the client's status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/srv_internal.h"

/* One prompt, tokenized; echo is the text an echoing completion starts with. */
typedef struct prompt_in {
  int32_t *ids; /* malloc'd [n] */
  int32_t n;
  const char *echo;
  size_t echo_len;
  char *echo_owned; /* malloc'd when decoded from token ids */
} prompt_in_t;

#define COMPLETIONS "/v1/completions"
#define CHAT "/v1/chat/completions"

static void fail(uint64_t rid, http_res_t *res, const char *endpoint, int status, const char *msg,
                 const char *param, const char *code) {
  http_res_send_error(res, status, NULL, msg, param, code);
  srv__access(rid, endpoint, status);
}

/* Answers 400 for a prompt that did not encode (rc, with the reason in
 * err; 500 for -ENOSYS: no chat template; 503 for -ENOMEM: memory ran out
 * rendering the template), or, once truncated to its last
 * g->truncate_prompt_tokens tokens, one that leaves no room in the context.
 * what ("prompt" or "messages") and param name it. Returns 0 when
 * p fits, an error once answered. */
static int check_prompt(srv_t *s, uint64_t rid, http_res_t *res, const char *endpoint, const oai_params_t *g,
                        const char *what, const char *param, int rc, char *err, size_t err_len,
                        prompt_in_t *p) {
  if (rc == 0 && p->n == 0) {
    snprintf(err, err_len, "the prompt has no tokens");
    rc = -EINVAL;
  }
  if (rc != 0) {
    const int status = rc == -ENOSYS ? 500 : rc == -ENOMEM ? 503 : 400;
    fail(rid, res, endpoint, status, err, status == 400 ? param : NULL,
         status == 503 ? "out_of_memory" : status == 400 ? "invalid_value" : NULL);
    return rc;
  }
  if (g->truncate_prompt_tokens > 0 && p->n > g->truncate_prompt_tokens) { /* keep the last ones (vLLM) */
    memmove(p->ids, p->ids + (p->n - g->truncate_prompt_tokens), (size_t)g->truncate_prompt_tokens * sizeof *p->ids);
    p->n = g->truncate_prompt_tokens;
  }
  const int32_t max = s->max_model_len, out = g->max_tokens > 0 ? g->max_tokens : 0;
  if (p->n >= max || (int64_t)p->n + out > max) {
    if (out)
      snprintf(err, err_len,
               "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the "
               "%s, %d in the completion). Please reduce the length of the %s or of the completion.",
               max, (long long)p->n + out, p->n, what, out, what);
    else
      snprintf(err, err_len,
               "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens, which "
               "leaves no room for the completion. Please reduce the length of the %s.",
               max, what, p->n, what);
    fail(rid, res, endpoint, 400, err, param, "context_length_exceeded");
    return -EINVAL;
  }
  return 0;
}

/* Tokenizes prompt i of a completions request into *p (text, or token ids
 * copied; with echo, the text the choice starts with). Runs on a worker
 * thread. Returns 0 or an encoding error with the reason in err. */
static int encode_completion(srv_t *s, const oai_completion_req_t *c, int32_t i, prompt_in_t *p, char *err,
                             size_t err_len) {
  if (c->prompts[i].text) {
    p->echo = c->prompts[i].text;
    p->echo_len = c->prompts[i].text_len;
    return srv__encode(s, p->echo, p->echo_len,
                       (c->params.add_special_tokens ? TOK_ENC_ADD_SPECIAL : 0) | srv__text_flags(s), &p->ids, &p->n,
                       err, err_len);
  }
  p->n = c->prompts[i].n_tokens;
  p->ids = xmalloc(((size_t)p->n + 1) * sizeof *p->ids);
  memcpy(p->ids, c->prompts[i].tokens, (size_t)p->n * sizeof *p->ids);
  if (c->params.echo) {
    const int flags = TOK_DEC_SPECIAL | TOK_DEC_STRIP_PREFIX;
    int64_t len = tok_decode(s->tok, p->ids, (size_t)p->n, flags, NULL, 0);
    p->echo_owned = xmalloc(len > 0 ? (size_t)len + 1 : 1);
    p->echo_owned[0] = 0;
    if (len > 0) tok_decode(s->tok, p->ids, (size_t)p->n, flags, p->echo_owned, (size_t)len + 1);
    p->echo = p->echo_owned;
    p->echo_len = len > 0 ? (size_t)len : 0;
  }
  return 0;
}

/* Renders a chat request's messages (and tools, unless tool_choice is
 * "none") through the template and tokenizes them into *p. Returns 0 or an
 * encoding error with the reason in err. Any thread. */
static int encode_chat_text(srv_t *s, const oai_chat_req_t *ch, prompt_in_t *p, char *err, size_t err_len) {
  const char *tools = ch->tool_choice == OAI_TOOL_CHOICE_NONE ? NULL : ch->tools;
  return srv__encode_chat_kw(s, ch->messages, ch->n_messages, tools, ch->template_kwargs, ch->reasoning_effort,
                             ch->add_generation_prompt, ch->continue_final_message, ch->params.add_special_tokens,
                             &p->ids, &p->n, err, err_len);
}

static void free_prompts(prompt_in_t *in, int32_t n) {
  if (!in) return;
  for (int32_t i = 0; i < n; i++) {
    free(in[i].ids);
    free(in[i].echo_owned);
  }
  free(in);
}

/* Answers a refused submit (the one mapping from the engine's error to the
 * client's status) and returns the status. */
int srv__submit_failed(uint64_t rid, http_res_t *res, const char *endpoint, int rc, const char *err) {
  char msg[256];
  int status = 500;
  const char *code = NULL, *text = msg;
  switch (rc) {
  case -EAGAIN:
    status = 429;
    code = "queue_full";
    text = "the server is busy: its waiting queue is full (max_waiting); retry later";
    break;
  case -EINVAL:
    status = 400;
    code = "invalid_value";
    text = err;
    break;
  case -ESHUTDOWN:
    status = 503;
    code = "draining";
    text = "the server is shutting down";
    break;
  default:
    snprintf(msg, sizeof msg, "the engine refused the request: %s", strerror(-rc));
  }
  if (status == 429 || status == 503) http_res_header(res, "Retry-After", "1");
  fail(rid, res, endpoint, status, text, NULL, code);
  return status;
}

/* What both endpoints do once their prompts are encoded: one engine request
 * per prompt (g's parameters, g->n sequences each), all submitted or none
 * (a refusal cancels those already in and answers), then the response
 * starts. grammar (NULL: none) constrains every sequence. Frees in[n_parts]. */
static void submit_and_start(srv_t *s, uint64_t rid, http_res_t *res, const char *endpoint, int64_t arrival,
                             bool chat, const oai_params_t *g, gram_entry_t *grammar, oai_tools_format_t tools,
                             const char *tool_name, bool parallel_tools, const srv_api_t *api,
                             const oai_chat_req_t *ch, prompt_in_t *in, int32_t n_parts) {
  if (g->speculative == 1 && !s->cfg->speculative) { /* asked for, and nothing would honour it */
    fail(rid, res, endpoint, 400, "speculative: true, but speculative decoding is off on this server (--speculative)",
         "speculative", "invalid_value");
    free_prompts(in, n_parts);
    return;
  }
  const reason_fmt_t rf = ch ? srv__reason_format(s) : REASON_NONE; /* a thinking model's chat */
  if (tools == OAI_TOOLS_HARMONY && rf != REASON_GPT_OSS) { /* the splitter reads the messages' headers */
    fail(rid, res, endpoint, 400, "tools: harmony tool calls (tool_call_parser openai) are read by the gpt_oss "
         "reasoning parser, and reasoning_parser is not gpt_oss", "tools", "unsupported_parameter");
    free_prompts(in, n_parts);
    return;
  }
  if (rf == REASON_GPT_OSS && (tools == OAI_TOOLS_HERMES || tools == OAI_TOOLS_LLAMA3 || tools == OAI_TOOLS_MISTRAL)) {
    /* gpt-oss writes its calls as harmony messages: another format's parser would stream them as text */
    fail(rid, res, endpoint, 400, "tools: gpt-oss writes harmony tool calls, which this server's tool_call_parser "
         "cannot read (set tool_call_parser to openai, or auto)", "tools", "unsupported_parameter");
    free_prompts(in, n_parts);
    return;
  }
  if (ch && ch->has_thinking_budget && rf == REASON_NONE) {
    const char *param = ch->budget_param ? ch->budget_param : "thinking_token_budget";
    char msg[256];
    snprintf(msg, sizeof msg, "%s: the model does not think (no reasoning parser: the chat template shows no "
             "reasoning and reasoning_parser is auto or none)", param);
    fail(rid, res, endpoint, 400, msg, param, "unsupported_parameter");
    free_prompts(in, n_parts);
    return;
  }
  sched_req_params_t p = sched_req_params_default();
  p.grammar = grammar; /* each request takes its own reference */
  p.samp = g->samp;
  p.max_tokens = g->max_tokens > 0 ? g->max_tokens : 0;
  p.n = g->n;
  p.ignore_eos = g->ignore_eos;
  p.stop = g->stop;
  p.n_stop = g->n_stop;
  p.stop_ids = g->stop_token_ids;
  p.n_stop_ids = g->n_stop_token_ids;
  p.min_tokens = g->min_tokens;
  p.no_spec = g->speculative == 0;
  p.special = g->special;
  const bool echo_lp = g->echo && g->samp.logprobs;
  p.prompt_logprobs = echo_lp || g->prompt_logprobs >= 0;
  p.prompt_top_logprobs = echo_lp ? g->samp.top_logprobs : 0;
  if (g->prompt_logprobs > p.prompt_top_logprobs) p.prompt_top_logprobs = g->prompt_logprobs;
  p.score_only = g->max_tokens == 0;
  int32_t *think_close = NULL; /* what a spent thinking budget forces */
  int32_t *think_lead = NULL;  /* gpt-oss, a forced tool_choice: what the output starts with */
  char call_open[160] = "";    /* ... a named one: the call's header, which a spent budget forces */
  srv__tools_harmony(s, rf, tools, tool_name, &p, &think_lead, call_open, sizeof call_open);
  if (rf != REASON_NONE) {
    p.think_budget = ch->has_thinking_budget ? ch->thinking_budget : s->cfg->reasoning_budget;
    if (srv__reason_close_ids(s, rf, call_open[0] ? call_open : NULL, &think_close, &p.n_think_close,
                              &p.think_open) != 0)
      p.think_budget = -1;
    p.think_close = think_close;
    if (rf == REASON_GPT_OSS) p.special = 1; /* harmony's channels are control tokens */
  }
  srv_job_t *j = srv__job_create(s, res, chat, g, n_parts);
  j->endpoint = endpoint;
  j->tools_format = tools;
  j->parallel_tool_calls = parallel_tools;
  j->harmony_calls = tools != OAI_TOOLS_NONE && rf == REASON_GPT_OSS;
  if (tools == OAI_TOOLS_JSON_ARGS) snprintf(j->tool_name, sizeof j->tool_name, "%s", tool_name);
  if (api) api->init(j, api->req); /* another API's writer */
  if (tools == OAI_TOOLS_LLAMA3 || tools == OAI_TOOLS_MISTRAL) p.special = 1; /* <|python_tag|>, [TOOL_CALLS] */
  j->arrival_ns = arrival; /* parsing and tokenizing count as the request's time */
  char err[512] = "";
  int rc = 0;
  for (int32_t i = 0; i < n_parts; i++) {
    srv_part_t *part = &j->parts[i];
    part->prompt_tokens = in[i].n;
    if (p.prompt_logprobs) srv__plp_init(s, part, in[i].ids, in[i].n);
    if (rf != REASON_NONE) srv__reason_start(j, rf, i, in[i].ids, in[i].n, &p.reasoning);
    if (g->return_token_ids) part->prompt_ids = memcpy(xmalloc((size_t)in[i].n * sizeof *in[i].ids), in[i].ids,
                                                       (size_t)in[i].n * sizeof *in[i].ids);
    part->req = sched_req_create(in[i].ids, in[i].n, &p, part, err, sizeof err);
    if (!part->req) {
      rc = -EINVAL;
      break;
    }
  }
  free(think_close);
  free(think_lead);
  for (int32_t i = 0; rc == 0 && i < n_parts; i++) {
    rc = sched_submit(s->engine, j->parts[i].req, err, sizeof err);
    if (rc == 0) {
      j->parts[i].live = true;
      j->n_live++;
    }
  }
  if (rc != 0) {
    for (int32_t i = 0; i < n_parts; i++)
      if (!j->parts[i].live) {
        sched_req_destroy(j->parts[i].req);
        j->parts[i].req = NULL;
      }
    srv__job_cancel(j, "another prompt of the request was refused");
    const int status = srv__submit_failed(rid, res, endpoint, rc, err);
    j->res = NULL;
    j->status = status;
    srv__job_maybe_free(j);
    free_prompts(in, n_parts);
    return;
  }
  const char **echo = NULL;
  size_t *echo_len = NULL;
  if (g->echo) {
    echo = xcalloc((size_t)n_parts, sizeof *echo);
    echo_len = xcalloc((size_t)n_parts, sizeof *echo_len);
    for (int32_t i = 0; i < n_parts; i++) {
      echo[i] = in[i].echo;
      echo_len[i] = in[i].echo_len;
    }
  }
  srv__job_start(j, echo, echo_len);
  free(echo);
  free(echo_len);
  free_prompts(in, n_parts);
}

/* The start both endpoints share: 503 unless serving. */
static bool serving(srv_t *s, http_res_t *res, uint64_t rid, const char *endpoint) {
  if (srv__serving(s, res)) return true;
  srv__access(rid, endpoint, 503);
  return false;
}

/* Answers a request that did not parse (400 with the OpenAI error), or
 * whose grammar could not be queued for compiling (429). */
static void parse_failed(http_res_t *res, uint64_t rid, const char *endpoint, const oai_error_t *e) {
  if (e->status == 429) http_res_header(res, "Retry-After", "1");
  srv__send_oai_error(res, e);
  srv__access(rid, endpoint, e->status ? e->status : 400);
}

/* Answers 404 and returns false when the request names another model. */
static bool model_ok(srv_t *s, http_res_t *res, uint64_t rid, const char *endpoint, const char *model) {
  if (srv__model_ok(s, res, model)) return true;
  srv__access(rid, endpoint, 404);
  return false;
}

/* What a work item's run leaves for its done (in the item's arena). */
typedef struct enc_out {
  int parse_rc;            /* 0, or the parse failed (e) */
  oai_error_t e;
  oai_completion_req_t c;  /* completions */
  oai_chat_req_t ch;       /* chat */
  oai_responses_req_t resp; /* /v1/responses */
  anth_req_t anth;         /* /v1/messages */
  const char *model;       /* the request's model field (NULL: none) */
  const oai_grammar_t *gsrc; /* its structured-output form (in the request's parse) */
  gram_entry_t *grammar;   /* that form, compiled (a reference; NULL: none) */
  prompt_in_t *in;         /* [n_in] malloc'd (calloc'd: unencoded ones are empty) */
  int32_t n_in;
  int32_t n_done;          /* prompts encoded, or the index of the one that failed */
  int rc;                  /* that prompt's encoding error, 0 if all encoded */
  char err[512];
} enc_out_t;

/* The work item's output, empty; a parse writes into it. */
static enc_out_t *enc_out(srv_work_t *w) {
  enc_out_t *o = w->out = arena_alloc(&w->arena, sizeof *o);
  memset(o, 0, sizeof *o);
  return o;
}

/* After the parse (rc): true when it failed (o answers the 400); else o
 * gets room for n_in prompts. */
static bool parse_failed_in(enc_out_t *o, int rc, int32_t n_in) {
  if (rc != 0) {
    o->parse_rc = -EINVAL;
    return true;
  }
  o->in = xcalloc((size_t)n_in, sizeof *o->in);
  o->n_in = n_in;
  return false;
}

/* Compile thread: compiles the grammar run did not find into o->grammar
 * (a failure answers its 400 as a parse error); refused (a full compile
 * queue, on the loop): the 429. */
static void grammar_stage(srv_work_t *w, int refused) {
  enc_out_t *o = w->out;
  if (refused) {
    o->parse_rc = -EAGAIN;
    o->e = (oai_error_t){.status = 429, .type = "invalid_request_error", .code = "queue_full"};
    snprintf(o->e.message, sizeof o->e.message,
             "the server is busy: too many structured-output grammars wait to compile (grammar_compile_queue %d); "
             "retry later", w->s->cfg->grammar_compile_queue);
  } else if (srv__grammar(w->s, o->gsrc, &o->grammar, &o->e) != 0) {
    o->parse_rc = -EINVAL;
  }
}

/* Worker: the request's structured output from the cache of compiled
 * grammars into o->grammar, or, when it is not there, the compile staged
 * for after run (grammar_stage: never on this worker). */
static void find_grammar(srv_work_t *w, const oai_params_t *g, enc_out_t *o) {
  o->gsrc = &g->grammar;
  if (srv__grammar_find(w->s, &g->grammar, &o->grammar) == 1) w->stage = grammar_stage;
}

/* Worker: parse a completions request, compile its structured output and
 * tokenize its prompts (up to the first that fails). */
static void completions_run(srv_work_t *w) {
  srv_t *s = w->s;
  enc_out_t *o = enc_out(w);
  const int rc = oai_parse_completion(w->body, w->body_len, &s->oai_lim, &w->arena, &o->c, &o->e);
  if (parse_failed_in(o, rc, rc ? 0 : o->c.n_prompts)) return;
  o->model = o->c.model;
  find_grammar(w, &o->c.params, o);
  for (; o->n_done < o->c.n_prompts; o->n_done++)
    if ((o->rc = encode_completion(s, &o->c, o->n_done, &o->in[o->n_done], o->err, sizeof o->err)) != 0) break;
}

/* Loop: the start of both done callbacks. Takes o->in into *in (the
 * caller frees or submits it); returns true when the request goes on, false
 * once answered (a parse error, not serving, another model) or when its
 * client went away (w->res NULL). */
static bool done_start(srv_work_t *w, const char *endpoint, prompt_in_t **in) {
  enc_out_t *o = w->out;
  *in = o->in;
  o->in = NULL;
  if (!w->res) return false;
  if (o->parse_rc != 0) {
    parse_failed(w->res, w->rid, endpoint, &o->e);
    return false;
  }
  return serving(w->s, w->res, w->rid, endpoint) && model_ok(w->s, w->res, w->rid, endpoint, o->model);
}

/* Loop: answers a completions request whose work item is done. */
static void completions_done(srv_work_t *w) {
  srv_t *s = w->s;
  enc_out_t *o = w->out;
  http_res_t *res = w->res;
  const uint64_t rid = w->rid;
  prompt_in_t *in;
  if (!done_start(w, COMPLETIONS, &in)) {
  } else if (o->c.params.echo && o->c.params.truncate_prompt_tokens) {
    fail(rid, res, COMPLETIONS, 400, "echo with truncate_prompt_tokens is not supported", "truncate_prompt_tokens",
         "unsupported_parameter");
  } else {
    for (int32_t i = 0; i < o->c.n_prompts; i++) {
      char param[64];
      if (o->c.n_prompts > 1) snprintf(param, sizeof param, "prompt[%d]", i);
      else snprintf(param, sizeof param, "prompt");
      if (check_prompt(s, rid, res, COMPLETIONS, &o->c.params, "prompt", param, i == o->n_done ? o->rc : 0,
                       o->err, sizeof o->err, &in[i]) != 0) { /* answered */
        free_prompts(in, o->n_in);
        gram_entry_unref(o->grammar);
        return;
      }
    }
    submit_and_start(s, rid, res, COMPLETIONS, w->arrival_ns, false, &o->c.params, o->grammar, OAI_TOOLS_NONE,
                     NULL, false, NULL, NULL, in, o->c.n_prompts);
    in = NULL;
  }
  free_prompts(in, o->n_in);
  gram_entry_unref(o->grammar);
}

/* Worker: parse a chat request, compile its structured output, render its
 * messages and tokenize them. */
static void chat_run(srv_work_t *w) {
  enc_out_t *o = enc_out(w);
  if (parse_failed_in(o, oai_parse_chat(w->body, w->body_len, &w->s->oai_lim, &w->arena, &o->ch, &o->e), 1)) return;
  o->model = o->ch.model;
  if (srv__effort_refused(w->s, o->ch.reasoning_effort, "reasoning_effort", &o->e)) { /* nothing would read it */
    o->parse_rc = -EINVAL;
    return;
  }
  find_grammar(w, &o->ch.params, o);
  o->rc = encode_chat_text(w->s, &o->ch, &o->in[0], o->err, sizeof o->err);
}

/* Loop: a chat request whose messages are encoded into *in (rc, err: the
 * encoding's outcome): the tools check, the context check, the server's
 * default max_tokens, then the submit. Takes in (frees or submits it). */
static void chat_start(srv_t *s, uint64_t rid, http_res_t *res, const char *endpoint, int64_t arrival,
                       oai_chat_req_t *ch, gram_entry_t *grammar, const srv_api_t *api, int rc, char *err,
                       size_t err_len, prompt_in_t *in) {
  const bool tools = ch->tools && ch->tool_choice == OAI_TOOL_CHOICE_AUTO;
  oai_tools_format_t format = tools ? srv__tools_format(s) : OAI_TOOLS_NONE;
  if (ch->tool_choice == OAI_TOOL_CHOICE_REQUIRED) format = OAI_TOOLS_JSON_LIST; /* the grammar's output */
  if (ch->tool_choice == OAI_TOOL_CHOICE_NAMED) format = OAI_TOOLS_JSON_ARGS;
  if (tools && format == OAI_TOOLS_NONE) {
    fail(rid, res, endpoint, 400,
         "tools: the chat template teaches no tool-call format this server reads (hermes, llama3_json, mistral, "
         "openai); "
         "use a template with tools (chat_template) or set tool_call_parser",
         "tools", "unsupported_parameter");
  } else if (check_prompt(s, rid, res, endpoint, &ch->params, "messages", "messages", rc, err, err_len, in) == 0) {
    if (ch->params.max_tokens < 0 && s->chat_max_tokens > 0) { /* the server's default, within the context */
      const int32_t room = s->max_model_len - in->n;
      ch->params.max_tokens = s->chat_max_tokens < room ? s->chat_max_tokens : room;
    }
    submit_and_start(s, rid, res, endpoint, arrival, true, &ch->params, grammar, format, ch->tool_name,
                     ch->parallel_tool_calls, api, ch, in, 1);
    return;
  }
  free_prompts(in, 1);
}

/* Loop: answers a chat request whose work item is done. */
static void chat_done(srv_work_t *w) {
  enc_out_t *o = w->out;
  prompt_in_t *in;
  if (done_start(w, CHAT, &in))
    chat_start(w->s, w->rid, w->res, CHAT, w->arrival_ns, &o->ch, o->grammar, NULL, o->rc, o->err, sizeof o->err, in);
  else
    free_prompts(in, o->n_in);
  gram_entry_unref(o->grammar);
}

/* Worker: the rest of a run whose request (another API's) was parsed (rc)
 * into the chat request ch: its structured output, its messages encoded. */
static void api_run(srv_work_t *w, enc_out_t *o, int rc, const oai_chat_req_t *ch) {
  if (parse_failed_in(o, rc, 1)) return;
  o->model = ch->model;
  if (srv__effort_refused(w->s, ch->reasoning_effort, "reasoning.effort", &o->e)) {
    o->parse_rc = -EINVAL;
    return;
  }
  find_grammar(w, &ch->params, o);
  o->rc = encode_chat_text(w->s, ch, &o->in[0], o->err, sizeof o->err);
}

/* Loop: answers another API's request (ch, set up as api) whose work item is done. */
static void api_done(srv_work_t *w, const char *endpoint, oai_chat_req_t *ch, const srv_api_t *api) {
  enc_out_t *o = w->out;
  prompt_in_t *in;
  if (done_start(w, endpoint, &in))
    chat_start(w->s, w->rid, w->res, endpoint, w->arrival_ns, ch, o->grammar, api, o->rc, o->err, sizeof o->err, in);
  else
    free_prompts(in, o->n_in);
  gram_entry_unref(o->grammar);
}

void srv__responses_run(srv_work_t *w) {
  enc_out_t *o = enc_out(w);
  api_run(w, o, oai_parse_responses(w->body, w->body_len, &w->s->oai_lim, &w->arena, &o->resp, &o->e), &o->resp.chat);
}

static void resp_init(srv_job_t *j, const void *req) { srv__resp_init(j, req); }

void srv__responses_done(srv_work_t *w) {
  enc_out_t *o = w->out;
  const srv_api_t api = {resp_init, &o->resp};
  api_done(w, "/v1/responses", &o->resp.chat, &api);
}

void srv__messages_run(srv_work_t *w) {
  enc_out_t *o = enc_out(w);
  api_run(w, o, anth_parse_messages(w->body, w->body_len, &w->s->oai_lim, &w->arena, &o->anth, &o->e), &o->anth.chat);
}

static void anth_init(srv_job_t *j, const void *req) { srv__anth_init(j, req); }

void srv__messages_done(srv_work_t *w) {
  enc_out_t *o = w->out;
  const srv_api_t api = {anth_init, &o->anth};
  api_done(w, "/v1/messages", &o->anth.chat, &api);
}

void srv__h_completions(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const int64_t arrival = clock_now_ns();
  if (!serving(s, res, req->id, COMPLETIONS)) return;
  srv__offload(s, req, res, arrival, completions_run, completions_done);
}

void srv__h_chat(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const int64_t arrival = clock_now_ns();
  if (!serving(s, res, req->id, CHAT)) return;
  srv__offload(s, req, res, arrival, chat_run, chat_done);
}
