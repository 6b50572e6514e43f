/* scheduler/sched_events.c — the event queue from the engine thread to
 * whoever polls it: a growable ring under its own mutex (see sched.h). A
 * step's events are gathered first and published together at its end,
 * after the statistics snapshot: whoever sees an event sees statistics at
 * least as new. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler/sched_internal.h"
#include "base/alloc.h"

void sched__post(sched_engine_t *e, const sched_event_t *ev) {
  xgrow(&e->step_ev, &e->cap_step_ev, e->n_step_ev + 1, sizeof *e->step_ev, 64);
  e->step_ev[e->n_step_ev++] = *ev;
}

void sched__publish(sched_engine_t *e) {
  if (e->n_step_ev == 0) return;
  pthread_mutex_lock(&e->ev_mu);
  if (e->ev_n + e->n_step_ev > e->ev_cap) {
    size_t cap = e->ev_cap ? 2 * e->ev_cap : 256;
    while (cap < e->ev_n + e->n_step_ev) cap *= 2;
    sched_event_t *ring = xmalloc(cap * sizeof *ring);
    for (size_t i = 0; i < e->ev_n; i++) ring[i] = e->ev[(e->ev_head + i) % e->ev_cap];
    free(e->ev);
    e->ev = ring;
    e->ev_cap = cap;
    e->ev_head = 0;
  }
  for (size_t i = 0; i < e->n_step_ev; i++) e->ev[(e->ev_head + e->ev_n + i) % e->ev_cap] = e->step_ev[i];
  e->ev_n += e->n_step_ev;
  e->n_step_ev = 0;
  pthread_cond_broadcast(&e->ev_cv);
  pthread_mutex_unlock(&e->ev_mu);
  if (e->notify) e->notify(e->notify_arg);
}

/* Moves up to max events out; ev_mu held. */
static int take(sched_engine_t *e, sched_event_t *out, int max) {
  int n = 0;
  while (n < max && e->ev_n > 0) {
    out[n++] = e->ev[e->ev_head];
    e->ev_head = (e->ev_head + 1) % e->ev_cap;
    e->ev_n--;
  }
  return n;
}

int sched_poll_events(sched_engine_t *e, sched_event_t *out, int max) {
  pthread_mutex_lock(&e->ev_mu);
  const int n = take(e, out, max);
  pthread_mutex_unlock(&e->ev_mu);
  return n;
}

int sched_wait_events(sched_engine_t *e, sched_event_t *out, int max, int64_t timeout_ns) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t ns = ts.tv_nsec + (timeout_ns > 0 ? timeout_ns : 0);
  ts.tv_sec += (time_t)(ns / 1000000000);
  ts.tv_nsec = (long)(ns % 1000000000);
  pthread_mutex_lock(&e->ev_mu);
  while (e->ev_n == 0)
    if (pthread_cond_timedwait(&e->ev_cv, &e->ev_mu, &ts) != 0) break;
  const int n = take(e, out, max);
  pthread_mutex_unlock(&e->ev_mu);
  return n;
}

void sched_event_release(sched_event_t *ev) {
  free(ev->text);
  free(ev->top);
  free(ev->error);
  free(ev->embedding);
  ev->embedding = NULL;
  ev->n_embedding = 0;
  ev->text = NULL;
  ev->top = NULL;
  ev->error = NULL;
  ev->text_len = 0;
  ev->n_top = 0;
}

void sched__events_clear(sched_engine_t *e) {
  sched_event_t ev;
  while (sched_poll_events(e, &ev, 1) == 1) sched_event_release(&ev);
  for (size_t i = 0; i < e->n_step_ev; i++) sched_event_release(&e->step_ev[i]);
  free(e->step_ev);
  free(e->ev);
  e->ev = e->step_ev = NULL;
  e->ev_cap = e->cap_step_ev = e->n_step_ev = 0;
}
