/* http/http_route.c — the route table (method + exact path → handler),
 * API-key authentication and the JSON routes' media type, applied to each
 * request before its handler runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/log.h"
#include "http/http_internal.h"

int http_server_route(http_server_t *srv, llhttp_method_t method, const char *path,
                      http_handler_fn handler, void *ctx, int flags) {
  if (!path || path[0] != '/' || !handler) return -EINVAL;
  for (int i = 0; i < srv->n_routes; i++)
    if (srv->routes[i].method == method && strcmp(srv->routes[i].path, path) == 0) return -EEXIST;
  xgrow(&srv->routes, &srv->cap_routes, (size_t)srv->n_routes + 1, sizeof *srv->routes, 16);
  char *p = xstrdup(path);
  srv->routes[srv->n_routes++] =
      (http__route_t){.method = method, .path = p, .handler = handler, .ctx = ctx, .flags = flags};
  return 0;
}

void http__routes_free(http_server_t *srv) {
  for (int i = 0; i < srv->n_routes; i++) free(srv->routes[i].path);
  free(srv->routes);
  srv->routes = NULL;
  srv->n_routes = srv->cap_routes = 0;
}

int http_server_set_api_keys(http_server_t *srv, const char *const *keys, int n) {
  for (int i = 0; i < n; i++)
    if (!keys[i] || !keys[i][0]) return -EINVAL;
  for (int i = 0; i < srv->n_keys; i++) free(srv->keys[i]);
  free(srv->keys);
  free(srv->key_lens);
  srv->keys = NULL;
  srv->key_lens = NULL;
  srv->n_keys = 0;
  if (n <= 0) return 0;
  srv->keys = xcalloc((size_t)n, sizeof *srv->keys);
  srv->key_lens = xcalloc((size_t)n, sizeof *srv->key_lens);
  for (int i = 0; i < n; i++) {
    srv->keys[i] = xstrdup(keys[i]);
    srv->key_lens[i] = strlen(keys[i]);
  }
  srv->n_keys = n;
  return 0;
}

/* 1 if given[0..glen) equals key[0..klen). The time taken depends on klen
 * only, never on where the strings first differ. */
static int key_equal(const char *key, size_t klen, const char *given, size_t glen) {
  volatile unsigned char diff = (unsigned char)(klen != glen);
  for (size_t i = 0; i < klen; i++) {
    unsigned char g = glen ? (unsigned char)given[i % glen] : 0;
    diff |= (unsigned char)((unsigned char)key[i] ^ g);
  }
  return diff == 0;
}

/* Whether the request carries `Authorization: Bearer <one of the keys>`, or
 * `x-api-key: <one of the keys>`. Every key is compared, so the time does
 * not say which one matched. */
static bool authorized(const http_server_t *srv, const http_req_t *req) {
  const char *auth = http_req_header(req, "authorization");
  const char *tok;
  if (auth && strncasecmp(auth, "Bearer ", 7) == 0) tok = auth + 7;
  else if (!(tok = http_req_header(req, "x-api-key"))) return false;
  while (*tok == ' ') tok++;
  size_t len = strlen(tok);
  while (len && tok[len - 1] == ' ') len--;
  int ok = 0;
  for (int i = 0; i < srv->n_keys; i++) ok |= key_equal(srv->keys[i], srv->key_lens[i], tok, len);
  return ok;
}

const char *http_req_header(const http_req_t *req, const char *name) {
  for (int i = 0; i < req->n_headers; i++)
    if (strcasecmp(req->headers[i].name, name) == 0) return req->headers[i].value;
  return NULL;
}

/* s[0..n) without its leading and trailing spaces and tabs. */
static void trim(const char **s, size_t *n) {
  while (*n && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
  while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

bool http__json_media_type(const char *v) {
  if (!v) return false;
  size_t n = strcspn(v, ";");
  const char *t = v;
  trim(&t, &n);
  if (n != 16 || strncasecmp(t, "application/json", 16) != 0) return false;
  for (const char *p = v + strcspn(v, ";"); *p == ';';) {
    const char *name = ++p;
    const size_t len = strcspn(p, ";");
    p += len;
    size_t k = strcspn(name, "=");
    if (k >= len) continue; /* no value: not a charset */
    const char *val = name + k + 1;
    size_t vn = len - k - 1;
    trim(&name, &k);
    trim(&val, &vn);
    if (vn >= 2 && val[0] == '"' && val[vn - 1] == '"') val++, vn -= 2;
    if (k == 7 && strncasecmp(name, "charset", 7) == 0 && !(vn == 5 && strncasecmp(val, "utf-8", 5) == 0))
      return false;
  }
  return true;
}

void http__route_dispatch(http_server_t *srv, http_res_t *res) {
  http_req_t *req = &res->req;
  llhttp_method_t method = req->method;
  if (method == HTTP_HEAD) {
    res->is_head = true;
    method = HTTP_GET;
  }
  const http__route_t *match = NULL;
  bool path_known = false;
  char allow[128] = "";
  size_t allow_len = 0;
  for (int i = 0; i < srv->n_routes; i++) {
    const http__route_t *r = &srv->routes[i];
    if (strcmp(r->path, req->path) != 0) continue;
    path_known = true;
    if (r->method == method) match = r;
    const char *name = llhttp_method_name(r->method);
    if (allow_len + strlen(name) + 3 < sizeof allow)
      allow_len += (size_t)snprintf(allow + allow_len, sizeof allow - allow_len, "%s%s",
                                    allow_len ? ", " : "", name);
  }
  if (path_known && http__cors(srv, res, allow)) return; /* a preflight, answered */
  if (srv->n_keys > 0 && !(match && (match->flags & HTTP_ROUTE_PUBLIC)) &&
      !authorized(srv, req)) {
    log_info("http: %s: %s %s: missing or wrong API key (401)", req->peer, req->method_name,
             req->path);
    http_res_header(res, "WWW-Authenticate", "Bearer");
    http_res_send_error(res, 401, NULL, "Incorrect or missing API key (Authorization: Bearer <key>, or x-api-key: <key>)",
                        NULL, "invalid_api_key");
    return;
  }
  if (!path_known) {
    char msg[200];
    snprintf(msg, sizeof msg, "no such route: %.150s", req->path);
    http_res_send_error(res, 404, NULL, msg, NULL, "not_found");
    return;
  }
  if (!match) {
    char msg[200];
    snprintf(msg, sizeof msg, "method %s not allowed on %.100s (allowed: %s)", req->method_name,
             req->path, allow);
    http_res_header(res, "Allow", allow);
    http_res_send_error(res, 405, NULL, msg, NULL, "method_not_allowed");
    return;
  }
  if (http__probe_refused(res, match->flags)) return;
  if ((match->flags & HTTP_ROUTE_JSON) && !http__json_media_type(http_req_header(req, "content-type"))) {
    const char *ct = http_req_header(req, "content-type");
    char got[84] = "none"; /* what came, in printable ASCII */
    if (ct) {
      size_t i = 0;
      for (; ct[i] && i < sizeof got - 1; i++) {
        const unsigned char ch = (unsigned char)ct[i];
        got[i] = ch < 0x20 || ch > 0x7e ? '?' : (char)ch;
      }
      got[i] = '\0';
    }
    char msg[200];
    snprintf(msg, sizeof msg, "the body must be JSON, sent with Content-Type: application/json (got %s)", got);
    http_res_send_error(res, 415, NULL, msg, NULL, "unsupported_media_type");
    return;
  }
  match->handler(req, res, match->ctx);
}
