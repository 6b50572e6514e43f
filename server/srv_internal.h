/* server/srv_internal.h — the pieces of `tram serve` (server/srv.h):
 *
 *   srv_main.c    srv_run: loop, listening, model loading, signals, drain,
 *                 the tick (watchdog, STATUS=, stall detection, request
 *                 timeouts), shutdown
 *   srv_notify.c  sd_notify and the watchdog decision
 *   srv_routes.c  routes and the small handlers: /health, /v1/models,
 *                 /metrics, /tokenize, /detokenize; prompt encoding shared
 *                 with the generation handlers
 *   srv_completions.c     POST /v1/completions and /v1/chat/completions: parse,
 *                 tokenize, check lengths, create and submit the engine
 *                 requests (one per prompt), start the response
 *   srv_embed.c   POST /v1/embeddings: parse, tokenize, check, one pooling
 *                 engine request per input, the embeddings writer
 *   srv_work.c    the worker pool hand-off of the generation handlers'
 *                 CPU work (parse, render, tokenize), the loop stall probe
 *   srv_dump.c    the SIGUSR1 state dump
 *   srv_messages.c  POST /v1/messages and /v1/messages/count_tokens
 *                 (Anthropic's) and their writer
 *   srv_events.c  the engine → loop bridge: drain the events, write SSE
 *                 chunks (coalesced per job and wake-up) or collect the
 *                 whole response, feed the metrics, write the access log,
 *                 free each job once its last request is done
 *
 * Threads: everything here runs on the loop thread, except the run half of
 * srv__offload's work items (libuv's worker pool: parse and encode only,
 * nothing shared but the immutable tokenizer and template), the loader
 * (srv_main.c: it builds the backend, model and engine with boot/,
 * then hands them over through uv_queue_work's completion) and the engine's notify hook (which
 * only calls uv_async_send). */
#ifndef TRAM_SRV_INTERNAL_H
#define TRAM_SRV_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/buf.h"
#include "config/cfg.h"
#include "grammar/gram_lru.h"
#include "text/chat_template.h"
#include "text/reasoning.h"
#include "text/tokenizer.h"
#include "scheduler/sched.h"
#include "http/http.h"
#include "server/kv_events.h"
#include "server/srv_dash.h"
#include "server/metrics.h"
#include "api/oai_request.h"
#include "api/oai_response.h"
#include "api/oai_responses.h"
#include "api/anth.h"
#include "boot/boot.h"

typedef enum srv_state {
  SRV_LOADING = 0, /* listening; the model loads; /health 503 */
  SRV_READY,       /* serving */
  SRV_DRAINING,    /* a signal came: finishing what is in flight */
  SRV_STOPPED,     /* shutting down */
} srv_state_t;

/* The engine may run no step for this long while it has work before the
 * requests in flight get a clean error, and /health answers 503 "stalled"
 * (for /health, the watchdog's period when that is shorter: srv__stall_ns).
 * Test builds may shorten it (base/fault.h: stall_ms=MS). */
#define SRV_STALL_NS (30 * INT64_C(1000000000))
/* After the drain timeout ended the requests left, connections still open
 * (clients not reading their last bytes) get this long before they are cut. */
#define SRV_CLOSE_GRACE_MS 5000
/* File descriptors kept out of the automatic connection cap (the model,
 * log, listeners, the probe reserve, libuv's own). */
#define SRV_FD_RESERVE 256
/* Output a streaming client has not taken (ours queued plus the kernel's
 * send queue) above which it counts as not reading: its engine requests
 * are paused, and cancelled after slow_client_timeout (srv__check_readers). */
#define SRV_UNREAD_BYTES (32 * 1024)
/* While a stream is paused, how often its socket is looked at to resume it. */
#define SRV_READERS_MS 50
/* The loop stall probe's period (srv_work.c). */
#define SRV_PROBE_MS 10
/* The nice value of the worker threads that parse and tokenize requests:
 * when cores are short, the loop's I/O and the engine's steps go first. */
#define SRV_WORK_NICE 5

typedef struct srv_job srv_job_t;
typedef struct srv_work srv_work_t;

typedef struct srv {
  const cfg_t *cfg;
  uv_loop_t loop;
  http_server_t *http;
  char url[300];         /* "http://127.0.0.1:8080", "unix:/path" or "systemd socket" */
  srv_state_t state;
  int exit_status;
  uint64_t boot_id;      /* random per process: makes response ids unique */
  int64_t boot_time;     /* Unix seconds, for /v1/models */

  /* made by the loader thread, the loop's after srv_main.c's load_done */
  uv_work_t load_work;
  bool loader_busy;      /* load_work has not completed */
  char load_err[1024];
  boot_t stack;    /* owns the backend, model, tokenizer, template and engine */
  chat_tmpl_t *tmpl;      /* = stack.tmpl */
  sched_engine_t *engine; /* = stack.engine; NULL once destroyed at the stop */
  const tok_t *tok;
  int32_t max_model_len, n_vocab;
  char bos[256], eos[256]; /* the special tokens' texts, for chat templates */
  char fingerprint[32];    /* "system_fingerprint": "fp_" + a hash of what decides the outputs */
  oai_limits_t oai_lim;
  samp_gen_defaults_t gen;   /* the requests' sampling defaults from the model (generation_config auto), or none */
  int32_t chat_max_tokens;   /* max_tokens of a chat request that gives none: default_max_tokens, else the
                              * model's max_new_tokens (auto); 0: to the end of the context */
  srv_metrics_t *metrics;
  kvev_t *kv_events;     /* vLLM's KV-cache events, or NULL (off) */
  srv_dash_t *dash;      /* the live dashboard (srv_dash.c); NULL when off */

  /* loop handles */
  uv_async_t wake;       /* the engine's notify hook sends it */
  uv_signal_t sig_term, sig_int, sig_hup, sig_usr1;
  uv_timer_t tick;       /* every second: watchdog, STATUS=, stalls, timeouts */
  uv_timer_t drain_timer;
  uv_timer_t readers;    /* every SRV_READERS_MS while a stream is paused: resume it once drained */
  int signals;           /* SIGTERM/SIGINT received */
  bool http_drained;     /* no connection left after http_server_drain */
  bool aborted_all;      /* the drain timeout ended what was left */

  /* the loop stall probe (srv_work.c) and the work items out on the pool */
  uv_timer_t probe;
  int64_t probe_due_ns;  /* when the probe should fire next */
  int64_t stall_max_ns;  /* the latest it ever fired */
  int64_t stall_sum_ns;  /* summed lateness */
  int n_work;            /* srv__offload items not yet completed */

  /* structured output (srv_grammar.c): the bounds of a request's grammar,
   * and the compile threads with their queue */
  gram_limits_t glim;
  pthread_t *gc_threads;
  int gc_n;
  pthread_mutex_t gc_mu;
  pthread_cond_t gc_cv;
  srv_work_t *gc_head, *gc_tail; /* waiting for a thread (stage_next links) */
  int gc_queued;
  srv_work_t *gc_done;           /* compiled, for the loop */
  bool gc_stop;
  uv_async_t gc_async;

  /* jobs in flight (a doubly linked list) */
  srv_job_t *jobs;
  int n_jobs;

  /* counters the loop keeps (per finished sequence) */
  uint64_t finished_stop, finished_length, finished_abort;
  /* what the loop adds to each engine event (logged at the end) */
  uint64_t ev_count;     /* events handled */
  uint64_t ev_loop_ns;   /* loop time in srv__on_wake: JSON, SSE, writes */
  uint64_t ev_wakes;     /* srv__on_wake passes that handled events */
  _Atomic int64_t notified_ns; /* set by the engine's notify hook (its first
                                * since the loop last looked), taken by the loop */
  uint64_t wake_ns;      /* summed: notify hook → srv__on_wake starts */
  uint64_t ev_delay_ns;  /* summed over passes: the newest event's posting → the pass's writes done */

  /* progress: the engine's step count when last seen changing */
  uint64_t seen_steps;
  int64_t seen_at;       /* CLOCK_MONOTONIC ns */
  uint64_t wd_usec;      /* WATCHDOG_USEC (0: off) */
  uint64_t wd_steps;     /* steps at the last ping */
  int64_t wd_last;       /* when the watchdog was last pinged */
  bool wd_warned;        /* the missed ping was logged */
  char status[200];      /* the last STATUS= sent */
} srv_t;

/* ---- srv_notify.c ----------------------------------------------------------- */

/* sd_notify(0, text) (a no-op without NOTIFY_SOCKET); logged at debug. */
void srv__notify(const char *text);
/* Sends STATUS=<line> if it differs from the last one; with state (e.g.
 * "READY=1") always, both in one message, state first. */
void srv__status(srv_t *s, const char *state, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Whether the engine looks stuck: work queued or running and no step for
 * more than stall_ns (updates s->seen_*). false while loading. */
bool srv__stalled(srv_t *s, int64_t stall_ns);
/* The stall threshold of /health: SRV_STALL_NS, or WATCHDOG_USEC when that
 * is shorter (systemd is about to restart a wedged engine; a prober should
 * know it). With for_health false, the threshold of srv__fail_stalled:
 * SRV_STALL_NS (a step longer than a short watchdog period fails no request). */
int64_t srv__stall_ns(const srv_t *s, bool for_health);
/* The watchdog's tick: pings WATCHDOG=1 when it is due and the engine made
 * progress since the last ping or has no work (or the model is loading). */
void srv__watchdog(srv_t *s);

/* ---- srv_routes.c ----------------------------------------------------------- */

/* Registers every route on s->http. */
void srv__routes(srv_t *s);
/* Whether requests may run now; if not, answers 503 (loading or draining)
 * and returns false. */
bool srv__serving(srv_t *s, http_res_t *res);
/* Answers 404 and returns false when the request names a model other than
 * the served one (NULL: no model given, fine). */
bool srv__model_ok(srv_t *s, http_res_t *res, const char *model);
/* Answers a parse error (400 with the field). */
void srv__send_oai_error(http_res_t *res, const oai_error_t *e);
/* Tokenizes text[len] with TOK_ENC_* flags into a malloc'd array (*ids,
 * *n). Returns 0 or -EINVAL with the reason in err. */
int srv__encode(srv_t *s, const char *text, size_t len, int flags, int32_t **ids, int32_t *n, char *err,
                size_t err_len);
/* The TOK_ENC_* flags for text a request gives (a prompt string):
 * TOK_ENC_PARSE_SPECIAL only with the special_tokens_in_input setting. */
int srv__text_flags(const srv_t *s);
/* Renders messages through the chat template and tokenizes the result
 * (special tokens parsed; BOS/EOS added only with add_special). Unless
 * special_tokens_in_input, every string of the template's inputs (the
 * messages and tools, dict keys included: all of it is the client's) is
 * marked first (tok_mark_specials): only the template's own markup yields
 * control tokens. With continue_final (vLLM's continue_final_message) the rendered
 * text ends where the last message's content ends (its end-of-turn
 * dropped), so the output continues it. tools (JSON text, or NULL) is the
 * template's `tools`. Returns 0,
 * -EINVAL with the reason in err (a template error, raise_exception), or
 * -ENOSYS when the model's template did not compile (a 500). */
int srv__encode_chat(srv_t *s, const oai_message_t *msgs, int32_t n_msgs, const char *tools,
                     bool add_generation_prompt, bool continue_final, bool add_special, int32_t **ids, int32_t *n, char *err, size_t err_len);
/* srv__encode_chat with the template's further variables: chat_template_kwargs
 * (a JSON object's text, or NULL) and reasoning_effort (or NULL). */
int srv__encode_chat_kw(srv_t *s, const oai_message_t *msgs, int32_t n_msgs, const char *tools, const char *kwargs,
                        const char *effort, bool add_generation_prompt, bool continue_final, bool add_special,
                        int32_t **ids, int32_t *n, char *err, size_t err_len);
/* srv_grammar.c: the compiled grammar of a request's structured-output
 * form from the stack's cache (any thread): 0 with *out referenced for the
 * caller (NULL for no form), or 1 when it is not there (*out NULL): then
 * srv__grammar compiles it, on a compile thread (srv_work_t.stage). */
int srv__grammar_find(srv_t *s, const oai_grammar_t *g, gram_entry_t **out);
/* Finds or compiles g (a compile thread): 0 with *out referenced for the
 * caller, or -EINVAL with the 400 in *e (the field, the compiler's message:
 * the bound hit and where). */
int srv__grammar(srv_t *s, const oai_grammar_t *g, gram_entry_t **out, oai_error_t *e);
/* The compile threads and their loop handle: started with the server,
 * stopped (joined) once no work item is out. */
void srv__grammar_start(srv_t *s);
void srv__grammar_stop(srv_t *s);
/* srv_completions.c: answers a refused sched_submit (rc, err) with the
 * client's status (429 queue full, 400, 503 draining, 500) and returns it. */
int srv__submit_failed(uint64_t rid, http_res_t *res, const char *endpoint, int rc, const char *err);
/* Sends a malloc'd JSON body and frees it. */
void srv__send_json(http_res_t *res, int status, char *json);
/* Writes the access-log line of a request answered without the engine; id
 * is http_req_t.id (read it before answering: the request is freed then). */
void srv__access(uint64_t id, const char *endpoint, int status);

/* ---- srv_info.c ------------------------------------------------------------- */

/* Registers GET /server_info, /model_info (and /get_server_info,
 * /get_model_info): what sglang-router asks of a worker. */
void srv__info_routes(srv_t *s);
/* The model as clients see it (/v1/models' root, /server_info's and
 * /model_info's model_path, the dashboard's model_file): the model file's
 * name, or with expose_model_path the path as the operator gave it. */
const char *srv__model_shown(const srv_t *s);

/* ---- srv_completions.c -------------------------------------------------------------- */

void srv__h_completions(const http_req_t *req, http_res_t *res, void *ctx);
void srv__h_chat(const http_req_t *req, http_res_t *res, void *ctx);
/* POST /v1/responses as a work item (srv__offload): the worker parses it
 * into a chat request, compiles its text.format and renders and tokenizes
 * its messages; the loop then runs the chat flow with a Responses job. */
typedef struct srv_work srv_work_t;
void srv__responses_run(srv_work_t *w);
void srv__responses_done(srv_work_t *w);
/* POST /v1/messages (Anthropic's) the same way: api/anth.h's parse on the
 * worker, then the chat flow with an Anthropic job (srv_messages.c). */
void srv__messages_run(srv_work_t *w);
void srv__messages_done(srv_work_t *w);
/* How a job of another API than OpenAI's chat and completions is set up
 * (its writer, ids, what it echoes): init(j, req) once the job exists. */
typedef struct srv_api {
  void (*init)(srv_job_t *j, const void *req);
  const void *req;
} srv_api_t;

/* ---- srv_work.c -------------------------------------------------------------- */

typedef struct srv_work srv_work_t;
typedef void (*srv_work_fn)(srv_work_t *w);
/* A work item's second stage, on a grammar compile thread; refused: the
 * compile queue was full (then it runs on the loop and must only record
 * the 429 for done). */
typedef void (*srv_stage_fn)(srv_work_t *w, int refused);

/* One request's CPU work, done off the loop thread. */
struct srv_work {
  uv_work_t uv;
  srv_t *s;
  http_res_t *res;     /* NULL once the client went away */
  uint64_t rid;        /* http_req_t.id */
  int64_t arrival_ns;
  char *body;          /* a copy of the request body, NUL-terminated */
  size_t body_len;
  arena_t arena;       /* run's allocations; freed with the item */
  srv_work_fn run;     /* on a worker thread: may read s's tokenizer, template and limits */
  srv_work_fn done;    /* on the loop thread: answers, or with res NULL only frees */
  void *out;           /* what run leaves for done */
  srv_stage_fn stage;  /* set by run: a grammar to compile before done (srv_grammar.c) */
  srv_work_t *stage_next; /* the compile queue's links (under srv_t.gc_mu) */
  _Atomic bool gone;   /* the client went away (set on the loop, read by a compile thread) */
};

/* Hands req's CPU work to the worker pool: run(w) on a worker, then done(w)
 * on the loop, with w->res NULL if the client went away meanwhile (res's
 * on_abort is taken until then; done must end the response or set
 * callbacks). */
void srv__offload(srv_t *s, const http_req_t *req, http_res_t *res, int64_t arrival_ns, srv_work_fn run,
                  srv_work_fn done);
/* Starts the stall probe timer (closed by srv__maybe_finish). */
void srv__probe_start(srv_t *s);
/* The loop's end of an item: done, then frees it (after run, or after its
 * stage came back). */
void srv__work_finish(srv_work_t *w);
/* srv_grammar.c: runs w's stage on a compile thread, then finishes w on the
 * loop; a full queue refuses it at once (stage(w, 1), then finish). Loop. */
void srv__grammar_queue(srv_work_t *w);

/* ---- srv_events.c ----------------------------------------------------------- */

/* One choice's output. */
typedef struct srv_choice {
  buf_t text;              /* the whole response: echo + output (not streaming; streaming with tools:
                            * the output, of which `sent` bytes have gone out as content) */
  size_t sent;
  oai_token_logprob_t *lp;     /* [n_lp] per generated token (not streaming) */
  int32_t n_lp;
  size_t cap_lp;
  int32_t offset;              /* bytes of text so far (echo included), for text_offset */
  int32_t tokens;              /* generated */
  int64_t last_token_ns;       /* for the inter-token latency */
  sched_finish_t finish;       /* the engine's (sched_event_t.finish) */
  char *stop_str;              /* malloc'd, or NULL */
  int32_t stop_token;          /* the stop token id that matched (sched_event_t.stop_id); -1: none */
  char *error;                 /* malloc'd, or NULL */
  bool done;
  int32_t *ids;                /* return_token_ids: [n_ids] the generated token ids (malloc'd) */
  int32_t n_ids;
  size_t cap_ids;
  bool prompt_ids_sent;        /* return_token_ids, streaming: a chunk carried the prompt's ids */
  /* a thinking model's output (srv_reasoning.c; the job's `reasoning`): text holds the content only */
  reason_split_t split;        /* the splitter of this choice's output */
  buf_t reasoning;             /* the reasoning so far */
  size_t reason_sent;          /* bytes of it a stream has written */
  int32_t reason_tokens;       /* tokens sampled inside the reasoning */
  float *embedding;            /* /v1/embeddings: the input's vector [the model's dim] (malloc'd), or NULL */
} srv_choice_t;

/* One prompt of a job: one engine request with n sequences. */
typedef struct srv_part {
  srv_job_t *job;
  sched_req_t *req;
  int32_t index;               /* prompt index: choices index*n .. index*n + n-1 */
  int32_t prompt_tokens;
  int64_t last_token_ns;       /* of any of its sequences (metrics) */
  int32_t max_seq_tokens;      /* the longest of its sequences (metrics) */
  bool live;                   /* submitted, final event not yet seen */
  /* prompt logprobs (srv_prompt_lp.c): one entry per prompt token, entry 0 without a logprob */
  oai_token_logprob_t *plp;    /* [prompt_tokens] or NULL */
  oai_top_logprob_t *plp_top;  /* [prompt_tokens * SAMP_MAX_TOP_LOGPROBS] their alternatives */
  int32_t *prompt_ids;         /* return_token_ids: [prompt_tokens] (malloc'd), else NULL */
} srv_part_t;

/* How a job's output is written, one per API format (srv_write_openai.c:
 * completions and chat; srv_responses.c: the Responses API;
 * srv_messages.c: Anthropic's Messages), so that a new API is one new
 * writer. Every function appends to j->out (the wake-up's
 * single write, srv_events.c); the job's bookkeeping is srv_events.c's. */
typedef struct srv_writer {
  /* A stream's first bytes, after its 200 head (echo: a completion's
   * prompts' text, [n_parts] with lengths, or NULL). */
  void (*stream_start)(srv_job_t *j, const char *const *echo, const size_t *echo_len);
  /* What event ev of choice ci (c) adds to the stream. */
  void (*stream_event)(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev);
  /* An error that ends the stream (code: NULL or the error's code). */
  void (*stream_error)(srv_job_t *j, const char *message, const char *code);
  /* The stream's last bytes, once every choice is done. */
  void (*stream_end)(srv_job_t *j);
  /* The whole response's JSON (malloc'd), once every choice is done; NULL:
   * nothing whole to give (a 504 or 503 is sent instead). */
  char *(*whole)(srv_job_t *j);
} srv_writer_t;

extern const srv_writer_t srv_writer_openai;
extern const srv_writer_t srv_writer_responses;
extern const srv_writer_t srv_writer_anthropic;
extern const srv_writer_t srv_writer_embed; /* srv_embed.c: whole only, never streamed */

/* Keeps ev's logprobs entry in c->lp (with j->logprobs; its alternatives
 * copied): a whole response's, or a stream's that answers with them at the
 * end (the Responses API). */
void srv__keep_logprob(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev);
/* Appends "data: <json>\n\n" to j->out and frees json. */
void srv__sse(srv_job_t *j, char *json);
/* An OpenAI error object as an SSE event (the OpenAI and Responses
 * writers' stream_error). */
void srv__write_openai_error(srv_job_t *j, const char *message, const char *code);
/* The logprobs entry of ev's token for choice c; top[] must hold
 * SAMP_MAX_TOP_LOGPROBS. */
void srv__logprob_entry(const srv_job_t *j, const srv_choice_t *c, const sched_event_t *ev,
                        oai_token_logprob_t *lp, oai_top_logprob_t *top);

/* One generation request (completions or chat) from arrival until its
 * response has ended (or its client left) and every engine request of it
 * has posted its final event. */
struct srv_job {
  srv_t *srv;
  srv_job_t *prev, *next;
  http_res_t *res;             /* NULL once the response ended or the client left */
  bool chat, stream, include_usage, logprobs;
  bool include_stop_str;       /* include_stop_str_in_output */
  bool continuous_usage;       /* stream_options.continuous_usage_stats */
  bool echo_logprobs;          /* completions echo + logprobs: the prompt's logprobs lead the choice's */
  int32_t echo_top;            /* their alternatives (the request's logprobs) */
  int32_t prompt_logprobs;     /* vLLM's prompt_logprobs: -1 off, else the alternatives */
  bool return_token_ids;       /* vLLM's: token_ids on every choice (chunk), prompt_token_ids */
  oai_tools_format_t tools_format; /* chat with tools: how the output is read; NONE: no tools */
  bool parallel_tool_calls;    /* false: at most one call */
  char tool_name[OAI_MAX_TOOL_NAME + 1]; /* OAI_TOOLS_JSON_ARGS: the call's name (a named tool_choice) */
  bool harmony_calls;          /* gpt-oss with tools shown: the splitter keeps harmony's calls in the text
                                * (reason_split_t.calls), read first whatever tools_format is (srv_tools.c) */
  const srv_writer_t *writer;  /* the API format it answers in */
  bool reasoning;              /* chat with a reasoning parser: events' texts are split (srv_reasoning.c) */
  /* /v1/responses (srv_responses.c) */
  char *resp_instructions;     /* malloc'd, or NULL */
  int32_t resp_max_output;     /* -1: none */
  float resp_temperature, resp_top_p;
  const char *resp_format;     /* text.format.type echoed: "text", "json_object", "json_schema" (static) */
  int64_t resp_seq;            /* the next event's sequence_number */
  char resp_item_id[64];
  /* /v1/messages (srv_messages.c) */
  int32_t anth_next;           /* the next content block's index */
  int anth_open;               /* the open block: -1 none, else its anth_block_kind_t */
  bool anth_called;            /* the output held tool calls (stop_reason "tool_use") */
  bool anth_thinking;          /* thinking enabled: the reasoning as thinking blocks */
  bool anth_failed;            /* an error event was written: nothing follows it */
  int32_t resp_lp_sent;        /* logprobs entries streamed in deltas so far */
  char resp_rs_id[64];         /* a thinking model's reasoning item */
  unsigned resp_items;         /* a stream's items so far: SRV_RESP_* */
  int32_t n;                   /* choices per prompt */
  int32_t max_tokens;          /* the request's max_tokens; 0: none given */
  char id[64];
  int64_t created;             /* Unix seconds */
  int64_t arrival_ns;
  const char *endpoint;
  srv_part_t *parts;           /* [n_parts] */
  int32_t n_parts, n_live;
  srv_choice_t *choices;       /* [n_parts * n] */
  int32_t n_choices;
  int64_t prompt_tokens, completion_tokens, cached_tokens; /* from the parts' final events */
  int64_t first_scheduled_ns, first_token_ns; /* earliest over the parts; 0: not yet */
  buf_t out;               /* SSE bytes waiting for this wake-up's single write */
  bool dirty;                  /* out holds bytes (the job is on the flush list) */
  srv_job_t *next_dirty;
  bool client_gone, timed_out, errored;
  int64_t unread_since;        /* when the client's unread output first passed SRV_UNREAD_BYTES; 0: it reads */
  bool paused;                 /* its engine requests are paused (sched_req_pause): the client is not reading */
  int status;                  /* HTTP status sent */
  bool embed_base64;           /* /v1/embeddings: encoding_format "base64" */
};

/* A job for a request with n_parts prompts of n choices each, on s's list.
 * The caller fills the rest. */
srv_job_t *srv__job_create(srv_t *s, http_res_t *res, bool chat, const oai_params_t *g, int32_t n_parts);
/* ---- srv_responses.c -------------------------------------------------------- */
enum { SRV_RESP_REASONING = 1, SRV_RESP_REASONING_DONE = 2, SRV_RESP_MESSAGE = 4 };
void srv__h_responses(const http_req_t *req, http_res_t *res, void *ctx);
/* Makes j a Responses job (ids, what the response echoes). */
void srv__resp_init(srv_job_t *j, const oai_responses_req_t *r);
/* The stream's events: the opening ones; an event's text delta (kept for
 * the end, with its logprobs when asked);
 * the closing ones (done, completed or incomplete). */
void srv__resp_stream_start(srv_job_t *j);
void srv__resp_stream_text(srv_job_t *j, const sched_event_t *ev);
void srv__resp_stream_end(srv_job_t *j);
/* The whole response object (malloc'd). */
char *srv__resp_whole(const srv_job_t *j);

/* ---- srv_messages.c --------------------------------------------------------- */
/* POST /v1/messages and /v1/messages/count_tokens (Anthropic's). */
void srv__h_messages(const http_req_t *req, http_res_t *res, void *ctx);
void srv__h_count_tokens(const http_req_t *req, http_res_t *res, void *ctx);
/* Makes j an Anthropic job (its writer, its "msg_" id). */
void srv__anth_init(srv_job_t *j, const anth_req_t *r);
/* ---- srv_embed.c ------------------------------------------------------------ */
/* POST /v1/embeddings (a work item: parse and tokenize on a worker). */
void srv__h_embeddings(const http_req_t *req, http_res_t *res, void *ctx);
/* The pooling of the server's embeddings: the pooling setting, or (auto)
 * the model file's, else last. */
sched_pool_t srv__pooling(const srv_t *s);

/* ---- srv_tools.c ------------------------------------------------------------ */
/* The format tool calls are read in: the tool_call_parser setting, or
 * (auto) the chat template's. */
oai_tools_format_t srv__tools_format(const srv_t *s);
/* Choice ci's finished text c->text as oc's content and tool calls (ids
 * made here), finish_reason "tool_calls" when it called any; in a. With
 * harmony_calls, harmony's calls are read first; a forced tool_choice's
 * JSON (the grammar's, in the final channel) when there are none, and a
 * named one keeps only calls of its function. */
void srv__tools_parse(const srv_job_t *j, int32_t ci, const srv_choice_t *c, arena_t *a, oai_choice_t *oc);
/* gpt-oss (rf REASON_GPT_OSS) with a forced tool_choice (tools JSON_ARGS,
 * JSON_LIST): the engine forces the analysis channel's opening first
 * (p->think_lead: *lead, malloc'd, the caller frees it after creating its
 * requests), and for a named one (tool_name) a spent thinking budget opens
 * the call: close[cap] gets its harmony header (the text to force instead
 * of the final channel's), and the grammar constrains the call's arguments
 * (p->grammar_in_calls). Otherwise nothing changes. */
void srv__tools_harmony(srv_t *s, reason_fmt_t rf, oai_tools_format_t tools, const char *tool_name,
                        sched_req_params_t *p, int32_t **lead, char *close, size_t cap);

/* ---- srv_reasoning.c ------------------------------------------------------- */
/* The format a thinking model's output is read in: the reasoning_parser
 * setting, or (auto) the chat template's; REASON_NONE: no splitting. */
reason_fmt_t srv__reason_format(const srv_t *s);
/* Starts the splitters of part's choices for format f from the end of its
 * prompt ids[n] (*start gets the starting state, for the engine); marks j
 * as splitting (f not NONE). */
void srv__reason_start(srv_job_t *j, reason_fmt_t f, int32_t part, const int32_t *ids, int32_t n,
                       reason_split_t *start);
/* The token ids of close (NULL: what closes f's reasoning) in malloc'd
 * *ids[*n]: what a spent thinking budget forces; and *open_id, the one
 * token that opens f's reasoning (-1: none is a single token). Returns 0
 * or -EINVAL. */
int srv__reason_close_ids(srv_t *s, reason_fmt_t f, const char *close, int32_t **ids, int32_t *n,
                          int32_t *open_id);
/* Splits ev's text for choice c: the reasoning is appended to
 * c->reasoning, and the event the writers see is returned: ev itself when
 * the job does not split, else *tmp, ev with the content as its text (a
 * final event also flushes the splitter). Release it with
 * srv__reason_event_done(returned, tmp). */
const sched_event_t *srv__reason_event(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev, sched_event_t *tmp);
void srv__reason_event_done(const sched_event_t *ev, const sched_event_t *tmp);
/* A request's reasoning_effort (NULL: none; the field `param`) that the chat
 * template does not read: true with the 400 in *e (naming param). */
bool srv__effort_refused(const srv_t *s, const char *effort, const char *param, oai_error_t *e);
/* A stream's reasoning not yet written (*p[*n]), marked written; false: none. */
bool srv__reason_pending(srv_choice_t *c, const char **p, size_t *n);

/* ---- srv_prompt_lp.c --------------------------------------------------------- */
/* Gives part its prompt-logprob entries for prompt ids[n] (entry 0, the
 * first token, has no logprob). */
void srv__plp_init(srv_t *s, srv_part_t *p, const int32_t *ids, int32_t n);
/* Stores a SCHED_EV_PROMPT event in its part. */
void srv__plp_event(srv_t *s, srv_part_t *p, const sched_event_t *ev);
/* The part's entries with at most n_top alternatives each and text_offset
 * counted from 0 (malloc'd [p->prompt_tokens]; the strings are the
 * tokenizer's, the alternatives the part's). */
oai_token_logprob_t *srv__plp_view(const srv_part_t *p, int32_t n_top);
void srv__plp_free(srv_part_t *p);

/* Cancels the job's live engine requests (client gone, timeout, shutdown). */
void srv__job_cancel(srv_job_t *j, const char *why);
/* Frees the job if nothing refers to it any more (response ended or client
 * gone, no live part). Returns true if it was freed. */
bool srv__job_maybe_free(srv_job_t *j);
/* The response has started (all parts submitted): stream head and the
 * first chunks (chat role, echo), or nothing until the end. */
void srv__job_start(srv_job_t *j, const char *const *echo, const size_t *echo_len);
/* Back-pressure that reaches the engine. A streaming job whose client has
 * left more than SRV_UNREAD_BYTES unread (ours queued plus the kernel's send
 * queue) is paused: its engine requests take no step (they keep their
 * cache blocks unless the engine needs them). It is resumed once the
 * client has read below that; a job still not read after
 * slow_client_timeout, counted from when its output first stopped
 * draining, is cancelled. Looked at after each write, on the tick, and
 * every SRV_READERS_MS while a job is paused (s->readers). */
void srv__check_readers(srv_t *s, int64_t now);
/* The engine ran no step for stalled_s seconds while it had work: every
 * response still open is ended now with a clean error (a stream: an error
 * event, then the end; a whole response: 503 "engine_stalled"), and its
 * requests are cancelled; the jobs are freed when (if) the engine posts
 * their final events. */
void srv__fail_stalled(srv_t *s, double stalled_s);
/* uv_async callback: drains the engine's events. */
void srv__on_wake(uv_async_t *h);

/* ---- srv_dump.c ------------------------------------------------------------- */

/* Logs one screen of state (SIGUSR1): connections, engine, jobs. */
void srv__dump_state(srv_t *s);

/* ---- srv_main.c ------------------------------------------------------------- */

/* Shuts down once a drain (or a failed load) has nothing left to wait for:
 * no connection, no job, no loader at work. */
void srv__maybe_finish(srv_t *s);

#endif
