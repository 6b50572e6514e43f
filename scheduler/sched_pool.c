/* scheduler/sched_pool.c — embeddings: a pooling request's prompt pass
 * (sched.h: sched_req_params_t.pooling). Its prompt is computed like any
 * other prompt, in chunks under the step's token budget next to other
 * requests' work, with no prefix-cache hit so every row is computed; the
 * rows its pooling needs (every row for MEAN, the first for CLS, the last
 * for LAST) ask the forward for their final-normed hidden state
 * (model_batch_t.hidden_rows) instead of logits, and nothing is sampled.
 *
 * Batch invariance: a row's hidden state does not depend on the batch
 * (kernels/kern.h); the rows of a sequence come in position order, chunk
 * after chunk, and MEAN's sum is taken in double in that order, so the
 * vector is the same bits however the prompt was chunked or batched. A
 * preempted request recomputes its prompt: positions it took already
 * (pool_next) are not taken twice.
 *
 * Once the last row it needs is in, the vector is made (the mean, then, if
 * asked, divided by max(L2 norm, 1e-12) as torch's F.normalize does) and
 * the request ends (SCHED_FINISH_STOP): its blocks are freed (full blocks
 * stay in the prefix cache, holding the same K/V a generation would have
 * written for those tokens) and its final event carries the vector. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "scheduler/sched_internal.h"

/* Whether pooling `pool` takes prompt position pos of an n-token prompt. */
static int wanted(sched_pool_t pool, int64_t pos, int32_t n) {
  switch (pool) {
  case SCHED_POOL_MEAN: return 1;
  case SCHED_POOL_CLS: return pos == 0;
  case SCHED_POOL_LAST: return pos == n - 1;
  default: return 0;
  }
}

/* The position after which q's vector is complete. */
static int32_t last_needed(const sched_eseq_t *q) {
  return q->req->p.pooling == SCHED_POOL_CLS ? 0 : q->req->n_prompt - 1;
}

int32_t sched__pool_rows(sched_engine_t *e, sched_eseq_t *q, int32_t row, int64_t start, int32_t q_len, int32_t n) {
  const sched_req_t *r = q->req;
  for (int32_t j = 0; j < q_len; j++) {
    const int64_t pos = start + j;
    if (pos >= r->n_prompt || pos < q->pool_next || !wanted(r->p.pooling, pos, r->n_prompt)) continue;
    e->hidden_rows[n] = row + j;
    e->hidden_seqs[n] = q;
    e->hidden_pos[n] = (int32_t)pos;
    n++;
  }
  return n;
}

/* The vector of q from its pool: the mean (MEAN), normalized if asked;
 * NULL when a value is not finite (a model that overflowed). */
static float *make_vector(const sched_engine_t *e, const sched_eseq_t *q) {
  const sched_req_t *r = q->req;
  const int32_t dim = e->dim;
  const double div = r->p.pooling == SCHED_POOL_MEAN ? (double)r->n_prompt : 1.0;
  double ss = 0;
  for (int32_t i = 0; i < dim; i++) ss += (q->pool[i] / div) * (q->pool[i] / div);
  if (!isfinite(ss)) return NULL;
  const double norm = sqrt(ss);
  const double scale = r->p.normalize ? 1.0 / (div * (norm > 1e-12 ? norm : 1e-12)) : 1.0 / div;
  float *v = xmalloc((size_t)dim * sizeof *v);
  for (int32_t i = 0; i < dim; i++) v[i] = (float)(q->pool[i] * scale);
  return v;
}

void sched__pool_take(sched_engine_t *e, int32_t n_hidden) {
  const int32_t dim = e->dim;
  for (int32_t k = 0; k < n_hidden; k++) {
    sched_eseq_t *q = e->hidden_seqs[k];
    sched_req_t *r = q->req;
    if (q->finished) continue; /* cannot happen: a request ends on its last row */
    const float *h = e->hidden + (size_t)k * (size_t)dim;
    if (r->p.pooling == SCHED_POOL_MEAN)
      for (int32_t i = 0; i < dim; i++) q->pool[i] += (double)h[i];
    else
      for (int32_t i = 0; i < dim; i++) q->pool[i] = (double)h[i];
    q->pool_next = e->hidden_pos[k] + 1;
    if (e->hidden_pos[k] != last_needed(q)) continue;
    r->embedding = make_vector(e, q);
    if (r->embedding)
      sched__finish_req(e, r, SCHED_FINISH_STOP, NULL);
    else
      sched__fail_seq(e, q, "the model's hidden state is not finite: no embedding");
  }
}
