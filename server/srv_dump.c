/* server/srv_dump.c — SIGUSR1: one screen of the daemon's state in the log
 * (what an operator wants to see before deciding to restart a replica that
 * looks stuck): the state, the engine's queues, steps and KV cache, the
 * HTTP connections, the jobs and work items in flight with their age, and
 * the loop's longest stall. SIGUSR2 is ignored (srv_main.c), so that a
 * stray signal never kills the daemon. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "server/srv_internal.h"

static const char *state_name(srv_state_t st) {
  switch (st) {
  case SRV_LOADING: return "loading";
  case SRV_READY: return "ready";
  case SRV_DRAINING: return "draining";
  case SRV_STOPPED: return "stopped";
  }
  return "?";
}

void srv__dump_state(srv_t *s) {
  const int64_t now = clock_now_ns();
  http_server_stats_t hs = {0};
  if (s->http) http_server_stats(s->http, &hs);
  log_info("SIGUSR1 state: %s, pid %ld, up %lld s; HTTP: %u connections open (%u on the probe reserve), "
           "%llu accepted, %llu evicted, %llu refused, %llu requests, %llu timeouts, %llu dropped; "
           "%d jobs, %d work items out; loop stall max %.1f ms",
           state_name(s->state), (long)getpid(), (long long)(time(NULL) - s->boot_time), hs.connections_open,
           hs.probe_open, (unsigned long long)hs.connections_accepted, (unsigned long long)hs.evicted,
           (unsigned long long)hs.connections_rejected, (unsigned long long)hs.requests,
           (unsigned long long)hs.timeouts, (unsigned long long)hs.dropped, s->n_jobs, s->n_work,
           (double)s->stall_max_ns / 1e6);
  if (s->engine) {
    sched_stats_t st;
    sched_get_stats(s->engine, &st);
    log_info("SIGUSR1 engine: %d running, %d waiting; %llu steps, last %.1f s ago (%d tokens, %.1f ms); "
             "KV %d/%d blocks used, %d cached; %llu submitted, %llu finished, %llu preemptions",
             st.running, st.waiting, (unsigned long long)st.steps,
             st.last_progress ? (double)(now - st.last_progress) / 1e9 : -1.0, st.last_step_tokens,
             (double)st.last_step_ns / 1e6, st.kv_blocks_used, st.kv_blocks_total, st.kv_blocks_cached,
             (unsigned long long)st.requests_submitted, (unsigned long long)st.requests_finished,
             (unsigned long long)st.preemptions);
  }
  int shown = 0;
  for (const srv_job_t *j = s->jobs; j && shown < 10; j = j->next, shown++)
    log_info("SIGUSR1 job %s: %s, %.1f s old, %d of %d parts live, %lld tokens out%s%s", j->id, j->endpoint,
             (double)(now - j->arrival_ns) / 1e9, j->n_live, j->n_parts, (long long)j->completion_tokens,
             j->stream ? ", streaming" : "", j->client_gone ? ", client gone" : "");
  if (s->n_jobs > shown) log_info("SIGUSR1 ... and %d more jobs", s->n_jobs - shown);
}
