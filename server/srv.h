/* server/srv.h — `tram serve`: the daemon that joins the HTTP server, the
 * OpenAI request and response code, and the engine.
 *
 * srv_run() owns everything for the life of the process:
 *   - one libuv loop on the calling thread that owns every socket: the HTTP
 *     server (TCP host:port, a unix socket, or the sockets systemd passes
 *     with LISTEN_FDS), the signal handlers and a one-second tick;
 *   - the model: loaded off the loop thread (backend, weights, tokenizer,
 *     chat template, engine) while /health answers 503 "loading";
 *   - the engine (scheduler/sched.h), whose thread wakes the loop through a
 *     uv_async from its notify hook; the loop drains the events and turns
 *     them into SSE chunks or whole JSON responses.
 *
 * Lifecycle (systemd through libsystemd; every call is a no-op outside it):
 *   READY=1 once the model is loaded and the socket listens, sent only after
 *   /health answers 200; STATUS= a short state line (loading, ready with
 *   counts, draining); WATCHDOG=1 every WatchdogSec/2 while the engine makes
 *   progress or has no work (a wedged engine stops the pings).
 *   SIGTERM or SIGINT: STOPPING=1, stop accepting, let the requests in flight
 *   finish for up to drain_timeout, then end the rest (finish_reason
 *   "abort"), exit 0; a second signal exits at once (status 1). SIGHUP
 *   reopens the log file. */
#ifndef TRAM_SRV_H
#define TRAM_SRV_H

#include "config/cfg.h"

#define TRAM_VERSION "0.1.0"

/* Serves cfg (read-only, must outlive the call) until a signal stops it.
 * Returns the process exit status: 0 after a graceful stop, 1 when the
 * model cannot be loaded or the socket cannot be opened (logged). */
int srv_run(const cfg_t *cfg);

#endif
