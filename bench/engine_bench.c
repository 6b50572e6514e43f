/* bench/engine_bench.c — the engine on the default model, no HTTP: for each
 * concurrency C, C requests of P random prompt tokens and O output tokens
 * (eos ignored) are submitted at once and run to the end.
 *
 * Prints per C: wall time, aggregate generated tokens/s (and prompt
 * tokens/s) in wall time and in cpu-time (process CPU time / threads: what
 * the run takes on cores it has to itself; on a shared machine that is the
 * meaningful figure), steps, mean step time, and the scheduler overhead:
 * the time of a step outside model_forward, as a share of the step, split
 * into before the forward (inbox, plan, batch, metadata) and after it
 * (sampling, detokenizing, stop checks, events). Goal: overhead < 2%.
 *
 * Usage: engine_bench [-m MODEL] [-t THREADS] [-c 1,8,32,64] [-p 128] [-o 128]
 *                     [--max-batch-tokens N] [--max-seqs N] [--device cpu|cuda]
 *                     [--kv-cache-mb N] [--precision exact|fast] [--no-graphs]
 * --no-graphs: decode steps launch their kernels (the setting cuda_graphs
 * off; it changes nothing on the CPU). --device cuda runs the same engine on the CUDA backend (a build with
 * CUDA: `make gpu-tests` makes build/tests/gpu/engine_bench); the "cpu"
 * columns then divide process CPU time by THREADS as well, which says
 * little. --kv-cache-mb: the KV cache budget (default 1024). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "model/model.h"
#include "scheduler/sched.h"
#include "text/tokenizer.h"

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Runs c requests at once; returns 0 or -1. */
static int run(sched_engine_t *e, int c, int n_prompt, int n_out, int threads) {
  sched_req_t **reqs = calloc((size_t)c, sizeof *reqs);
  int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
  if (!reqs || !prompt) abort();
  sched_req_params_t p = sched_req_params_default();
  p.max_tokens = n_out;
  p.ignore_eos = 1;
  sched_stats_t s0, s1;
  sched_get_stats(e, &s0);
  const double cpu0 = cpu_s();
  const int64_t t0 = clock_now_ns();
  char err[256];
  for (int i = 0; i < c; i++) {
    for (int j = 0; j < n_prompt; j++) prompt[j] = 1000 + (int32_t)(rnd() % 20000); /* ordinary tokens */
    reqs[i] = sched_req_create(prompt, n_prompt, &p, NULL, err, sizeof err);
    if (!reqs[i] || sched_submit(e, reqs[i], err, sizeof err) != 0) {
      fprintf(stderr, "engine_bench: submit: %s\n", err);
      return -1;
    }
  }
  int done = 0;
  sched_event_t ev[128];
  while (done < c) {
    const int k = sched_wait_events(e, ev, 128, 1000000000);
    for (int i = 0; i < k; i++) {
      done += ev[i].final;
      sched_event_release(&ev[i]);
    }
  }
  const double wall = (double)(clock_now_ns() - t0) / 1e9, cpu = (cpu_s() - cpu0) / threads;
  sched_get_stats(e, &s1);
  for (int i = 0; i < c; i++) sched_req_destroy(reqs[i]);
  const double gen = (double)(s1.generated_tokens - s0.generated_tokens);
  const double pr = (double)(s1.prompt_tokens - s0.prompt_tokens);
  const double steps = (double)(s1.steps - s0.steps);
  const double busy = (double)(s1.busy_ns - s0.busy_ns), fwd = (double)(s1.forward_ns - s0.forward_ns);
  const double plan = (double)(s1.plan_ns - s0.plan_ns), out = (double)(s1.output_ns - s0.output_ns);
  printf("%4d  %8.2f  %9.1f  %9.1f  %9.1f  %9.1f  %6.0f  %8.1f  %7.2f%%  %6.2f%%  %6.2f%%\n", c, wall, gen / wall,
         gen / cpu, pr / wall, pr / cpu, steps, busy / steps / 1e6, 100 * (busy - fwd) / busy, 100 * plan / busy,
         100 * out / busy);
  fflush(stdout);
  free(reqs);
  free(prompt);
  return 0;
}

int main(int argc, char **argv) {
  const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *list = "1,8,32,64";
  const char *device = "cpu";
  int threads = 0, n_prompt = 128, n_out = 128, max_tokens = 256, max_seqs = 64, kv_mb = 1024;
  kern_precision_t precision = KERN_PRECISION_EXACT;
  int graphs = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-graphs")) {
      graphs = 0;
      continue;
    }
    if (!v) {
      fprintf(stderr, "usage: engine_bench [-m MODEL] [-t THREADS] [-c 1,8,32,64] [-p 128] [-o 128] "
                      "[--max-batch-tokens N] [--max-seqs N] [--device cpu|cuda] [--kv-cache-mb N] [--precision exact|fast] [--no-graphs]\n");
      return 2;
    }
    if (!strcmp(a, "-m")) model = v;
    else if (!strcmp(a, "-t")) threads = atoi(v);
    else if (!strcmp(a, "-c")) list = v;
    else if (!strcmp(a, "-p")) n_prompt = atoi(v);
    else if (!strcmp(a, "-o")) n_out = atoi(v);
    else if (!strcmp(a, "--max-batch-tokens")) max_tokens = atoi(v);
    else if (!strcmp(a, "--max-seqs")) max_seqs = atoi(v);
    else if (!strcmp(a, "--device")) device = v;
    else if (!strcmp(a, "--kv-cache-mb")) kv_mb = atoi(v);
    else if (!strcmp(a, "--precision") && (!strcmp(v, "exact") || !strcmp(v, "fast")))
      precision = !strcmp(v, "fast") ? KERN_PRECISION_FAST : KERN_PRECISION_EXACT;
    else {
      fprintf(stderr, "engine_bench: unknown option %s\n", a);
      return 2;
    }
    i++;
  }
  log_set_level(LOG_LEVEL_WARN);
  const kern_backend_opts_t bo = {.n_threads = threads, .precision = precision};
  kern_backend_t *be = kern_backend_create_opts(device, &bo);
  char err[512];
  model_t *m = be ? model_load(model, be, err, sizeof err) : NULL;
  if (!m) {
    if (be) fprintf(stderr, "engine_bench: %s\n", err);
    kern_backend_destroy(be);
    return 1;
  }
  if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  sched_config_t cfg = sched_config_default();
  cfg.max_seqs = max_seqs;
  cfg.max_batch_tokens = max_tokens;
  cfg.kv_cache_bytes = (int64_t)kv_mb << 20;
  cfg.cuda_graphs = graphs;
  tok_t *tok = tok_create_from_gguf(model_gguf(m), err, sizeof err);
  sched_engine_t *e = tok ? sched_engine_create(m, tok, be, &cfg) : NULL;
  if (!e) {
    fprintf(stderr, "engine_bench: %s\n", tok ? "cannot start the engine" : err);
    return 1;
  }
  printf("engine_bench: %s on %s, %d threads, precision %s, %d prompt + %d output tokens per request, max_seqs %d, "
         "max_batch_tokens %d, KV cache %d MiB, decode graphs %s\n",
         model, device, threads, be->precision == KERN_PRECISION_FAST ? "fast" : "exact", n_prompt, n_out, max_seqs,
         max_tokens, kv_mb, graphs && be->graph_begin ? "on" : "off");
  printf("   C    wall s   gen/s wall  gen/s cpu  prompt/s w  prompt/s c   steps  ms/step  overhead  before   after\n");
  int rc = 0;
  for (const char *p = list; *p && rc == 0;) {
    int c = (int)strtol(p, (char **)&p, 10);
    if (c > 0) rc = run(e, c, n_prompt, n_out, threads);
    while (*p == ',') p++;
  }
  sched_engine_destroy(e);
  tok_destroy(tok);
  model_destroy(m);
  kern_backend_destroy(be);
  return rc ? 1 : 0;
}
