/* sample/samp_params.c — the sampling parameters' defaults, the one table of
 * request fields and their limits, and the check against it (see
 * samp_params.h). */
#include "sample/samp_params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define FIELD(key, lo, hi, lo_open, integral) {#key, lo, hi, lo_open, integral, offsetof(samp_params_t, key)}

const samp_field_t samp_fields[] = {
    FIELD(temperature, 0, 2, 0, 0),
    FIELD(top_p, 0, 1, 1, 0),
    FIELD(min_p, 0, 1, 0, 0),
    FIELD(presence_penalty, -2, 2, 0, 0),
    FIELD(frequency_penalty, -2, 2, 0, 0),
    FIELD(repetition_penalty, 0, 10, 1, 0),
    FIELD(top_k, -1, INT32_MAX, 0, 1),
};
const int samp_n_fields = (int)(sizeof samp_fields / sizeof samp_fields[0]);

samp_params_t samp_params_default(void) {
  samp_params_t p;
  memset(&p, 0, sizeof p);
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repetition_penalty = 1.0f;
  return p;
}

int samp_field_accepts(const samp_field_t *f, double v) {
  if (!isfinite(v) || v < f->lo || v > f->hi || (f->lo_open && v == f->lo)) return 0;
  if (f->integral) return v == floor(v);
  return !(f->lo_open && (float)v <= f->lo); /* as stored: 1e-300 is a repetition_penalty of 0 */
}

void samp_field_set(samp_params_t *p, const samp_field_t *f, double v) {
  char *at = (char *)p + f->offset;
  if (f->integral) {
    const int32_t i = v < 0 ? 0 : (int32_t)v; /* top_k -1: off, as 0 */
    memcpy(at, &i, sizeof i);
  } else {
    const float x = (float)v;
    memcpy(at, &x, sizeof x);
  }
}

const char *samp_field_range(const samp_field_t *f, char *buf, size_t cap) {
  snprintf(buf, cap, "%s%.10g, %.10g]", f->lo_open ? "(" : "[", f->lo, f->hi);
  return buf;
}

int samp_params_validate(const samp_params_t *p, int32_t n_vocab, char *err, size_t err_size) {
  const char *why = NULL;
  char buf[128];
  if (!isfinite(p->temperature) || p->temperature < 0) why = "temperature must be a finite number >= 0";
  else if (!isfinite(p->top_p) || p->top_p < 0 || p->top_p > 1) why = "top_p must be in [0, 1]";
  else if (!isfinite(p->min_p) || p->min_p < 0 || p->min_p > 1) why = "min_p must be in [0, 1]";
  else if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0) why = "repetition_penalty must be > 0";
  else if (!isfinite(p->presence_penalty)) why = "presence_penalty must be finite";
  else if (!isfinite(p->frequency_penalty)) why = "frequency_penalty must be finite";
  else if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias)) why = "logit_bias is malformed";
  else if (p->top_logprobs < 0 || p->top_logprobs > SAMP_MAX_TOP_LOGPROBS) why = "top_logprobs must be in 0..20";
  else if (n_vocab <= 0) why = "empty vocabulary";
  for (int32_t i = 0; !why && i < p->n_logit_bias; i++) {
    if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= n_vocab) {
      snprintf(buf, sizeof buf, "logit_bias token %d is not in the vocabulary (0..%d)", p->logit_bias[i].token,
               n_vocab - 1);
      why = buf;
    } else if (!isfinite(p->logit_bias[i].bias)) {
      snprintf(buf, sizeof buf, "logit_bias for token %d is not finite", p->logit_bias[i].token);
      why = buf;
    }
  }
  if (!why) return 0;
  if (err && err_size) snprintf(err, err_size, "%s", why);
  return -EINVAL;
}

void samp_gen_apply(const samp_gen_defaults_t *d, unsigned given, samp_params_t *p) {
  for (int i = 0; d && i < samp_n_fields; i++)
    if ((d->fields >> i & 1) && !(given >> i & 1))
      memcpy((char *)p + samp_fields[i].offset, (const char *)&d->samp + samp_fields[i].offset,
             samp_fields[i].integral ? sizeof(int32_t) : sizeof(float));
}

const char *samp_gen_describe(const samp_gen_defaults_t *d, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i <= samp_n_fields && at < cap; i++) {
    const samp_field_t *f = i < samp_n_fields ? &samp_fields[i] : NULL;
    if (f ? !(d->fields >> i & 1) : d->max_tokens <= 0) continue;
    const char *at_field = f ? (const char *)&d->samp + f->offset : NULL, *sep = at ? " " : "";
    int32_t iv = 0;
    float fv = 0;
    if (f && f->integral) memcpy(&iv, at_field, sizeof iv);
    else if (f) memcpy(&fv, at_field, sizeof fv);
    int n = !f           ? snprintf(buf + at, cap - at, "%smax_tokens=%d", sep, d->max_tokens)
            : f->integral ? snprintf(buf + at, cap - at, "%s%s=%d", sep, f->name, iv)
                          : snprintf(buf + at, cap - at, "%s%s=%g", sep, f->name, (double)fv);
    at = n < 0 ? cap : at + (size_t)n;
  }
  if (!buf[0]) snprintf(buf, cap, "none");
  return buf;
}
