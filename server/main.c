/* server/main.c — the tram program: `tram [serve] ...`, `tram --version`. */
#include <stdio.h>
#include <string.h>

#include "config/log.h"

#define TRAM_VERSION "0.1.0"

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
    printf("tram %s\n", TRAM_VERSION);
    return 0;
  }
  log_error("the HTTP server is not built yet (issue 7): `tram serve` cannot run");
  return 1;
}
