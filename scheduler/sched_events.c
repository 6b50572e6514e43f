/* scheduler/sched_events.c — the event queue from the engine thread to
 * whoever polls it: a growable ring under its own mutex (see sched.h). */
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched_internal.h"

void sched__post(sched_engine_t *e, const sched_event_t *ev) {
  pthread_mutex_lock(&e->ev_mu);
  if (e->ev_n == e->ev_cap) {
    size_t cap = e->ev_cap ? 2 * e->ev_cap : 256;
    sched_event_t *ring = malloc(cap * sizeof *ring);
    if (!ring) abort();
    for (size_t i = 0; i < e->ev_n; i++) ring[i] = e->ev[(e->ev_head + i) % e->ev_cap];
    free(e->ev);
    e->ev = ring;
    e->ev_cap = cap;
    e->ev_head = 0;
  }
  e->ev[(e->ev_head + e->ev_n) % e->ev_cap] = *ev;
  e->ev_n++;
  pthread_mutex_unlock(&e->ev_mu);
  e->ev_posted++;
}

int sched_poll_events(sched_engine_t *e, sched_event_t *out, int max) {
  pthread_mutex_lock(&e->ev_mu);
  int n = 0;
  while (n < max && e->ev_n > 0) {
    out[n++] = e->ev[e->ev_head];
    e->ev_head = (e->ev_head + 1) % e->ev_cap;
    e->ev_n--;
  }
  pthread_mutex_unlock(&e->ev_mu);
  return n;
}

void sched_event_release(sched_event_t *ev) {
  free(ev->text);
  free(ev->top);
  free(ev->error);
  ev->text = NULL;
  ev->top = NULL;
  ev->error = NULL;
  ev->text_len = 0;
  ev->n_top = 0;
}

void sched__events_clear(sched_engine_t *e) {
  sched_event_t ev;
  while (sched_poll_events(e, &ev, 1) == 1) sched_event_release(&ev);
  free(e->ev);
  e->ev = NULL;
  e->ev_cap = 0;
}
