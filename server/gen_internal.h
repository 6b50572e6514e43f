/* server/gen_internal.h — the pieces of `tram generate` (server/generate.c
 * runs and prints, server/gen_input.c reads the prompts). */
#ifndef TRAM_GEN_INTERNAL_H
#define TRAM_GEN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "scheduler/sched.h"

/* One completion of a prompt, as it comes back. */
typedef struct gen_choice {
  char *text;
  size_t len, cap;
  int32_t *ids;       /* [n_ids] sampled tokens */
  uint64_t *steps;    /* [n_ids] the engine step of each */
  int32_t n_ids, cap_ids;
  sched_finish_t finish;
  char *stop_str;     /* copy, or NULL */
  int32_t stop_token;
  char *error;
} gen_choice_t;

/* One prompt: its parameters, then its results. */
typedef struct gen_item {
  char *prompt;       /* the text as given */
  int chat;           /* render it as a user message through the chat template */
  int32_t *ids;       /* [n_ids] its tokens */
  int32_t n_ids;
  sched_req_params_t p;
  char **stop;        /* [p.n_stop] owned */
  int32_t *stop_ids;  /* [p.n_stop_ids] owned */
  int64_t arrive_step; /* submit once the engine ran this many steps (0: at once) */
  int32_t cancel_after; /* cancel after this many tokens of choice 0 (0: never) */
  /* results */
  sched_req_t *req;
  int submitted, done, cancelled;
  char *error;        /* refused at submit */
  gen_choice_t *choices; /* [p.n] */
  sched_usage_t usage;
  sched_times_t times;
  uint64_t cancel_step, final_step;
} gen_item_t;

/* The command line's options that are per-prompt defaults. */
typedef struct gen_defaults {
  sched_req_params_t p;
  int chat;
  const char *const *stop;
  int32_t n_stop;
} gen_defaults_t;

/* Reads FILE's prompts (plain lines or JSON lines) into *items[*n] with d's
 * defaults. Returns 0, or -EINVAL after printing "FILE:LINE: why". */
int gen_read_prompts(const char *path, const gen_defaults_t *d, gen_item_t **items, int *n);

/* One item for a prompt given on the command line. */
void gen_item_from_text(gen_item_t *it, const char *prompt, const gen_defaults_t *d);

/* Tokenizes it->prompt (through the chat template when it->chat; tmpl may
 * be NULL otherwise). Returns 0 or -EINVAL with the reason in err. */
int gen_tokenize(gen_item_t *it, const tok_t *tok, const chat_tmpl_t *tmpl, char *err, size_t err_len);

/* Frees what an item owns (its request too). */
void gen_item_free(gen_item_t *it);

#endif
