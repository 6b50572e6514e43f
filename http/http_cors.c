/* http/http_cors.c — CORS (the Fetch standard's cross-origin checks) for
 * the HTTP server: the allowed origins, the Access-Control-Allow-Origin
 * header on answers to an allowed Origin, and the preflight OPTIONS request
 * answered before authentication (a browser sends no API key with it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "http/http_internal.h"

static void free_origins(http_server_t *srv) {
  for (int i = 0; i < srv->n_origins; i++) free(srv->origins[i]);
  free(srv->origins);
  srv->origins = NULL;
  srv->n_origins = 0;
}

int http_server_set_allowed_origins(http_server_t *srv, const char *const *origins, int n) {
  for (int i = 0; i < n; i++)
    if (!origins[i] || !origins[i][0]) return -EINVAL;
  free_origins(srv);
  if (n <= 0) return 0;
  srv->origins = xcalloc((size_t)n, sizeof *srv->origins);
  for (int i = 0; i < n; i++) srv->origins[i] = xstrdup(origins[i]);
  srv->n_origins = n;
  return 0;
}

void http__cors_free(http_server_t *srv) { free_origins(srv); }

/* Whether origin is allowed: listed exactly (scheme://host[:port]), or "*". */
static bool allowed(const http_server_t *srv, const char *origin) {
  for (int i = 0; i < srv->n_origins; i++)
    if (strcmp(srv->origins[i], "*") == 0 || strcmp(srv->origins[i], origin) == 0) return true;
  return false;
}

bool http__cors(http_server_t *srv, http_res_t *res, const char *allow) {
  const http_req_t *req = &res->req;
  const char *origin = http_req_header(req, "origin");
  if (srv->n_origins == 0 || !origin) return false;
  const bool ok = allowed(srv, origin);
  if (ok) {
    http_res_header(res, "Access-Control-Allow-Origin", origin);
    http_res_header(res, "Vary", "Origin");
  }
  const char *want = http_req_header(req, "access-control-request-method");
  if (req->method != HTTP_OPTIONS || !want) return false; /* not a preflight */
  if (!ok) {
    char msg[200];
    snprintf(msg, sizeof msg, "origin %.150s is not allowed (allowed_origins)", origin);
    http_res_send_error(res, 403, NULL, msg, NULL, "origin_not_allowed");
    return true;
  }
  char methods[160];
  snprintf(methods, sizeof methods, "%s%sOPTIONS", allow, allow[0] ? ", " : "");
  const char *headers = http_req_header(req, "access-control-request-headers");
  http_res_header(res, "Access-Control-Allow-Methods", methods);
  http_res_header(res, "Access-Control-Allow-Headers", headers ? headers : "Authorization, Content-Type");
  http_res_header(res, "Access-Control-Max-Age", "600");
  http_res_send(res, 200, NULL, NULL, 0); /* 2xx: an "ok status" to the Fetch standard */
  return true;
}
