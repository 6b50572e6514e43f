/* server/srv_info.c — the worker-information routes a router asks of a
 * model server before it sends it traffic: SGLang's GET /server_info and
 * GET /model_info (and their older names /get_server_info and
 * /get_model_info), which sglang-router (the SGLang model gateway) reads
 * when a worker is added, to learn the model it serves (served_model_name,
 * model_path), its parallelism (tp_size, dp_size: 1 each) and its limits.
 * tram answers with the fields that router reads, filled from its own
 * configuration and model. Both need the API key like /v1/models. The
 * model's path stays the server's (expose_model_path): clients see the
 * file name. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/srv_internal.h"

const char *srv__model_shown(const srv_t *s) {
  if (s->cfg->expose_model_path) return s->cfg->model;
  const char *slash = strrchr(s->cfg->model, '/');
  return slash ? slash + 1 : s->cfg->model;
}

static cJSON *must(cJSON *j) {
  if (!j) xoom("server", 0);
  return j;
}

/* The fields both answers share. */
static cJSON *common(const srv_t *s) {
  cJSON *o = must(cJSON_CreateObject());
  must(cJSON_AddStringToObject(o, "model_path", srv__model_shown(s)));
  must(cJSON_AddStringToObject(o, "served_model_name", s->cfg->served_model_name));
  must(cJSON_AddBoolToObject(o, "is_generation", 1));
  /* the file's general.architecture, and Hugging Face's class for it */
  must(cJSON_AddStringToObject(o, "model_type", sched_engine_model_arch(s->engine)));
  cJSON *arch = must(cJSON_AddArrayToObject(o, "architectures"));
  cJSON_AddItemToArray(arch, must(cJSON_CreateString(sched_engine_model_hf_class(s->engine))));
  return o;
}

static void send_obj(http_res_t *res, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!text) xoom("server", 0);
  srv__send_json(res, 200, text);
}

static void h_server_info(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id; /* req is freed once answered */
  if (!srv__serving(s, res)) return;
  cJSON *o = common(s);
  must(cJSON_AddNumberToObject(o, "tp_size", 1));
  must(cJSON_AddNumberToObject(o, "dp_size", 1));
  must(cJSON_AddNumberToObject(o, "max_running_requests", s->cfg->max_seqs));
  must(cJSON_AddNumberToObject(o, "max_prefill_tokens", s->cfg->max_batch_tokens));
  must(cJSON_AddNumberToObject(o, "context_length", s->max_model_len));
  must(cJSON_AddStringToObject(o, "version", "tram"));
  send_obj(res, o);
  srv__access(rid, "/server_info", 200);
}

static void h_model_info(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id; /* req is freed once answered */
  if (!srv__serving(s, res)) return;
  cJSON *o = common(s);
  must(cJSON_AddNullToObject(o, "tokenizer_path")); /* the tokenizer is inside the GGUF file */
  must(cJSON_AddNumberToObject(o, "max_context_length", s->max_model_len));
  must(cJSON_AddNumberToObject(o, "vocab_size", s->n_vocab));
  const int32_t bos = tok_bos(s->tok), eos = tok_eos(s->tok);
  if (bos >= 0) must(cJSON_AddNumberToObject(o, "bos_token_id", bos));
  if (eos >= 0) must(cJSON_AddNumberToObject(o, "eos_token_id", eos));
  /* tram's own: the defaults requests take from the model file (generation_config auto) */
  cJSON *gen = must(cJSON_AddObjectToObject(o, "generation_defaults"));
  for (int i = 0; i < samp_n_fields; i++) {
    if (!(s->gen.fields >> i & 1)) continue;
    const char *at = (const char *)&s->gen.samp + samp_fields[i].offset;
    int32_t iv;
    float fv;
    memcpy(&iv, at, sizeof iv);
    memcpy(&fv, at, sizeof fv);
    char num[32]; /* a float's shortest decimal: 0.7, not 0.699999988 */
    snprintf(num, sizeof num, "%.7g", (double)fv);
    must(cJSON_AddNumberToObject(gen, samp_fields[i].name, samp_fields[i].integral ? (double)iv : strtod(num, NULL)));
  }
  if (s->gen.max_tokens > 0) must(cJSON_AddNumberToObject(gen, "max_tokens", s->gen.max_tokens));
  send_obj(res, o);
  srv__access(rid, "/model_info", 200);
}

void srv__info_routes(srv_t *s) {
  http_server_route(s->http, HTTP_GET, "/server_info", h_server_info, s, 0);
  http_server_route(s->http, HTTP_GET, "/get_server_info", h_server_info, s, 0);
  http_server_route(s->http, HTTP_GET, "/model_info", h_model_info, s, 0);
  http_server_route(s->http, HTTP_GET, "/get_model_info", h_model_info, s, 0);
}
