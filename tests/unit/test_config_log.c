/* tests/unit/test_config_log.c — logging: levels, text and JSON lines, JSON
 * escaping and truncation, the access-log line, the log file and its
 * reopening after rotation. (journald prefixes need a process whose stderr
 * is the stream named by JOURNAL_STREAM: tests/integration/test_config.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "tests/unit/testutil.h"

static char dir[64];
static char path[128];

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/tram-test-log-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(path, sizeof path, "%s/tram.log", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  log_close();
  log_set_level(LOG_LEVEL_INFO);
  log_set_format(LOG_FORMAT_TEXT);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Starts a fresh log file at `path` with this level and format. */
static void start(log_level_t level, log_format_t format) {
  unlink(path);
  assert_int_equal(log_configure(level, format, path), 0);
}

/* Reads file p whole (malloc'ed). */
static char *slurp(const char *p) {
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  char *buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Splits text into lines (in place); returns the count, fills lines[max]. */
static int lines_of(char *text, char **lines, int max) {
  int n = 0;
  for (char *p = text; *p && n < max;) {
    char *nl = strchr(p, '\n');
    assert_non_null(nl); /* every line ends with a newline */
    *nl = '\0';
    lines[n++] = p;
    p = nl + 1;
  }
  return n;
}

static void text_lines_and_levels(void **state) {
  (void)state;
  start(LOG_LEVEL_WARN, LOG_FORMAT_TEXT);
  log_error("e %d", 1);
  log_warn("w two\nlines");
  log_info("not written");
  log_debug("not written");
  log_set_level(LOG_LEVEL_DEBUG);
  log_debug("d");
  char *text = slurp(path);
  char *l[8];
  assert_int_equal(lines_of(text, l, 8), 3);
  regex_t re;
  assert_int_equal(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                                "(error|warn|info|debug): ", REG_EXTENDED | REG_NOSUB), 0);
  for (int i = 0; i < 3; i++) assert_int_equal(regexec(&re, l[i], 0, NULL, 0), 0);
  regfree(&re);
  assert_non_null(strstr(l[0], "error: e 1"));
  assert_non_null(strstr(l[1], "warn: w two lines")); /* one entry, one line */
  assert_non_null(strstr(l[2], "debug: d"));
  free(text);
  assert_int_equal(log_get_level(), LOG_LEVEL_DEBUG);
  log_level_t lv;
  assert_int_equal(log_level_parse("warn", &lv), 0);
  assert_int_equal(lv, LOG_LEVEL_WARN);
  assert_int_equal(log_level_parse("WARN", &lv), -1);
  assert_string_equal(log_level_name(LOG_LEVEL_DEBUG), "debug");
}

/* JSON lines parse, carry ts/level/msg, and escape anything. */
static void json_lines(void **state) {
  (void)state;
  start(LOG_LEVEL_INFO, LOG_FORMAT_JSON);
  const char *tricky = "quote \" backslash \\ tab \t nl \n ctl \x01 utf8 \xc3\xa9 bad \xff\xc3 end";
  log_info("%s", tricky);
  log_error("plain");
  char *text = slurp(path);
  char *l[4];
  assert_int_equal(lines_of(text, l, 4), 2);
  cJSON *j = cJSON_Parse(l[0]);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "info");
  assert_int_equal(strlen(cJSON_GetObjectItem(j, "ts")->valuestring), 24);
  /* Valid bytes come back as they were; the two invalid ones as U+FFFD. */
  assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring,
                      "quote \" backslash \\ tab \t nl \n ctl \x01 utf8 \xc3\xa9 bad "
                      "\xef\xbf\xbd\xef\xbf\xbd end");
  cJSON_Delete(j);
  j = cJSON_Parse(l[1]);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "error");
  cJSON_Delete(j);
  free(text);
}

/* A message longer than a line is cut, and the line stays valid JSON, for
 * random messages of escapes and multi-byte characters. */
static void long_lines_truncate_cleanly(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  const char *pieces[] = {"a", "\"", "\\", "\n", "\x02", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff"};
  static char msg[3 * LOG_LINE_MAX];
  for (int fmt = 0; fmt < 2; fmt++) {
    for (int round = 0; round < 20; round++) {
      start(LOG_LEVEL_INFO, (log_format_t)fmt);
      size_t n = 0;
      size_t target = LOG_LINE_MAX - 200 + tu_below(&r, 400 + (uint64_t)LOG_LINE_MAX);
      while (n + 4 < target) {
        const char *p = pieces[tu_below(&r, sizeof pieces / sizeof *pieces)];
        memcpy(msg + n, p, strlen(p));
        n += strlen(p);
      }
      msg[n] = '\0';
      log_info("%s", msg);
      log_access(&(log_access_t){.id = msg, .endpoint = msg, .status = 200, .finish_reason = msg,
                                 .queue_ms = 1, .ttft_ms = 2, .total_ms = 3});
      char *text = slurp(path);
      char *l[4];
      assert_int_equal(lines_of(text, l, 4), 2);
      for (int i = 0; i < 2; i++) {
        assert_true(strlen(l[i]) + 1 <= LOG_LINE_MAX);
        if (fmt == LOG_FORMAT_JSON) {
          cJSON *j = cJSON_Parse(l[i]);
          if (!j) fail_msg("invalid JSON line: %.200s", l[i]);
          if (i == 1) assert_true(cJSON_GetObjectItem(j, "total_ms")->valuedouble == 3.0);
          cJSON_Delete(j);
        }
      }
      /* The access line keeps its fixed fields whatever the strings' size. */
      if (fmt == LOG_FORMAT_TEXT) assert_non_null(strstr(l[1], " status=200 prompt_tokens=0 output_tokens=0 queue_ms=1.0 ttft_ms=2.0 total_ms=3.0 finish_reason="));
      free(text);
    }
  }
}

static void access_log(void **state) {
  (void)state;
  log_access_t a = {.id = "cmpl-7", .endpoint = "/v1/chat/completions", .status = 200,
                    .prompt_tokens = 12, .output_tokens = 50, .queue_ms = 1.25,
                    .ttft_ms = 40.04, .total_ms = 900.5, .finish_reason = "stop"};
  start(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
  log_access(&a);
  log_access_t b = {.id = "odd id\n", .endpoint = "/v1/completions", .status = 499,
                    .prompt_tokens = 3, .output_tokens = 0, .queue_ms = -1, .ttft_ms = -1,
                    .total_ms = 2.0};
  log_access(&b);
  log_set_level(LOG_LEVEL_WARN);
  log_access(&a); /* info is off */
  char *text = slurp(path);
  char *l[4];
  assert_int_equal(lines_of(text, l, 4), 2);
  assert_non_null(strstr(l[0], " info: request id=cmpl-7 endpoint=/v1/chat/completions status=200 "
                               "prompt_tokens=12 output_tokens=50 queue_ms=1.2 ttft_ms=40.0 "
                               "total_ms=900.5 finish_reason=stop"));
  assert_non_null(strstr(l[1], "request id=odd_id_ endpoint=/v1/completions status=499 "
                               "prompt_tokens=3 output_tokens=0 queue_ms=- ttft_ms=- total_ms=2.0"));
  assert_null(strstr(l[1], "finish_reason"));
  free(text);

  start(LOG_LEVEL_INFO, LOG_FORMAT_JSON);
  log_access(&a);
  log_access(&b);
  text = slurp(path);
  assert_int_equal(lines_of(text, l, 4), 2);
  cJSON *j = cJSON_Parse(l[0]);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "request");
  assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "cmpl-7");
  assert_string_equal(cJSON_GetObjectItem(j, "endpoint")->valuestring, "/v1/chat/completions");
  assert_int_equal(cJSON_GetObjectItem(j, "status")->valueint, 200);
  assert_int_equal(cJSON_GetObjectItem(j, "prompt_tokens")->valueint, 12);
  assert_int_equal(cJSON_GetObjectItem(j, "output_tokens")->valueint, 50);
  assert_true(cJSON_GetObjectItem(j, "ttft_ms")->valuedouble == 40.0);
  assert_true(cJSON_GetObjectItem(j, "total_ms")->valuedouble == 900.5);
  assert_string_equal(cJSON_GetObjectItem(j, "finish_reason")->valuestring, "stop");
  cJSON_Delete(j);
  j = cJSON_Parse(l[1]);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "odd id\n");
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "ttft_ms")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "queue_ms")));
  assert_null(cJSON_GetObjectItem(j, "finish_reason"));
  cJSON_Delete(j);
  free(text);
}

/* logrotate moves the file away; after log_reopen() lines go to a new file
 * at the same path, and nothing was lost. */
static void reopen_after_rotation(void **state) {
  (void)state;
  start(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
  log_info("before");
  char rotated[160];
  snprintf(rotated, sizeof rotated, "%s.1", path);
  assert_int_equal(rename(path, rotated), 0);
  log_info("still old");
  assert_int_equal(log_reopen(), 0);
  log_info("after");
  char *old = slurp(rotated), *cur = slurp(path);
  assert_non_null(strstr(old, "before"));
  assert_non_null(strstr(old, "still old"));
  assert_null(strstr(old, "after"));
  assert_non_null(strstr(cur, "after"));
  assert_null(strstr(cur, "before"));
  free(old);
  free(cur);
  /* A failed reopen (folder gone) keeps the old file. */
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s.d && mkdir %s.d", dir, dir);
  assert_int_equal(system(cmd), 0);
  char moved[160];
  snprintf(moved, sizeof moved, "%s.d/x.log", dir);
  assert_int_equal(log_configure(LOG_LEVEL_INFO, LOG_FORMAT_TEXT, moved), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s.d", dir);
  assert_int_equal(system(cmd), 0);
  assert_true(log_reopen() < 0);
  log_info("into the unlinked file"); /* must not crash */
  /* Back to stderr: reopen has nothing to do. */
  log_close();
  assert_int_equal(log_reopen(), 0);
  assert_int_equal(log_configure(LOG_LEVEL_INFO, LOG_FORMAT_TEXT, "/nonexistent/dir/x.log"), -2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(text_lines_and_levels),
      cmocka_unit_test(json_lines),
      cmocka_unit_test(long_lines_truncate_cleanly),
      cmocka_unit_test(access_log),
      cmocka_unit_test(reopen_after_rotation),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
