/* server/main.c — the tram program.
 *
 *   tram [serve] [SETTINGS]               serve the model (the default command)
 *   tram serve --check-config [SETTINGS]  validate, print the resolved settings
 *                                         as JSON with their sources, exit 0
 *   tram generate ...                     run prompts through the engine, print
 *                                         the outputs and the throughput
 *                                         (server/generate.h)
 *   tram --help | --help-markdown | --version
 *
 * Exit status: 0 success, 1 a failure while running, 2 a usage or
 * configuration error (nothing was started). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg.h"
#include "base/alloc.h"
#include "base/log.h"
#include "server/generate.h"
#include "server/srv.h"

extern char **environ;

enum { EXIT_USAGE = 2 };

static bool is(const char *a, const char *x, const char *y) {
  return strcmp(a, x) == 0 || (y && strcmp(a, y) == 0);
}

static int version(void) {
#ifdef TRAM_CUDA
  printf("tram %s (devices: cpu, cuda)\n", TRAM_VERSION);
#else
  printf("tram %s (devices: cpu)\n", TRAM_VERSION);
#endif
  return 0;
}

/* `tram serve`: argv[0..argc) are the settings (plus --check-config). */
static int serve(int argc, char **argv) {
  bool check_only = false;
  char **args = xcalloc((size_t)argc + 1, sizeof *args);
  int n = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--check-config") == 0) check_only = true;
    else args[n++] = argv[i];
  }
  cfg_t cfg;
  char err[1024];
  int rc = cfg_load(&cfg, n, args, environ, err, sizeof err);
  free(args);
  if (rc) {
    log_error("%s", err);
    return EXIT_USAGE;
  }
  rc = log_configure((log_level_t)cfg.log_level, (log_format_t)cfg.log_format, cfg.log_file);
  if (rc) {
    char where[256];
    log_error("%s: cannot open log file \"%s\": %s",
              cfg_source_describe(&cfg, CFG_LOG_FILE, where, sizeof where), cfg.log_file,
              strerror(-rc));
    cfg_free(&cfg);
    return EXIT_USAGE;
  }
  if (check_only) {
    log_info("configuration is valid%s%s", cfg.config ? ": " : "", cfg.config ? cfg.config : "");
    if (log_write_error()) { /* the log itself is not: say so where it can be read */
      fprintf(stderr, "tram: cannot write to the log file \"%s\": %s\n", cfg.log_file ? cfg.log_file : "(stderr)",
              strerror(-log_write_error()));
      cfg_free(&cfg);
      return EXIT_USAGE;
    }
    char *json = cfg_to_json(&cfg);
    if (!json) abort();
    printf("%s\n", json);
    free(json);
    cfg_free(&cfg);
    return 0;
  }
  rc = srv_run(&cfg);
  cfg_free(&cfg);
  log_close();
  return rc;
}

int main(int argc, char **argv) {
  const char *prog = "tram";
  int first = 1;
  const char *command = "serve";
  if (argc > 1 && argv[1][0] != '-') {
    command = argv[1];
    first = 2;
  }
  if (strcmp(command, "generate") == 0) return gen_main(argc - first, argv + first);
  for (int i = first; i < argc; i++) {
    if (is(argv[i], "--help", "-h")) {
      cfg_print_help(stdout, prog);
      return 0;
    }
    if (is(argv[i], "--help-markdown", NULL)) {
      cfg_print_markdown(stdout);
      return 0;
    }
    if (is(argv[i], "--version", "-V")) return version();
  }
  if (strcmp(command, "serve") == 0) return serve(argc - first, argv + first);
  log_error("unknown command \"%s\" (commands: serve, generate; see tram --help)", command);
  return EXIT_USAGE;
}
