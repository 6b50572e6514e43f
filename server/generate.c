/* server/generate.c — `tram generate` (see generate.h): options, the run
 * through the engine, and the output (text, or JSON lines with --json). */
#include "server/generate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/alloc.h"
#include "config/cfg.h"
#include "base/log.h"
#include "server/gen_internal.h"
#include "boot/boot.h"

extern char **environ;

enum { EXIT_RUN = 1, EXIT_USAGE = 2 };

static const char USAGE[] =
    "Usage: tram generate -m MODEL (-p PROMPT | --prompts FILE) [OPTIONS] [SETTINGS]\n"
    "\n"
    "Runs the prompts through the engine at once and prints each output, then the\n"
    "throughput (prompt tokens/s, generated tokens/s, requests/s) on stderr.\n"
    "\n"
    "  -p, --prompt TEXT       one prompt\n"
    "  --prompts FILE          one prompt per line, or JSON lines with per-prompt keys:\n"
    "                          prompt, max_tokens, temperature, top_k, top_p, min_p, seed, n,\n"
    "                          stop, stop_token_ids, ignore_eos, repetition_penalty,\n"
    "                          presence_penalty, frequency_penalty, chat; for tests of the\n"
    "                          scheduler also arrive_step and cancel_after\n"
    "  -n, --max-tokens N      tokens to generate at most per completion (default 128;\n"
    "                          0: up to the context length)\n"
    "  --temperature T         0 (default): greedy; 0..2\n"
    "  --top-k K, --top-p P, --min-p P, --repetition-penalty R, --presence-penalty P,\n"
    "  --frequency-penalty F   the API's sampling fields, with the API's limits\n"
    "  --seed S                the sampler's seed\n"
    "  --stop TEXT             a stop string (repeatable)\n"
    "  --ignore-eos            do not stop at end-of-generation tokens\n"
    "  --chat                  render each prompt as a user message with the chat template\n"
    "  --json                  one JSON object per prompt, then a {\"stats\": ...} line\n"
    "  --no-prefix-caching     do not share KV blocks between prompts\n"
    "\n"
    "SETTINGS: tram's (tram --help): -m/--model, --threads, --kv-cache-bytes,\n"
    "--kv-cache-blocks, --block-size, --max-batch-tokens, --max-seqs, --max-model-len ...\n";

typedef struct gen_opts {
  const char *prompt, *prompts;
  gen_defaults_t d;
  const char **stop; /* [d.n_stop] views into argv */
  int json, no_prefix;
} gen_opts_t;

/* Matches "--name VALUE" or "--name=VALUE" at argv[*i]; sets *val. */
static int opt(int argc, char **argv, int *i, const char *name, const char *alias, const char **val) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if ((strncmp(a, name, n) == 0 && a[n] == '=') ) {
    *val = a + n + 1;
    return 1;
  }
  if (strcmp(a, name) == 0 || (alias && strcmp(a, alias) == 0)) {
    if (*i + 1 >= argc) {
      fprintf(stderr, "tram generate: %s needs a value\n", name);
      *val = NULL;
      return -1;
    }
    *val = argv[++*i];
    return 1;
  }
  return 0;
}

static int number(const char *name, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "tram generate: %s: expected a number in [%g, %g], got \"%s\"\n", name, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* Matches a sampling flag at argv[*i]: one per field of the sampling table
 * (sample/samp_params.h), "--top-p" for top_p, with the table's limits.
 * Returns 1 when it set the field, 0 when argv[*i] is not one, -1 after
 * printing what is wrong with the value. */
static int samp_flag(int argc, char **argv, int *i, samp_params_t *s) {
  for (int k = 0; k < samp_n_fields; k++) {
    const samp_field_t *f = &samp_fields[k];
    char flag[64] = "--", range[64];
    for (size_t j = 0; f->name[j] && j + 3 < sizeof flag; j++) flag[j + 2] = f->name[j] == '_' ? '-' : f->name[j];
    const char *v;
    double x;
    const int r = opt(argc, argv, i, flag, NULL, &v);
    if (r == 0) continue;
    if (r < 0 || number(flag, v, f->lo, f->hi, &x)) return -1;
    if (!samp_field_accepts(f, x)) {
      fprintf(stderr, "tram generate: %s: expected %s in %s, got \"%s\"\n", flag,
              f->integral ? "an integer" : "a number", samp_field_range(f, range, sizeof range), v);
      return -1;
    }
    samp_field_set(s, f, x);
    return 1;
  }
  return 0;
}

/* Takes generate's own options out of argv; the rest go to rest[]. Returns
 * 0, 1 for --help, or -1 on a usage error. */
static int parse_opts(int argc, char **argv, gen_opts_t *o, char **rest, int *n_rest) {
  memset(o, 0, sizeof *o);
  o->d.p = sched_req_params_default();
  o->d.p.max_tokens = 128;
  o->stop = xcalloc((size_t)argc + 1, sizeof *o->stop);
  *n_rest = 0;
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    double x;
    int r;
    samp_params_t *s = &o->d.p.samp;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    if (strcmp(argv[i], "--chat") == 0) o->d.chat = 1;
    else if (strcmp(argv[i], "--json") == 0) o->json = 1;
    else if (strcmp(argv[i], "--ignore-eos") == 0) o->d.p.ignore_eos = 1;
    else if (strcmp(argv[i], "--no-prefix-caching") == 0) o->no_prefix = 1;
    else if ((r = opt(argc, argv, &i, "--prompt", "-p", &v))) {
      if (r < 0) return -1;
      o->prompt = v;
    } else if ((r = opt(argc, argv, &i, "--prompts", NULL, &v))) {
      if (r < 0) return -1;
      o->prompts = v;
    } else if ((r = opt(argc, argv, &i, "--stop", NULL, &v))) {
      if (r < 0) return -1;
      o->stop[o->d.n_stop++] = v;
    } else if ((r = opt(argc, argv, &i, "--max-tokens", "-n", &v))) {
      if (r < 0 || number("--max-tokens", v, 0, 1 << 24, &x)) return -1;
      o->d.p.max_tokens = (int32_t)x;
    } else if ((r = samp_flag(argc, argv, &i, s))) {
      if (r < 0) return -1;
    } else if ((r = opt(argc, argv, &i, "--seed", NULL, &v))) {
      char *end;
      errno = 0;
      unsigned long long seed = strtoull(v ? v : "", &end, 10);
      if (r < 0 || errno || !v || end == v || *end) {
        fprintf(stderr, "tram generate: --seed: expected an unsigned integer\n");
        return -1;
      }
      s->seed = seed;
      s->has_seed = 1;
    } else {
      rest[(*n_rest)++] = argv[i];
    }
  }
  o->d.stop = o->stop;
  if (!o->prompt == !o->prompts) {
    fprintf(stderr, "tram generate: give exactly one of -p PROMPT and --prompts FILE (see tram generate --help)\n");
    return -1;
  }
  return 0;
}

/* --- the run ------------------------------------------------------------------ */

static void on_event(sched_engine_t *e, gen_item_t *it, const sched_event_t *ev, int *n_done) {
  gen_choice_t *c = &it->choices[ev->index];
  if (ev->token >= 0) {
    int32_t cap = c->cap_ids;
    xgrow_i32(&c->ids, &cap, c->n_ids + 1, sizeof *c->ids, 64);
    cap = c->cap_ids;
    xgrow_i32(&c->steps, &cap, c->n_ids + 1, sizeof *c->steps, 64);
    c->cap_ids = cap;
    c->ids[c->n_ids] = ev->token;
    c->steps[c->n_ids++] = ev->step;
  }
  if (ev->text_len) {
    if (c->len + ev->text_len + 1 > c->cap) {
      c->cap = 2 * (c->len + ev->text_len + 1);
      c->text = xreallocarray(c->text, c->cap, 1);
    }
    memcpy(c->text + c->len, ev->text, ev->text_len);
    c->len += ev->text_len;
  }
  if (ev->kind != SCHED_EV_TOKEN) {
    c->finish = ev->finish;
    c->stop_token = ev->stop_token;
    if (ev->stop_str) c->stop_str = xstrdup(ev->stop_str);
    if (ev->error) c->error = xstrdup(ev->error);
  }
  if (it->cancel_after > 0 && !it->cancelled && ev->index == 0 && c->n_ids >= it->cancel_after && !ev->final) {
    sched_stats_t st;
    sched_get_stats(e, &st);
    it->cancel_step = st.steps;
    it->cancelled = 1;
    sched_req_cancel(it->req);
  }
  if (ev->final) {
    it->usage = ev->usage;
    it->times = ev->times;
    it->final_step = ev->step;
    it->done = 1;
    (*n_done)++;
  }
}

/* Submits every item (each when its arrive_step comes) and collects the
 * events until all are done. */
static void run(sched_engine_t *e, gen_item_t *items, int n) {
  int n_done = 0, n_submitted = 0;
  sched_event_t evs[64];
  while (n_done < n) {
    if (n_submitted < n) {
      sched_stats_t st;
      sched_get_stats(e, &st);
      /* an idle engine runs no more steps: the next arrivals come now */
      uint64_t now = st.steps, next = UINT64_MAX;
      for (int i = 0; i < n; i++)
        if (!items[i].submitted && (uint64_t)items[i].arrive_step < next) next = (uint64_t)items[i].arrive_step;
      if (n_done == n_submitted && next > now) now = next;
      for (int i = 0; i < n; i++) {
        gen_item_t *it = &items[i];
        if (it->submitted || (uint64_t)it->arrive_step > now) continue;
        it->submitted = 1;
        n_submitted++;
        char err[512];
        it->req = sched_req_create(it->ids, it->n_ids, &it->p, it, err, sizeof err);
        int rc = it->req ? sched_submit(e, it->req, err, sizeof err) : -EINVAL;
        if (rc != 0) {
          it->error = xstrdup(err);
          it->done = 1;
          n_done++;
        }
      }
    }
    /* waiting for arrivals: look at the step count every millisecond */
    const int k = sched_wait_events(e, evs, 64, n_submitted < n ? 1000000 : 1000000000);
    for (int j = 0; j < k; j++) {
      on_event(e, (gen_item_t *)evs[j].user, &evs[j], &n_done);
      sched_event_release(&evs[j]);
    }
  }
}

/* --- output ------------------------------------------------------------------- */

static double ms(int64_t from, int64_t to) { return from && to ? (double)(to - from) / 1e6 : -1; }

static void print_json(const gen_item_t *it, int index) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "index", index);
  cJSON_AddNumberToObject(o, "prompt_tokens", it->n_ids);
  if (it->error) cJSON_AddStringToObject(o, "error", it->error);
  cJSON *chs = cJSON_AddArrayToObject(o, "choices");
  for (int32_t k = 0; !it->error && k < it->p.n; k++) {
    const gen_choice_t *c = &it->choices[k];
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", k);
    char *t = xstrndup(c->text ? c->text : "", c->len);
    cJSON_AddStringToObject(ch, "text", t);
    free(t);
    cJSON *ids = cJSON_AddArrayToObject(ch, "token_ids"), *steps = cJSON_AddArrayToObject(ch, "token_steps");
    for (int32_t j = 0; j < c->n_ids; j++) {
      cJSON_AddItemToArray(ids, cJSON_CreateNumber(c->ids[j]));
      cJSON_AddItemToArray(steps, cJSON_CreateNumber((double)c->steps[j]));
    }
    cJSON_AddStringToObject(ch, "finish_reason", sched_finish_name(c->finish));
    if (c->stop_str) cJSON_AddStringToObject(ch, "stop", c->stop_str);
    if (c->stop_token >= 0) cJSON_AddNumberToObject(ch, "stop_token", c->stop_token);
    if (c->error) cJSON_AddStringToObject(ch, "error", c->error);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)sched_req_seed(it->req, k));
    cJSON_AddStringToObject(ch, "seed", seed); /* a string: a double would round it */
    cJSON_AddItemToArray(chs, ch);
  }
  if (!it->error) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)it->usage.prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)it->usage.completion_tokens);
    cJSON_AddNumberToObject(u, "cached_tokens", (double)it->usage.cached_tokens);
    cJSON *t = cJSON_AddObjectToObject(o, "times");
    cJSON_AddNumberToObject(t, "queue_ms", ms(it->times.arrival, it->times.first_scheduled));
    cJSON_AddNumberToObject(t, "ttft_ms", ms(it->times.arrival, it->times.first_token));
    cJSON_AddNumberToObject(t, "total_ms", ms(it->times.arrival, it->times.finished));
    cJSON_AddNumberToObject(t, "first_step", (double)it->times.first_step);
    cJSON_AddNumberToObject(t, "final_step", (double)it->final_step);
    if (it->cancelled) cJSON_AddNumberToObject(t, "cancel_step", (double)it->cancel_step);
  }
  char *s = cJSON_PrintUnformatted(o);
  printf("%s\n", s);
  free(s);
  cJSON_Delete(o);
}

static void print_stats_json(const sched_stats_t *st, double wall_s) {
  cJSON *o = cJSON_CreateObject(), *s = cJSON_AddObjectToObject(o, "stats");
#define F(name) cJSON_AddNumberToObject(s, #name, (double)st->name)
  F(running); F(waiting); F(kv_blocks_total); F(kv_blocks_used); F(kv_blocks_free); F(kv_blocks_cached);
  F(block_size); F(max_model_len); F(requests_submitted); F(requests_finished); F(preemptions); F(steps);
  F(decode_steps); F(varlen_steps); F(step_tokens); F(step_seqs); F(prompt_tokens); F(generated_tokens);
  F(prefix_query_tokens); F(prefix_hit_tokens); F(prefix_query_blocks); F(prefix_hit_blocks); F(busy_ns);
  F(forward_ns); F(plan_ns); F(output_ns); F(spec_drafts); F(spec_draft_tokens); F(spec_accepted_tokens);
  F(draft_kv_blocks_total); F(draft_kv_blocks_used);
#undef F
  cJSON_AddNumberToObject(s, "wall_s", wall_s);
  char *p = cJSON_PrintUnformatted(o);
  printf("%s\n", p);
  free(p);
  cJSON_Delete(o);
}

static void print_text(const gen_item_t *items, int n, int one) {
  for (int i = 0; i < n; i++) {
    const gen_item_t *it = &items[i];
    if (!one) printf("=== %d: %s\n", i, it->prompt);
    if (it->error) {
      printf("error: %s\n", it->error);
      continue;
    }
    for (int32_t k = 0; k < it->p.n; k++) {
      const gen_choice_t *c = &it->choices[k];
      if (it->p.n > 1) printf("--- completion %d\n", k);
      fwrite(c->text ? c->text : "", 1, c->len, stdout);
      if (c->error) printf("\nerror: %s", c->error);
      printf("\n");
    }
  }
}

/* --- main ----------------------------------------------------------------------- */

static int setup(int n_rest, char **rest, cfg_t *cfg) {
  char err[1024];
  if (cfg_load(cfg, n_rest, rest, environ, err, sizeof err) != 0) {
    fprintf(stderr, "tram generate: %s\n", err);
    return EXIT_USAGE;
  }
  if (log_configure((log_level_t)cfg->log_level, (log_format_t)cfg->log_format, cfg->log_file) != 0) {
    fprintf(stderr, "tram generate: cannot open the log file %s\n", cfg->log_file);
    return EXIT_USAGE;
  }
  return 0;
}

int gen_main(int argc, char **argv) {
  gen_opts_t o;
  char **rest = xcalloc((size_t)argc + 1, sizeof *rest);
  int n_rest = 0, status = EXIT_USAGE, n_items = 0;
  int rc = parse_opts(argc, argv, &o, rest, &n_rest);
  cfg_t cfg = {0};
  boot_t stack = {0};
  gen_item_t *items = NULL;
  if (rc == 1) {
    fputs(USAGE, stdout);
    status = 0;
    goto out;
  }
  if (rc < 0 || (status = setup(n_rest, rest, &cfg)) != 0) goto out;
  status = EXIT_USAGE;
  if (o.prompts) {
    if (gen_read_prompts(o.prompts, &o.d, &items, &n_items) != 0) goto out;
  } else {
    items = xcalloc(1, sizeof *items);
    gen_item_from_text(&items[0], o.prompt, &o.d);
    n_items = 1;
  }
  status = EXIT_RUN;
  char err[1024];
  boot_opts_t so = boot_opts_from_cfg(&cfg);
  so.sched.prefix_caching = !o.no_prefix;
  so.sched.max_waiting = 0; /* every prompt is queued at once */
  if (boot_open(&stack, &so, err, sizeof err) != 0) {
    fprintf(stderr, "tram generate: %s\n", err);
    goto out;
  }
  sched_engine_t *e = stack.engine;
  for (int i = 0; i < n_items; i++) {
    if (items[i].chat && !stack.tmpl) {
      fprintf(stderr, "tram generate: --chat needs the model's chat template, which does not compile (see above)\n");
      goto out;
    }
    items[i].choices = xcalloc((size_t)(items[i].p.n ? items[i].p.n : 1), sizeof *items[i].choices);
    items[i].p.n = items[i].p.n ? items[i].p.n : 1;
    if (gen_tokenize(&items[i], stack.tok, stack.tmpl, err, sizeof err) != 0) {
      fprintf(stderr, "tram generate: prompt %d: %s\n", i, err);
      status = EXIT_USAGE;
      goto out;
    }
  }
  const int64_t t0 = clock_now_ns();
  run(e, items, n_items);
  const double wall = (double)(clock_now_ns() - t0) / 1e9;
  sched_stats_t st;
  sched_get_stats(e, &st);
  int64_t prompt = 0, gen = 0, failed = 0;
  for (int i = 0; i < n_items; i++) {
    if (o.json) print_json(&items[i], i);
    failed += items[i].error != NULL;
    prompt += items[i].error ? 0 : items[i].usage.prompt_tokens;
    gen += items[i].usage.completion_tokens;
  }
  if (o.json) print_stats_json(&st, wall);
  else print_text(items, n_items, o.prompt != NULL);
  fflush(stdout);
  fprintf(stderr,
          "tram generate: %d requests in %.2f s: %lld prompt tokens (%.1f tok/s), %lld generated tokens (%.1f "
          "tok/s), %.2f requests/s; %llu steps, %llu preemptions, prefix cache %llu/%llu tokens\n",
          n_items, wall, (long long)prompt, (double)prompt / wall, (long long)gen, (double)gen / wall,
          (double)n_items / wall, (unsigned long long)st.steps, (unsigned long long)st.preemptions,
          (unsigned long long)st.prefix_hit_tokens, (unsigned long long)st.prefix_query_tokens);
  status = failed == n_items ? EXIT_RUN : 0;
out:
  for (int i = 0; i < n_items; i++) gen_item_free(&items[i]); /* before the engine: no event names them now */
  free(items);
  boot_close(&stack);
  cfg_free(&cfg);
  free(o.stop);
  free(rest);
  return status;
}
