/* boot/boot.c — model file + device → backend, model, tokenizer, chat
 * template, grammar vocabulary, engine (see boot.h). */
#include "boot/boot.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/file.h"
#include "base/log.h"
#include "gguf/gguf.h"
#include "kernels/kern.h"
#include "model/model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

/* Compiles the template file at path into st->tmpl. Returns 0 or -EINVAL
 * with the reason in err. */
static int load_template(boot_t *st, const char *path, char *err, size_t err_len) {
  char *src, why[512];
  size_t len;
  if (file_read(path, CHAT_TMPL_MAX_OUTPUT, &src, &len, why, sizeof why) != 0) {
    snprintf(err, err_len, "chat_template %s: %s", path, why);
    return -EINVAL;
  }
  st->tmpl = chat_tmpl_compile(src, len, why, sizeof why);
  free(src);
  if (!st->tmpl) {
    snprintf(err, err_len, "chat_template %s does not compile: %s", path, why);
    return -EINVAL;
  }
  log_info("chat template: %s (instead of the model's)", path);
  return 0;
}

/* Loads o->draft_model_path into st->draft and checks that its vocabulary
 * is st->tok's: the same size and every token's text. Returns 0 or -EINVAL
 * with the reason in err. */
static int load_draft(boot_t *st, const boot_opts_t *o, char *err, size_t err_len) {
  const char *path = o->draft_model_path;
  if (!path) {
    snprintf(err, err_len, "speculative decoding with a draft model needs draft_model (a GGUF file)");
    return -EINVAL;
  }
  char why[512];
  st->draft = model_load(path, st->be, why, sizeof why);
  if (!st->draft) {
    snprintf(err, err_len, "draft_model: %s", why);
    return -EINVAL;
  }
  const int32_t n = tok_n_vocab(st->tok), n_draft = model_hparams(st->draft)->n_vocab;
  const gguf_str_t *texts = NULL;
  const int64_t n_texts = gguf_get_arr_str(model_gguf(st->draft), "tokenizer.ggml.tokens", &texts);
  if (n_draft != n || n_texts != n) {
    snprintf(err, err_len, "draft_model %s has a vocabulary of %d tokens (%lld token texts), the model %s %d: a "
             "draft model must share the model's vocabulary",
             path, n_draft, (long long)(n_texts > 0 ? n_texts : 0), o->model_path, n);
    return -EINVAL;
  }
  for (int32_t i = 0; i < n; i++) {
    size_t len;
    const char *t = tok_text(st->tok, i, &len);
    if (texts[i].len != len || memcmp(texts[i].ptr, t, len) != 0) {
      snprintf(err, err_len, "draft_model %s: token %d is \"%.*s\", in the model %s it is \"%.*s\": a draft model "
               "must share the model's vocabulary",
               path, i, (int)(texts[i].len < 64 ? texts[i].len : 64), texts[i].ptr, o->model_path,
               (int)(len < 64 ? len : 64), t);
      return -EINVAL;
    }
  }
  return 0;
}

int boot_open(boot_t *st, const boot_opts_t *o, char *err, size_t err_len) {
  memset(st, 0, sizeof *st);
  const kern_backend_opts_t bo = {.n_threads = o->threads, .precision = (kern_precision_t)o->precision};
  st->be = kern_backend_create_opts(o->device, &bo);
  if (!st->be) {
    snprintf(err, err_len, "cannot create the %s backend (see above)", o->device);
    return -EINVAL;
  }
  model_load_opts_t mo = {.quantize = KERN_F32};
  if (o->quantize && strcasecmp(o->quantize, "off") != 0) {
    for (int t = 0; t < KERN_TYPE_COUNT && mo.quantize == KERN_F32; t++)
      if (kern_type_name((uint32_t)t) && strcasecmp(kern_type_name((uint32_t)t), o->quantize) == 0)
        mo.quantize = (kern_type_t)t;
    if (mo.quantize == KERN_F32) {
      snprintf(err, err_len, "quantize: unknown type \"%s\"", o->quantize);
      boot_close(st);
      return -EINVAL;
    }
  }
  st->model = model_load_opts(o->model_path, st->be, &mo, err, err_len);
  if (!st->model) {
    boot_close(st);
    return -EINVAL;
  }
  char tok_err[384];
  st->tok = tok_create_from_gguf(model_gguf(st->model), tok_err, sizeof tok_err);
  if (!st->tok) {
    snprintf(err, err_len, "%s: %s", o->model_path, tok_err);
    boot_close(st);
    return -EINVAL;
  }
  if (tok_n_vocab(st->tok) != model_hparams(st->model)->n_vocab) {
    snprintf(err, err_len, "%s: the tokenizer has %d tokens, the model %d", o->model_path, tok_n_vocab(st->tok),
             model_hparams(st->model)->n_vocab);
    boot_close(st);
    return -EINVAL;
  }
  model_gen_defaults(model_gguf(st->model), &st->gen);
  st->pooling = model_hparams(st->model)->pooling; /* MODEL_POOL_* and sched_pool_t are llama.cpp's numbers */
  st->embed_dim = model_hparams(st->model)->dim;
  st->pool_normalize = model_hparams(st->model)->pool_normalize;
  if (o->chat_template_path) {
    if (load_template(st, o->chat_template_path, err, err_len) != 0) {
      boot_close(st);
      return -EINVAL;
    }
  } else {
    st->tmpl = chat_tmpl_from_gguf(model_gguf(st->model), st->tok);
    if (!st->tmpl) log_warn("the model's chat template does not compile: chat requests will be refused");
  }
  st->gvocab = sched_gram_vocab_create(st->tok, err, err_len);
  st->grammars = st->gvocab ? gram_lru_create(st->gvocab, 0, o->grammar_cache_bytes) : NULL;
  if (!st->grammars) {
    if (st->gvocab) snprintf(err, err_len, "out of memory for the grammar cache");
    boot_close(st);
    return -EINVAL;
  }
  sched_config_t sc = o->sched;
  if (sc.spec.method == SCHED_SPEC_DRAFT) {
    if (load_draft(st, o, err, err_len) != 0) {
      boot_close(st);
      return -EINVAL;
    }
    sc.spec.draft_model = st->draft;
  }
  st->engine = sched_engine_create(st->model, st->tok, st->be, &sc);
  if (!st->engine) {
    snprintf(err, err_len, "cannot start the engine (see above)");
    boot_close(st);
    return -EINVAL;
  }
  return 0;
}

void boot_close(boot_t *st) {
  sched_engine_destroy(st->engine);
  gram_lru_destroy(st->grammars); /* entries live on in requests until their last reference */
  gram_vocab_destroy(st->gvocab);
  chat_tmpl_free(st->tmpl);
  tok_destroy(st->tok);
  model_destroy(st->draft);
  model_destroy(st->model);
  kern_backend_destroy(st->be);
  memset(st, 0, sizeof *st);
}
