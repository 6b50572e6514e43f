/* scheduler/sched_stop.h — stop strings matched on a sequence's output text
 * as it streams, with hold-back.
 *
 * A request's stop strings (sched_stops_t, immutable once built) each get a
 * KMP failure table. Per sequence, a sched_stop_state_t follows every
 * string's automaton over the output bytes and holds back the text that
 * could still be the start of a stop string. sched_stop_push() releases
 * what is decided: everything but the longest held suffix that is a proper
 * prefix of some stop string, or, when a stop string completes, the text
 * before its start (the stop string itself and anything after it are
 * dropped). The first stop string to complete, byte by byte, wins.
 *
 * Stop strings must be non-empty valid UTF-8 (the output text is valid
 * UTF-8 from the streaming detokenizer), so released text always ends on a
 * character boundary. Work per pushed byte is O(number of stop strings),
 * amortised. */
#ifndef TRAM_SCHED_STOP_H
#define TRAM_SCHED_STOP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct sched_stops {
  int32_t n;
  char **str;      /* [n] NUL-terminated copies */
  int32_t *len;    /* [n] */
  int32_t **fail;  /* [n][len] KMP failure: fail[i][j] = longest proper border of str[i][0..j] */
  int32_t max_len; /* longest string */
} sched_stops_t;

/* Copies strs[n] (n may be 0) and builds the tables. Returns 0, or -EINVAL
 * with a message in err[err_len] for an empty string, invalid UTF-8, one
 * longer than max_len bytes, or n > max_n. */
int sched_stops_init(sched_stops_t *s, const char *const *strs, int32_t n, int32_t max_n, int32_t max_len, char *err,
                     size_t err_len);
void sched_stops_free(sched_stops_t *s);

typedef struct sched_stop_state {
  buf_t held;       /* text not yet released (owned) */
  int32_t *match;   /* [n_stops] bytes of each stop string matched at the end of the text */
  int32_t n_stops;
} sched_stop_state_t;

void sched_stop_state_init(sched_stop_state_t *st, const sched_stops_t *stops);
void sched_stop_state_free(sched_stop_state_t *st);

/* Feeds text[len] (the next output text). Appends the text now released to
 * out (a malloc'd base/buf.h buffer) and returns the index of the stop
 * string that completed (then nothing is held any more), or -1. */
int32_t sched_stop_push(sched_stop_state_t *st, const sched_stops_t *stops, const char *text, size_t len, buf_t *out);

/* Releases everything held (the sequence ended for another reason). */
void sched_stop_flush(sched_stop_state_t *st, buf_t *out);

#endif
