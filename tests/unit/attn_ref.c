/* tests/unit/attn_ref.c — see attn_ref.h. */
#include "tests/unit/attn_ref.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/testutil.h"

void ref_attn_seq(int q_len, int k_len, int n_heads, int n_kv_heads, int head_dim, const float *q,
                  const float *k, const float *v, double *out) {
  ref_attn_seq_window(q_len, k_len, n_heads, n_kv_heads, head_dim, -1, 0.0, NULL, q, k, v, out);
}

void ref_attn_seq_window(int q_len, int k_len, int n_heads, int n_kv_heads, int head_dim, int window_left,
                         double softcap, const float *sinks, const float *q, const float *k, const float *v,
                         double *out) {
  const double scale = 1.0 / sqrt((double)head_dim);
  const int group = n_heads / n_kv_heads, kv_dim = n_kv_heads * head_dim;
  double *w = malloc((size_t)(k_len > 0 ? k_len : 1) * sizeof *w);
  assert_non_null(w);
  for (int i = 0; i < q_len; i++) {
    int seen = i + k_len - q_len + 1; /* keys 0..seen-1 */
    if (seen < 0) seen = 0;
    if (seen > k_len) seen = k_len;
    const int pos = i + k_len - q_len; /* the row's own key position */
    const int first = window_left >= 0 && pos - window_left > 0 ? pos - window_left : 0;
    for (int h = 0; h < n_heads; h++) {
      const float *qv = q + ((size_t)i * n_heads + h) * head_dim;
      double *o = out + ((size_t)i * n_heads + h) * head_dim;
      const int kvh = h / group;
      for (int d = 0; d < head_dim; d++) o[d] = 0.0;
      if (seen == 0) continue;
      double m = -INFINITY, z = 0.0;
      for (int j = first; j < seen; j++) {
        const float *kv = k + (size_t)j * kv_dim + (size_t)kvh * head_dim;
        double s = 0.0;
        for (int d = 0; d < head_dim; d++) s += (double)qv[d] * kv[d];
        w[j] = s * scale;
        if (softcap > 0) w[j] = softcap * tanh(w[j] / softcap);
        if (w[j] > m) m = w[j];
      }
      if (sinks && sinks[h] > m) m = sinks[h];
      for (int j = first; j < seen; j++) {
        w[j] = exp(w[j] - m);
        z += w[j];
      }
      if (sinks) z += exp((double)sinks[h] - m);
      for (int j = first; j < seen; j++) {
        const float *vv = v + (size_t)j * kv_dim + (size_t)kvh * head_dim;
        for (int d = 0; d < head_dim; d++) o[d] += w[j] * vv[d];
      }
      for (int d = 0; d < head_dim; d++) o[d] /= z;
    }
  }
  free(w);
}

void ref_check(const char *what, const float *got, const double *want, long n) {
  for (long i = 0; i < n; i++) {
    if (isnan(got[i])) fail_msg("%s: element %ld is NaN (never written?)", what, i);
    if (want[i] == 0.0 && got[i] != 0.0f) fail_msg("%s: element %ld is %g, want exactly 0", what, i, got[i]);
  }
  double err = tu_rel_l2(got, want, (size_t)n);
  if (!(err < 1e-5)) fail_msg("%s: relative L2 error %.3g >= 1e-5", what, err);
}
