/* hf/hf_internal.h — what hf/'s files share: hf_open.c (the folder, the
 * files, the tensors), hf_config.c (config.json → keys), hf_tokenizer.c
 * (tokenizer.json → tokenizer.ggml.* keys). Not for use outside hf/. */
#ifndef TRAM_HF_INTERNAL_H
#define TRAM_HF_INTERNAL_H

#include <cjson/cJSON.h>

#include "gguf/gguf_build.h"

/* What hf_config.c learns that the tensor mapping needs. */
typedef struct hf_arch {
  const char *name;  /* the GGUF architecture */
  int permute_qk;    /* llama: reorder Q/K rows for adjacent-pair RoPE (llama.cpp's permute) */
  int gemma;         /* norm weights stored as w, GGUF wants 1 + w */
  int tied;          /* tie_word_embeddings: lm_head.weight not used */
  int qwen35;        /* Qwen3.5's hybrid: zero-centred norms (1 + w, not the gated ssm_norm), A_log as
                        -exp(A_log), the conv1d squeezed, its multimodal wrapper's names unwrapped */
  int n_heads, n_kv_heads, n_layers, n_vocab;
  float *rope_long, *rope_short; /* phi3 LongRoPE factors [n_rope], malloc'd, or NULL */
  int n_rope;
} hf_arch_t;

/* config.json (cfg) → the architecture's keys in b, and *arch. 0, or
 * -EINVAL after writing one line naming the field into err. */
int hf__config(gguf_build_t *b, const cJSON *cfg, hf_arch_t *arch, char *err, size_t err_len);

/* tokenizer.json (tok) and tokenizer_config.json (tcfg, may be NULL), with
 * config.json's ids as fallbacks → tokenizer.ggml.* and
 * tokenizer.chat_template keys in b; the vocabulary padded to n_vocab. 0 or
 * -EINVAL with err written. */
int hf__tokenizer(gguf_build_t *b, const cJSON *tok, const cJSON *tcfg, const cJSON *cfg, int n_vocab, char *err,
                  size_t err_len);

/* A whole number JSON value in [lo, hi] into *out; def when v is NULL or
 * JSON null (an error when def < lo). 0 or -EINVAL naming `what`. */
int hf__int(const cJSON *v, const char *what, long long def, long long lo, long long hi, long long *out, char *err,
            size_t err_len);

#endif
