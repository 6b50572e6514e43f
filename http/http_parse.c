/* http/http_parse.c — one connection's request parser (see http_parse.h).
 *
 * llhttp calls back with pieces of the URL, header names and values (a piece
 * may end at a read boundary); they are appended to hbuf and closed by the
 * *_complete callbacks. on_message_complete pauses llhttp, so one
 * llhttp_execute() never runs past the end of a request. */
#include "http/http_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

#define HEADER_LINE_OVERHEAD 4 /* ": " and CRLF, counted against the limit */

static http__parser_t *P(llhttp_t *ll) { return ll->data; }

static int fail(http__parser_t *p, int status, const char *reason) {
  p->error_status = status;
  p->error_reason = reason;
  return HPE_USER;
}

/* Appends to hbuf, enforcing the header-size limit. */
static int hbuf_append(http__parser_t *p, const char *at, size_t n) {
  p->header_bytes += n;
  if (p->header_bytes > p->limits->max_header_bytes)
    return fail(p, 431, "request header section too large");
  xgrow(&p->hbuf, &p->hcap, p->hlen + n + 1, 1, 16);
  memcpy(p->hbuf + p->hlen, at, n);
  p->hlen += n;
  return 0;
}

/* Starts a token at the current end of hbuf if none is open. */
static void token_open(http__parser_t *p) {
  if (!p->in_token) {
    p->in_token = true;
    p->tok_start = (uint32_t)p->hlen;
  }
}

/* Closes the open token with a NUL; returns its length. */
static uint32_t token_close(http__parser_t *p, uint32_t *start) {
  token_open(p); /* an empty token had no data callback */
  p->in_token = false;
  *start = p->tok_start;
  uint32_t n = (uint32_t)p->hlen - p->tok_start;
  char nul = '\0';
  if (hbuf_append(p, &nul, 1)) return UINT32_MAX;
  p->header_bytes--; /* the NUL is ours, not the client's */
  return n;
}

static int on_message_begin(llhttp_t *ll) {
  http__parser_t *p = P(ll);
  p->begun = true;
  return 0;
}

static int on_url(llhttp_t *ll, const char *at, size_t n) {
  http__parser_t *p = P(ll);
  token_open(p);
  return hbuf_append(p, at, n);
}

static int on_url_complete(llhttp_t *ll) {
  http__parser_t *p = P(ll);
  uint32_t start;
  uint32_t n = token_close(p, &start);
  if (n == UINT32_MAX) return HPE_USER;
  p->url_len = n;
  return 0;
}

static int on_header_field(llhttp_t *ll, const char *at, size_t n) {
  http__parser_t *p = P(ll);
  if (p->headers_done) { /* a chunked trailer: counted, not kept */
    p->header_bytes += n;
    return p->header_bytes > p->limits->max_header_bytes ? fail(p, 431, "trailer section too large")
                                                         : 0;
  }
  token_open(p);
  return hbuf_append(p, at, n);
}

static int on_version_complete(llhttp_t *ll) {
  if (ll->http_major == 1 && (ll->http_minor == 0 || ll->http_minor == 1)) return 0;
  return fail(P(ll), 505, "HTTP version not supported (HTTP/1.0 and HTTP/1.1 are)");
}

static int on_header_field_complete(llhttp_t *ll) {
  http__parser_t *p = P(ll);
  if (p->headers_done) return 0;
  uint32_t n = token_close(p, &p->pending_name_off);
  if (n == UINT32_MAX) return HPE_USER;
  if (n == 0) return fail(p, 400, "empty header name");
  p->pending_name_len = n;
  return 0;
}

/* A value arrives in spans, split where a read ended; a span that starts
 * anywhere else than where the last one ended means llhttp skipped a line
 * break: a folded line (obs-fold), which RFC 9112 lets a server reject. */
static int on_header_value(llhttp_t *ll, const char *at, size_t n) {
  http__parser_t *p = P(ll);
  if (p->vend && at != p->vend && !(at == p->feed_start && p->vend_at_feed_end))
    return fail(p, 400, "folded header line (obs-fold)");
  p->vend = at + n;
  p->vend_at_feed_end = p->vend == p->feed_end;
  return on_header_field(ll, at, n); /* same accounting; the token says which */
}

static int on_header_value_complete(llhttp_t *ll) {
  http__parser_t *p = P(ll);
  p->header_bytes += HEADER_LINE_OVERHEAD;
  p->vend = NULL;
  if (p->headers_done) return 0;
  uint32_t start;
  uint32_t n = token_close(p, &start);
  if (n == UINT32_MAX) return HPE_USER;
  if (p->n_hdrs >= p->limits->max_headers) return fail(p, 431, "too many header lines");
  xgrow(&p->hdrs, &p->cap_hdrs, (size_t)p->n_hdrs + 1, sizeof *p->hdrs, 16);
  p->hdrs[p->n_hdrs++] = (http__hdr_t){p->pending_name_off, p->pending_name_len, start, n};
  return p->header_bytes > p->limits->max_header_bytes
             ? fail(p, 431, "request header section too large")
             : 0;
}

static const char *find_header(const http__parser_t *p, const char *name) {
  for (int i = 0; i < p->n_hdrs; i++)
    if (strcasecmp(p->hbuf + p->hdrs[i].name_off, name) == 0) return p->hbuf + p->hdrs[i].val_off;
  return NULL;
}

/* Whether v is a Host value RFC 9112 allows: uri-host [":" port], that is
 * reg-name or IP-literal characters (unreserved, pct-encoded, sub-delims,
 * ':' '[' ']'); empty is allowed (a target without an authority). */
static bool host_value_ok(const char *v) {
  for (; *v; v++)
    if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') || (*v >= '0' && *v <= '9') ||
          strchr("-._~%!$&'()*+,;=:[]", *v)))
      return false;
  return true;
}

/* The Transfer-Encoding lines: 0 when every coding is "chunked", applied
 * once (or there are none); else fails: 501 for a coding tram does not
 * implement (RFC 9112 6.1: gzip, deflate, compress...), 400 for chunked
 * twice or an empty list. */
static int check_codings(http__parser_t *p) {
  int chunked = 0, lines = 0;
  for (int i = 0; i < p->n_hdrs; i++) {
    if (strcasecmp(p->hbuf + p->hdrs[i].name_off, "transfer-encoding") != 0) continue;
    lines++;
    const char *v = p->hbuf + p->hdrs[i].val_off;
    while (*v) {
      const size_t n = strcspn(v, ",");
      size_t a = 0, b = n;
      while (a < b && (v[a] == ' ' || v[a] == '\t')) a++;
      while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) b--;
      if (b - a == 7 && strncasecmp(v + a, "chunked", 7) == 0) chunked++;
      else if (b > a) return fail(p, 501, "transfer coding not implemented (only chunked is)");
      v += n + (v[n] == ',');
    }
  }
  if (chunked > 1) return fail(p, 400, "chunked transfer coding applied twice");
  if (lines && !chunked) return fail(p, 400, "empty Transfer-Encoding");
  return 0;
}

static int on_headers_complete(llhttp_t *ll) {
  http__parser_t *p = P(ll);
  p->headers_done = true;
  const char *host = NULL;
  for (int i = 0; i < p->n_hdrs; i++) {
    if (strcasecmp(p->hbuf + p->hdrs[i].name_off, "host") != 0) continue;
    if (host) return fail(p, 400, "more than one Host header");
    host = p->hbuf + p->hdrs[i].val_off;
  }
  if (ll->http_major == 1 && ll->http_minor >= 1 && !host)
    return fail(p, 400, "HTTP/1.1 request without a Host header");
  if (host && !host_value_ok(host)) return fail(p, 400, "invalid Host header");
  if (check_codings(p)) return HPE_USER;
  if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->limits->max_body_bytes)
    return fail(p, 413, "request body larger than the limit");
  const char *expect = find_header(p, "expect");
  if (expect) {
    if (strcasecmp(expect, "100-continue") != 0)
      return fail(p, 400, "unsupported Expect header"); /* RFC 9110 allows 417; 400 is plainer */
    p->expect_continue = ll->http_minor >= 1;
  }
  if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > 0) {
    size_t cap = (size_t)ll->content_length + 1;
    p->body = xmalloc(cap);
    p->body_cap = cap;
  }
  return 0;
}

static int on_body(llhttp_t *ll, const char *at, size_t n) {
  http__parser_t *p = P(ll);
  if (n > p->limits->max_body_bytes - p->body_len)
    return fail(p, 413, "request body larger than the limit");
  if (p->body_len + n + 1 > p->body_cap) {
    size_t cap = p->body_cap ? p->body_cap : 4096;
    while (cap < p->body_len + n + 1) cap *= 2;
    if (cap > p->limits->max_body_bytes + 1) cap = p->limits->max_body_bytes + 1;
    p->body = xreallocarray(p->body, cap, 1);
    p->body_cap = cap;
  }
  memcpy(p->body + p->body_len, at, n);
  p->body_len += n;
  return 0;
}

static int on_chunk_extension(llhttp_t *ll, const char *at, size_t n) {
  (void)at;
  http__parser_t *p = P(ll);
  p->ext_bytes += n;
  return p->ext_bytes > HTTP__MAX_CHUNK_EXT ? fail(p, 400, "chunk extensions too long") : 0;
}

/* A chunk's size line is read (its size in content_length). */
static int on_chunk_header(llhttp_t *ll) {
  http__parser_t *p = P(ll);
  p->ext_bytes = 0;
  if (ll->content_length > p->limits->max_body_bytes - p->body_len)
    return fail(p, 413, "request body larger than the limit");
  return 0;
}

static int on_message_complete(llhttp_t *ll) {
  (void)ll;
  return HPE_PAUSED;
}

static const llhttp_settings_t parse_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
    .on_version_complete = on_version_complete,
    .on_chunk_extension_name = on_chunk_extension,
    .on_chunk_extension_value = on_chunk_extension,
    .on_chunk_header = on_chunk_header,
};

/* Clears the per-message state, keeping buffers' capacity. */
static void reset_message(http__parser_t *p) {
  p->begun = p->headers_done = p->expect_continue = false;
  p->hlen = 0;
  p->url_len = 0;
  p->in_token = false;
  p->n_hdrs = 0;
  p->header_bytes = 0;
  p->ext_bytes = 0;
  p->vend = NULL;
  p->body = NULL;
  p->body_len = p->body_cap = 0;
}

void http__parse_init(http__parser_t *p, const http_limits_t *limits) {
  memset(p, 0, sizeof *p);
  p->limits = limits;
  llhttp_init(&p->ll, HTTP_REQUEST, &parse_settings);
  p->ll.data = p;
}

void http__parse_free(http__parser_t *p) {
  free(p->hbuf);
  free(p->hdrs);
  free(p->body);
  memset(p, 0, sizeof *p);
}

http__parse_result_t http__parse_feed(http__parser_t *p, const char *data, size_t len,
                                      size_t *consumed) {
  *consumed = 0;
  p->feed_start = data;
  p->feed_end = data + len;
  llhttp_errno_t e = llhttp_execute(&p->ll, data, len);
  if (e == HPE_OK) {
    *consumed = len;
    return HTTP__PARSE_MORE;
  }
  if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
    const char *pos = llhttp_get_error_pos(&p->ll);
    *consumed = pos ? (size_t)(pos - data) : len;
    if (e == HPE_PAUSED) llhttp_resume(&p->ll);
    else llhttp_resume_after_upgrade(&p->ll);
    return HTTP__PARSE_DONE;
  }
  if (!p->error_status) {
    p->error_status = 400;
    p->error_reason = llhttp_get_error_reason(&p->ll);
    if (!p->error_reason) p->error_reason = llhttp_errno_name(e);
  }
  return HTTP__PARSE_ERROR;
}

int http__parse_take(http__parser_t *p, arena_t *arena, http_req_t *req, char **body_buf,
                     bool *keep_alive) {
  llhttp_t *ll = &p->ll;
  memset(req, 0, sizeof *req);
  req->method = (llhttp_method_t)ll->method;
  req->method_name = llhttp_method_name(req->method);
  req->http_major = ll->http_major;
  req->http_minor = ll->http_minor;
  req->arena = arena;
  arena_fallible(arena, true);

  /* URL: origin-form "/path?query", or absolute-form "http://host/path". */
  const char *url = p->hbuf ? p->hbuf : "";
  size_t url_len = p->url_len;
  const char *scheme_end = memchr(url, ':', url_len);
  if (url_len && url[0] != '/' && scheme_end && scheme_end + 2 < url + url_len &&
      scheme_end[1] == '/' && scheme_end[2] == '/') {
    const char *slash = memchr(scheme_end + 3, '/', (size_t)(url + url_len - scheme_end - 3));
    size_t skip = slash ? (size_t)(slash - url) : url_len;
    url += skip;
    url_len -= skip;
  }
  const char *q = memchr(url, '?', url_len);
  size_t path_len = q ? (size_t)(q - url) : url_len;
  req->path = arena_strndup(arena, url, path_len);
  req->path_len = path_len;
  req->query = q ? arena_strndup(arena, q + 1, url_len - path_len - 1) : "";
  req->query_len = q ? url_len - path_len - 1 : 0;

  http_header_t *h = arena_array(arena, (size_t)p->n_hdrs, sizeof *h);
  for (int i = 0; h && i < p->n_hdrs; i++) {
    const http__hdr_t *s = &p->hdrs[i];
    h[i].name = arena_strndup(arena, p->hbuf + s->name_off, s->name_len);
    h[i].name_len = s->name_len;
    h[i].value = arena_strndup(arena, p->hbuf + s->val_off, s->val_len);
    h[i].value_len = s->val_len;
  }
  req->headers = h;
  req->n_headers = p->n_hdrs;

  if (p->body) {
    p->body[p->body_len] = '\0';
    req->body = p->body;
    req->body_len = p->body_len;
  } else {
    req->body = "";
  }
  *body_buf = p->body;
  *keep_alive = llhttp_should_keep_alive(ll) && !ll->upgrade;
  reset_message(p);
  arena_fallible(arena, false);
  if (!arena->oom) return 0;
  req->path = req->query = "";
  req->path_len = req->query_len = 0;
  req->headers = NULL;
  req->n_headers = 0;
  *keep_alive = false;
  return -ENOMEM;
}
