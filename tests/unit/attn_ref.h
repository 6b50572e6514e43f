/* tests/unit/attn_ref.h — a naive float64 attention, the independent
 * reference the attention tests compare against. Written from the semantics
 * in kernels/kern.h (scale 1/sqrt(head_dim), causal aligned bottom-right,
 * zeros for a row that sees no key, query head h reads KV head
 * h / (n_heads / n_kv_heads)), sharing no code with tram. */
#ifndef TRAM_TEST_ATTN_REF_H
#define TRAM_TEST_ATTN_REF_H

/* One sequence: q [q_len, n_heads, head_dim], k and v [k_len, n_kv_heads,
 * head_dim] (f32, any values), out [q_len, n_heads, head_dim] (float64). */
void ref_attn_seq(int q_len, int k_len, int n_heads, int n_kv_heads, int head_dim, const float *q,
                  const float *k, const float *v, double *out);

/* The same with a sliding window: a row at absolute position p (= i + k_len
 * - q_len) sees keys max(0, p - window_left) .. p, flash-attn's
 * window_size = (window_left, 0); window_left < 0: no window. softcap > 0:
 * each scaled score s becomes softcap * tanh(s / softcap) (Gemma 2). sinks
 * [n_heads] or NULL: head h's softmax gets one more logit, sinks[h], with
 * no value (gpt-oss's learned sinks, Hugging Face's eager_attention_forward:
 * the column appended, the softmax taken, the column dropped). */
void ref_attn_seq_window(int q_len, int k_len, int n_heads, int n_kv_heads, int head_dim, int window_left,
                         double softcap, const float *sinks, const float *q, const float *k, const float *v,
                         double *out);

/* Checks a kernel's output against the reference: no element is NaN (every
 * one was written over the poison), elements whose reference is exactly 0
 * (rows that see no key) are exactly 0, and the relative L2 error is below
 * 1e-5. Fails the running cmocka test with `what` otherwise. */
void ref_check(const char *what, const float *got, const double *want, long n);

#endif
