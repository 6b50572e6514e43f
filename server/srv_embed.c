/* server/srv_embed.c — POST /v1/embeddings: parse (api/oai_embed.h) and
 * tokenize on a worker, then on the loop check the model, `dimensions` and
 * each input's length against the context, and submit one engine request
 * per input with the server's pooling (sched_req_params_t.pooling: only
 * the prompt pass runs, batched with the other requests' work under the
 * token budget, nothing sampled, no KV kept). The job's bookkeeping is
 * srv_events.c's, as for generation; its writer (srv_writer_embed) writes
 * the whole response once every input's vector is in. Never streamed.
 *
 * The pooling: the pooling setting, or (auto) the model file's
 * <arch>.pooling_type, else last (what vLLM does with a decoder model run
 * as an embedding model); normalized as the request's normalize says, else
 * the pooling_normalize setting, else (auto) the model (a
 * sentence-transformers Normalize module), else yes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_embed.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/srv_internal.h"

#define EMBEDDINGS "/v1/embeddings"

/* What the worker leaves for the loop (in the work item's arena). */
typedef struct embed_out {
  int parse_rc;
  oai_error_t e;
  oai_embed_req_t q;
  int32_t **ids;   /* [q.n_inputs] malloc'd token ids (NULL: not encoded) */
  int32_t *n_ids;  /* [q.n_inputs] */
  int32_t n_done;  /* inputs encoded, or the index of the one that failed */
  int rc;          /* that input's encoding error (0: all encoded) */
  char err[512];
} embed_out_t;

sched_pool_t srv__pooling(const srv_t *s) {
  switch (s->cfg->pooling) {
  case CFG_POOLING_LAST: return SCHED_POOL_LAST;
  case CFG_POOLING_MEAN: return SCHED_POOL_MEAN;
  case CFG_POOLING_CLS: return SCHED_POOL_CLS;
  default: return s->stack.pooling > 0 ? (sched_pool_t)s->stack.pooling : SCHED_POOL_LAST;
  }
}

/* Whether vectors are normalized when the request does not say. */
static int pool_normalize(const srv_t *s) {
  switch (s->cfg->pooling_normalize) {
  case CFG_POOLING_NORMALIZE_TRUE: return 1;
  case CFG_POOLING_NORMALIZE_FALSE: return 0;
  default: return s->stack.pool_normalize >= 0 ? s->stack.pool_normalize : 1;
  }
}

static void free_ids(embed_out_t *o) {
  for (int32_t i = 0; o->ids && i < o->q.n_inputs; i++) free(o->ids[i]);
  free(o->ids);
  free(o->n_ids);
  o->ids = NULL;
  o->n_ids = NULL;
}

/* Worker: parse, then tokenize each input (up to the first that fails). */
static void embed_run(srv_work_t *w) {
  srv_t *s = w->s;
  embed_out_t *o = w->out = arena_alloc(&w->arena, sizeof *o);
  memset(o, 0, sizeof *o);
  if (oai_parse_embeddings(w->body, w->body_len, &s->oai_lim, &w->arena, &o->q, &o->e) != 0) {
    o->parse_rc = -EINVAL;
    return;
  }
  o->ids = xcalloc((size_t)o->q.n_inputs, sizeof *o->ids);
  o->n_ids = xcalloc((size_t)o->q.n_inputs, sizeof *o->n_ids);
  const int flags = (o->q.add_special_tokens ? TOK_ENC_ADD_SPECIAL : 0) | srv__text_flags(s);
  for (; o->n_done < o->q.n_inputs; o->n_done++) {
    const oai_prompt_t *in = &o->q.inputs[o->n_done];
    if (in->text) {
      o->rc = srv__encode(s, in->text, in->text_len, flags, &o->ids[o->n_done], &o->n_ids[o->n_done], o->err,
                          sizeof o->err);
      if (o->rc == 0 && o->n_ids[o->n_done] == 0) {
        snprintf(o->err, sizeof o->err, "the input has no tokens");
        o->rc = -EINVAL;
      }
      if (o->rc != 0) return;
    } else {
      o->n_ids[o->n_done] = in->n_tokens;
      o->ids[o->n_done] = memcpy(xmalloc((size_t)in->n_tokens * sizeof(int32_t)), in->tokens,
                                 (size_t)in->n_tokens * sizeof(int32_t));
    }
  }
}

static void fail(uint64_t rid, http_res_t *res, int status, const char *msg, const char *param, const char *code) {
  http_res_send_error(res, status, NULL, msg, param, code);
  srv__access(rid, EMBEDDINGS, status);
}

/* Loop: the checks no worker can make (model, dimensions, lengths against
 * the context); 0 when the request goes on, else answered. */
static int check(srv_t *s, uint64_t rid, http_res_t *res, embed_out_t *o) {
  char msg[512];
  if (o->parse_rc != 0) {
    srv__send_oai_error(res, &o->e);
    srv__access(rid, EMBEDDINGS, o->e.status ? o->e.status : 400);
    return -EINVAL;
  }
  if (!srv__serving(s, res)) {
    srv__access(rid, EMBEDDINGS, 503);
    return -EINVAL;
  }
  if (!srv__model_ok(s, res, o->q.model)) {
    srv__access(rid, EMBEDDINGS, 404);
    return -EINVAL;
  }
  if (o->q.dimensions && o->q.dimensions != s->stack.embed_dim) {
    snprintf(msg, sizeof msg,
             "dimensions %d is not supported: this model's embeddings have %d dimensions and it is not known to be "
             "Matryoshka-trained (leave dimensions out, or give %d)",
             o->q.dimensions, s->stack.embed_dim, s->stack.embed_dim);
    fail(rid, res, 400, msg, "dimensions", "unsupported_parameter");
    return -EINVAL;
  }
  const int max_waiting = s->cfg->max_waiting;
  if (max_waiting > 0 && o->q.n_inputs > max_waiting) {
    snprintf(msg, sizeof msg, "input has %d inputs; this server queues at most %d requests (max_waiting)",
             o->q.n_inputs, max_waiting);
    fail(rid, res, 400, msg, "input", "invalid_value");
    return -EINVAL;
  }
  const int32_t max = s->max_model_len;
  const int32_t keep = o->q.truncate_prompt_tokens < 0 ? max : o->q.truncate_prompt_tokens;
  for (int32_t i = 0; i < o->q.n_inputs; i++) {
    char param[32];
    if (o->q.n_inputs > 1) snprintf(param, sizeof param, "input[%d]", i);
    else snprintf(param, sizeof param, "input");
    if (i == o->n_done && o->rc != 0) {
      fail(rid, res, 400, o->err, param, "invalid_value");
      return -EINVAL;
    }
    if (keep > 0 && o->n_ids[i] > keep) { /* keep the last ones (vLLM) */
      memmove(o->ids[i], o->ids[i] + (o->n_ids[i] - keep), (size_t)keep * sizeof(int32_t));
      o->n_ids[i] = keep;
    }
    if (o->n_ids[i] > max) {
      snprintf(msg, sizeof msg,
               "This model's maximum context length is %d tokens. However, %s has %d tokens. Please reduce its "
               "length, or set truncate_prompt_tokens.",
               max, param, o->n_ids[i]);
      fail(rid, res, 400, msg, param, "context_length_exceeded");
      return -EINVAL;
    }
  }
  return 0;
}

/* Loop: one engine request per input, all submitted or none, then the job
 * waits for their vectors. */
static void submit(srv_t *s, uint64_t rid, http_res_t *res, int64_t arrival, embed_out_t *o) {
  const oai_params_t g = {.n = 1};
  srv_job_t *j = srv__job_create(s, res, false, &g, o->q.n_inputs);
  j->endpoint = EMBEDDINGS;
  j->writer = &srv_writer_embed;
  j->embed_base64 = o->q.base64;
  j->arrival_ns = arrival;
  oai_make_id(j->id, sizeof j->id, "embd", s->boot_id, rid);
  sched_req_params_t p = sched_req_params_default();
  p.pooling = srv__pooling(s);
  p.normalize = o->q.normalize >= 0 ? o->q.normalize : pool_normalize(s);
  p.no_spec = 1;
  char err[512] = "";
  int rc = 0;
  for (int32_t i = 0; i < o->q.n_inputs && rc == 0; i++) {
    srv_part_t *part = &j->parts[i];
    part->prompt_tokens = o->n_ids[i];
    part->req = sched_req_create(o->ids[i], o->n_ids[i], &p, part, err, sizeof err);
    if (!part->req) rc = -EINVAL;
  }
  for (int32_t i = 0; rc == 0 && i < o->q.n_inputs; i++) {
    rc = sched_submit(s->engine, j->parts[i].req, err, sizeof err);
    if (rc == 0) {
      j->parts[i].live = true;
      j->n_live++;
    }
  }
  if (rc != 0) {
    for (int32_t i = 0; i < o->q.n_inputs; i++)
      if (!j->parts[i].live) {
        sched_req_destroy(j->parts[i].req);
        j->parts[i].req = NULL;
      }
    srv__job_cancel(j, "another input of the request was refused");
    j->status = srv__submit_failed(rid, res, EMBEDDINGS, rc, err);
    j->res = NULL;
    srv__job_maybe_free(j);
    return;
  }
  if (o->q.user) log_debug("%s: user \"%.100s\", %d inputs", j->id, o->q.user, o->q.n_inputs);
  srv__job_start(j, NULL, NULL);
}

static void embed_done(srv_work_t *w) {
  embed_out_t *o = w->out;
  if (w->res && check(w->s, w->rid, w->res, o) == 0) submit(w->s, w->rid, w->res, w->arrival_ns, o);
  free_ids(o);
}

void srv__h_embeddings(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const int64_t arrival = clock_now_ns();
  if (!srv__serving(s, res)) {
    srv__access(req->id, EMBEDDINGS, 503);
    return;
  }
  srv__offload(s, req, res, arrival, embed_run, embed_done);
}

/* ---- the writer ------------------------------------------------------------------ */

static char *embed_whole(srv_job_t *j) {
  const float **vecs = xcalloc((size_t)j->n_choices, sizeof *vecs);
  for (int32_t i = 0; i < j->n_choices; i++) vecs[i] = j->choices[i].embedding;
  char *json = NULL;
  bool all = true;
  for (int32_t i = 0; i < j->n_choices; i++) all &= vecs[i] != NULL;
  if (all)
    json = oai_write_embeddings(j->srv->cfg->served_model_name, vecs, j->n_choices, j->srv->stack.embed_dim,
                                j->embed_base64, j->prompt_tokens);
  free(vecs);
  return json; /* NULL: a vector is missing (the request timed out or was cancelled) or not finite */
}

const srv_writer_t srv_writer_embed = {.whole = embed_whole}; /* never streamed */
