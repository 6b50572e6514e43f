/* scheduler/sched.h — the continuous-batching engine: one engine thread owns
 * the model runner, the paged KV cache, the sampler scratch and the
 * scheduler, and runs one step at a time over every admitted request.
 *
 * Threads and the two queues. Any thread submits requests (sched_submit)
 * and cancels them (sched_req_cancel); at the end of each step the engine
 * thread publishes the step's events (tokens, finished, error) to an event
 * queue, after its statistics snapshot, and calls the notify hook; any
 * thread drains the queue with sched_poll_events (or blocks in
 * sched_wait_events). Nothing else is shared, except the request's atomic
 * cancellation flag and the statistics snapshot (sched_get_stats). No libuv
 * here: the server's notify hook does uv_async_send.
 *
 * A step (scheduler/sched_plan.c has the details): running sequences with
 * one token to compute first (decodes), then the next chunk of partially
 * prefilled prompts, then waiting sequences in arrival order, under a token
 * budget (max_batch_tokens) and a sequence budget (max_seqs). Each sequence
 * owns the cache blocks for the tokens it adds before the forward runs; when
 * the cache runs out the most recently admitted running sequence is
 * preempted (its blocks freed, its generated tokens and sampler state kept,
 * recomputed later), so no request is lost and its output does not change.
 * With prefix caching, full blocks are shared by content across requests.
 * A request's tokens depend only on its own prompt, parameters and seed —
 * never on the batch, chunking or preemption (kernels/kern.h's batch
 * invariance plus the sampler's counter-based random stream).
 *
 * Ownership of a request: the submitter creates it (sched_req_create, which
 * copies everything it is given), the engine owns it from a successful
 * sched_submit until it posts the request's final event (ev.final == 1);
 * then the submitter destroys it, after it has released that event. The
 * request pointer in every event stays valid until then. A request whose
 * submit failed stays the submitter's.
 *
 * Events of one request come in order: for each of its n sequences
 * (index 0..n-1), TOKEN events then one FINISHED or ERROR event; the final
 * event of the request is the last of all. Text deltas are the newly
 * releasable detokenized output (valid UTF-8, stop-string hold-back already
 * applied, possibly empty); their concatenation is the sequence's output. */
#ifndef TRAM_SCHED_H
#define TRAM_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "cache/kv_observer.h"
#include "sample/samp_params.h"
#include "text/reasoning.h"

/* Only pointers to these cross this header, so the server compiles without
 * the kernels, the model, the cache or attention (kernels/kern.h,
 * model/model.h, text/tokenizer.h own them). */
typedef struct kern_backend kern_backend_t;
typedef struct model model_t;
typedef struct tok tok_t;
typedef struct gram_entry gram_entry_t; /* a compiled grammar (grammar/gram_lru.h) */
typedef struct gram_vocab gram_vocab_t;

typedef struct sched_engine sched_engine_t;
typedef struct sched_req sched_req_t;

/* ---- configuration -------------------------------------------------------- */

/* Speculative decoding (scheduler/sched_spec.c). */
typedef enum sched_spec_method {
  SCHED_SPEC_OFF = 0,
  SCHED_SPEC_NGRAM, /* prompt lookup: the continuation of the last n-gram's earlier occurrence */
  SCHED_SPEC_DRAFT, /* a draft model's greedy continuation (scheduler/sched_draft.c) */
} sched_spec_method_t;

#define SCHED_SPEC_MAX_K 16 /* draft tokens per sequence and step at most */

typedef struct sched_spec_config {
  sched_spec_method_t method;
  int k;                /* draft tokens per step (1..SCHED_SPEC_MAX_K); 0: 4 */
  int ngram_min, ngram_max; /* n-gram sizes tried, longest first (1 <= min <= max); 0: 1 and 4 */
  int max_batch;        /* speculate only while at most this many sequences run (>= 1); 0: 4 */
  /* SCHED_SPEC_DRAFT: the draft model (same backend and vocabulary as the
   * engine's model; the caller's, outliving the engine) and its own KV
   * cache's bytes (0: room for max_batch sequences of max_model_len tokens,
   * at most as many blocks as the main cache) */
  const model_t *draft_model;
  int64_t draft_kv_cache_bytes;
} sched_spec_config_t;

typedef struct sched_config {
  int max_batch_tokens;   /* tokens per step at most (>= max_seqs); 0: 256 */
  int max_seqs;           /* sequences running at once at most; 0: 16 */
  int64_t kv_cache_bytes; /* KV cache budget (used when kv_cache_blocks is 0); 0 with 0 blocks: 512 MiB.
                           * Given (not 0), a hybrid's recurrent states come out of it; the default
                           * is the KV cache's alone, the states come on top */
  int kv_cache_blocks;    /* KV cache size in blocks; 0: from kv_cache_bytes */
  int kv_cache_bytes_default; /* set by the engine: kv_cache_bytes was 0 (the default taken) */
  int block_size;         /* tokens per block; 0: 32 */
  int max_model_len;      /* longest sequence (prompt + output); 0: the model's context. Clamped to
                           * the whole cache (logged) */
  int max_waiting;        /* requests waiting for admission at most; 0: no limit */
  int prefix_caching;     /* 1: share full blocks by content across requests */
  int64_t state_snapshot_bytes; /* a hybrid model's recurrent-state snapshots kept with prefix-cache blocks
                                 * (cache/kv_state.h); 0: 512 MiB; < 0: none, and then no prefix caching
                                 * for hybrids */
  int cuda_graphs;        /* 1: decode steps replay captured graphs where the backend has them
                           * (model/model_graph.h); 0: off */
  int step_target_ms;     /* prompt chunks of steps with decodes sized to keep a step under this
                           * (scheduler/sched_pace.h); 0: auto, 2.5 decode-only steps */
  kv_observer_t kv_observer; /* told of every prefix-cache block stored and evicted, on the engine
                              * thread; flushed after each step (zero: none) */
  sched_spec_config_t spec;  /* speculative decoding (zero: off) */
} sched_config_t;

/* The defaults above, prefix caching on. */
sched_config_t sched_config_default(void);

/* ---- requests -------------------------------------------------------------- */

#define SCHED_MAX_STOP 16        /* stop strings per request */
#define SCHED_MAX_STOP_LEN 256   /* bytes of one stop string */
#define SCHED_MAX_STOP_IDS 64    /* stop token ids per request */
#define SCHED_MAX_N 64           /* completions of one prompt */
/* Reasoning close / lead ids per request: the longest is a forced harmony
 * call header (`<|end|><|start|>assistant<|channel|>commentary
 * to=functions.NAME <|constrain|>json<|message|>`): 5 special tokens and 38
 * characters around a name of up to 64 (OpenAI's ^[a-zA-Z0-9_-]{1,64}$), so
 * at most 107 tokens even where every character is a token of its own. */
#define SCHED_MAX_THINK_IDS 128

/* Embeddings (scheduler/sched_pool.c): how a pooling request's prompt rows'
 * final-normed hidden states become one vector. The values are llama.cpp's
 * enum llama_pooling_type (and GGUF's `<arch>.pooling_type`). */
typedef enum sched_pool {
  SCHED_POOL_NONE = 0, /* a generation request */
  SCHED_POOL_MEAN = 1, /* the mean over every prompt row */
  SCHED_POOL_CLS = 2,  /* the first row */
  SCHED_POOL_LAST = 3, /* the last row (decoder embedding models: Qwen3-Embedding, e5-mistral) */
} sched_pool_t;

typedef struct sched_req_params {
  samp_params_t samp;           /* sampling; logit_bias is copied */
  int32_t max_tokens;           /* output tokens per sequence at most; 0: up to max_model_len */
  int32_t n;                    /* completions of the prompt (1..SCHED_MAX_N); 0: 1 */
  int ignore_eos;               /* 1: end-of-generation tokens do not stop */
  const char *const *stop;      /* [n_stop] stop strings (copied), matched on the output text */
  int32_t n_stop;
  const int32_t *stop_ids;      /* [n_stop_ids] token ids that stop (copied) */
  int32_t n_stop_ids;
  int special;                  /* 1: render control tokens' text in the output (TOK_DEC_SPECIAL) */
  int32_t min_tokens;           /* until a sequence has this many tokens, end-of-generation and stop
                                 * tokens cannot be sampled (their logits are -inf; logprobs are
                                 * those of that masked row) and stop strings do not match; 0: off */
  int prompt_logprobs;          /* 1: a SCHED_EV_PROMPT event for each prompt token from the second (its
                                 * raw logprob given the tokens before it, its rank, and
                                 * prompt_top_logprobs alternatives); the prompt is then computed whole
                                 * (no prefix-cache hit) */
  int32_t prompt_top_logprobs;  /* 0..SAMP_MAX_TOP_LOGPROBS */
  int score_only;               /* 1: no token is sampled: once the prompt is computed the request
                                 * ends (SCHED_FINISH_LENGTH, 0 tokens) — prompt scoring */
  int no_spec;                  /* 1: never speculate for this request (plain decoding; its tokens are
                                 * the same either way) */
  gram_entry_t *grammar;        /* structured output: every sequence's output is a sentence of this
                                 * grammar (compiled over the engine's vocabulary,
                                 * sched_gram_vocab_create); tokens it refuses are -inf before
                                 * sampling (logprobs are of that masked row), end of generation
                                 * only where it accepts, and the sequence stops (SCHED_FINISH_STOP)
                                 * once nothing can follow. The request takes its own reference.
                                 * NULL: none */
  /* a thinking model (scheduler/sched_think.c) */
  reason_split_t reasoning;     /* the output's splitter where it starts (text/reasoning.h: the server
                                 * starts it from the prompt's end); fmt REASON_NONE: no reasoning. With
                                 * one, the grammar constrains the answer only: not the tokens of the
                                 * reasoning, nor the one that ends it (as vLLM's reasoning parsers);
                                 * before the output shows whether it thinks (REASON_START), the
                                 * grammar's tokens and think_open are allowed */
  int32_t think_budget;         /* tokens of reasoning, after which think_close is forced (one token a
                                 * step, the logits row masked to it) and the model answers; -1: none */
  const int32_t *think_close;   /* [n_think_close] the ids that close the reasoning (copied) */
  int32_t n_think_close;
  const int32_t *think_lead;    /* [n_think_lead] ids forced first, at the output's start, one a step as
                                 * think_close's (gpt_oss with a forced tool_choice: the analysis
                                 * channel's opening, so that the budget and the forced call follow a
                                 * reasoning); copied */
  int32_t n_think_lead;
  int32_t think_open;           /* the single token that opens the reasoning, or -1 */
  bool grammar_in_calls;        /* gpt_oss: the grammar constrains a tool call's arguments too (the body of
                                 * a message with a recipient, REASON_CALL: a named tool_choice) */
  sched_pool_t pooling;         /* not NONE: an embedding. Only the prompt pass runs (no prefix-cache
                                 * hit, every prompt row computed, nothing sampled); the request
                                 * ends (SCHED_FINISH_STOP, 0 tokens) with its final event carrying
                                 * the pooled vector. Needs n 1 and no grammar, prompt_logprobs or
                                 * score_only. The vector of a prompt is bit-identical whatever the
                                 * batch, chunking or preemption (the sum of MEAN is taken in
                                 * position order, in double) */
  int normalize;                /* pooling: 1, the vector divided by its L2 norm (at least 1e-12) */
} sched_req_params_t;

/* The parameters that change nothing: samp_params_default(), max_tokens 0,
 * n 1, no stops. */
sched_req_params_t sched_req_params_default(void);

/* Creates a request for prompt[n_prompt] token ids (copied) with params p
 * (copied, stop strings and ids and logit_bias too) and the submitter's
 * `user` pointer (handed back in every event). Returns NULL with a message
 * in err[err_len] when p is malformed (n, counts or a stop string out of
 * range, an empty prompt); sampling parameters are checked at submit. */
sched_req_t *sched_req_create(const int32_t *prompt, int32_t n_prompt, const sched_req_params_t *p, void *user,
                              char *err, size_t err_len);

/* Frees a request: one never submitted, one whose submit failed, or one
 * whose final event has been polled and released. NULL is a no-op. */
void sched_req_destroy(sched_req_t *r);

/* Asks the engine to drop the request: any thread, any time between a
 * successful submit and the final event (later calls are no-ops). The
 * engine frees its blocks at its next step and finishes every sequence
 * still going with SCHED_FINISH_ABORT. */
void sched_req_cancel(sched_req_t *r);

/* Pauses (paused 1) or resumes (0) the request: back-pressure from a client
 * that stopped reading. Any thread, any time between a successful submit
 * and the final event. A paused request's sequences are not planned: a
 * running one takes no step and keeps its blocks (it may be preempted like
 * any other, and is preempted first when the cache or the running places
 * are short); a waiting one is not admitted, and others are admitted past
 * it. Resuming wakes the engine. Its output does not change. */
void sched_req_pause(sched_req_t *r, int paused);

void *sched_req_user(const sched_req_t *r);
/* The engine's id for the request (0 before submit), for logs. */
uint64_t sched_req_id(const sched_req_t *r);
int32_t sched_req_prompt_tokens(const sched_req_t *r);
/* The seed the sampler of sequence `index` uses (valid after submit). */
uint64_t sched_req_seed(const sched_req_t *r, int32_t index);

/* ---- events ---------------------------------------------------------------- */

typedef enum sched_event_kind {
  SCHED_EV_TOKEN = 0,    /* a sampled token of sequence `index` */
  SCHED_EV_FINISHED = 1, /* sequence `index` ended (finish says why); may carry its last token */
  SCHED_EV_ERROR = 2,    /* sequence `index` failed (message in error) */
  SCHED_EV_PROMPT = 3,   /* prompt_logprobs: prompt token `token` at `position` (index 0); these come
                          * in position order, each once, before the request's first TOKEN */
} sched_event_kind_t;

typedef enum sched_finish {
  SCHED_FINISH_NONE = 0,
  SCHED_FINISH_STOP,   /* eos/eot, a stop token id or a stop string */
  SCHED_FINISH_LENGTH, /* max_tokens or max_model_len reached */
  SCHED_FINISH_ABORT,  /* cancelled, or the engine stopped */
  SCHED_FINISH_ERROR,  /* see the ERROR event */
} sched_finish_t;

/* "stop", "length", "abort", "error" (OpenAI's names for the first two). */
const char *sched_finish_name(sched_finish_t f);

typedef struct sched_usage {
  int64_t prompt_tokens;     /* the prompt's length */
  int64_t completion_tokens; /* tokens sampled, all sequences together */
  int64_t cached_tokens;     /* prompt tokens found in the prefix cache at first admission */
} sched_usage_t;

/* Times on CLOCK_MONOTONIC, in nanoseconds; 0 when it did not happen. */
typedef struct sched_times {
  int64_t arrival;         /* sched_submit */
  int64_t first_scheduled; /* the first step that computed any of it */
  int64_t first_token;     /* the first sampled token */
  int64_t finished;        /* the final event */
  uint64_t first_step;     /* the engine step (sched_stats_t.steps numbering) that first computed any of it */
} sched_times_t;

typedef struct sched_event {
  sched_event_kind_t kind;
  sched_req_t *req;  /* valid until the submitter destroys it after the final event */
  void *user;        /* sched_req_user(req) */
  int32_t index;     /* sequence 0..n-1 */
  int32_t token;     /* the sampled token; -1 when none (abort, error, a flush) */
  char *text;        /* [text_len] output text released by this event (owned by the event; NULL if empty) */
  size_t text_len;
  float logprob;             /* token's raw logprob when samp.logprobs or top_logprobs (or PROMPT) */
  int32_t n_top;             /* = samp.top_logprobs (PROMPT: prompt_top_logprobs) */
  int32_t position;          /* PROMPT: the token's position in the prompt (1..n_prompt-1) */
  int32_t rank;              /* PROMPT: 1 + how many tokens the model found likelier */
  samp_logprob_t *top;       /* [n_top] (owned by the event; NULL when 0) */
  int64_t time;              /* when the engine produced it (CLOCK_MONOTONIC ns) */
  uint64_t step;             /* the engine step that produced it (1, 2, ...) */
  /* FINISHED and ERROR */
  sched_finish_t finish;
  const char *stop_str;      /* the stop string that matched (the request's copy), or NULL */
  int32_t stop_token;        /* the stop token id or eog token that matched, or -1 */
  int32_t stop_id;           /* the one of the request's stop_ids that matched (vLLM's stop_reason), or -1:
                              * an end-of-generation token that is not one of them is only stop_token */
  int32_t completion_tokens; /* tokens this sequence produced */
  char *error;               /* ERROR: what went wrong (owned by the event) */
  /* the request's last event: from here on the submitter owns req */
  int final;
  float *embedding;          /* final of a pooling request that finished: [n_embedding] (the model's
                              * dim) floats, owned by the event; else NULL */
  int32_t n_embedding;
  sched_usage_t usage;       /* final only */
  sched_times_t times;       /* final only */
} sched_event_t;

/* Moves up to `max` queued events into out[] in order; returns how many.
 * Any thread. Each must be passed to sched_event_release. */
int sched_poll_events(sched_engine_t *e, sched_event_t *out, int max);

/* Like sched_poll_events, but waits up to timeout_ns for the first event
 * when none is queued (for programs without an event loop: tram generate,
 * benchmarks, tests). Returns how many were moved (0 on timeout). */
int sched_wait_events(sched_engine_t *e, sched_event_t *out, int max, int64_t timeout_ns);

/* Frees an event's text, top logprobs and error. */
void sched_event_release(sched_event_t *ev);

/* The grammar vocabulary of tok (scheduler/sched_gram.c): each token's
 * decoded bytes; control, unused and unknown tokens are never text, the
 * end-of-generation ids are allowed where a grammar accepts. NULL with the
 * reason in err[err_len]. The caller destroys it (gram_vocab_destroy). */
gram_vocab_t *sched_gram_vocab_create(const tok_t *tok, char *err, size_t err_len);

/* ---- the engine ------------------------------------------------------------ */

/* Creates the engine for model m with tokenizer tok on backend be (all
 * outlive it): the KV cache, the model runner, the sampler scratch, and
 * starts the engine thread. Returns NULL after logging why (bad
 * configuration, a tokenizer whose vocabulary is not the model's, a cache
 * that holds no block, out of memory). */
sched_engine_t *sched_engine_create(const model_t *m, const tok_t *tok, kern_backend_t *be, const sched_config_t *c);

/* fn(arg) is called on the engine thread after each step that queued
 * events (never from sched_engine_destroy's final aborts); it must be quick
 * and thread-safe (the server passes a function that calls uv_async_send).
 * Set it before the first submit. */
void sched_engine_set_notify(sched_engine_t *e, void (*fn)(void *arg), void *arg);

/* Queues a request for admission. Thread-safe. Returns 0 (the engine owns
 * r until its final event); -EAGAIN when max_waiting requests wait already
 * (answer 429); -EINVAL when it can never run, with the reason in
 * err[err_len] (sampling parameters out of range; the prompt, or prompt plus
 * max_tokens, longer than max_model_len; more KV blocks than the whole
 * cache holds; n above max_seqs); -ESHUTDOWN after sched_engine_drain. */
int sched_submit(sched_engine_t *e, sched_req_t *r, char *err, size_t err_len);

/* Stops admitting new requests (sched_submit returns -ESHUTDOWN); what is
 * queued or running goes on to its end. Any thread. */
void sched_engine_drain(sched_engine_t *e);

/* Cancels every request queued or running (each ends with
 * SCHED_FINISH_ABORT at the next step). Any thread. */
void sched_engine_abort_all(sched_engine_t *e);

/* Aborts what is left, stops and joins the engine thread, and frees the
 * engine. Events not yet polled are released unseen: every submitted
 * request whose final event the submitter has not polled is then its to
 * destroy (the engine frees none). The orderly shutdown: sched_engine_drain,
 * poll until running + waiting is 0 (or, past a deadline,
 * sched_engine_abort_all and poll the final events), then destroy. NULL is
 * a no-op. */
void sched_engine_destroy(sched_engine_t *e);

/* ---- statistics ------------------------------------------------------------ */

#define SCHED_STEP_TOKEN_BUCKETS 16

typedef struct sched_stats {
  /* now */
  int32_t running;             /* sequences admitted and not finished */
  int32_t waiting;             /* sequences waiting for admission: new requests (queued or
                                * listed) and preempted sequences */
  int32_t paused;              /* of the running and waiting ones, those of paused requests
                                * (sched_req_pause): work the engine holds but does not do */
  int32_t kv_blocks_total, kv_blocks_used, kv_blocks_free;
  /* a hybrid model's recurrent-state pool (cache/kv_state.h; 0 for other models): slots in all and
   * held by running sequences, and its bytes */
  int32_t state_slots_total, state_slots_used;
  int32_t prefix_caching; /* 1: prefix-cache hits are taken (the setting, unless the model rules them out) */
  int64_t state_bytes;
  /* its snapshots at prefix-cache blocks: held, in all, their bytes (in all), and since start: taken,
   * restored by prefix-cache hits, dropped for room (not with their block) */
  int32_t state_snaps_used, state_snaps_total;
  int64_t state_snap_bytes;
  uint64_t state_snaps_taken, state_snaps_restored, state_snaps_dropped;
  int32_t kv_blocks_cached;    /* blocks holding a prefix-cache entry (in use or free) */
  int32_t draft_kv_blocks_total, draft_kv_blocks_used; /* the draft model's cache (0: no draft model) */
  int32_t block_size;
  int32_t max_model_len;       /* effective */
  /* totals since start */
  uint64_t requests_submitted, requests_finished;
  uint64_t preemptions;
  uint64_t steps, decode_steps, varlen_steps; /* steps per attention path */
  uint64_t step_tokens, step_seqs;            /* summed over steps */
  /* steps by prompt tokens computed + tokens sampled, t: [0] t <= 1, [k]
   * 2^(k-1) < t <= 2^k, the last one everything above */
  uint64_t step_tokens_log2[SCHED_STEP_TOKEN_BUCKETS];
  uint64_t prompt_tokens;        /* prompt tokens computed (recomputation included) */
  uint64_t generated_tokens;     /* tokens sampled */
  uint64_t prefix_query_tokens, prefix_hit_tokens; /* prompt tokens looked up / found cached */
  uint64_t prefix_query_blocks, prefix_hit_blocks;
  /* the last step */
  int32_t last_step_tokens, last_step_seqs;
  int64_t last_step_ns;          /* wall time of the whole step */
  int64_t last_forward_ns;       /* of which model_forward */
  uint64_t busy_ns;              /* summed over steps that ran: the whole step */
  uint64_t forward_ns;           /* of which model_forward */
  uint64_t plan_ns;              /* of which before it: inbox, cancellations, plan, batch and metadata */
  uint64_t output_ns;            /* of which after it: commit, sampling, detokenizing, stops, events */
  /* speculative decoding: verification rounds, draft tokens proposed,
   * drafts accepted, and accepted by position in the draft */
  uint64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
  uint64_t spec_accepted_per_pos[SCHED_SPEC_MAX_K];
  /* pacing (scheduler/sched_pace.h) and the weight bandwidth */
  int64_t step_target_ns;        /* the step time prompt chunks are sized for (0: not learned yet) */
  int32_t prefill_budget;        /* prompt tokens a step with decodes may compute now */
  double weight_gbps;            /* the last step's weight bytes / its forward time, GB/s */
  double memory_read_gbps;       /* the bound: the read bandwidth measured at start-up (0: unknown) */
  int64_t last_progress;         /* CLOCK_MONOTONIC ns of the last step that ran (0: none yet);
                                  * with waiting + running > 0 and an old value, the engine is stuck */
} sched_stats_t;

/* A consistent snapshot of the counters, taken at the end of the engine's
 * last step (plus the requests submitted since): an event already polled is
 * always reflected in it. Any thread. */
void sched_get_stats(sched_engine_t *e, sched_stats_t *out);

/* The model's tokenizer (immutable; any thread), and the engine's effective
 * maximum sequence length. */
const tok_t *sched_engine_tokenizer(const sched_engine_t *e);
int32_t sched_engine_max_model_len(const sched_engine_t *e);
/* The model's architecture, as GGUF's general.architecture names it
 * ("llama", "qwen2", "gemma3"), and Hugging Face's class for it
 * ("LlamaForCausalLM", "Qwen2ForCausalLM", "Gemma3ForCausalLM"). */
const char *sched_engine_model_arch(const sched_engine_t *e);
const char *sched_engine_model_hf_class(const sched_engine_t *e);
/* Bytes of the KV cache's arena (K and V of every layer and block). */
int64_t sched_engine_kv_cache_bytes(const sched_engine_t *e);

#endif
