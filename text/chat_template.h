/* text/chat_template.h — renders OpenAI-style chat messages into a prompt
 * with the model's own chat template (a Jinja template, GGUF key
 * `tokenizer.chat_template`).
 *
 * The template runs in a small Jinja interpreter (text/jinja/jinja*.c) that
 * renders what Hugging Face transformers renders: jinja2 with
 * trim_blocks/lstrip_blocks, loop controls, `raise_exception(msg)`,
 * `strftime_now(fmt)` and a json.dumps-based `tojson`. A construct it does
 * not support is a compile error, reported when the model loads.
 *
 * Variables a render sees: `messages`, `add_generation_prompt`, `bos_token`,
 * `eos_token`, `tools` and `documents` (none unless given, as transformers
 * passes them), plus any extra variables the caller gives as a dict.
 *
 * Inputs are chat_val_t trees — plain data (None, bool, int, float, str,
 * list, dict), no JSON library: the server converts request JSON at its
 * edge (api/oai_chat_val.h).
 *
 * Message normalisation: a message whose `content` is a list of parts
 * [{"type": "text", "text": ...}, ...] is rendered with content = the texts
 * joined with "\n" (what vLLM does for templates that expect string
 * content); any other part type is an error.
 *
 * Known differences from jinja2 (none seen in real chat templates): a
 * macro that reads a name which its enclosing body assigns with `set` may
 * see a different value before that assignment (jinja2 decides by whether
 * the body reads the name before it assigns it; tram by whether the name is
 * assigned at all); literal
 * expressions are not constant-folded, so an unknown filter in a branch
 * jinja2 folds away is still a compile error here.
 *
 * Ownership and threads: a compiled template is immutable; any number of
 * threads may render it at once. Each render allocates in its own arena and
 * hands back a malloc'd string. */
#ifndef TRAM_CHAT_TEMPLATE_H
#define TRAM_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct chat_tmpl chat_tmpl_t;

/* A template input value (what Python would pass): borrowed for the call. */
typedef enum chat_val_kind {
  CHAT_VAL_NONE = 0,
  CHAT_VAL_BOOL,  /* i: 0 or 1 */
  CHAT_VAL_INT,   /* i */
  CHAT_VAL_FLOAT, /* f */
  CHAT_VAL_STR,   /* s[n] bytes, UTF-8, need not be NUL-terminated */
  CHAT_VAL_LIST,  /* items[n] */
  CHAT_VAL_DICT,  /* items[n] under keys[n] (each a CHAT_VAL_STR), in order */
} chat_val_kind_t;

typedef struct chat_val chat_val_t;
struct chat_val {
  chat_val_kind_t kind;
  int64_t i;
  double f;
  const char *s;
  size_t n;                /* STR: bytes; LIST, DICT: entries */
  const chat_val_t *items; /* LIST, DICT: [n] */
  const chat_val_t *keys;  /* DICT: [n] */
};

/* The ChatML template, used for models without a template of their own
 * (with the BOS and EOS their tokenizer asks for: chat_tmpl_from_model). */
extern const char CHAT_TMPL_CHATML[];

/* Limits of one render (0 in chat_tmpl_input_t picks these). */
#define CHAT_TMPL_MAX_OUTPUT (16u << 20)  /* bytes of rendered text (and of any string) */
#define CHAT_TMPL_MAX_MEMORY (256u << 20) /* bytes one render may allocate */
#define CHAT_TMPL_MAX_STEPS 20000000u     /* statements + expressions evaluated */

/* Compiles template source src[len] (UTF-8; need not be NUL-terminated).
 * Returns NULL on a syntax error or an unsupported construct, with the
 * message (and its line) in err[err_size] when err is not NULL (then logged
 * at debug level only: the caller reports it), else logged as an error. The
 * source is copied. */
chat_tmpl_t *chat_tmpl_compile(const char *src, size_t len, char *err, size_t err_size);

/* What the model loader calls with the GGUF's template: src NULL or empty
 * compiles the ChatML fallback, saying so in the log. A model's own template
 * writes the BOS its tokenizer needs (`{{ bos_token }}`); the fallback
 * follows the tokenizer as such a template would, and as llama.cpp's
 * tokenization of its own ChatML fallback does: `{{ bos_token }}` first when
 * add_bos (the tokenizer's add_bos_token, tok_adds_bos()), `{{ eos_token }}`
 * last when add_eos (add_eos_token), around CHAT_TMPL_CHATML. A template of
 * the model's own is used as it is. NULL (logged) when the template does not
 * compile. */
chat_tmpl_t *chat_tmpl_from_model(const char *src, size_t len, int add_bos, int add_eos);

struct gguf_ctx;
struct tok;

/* chat_tmpl_from_model() with the GGUF key `tokenizer.chat_template` of g
 * (none: ChatML) and the BOS/EOS settings of tok, the tokenizer of the same
 * file. NULL (logged) when the key is not a string or the template does not
 * compile. */
chat_tmpl_t *chat_tmpl_from_gguf(const struct gguf_ctx *g, const struct tok *tok);

/* The source the template was compiled from (NUL-terminated, owned by t). */
const char *chat_tmpl_source(const chat_tmpl_t *t);

/* Frees t; NULL is a no-op. */
void chat_tmpl_free(chat_tmpl_t *t);

typedef struct chat_tmpl_input {
  const chat_val_t *messages;   /* a list of dicts {role, content, ...} */
  int add_generation_prompt;
  const char *bos_token;        /* NUL-terminated; NULL: "" */
  const char *eos_token;        /* NUL-terminated; NULL: "" */
  const chat_val_t *extra;      /* a dict of further variables, or NULL */
  size_t max_output;            /* 0: CHAT_TMPL_MAX_OUTPUT */
  size_t max_memory;            /* 0: CHAT_TMPL_MAX_MEMORY */
  uint64_t max_steps;           /* 0: CHAT_TMPL_MAX_STEPS */
} chat_tmpl_input_t;

/* Renders t for `in`. On success returns 0 and *out (malloc'd, NUL-
 * terminated, the caller frees it) with its length in *out_len. On failure
 * *out is NULL and the message goes to err[err_size] (if err is not NULL):
 *   -EBADMSG  the template called raise_exception(msg); err is msg exactly
 *   -EINVAL   messages/extra malformed, or a template error at render time
 *             (undefined variable misused, type error, ...)
 *   -E2BIG    a limit was hit (output size, memory, steps, nesting)
 * Never crashes or runs unbounded on a hostile template or input. */
int chat_tmpl_render(const chat_tmpl_t *t, const chat_tmpl_input_t *in, char **out, size_t *out_len, char *err,
                     size_t err_size);

#endif
