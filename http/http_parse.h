/* http/http_parse.h — internal: one connection's request parser.
 *
 * Wraps llhttp with the server's limits and turns bytes into complete
 * requests, without sockets (the server feeds it what it reads; the fuzz
 * target feeds it arbitrary bytes). It stops after each complete message so
 * that pipelined requests are handed out one at a time, and owns the buffers
 * of the message in progress: the URL and header lines (bounded by
 * max_header_bytes) and the body (bounded by max_body_bytes).
 *
 * Strict, as RFC 9112 asks (llhttp runs with no lenient flag): a version
 * other than HTTP/1.0 or 1.1 is 505; an empty header name, a folded header
 * line (obs-fold), a missing (HTTP/1.1), repeated or malformed Host, chunked
 * applied twice or a chunk's extensions over HTTP__MAX_CHUNK_EXT bytes are
 * 400; a transfer coding other than chunked (gzip, ...) is 501; a chunk
 * whose size takes the body past max_body_bytes is 413 as soon as its size
 * line is read. */
#ifndef TRAM_HTTP_PARSE_H
#define TRAM_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "http/http.h"

#define HTTP__MAX_CHUNK_EXT 1024 /* chunk extension bytes per chunk */

typedef enum {
  HTTP__PARSE_MORE = 0,  /* every byte consumed; the message is not complete */
  HTTP__PARSE_DONE = 1,  /* a message is complete: take it (http__parse_take) */
  HTTP__PARSE_ERROR = 2, /* bad input: error_status / error_reason; stop reading */
} http__parse_result_t;

typedef struct http__hdr {
  uint32_t name_off, name_len; /* in hbuf */
  uint32_t val_off, val_len;
} http__hdr_t;

typedef struct http__parser {
  llhttp_t ll;                  /* private */
  const http_limits_t *limits;  /* not owned */
  bool begun;                   /* a byte of the current message has arrived */
  bool headers_done;            /* its header section is complete */
  bool expect_continue;         /* it asked for 100-continue */
  int error_status;             /* 400, 413, 431 or 505 after HTTP__PARSE_ERROR */
  const char *error_reason;     /* a static string saying why */
  char *hbuf;                   /* url, then NUL-terminated names and values */
  size_t hlen, hcap;
  uint32_t url_len;             /* hbuf[0 .. url_len) */
  bool in_token;                /* a URL/name/value is being received */
  uint32_t tok_start;           /* where it starts in hbuf */
  uint32_t pending_name_off, pending_name_len;
  http__hdr_t *hdrs;            /* [n_hdrs] */
  int n_hdrs;
  size_t cap_hdrs;
  size_t header_bytes;          /* request line + headers seen so far */
  size_t ext_bytes;             /* chunk extension bytes of the current chunk */
  const char *feed_start, *feed_end; /* the buffer being parsed */
  const char *vend;             /* the end of the header value's last span; NULL: none yet */
  bool vend_at_feed_end;        /* that span ended its buffer */
  char *body;                   /* [body_len] (+1 for a NUL), malloc'd */
  size_t body_len, body_cap;
} http__parser_t;

/* Initialises a parser for requests under `limits` (kept by pointer). */
void http__parse_init(http__parser_t *p, const http_limits_t *limits);

/* Frees its buffers. */
void http__parse_free(http__parser_t *p);

/* Parses data[0..len). *consumed gets how many bytes were used: all of them
 * for MORE; up to the end of the completed message for DONE (feed the rest
 * after taking it); for ERROR, unspecified. After ERROR the parser must not
 * be fed again. */
http__parse_result_t http__parse_feed(http__parser_t *p, const char *data, size_t len,
                                      size_t *consumed);

/* After DONE: fills *req (strings, header array copied into arena) and moves
 * the body buffer to *body_buf (malloc'd, to free() after the response; NULL
 * when empty), then resets for the next message. *keep_alive says whether the
 * connection may carry another request after this one. Returns 0, or
 * -ENOMEM when memory ran out copying the head into the arena (the arena is
 * fallible meanwhile): then req has an empty path and no headers, the body
 * is still handed over, and the caller answers 503. */
int http__parse_take(http__parser_t *p, arena_t *arena, http_req_t *req, char **body_buf,
                      bool *keep_alive);

#endif
