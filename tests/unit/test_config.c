/* tests/unit/test_config.c — the settings parser: value syntax (ints, sizes,
 * durations, bools, enums, lists), ranges, the four sources and their
 * precedence, the cross-setting checks, and the error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/cfg.h"
#include "tests/unit/testutil.h"

/* --- fixtures: a temporary folder with a model file ------------------------ */

static char dir[64];
static char model[128];

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/tram-test-config-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(model, sizeof model, "%s/m.gguf", dir);
  write_file(model, "GGUF");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* A NULL-terminated argument or environment list. */
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Loads with flags `args` (NULL-terminated) and environment `env`. */
static int load(cfg_t *cfg, char *err, const char *const *args, const char *const *env) {
  int argc = 0;
  while (args && args[argc]) argc++;
  static const char *const none[] = {NULL};
  return cfg_load(cfg, argc, (char *const *)args, (char *const *)(env ? env : none), err, 512);
}

/* Loads expecting failure; the message must contain each of `want`. */
static void load_fails(const char *const *args, const char *const *env, const char *want1,
                       const char *want2) {
  cfg_t cfg;
  char err[512];
  int rc = load(&cfg, err, args, env);
  if (rc != -EINVAL) fail_msg("expected an error containing \"%s\", got success", want1);
  if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
    fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err, want1, want2 ? want2 : "");
  assert_null(cfg.model); /* left empty */
}

/* --- value syntax -------------------------------------------------------------- */

static void ints(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(cfg_parse_int("0", &v), 0), assert_int_equal(v, 0);
  assert_int_equal(cfg_parse_int("-17", &v), 0), assert_int_equal(v, -17);
  assert_int_equal(cfg_parse_int("+5", &v), 0), assert_int_equal(v, 5);
  assert_int_equal(cfg_parse_int("9223372036854775807", &v), 0), assert_true(v == INT64_MAX);
  assert_int_equal(cfg_parse_int("-9223372036854775808", &v), 0), assert_true(v == INT64_MIN);
  assert_int_equal(cfg_parse_int("9223372036854775808", &v), -ERANGE);
  assert_int_equal(cfg_parse_int("99999999999999999999", &v), -ERANGE);
  const char *bad[] = {"", "-", "abc", "0x10", " 5", "5 ", "1e3", "1.0", "5k"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(cfg_parse_int(bad[i], &v), -EINVAL);
}

static void sizes(void **state) {
  (void)state;
  struct { const char *s; int64_t want; } ok[] = {
      {"0", 0}, {"512", 512}, {"7B", 7}, {"1K", 1024}, {"1k", 1024}, {"1KB", 1024},
      {"1KiB", 1024}, {"1kib", 1024}, {"512M", 512LL << 20}, {"2G", 2LL << 30},
      {"2GiB", 2LL << 30}, {"3T", 3LL << 40}, {"8388607T", 8388607LL << 40},
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    int64_t v = -1;
    assert_int_equal(cfg_parse_size(ok[i].s, &v), 0);
    assert_true(v == ok[i].want);
  }
  int64_t v;
  assert_int_equal(cfg_parse_size("8388608T", &v), -ERANGE);
  assert_int_equal(cfg_parse_size("9223372036854775808", &v), -ERANGE);
  const char *bad[] = {"", "G", "-1", "-1G", "1.5G", "1X", "1 G", "1GiBx", "1Bi", "1iB", "1BB", "1Gb b"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (cfg_parse_size(bad[i], &v) != -EINVAL) fail_msg("size \"%s\" accepted", bad[i]);
  }
  /* Random numbers with random suffix spellings against v * 1024^unit. */
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  const char *spell[5][4] = {{"", "B", "b", "B"}, {"K", "k", "KB", "KiB"},
                             {"M", "m", "MB", "MiB"}, {"G", "g", "gb", "GiB"},
                             {"T", "t", "TB", "tib"}};
  for (int i = 0; i < 2000; i++) {
    int unit = (int)tu_below(&r, 5);
    int64_t n = (int64_t)tu_below(&r, (uint64_t)1 << 20);
    char s[64];
    snprintf(s, sizeof s, "%lld%s", (long long)n, spell[unit][tu_below(&r, 4)]);
    assert_int_equal(cfg_parse_size(s, &v), 0);
    int64_t want = n;
    for (int u = 0; u < unit; u++) want *= 1024;
    assert_true(v == want);
    char back[32];
    int64_t again;
    assert_int_equal(cfg_parse_size(cfg_format_size(v, back, sizeof back), &again), 0);
    assert_true(again == v);
  }
  char b[32];
  assert_string_equal(cfg_format_size(512LL << 20, b, sizeof b), "512M");
  assert_string_equal(cfg_format_size(1536, b, sizeof b), "1536");
  assert_string_equal(cfg_format_size(1000, b, sizeof b), "1000");
  assert_string_equal(cfg_format_size(64LL << 40, b, sizeof b), "64T");
}

static void durations(void **state) {
  (void)state;
  struct { const char *s; int64_t ms; } ok[] = {
      {"0", 0}, {"30", 30000}, {"30s", 30000}, {"500ms", 500}, {"5m", 300000},
      {"2h", 7200000}, {"0ms", 0},
  };
  int64_t v;
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    assert_int_equal(cfg_parse_duration_ms(ok[i].s, &v), 0);
    assert_true(v == ok[i].ms);
  }
  const char *bad[] = {"", "s", "-1", "-5s", "1.5s", "1d", "10 s", "5S", "5sec", "1hh"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (cfg_parse_duration_ms(bad[i], &v) != -EINVAL) fail_msg("duration \"%s\" accepted", bad[i]);
  }
  assert_int_equal(cfg_parse_duration_ms("9223372036854775807h", &v), -ERANGE);
  char b[32];
  assert_string_equal(cfg_format_duration(0, b, sizeof b), "0");
  assert_string_equal(cfg_format_duration(30000, b, sizeof b), "30s");
  assert_string_equal(cfg_format_duration(1500, b, sizeof b), "1500ms");
  assert_string_equal(cfg_format_duration(600000, b, sizeof b), "10m");
  assert_string_equal(cfg_format_duration(7200000, b, sizeof b), "2h");
}

static void bools_and_enums(void **state) {
  (void)state;
  const char *yes[] = {"true", "TRUE", "True", "yes", "on", "1"};
  const char *no[] = {"false", "FALSE", "no", "off", "0"};
  const char *bad[] = {"", "tru", "2", "y", "n", "enabled"};
  bool b;
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
    assert_int_equal(cfg_parse_bool(yes[i], &b), 0), assert_true(b);
  for (size_t i = 0; i < sizeof no / sizeof *no; i++)
    assert_int_equal(cfg_parse_bool(no[i], &b), 0), assert_false(b);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(cfg_parse_bool(bad[i], &b), -EINVAL);
  const char *const ch[] = {"cpu", "cuda", NULL};
  assert_int_equal(cfg_parse_enum("cpu", ch), 0);
  assert_int_equal(cfg_parse_enum("cuda", ch), 1);
  assert_int_equal(cfg_parse_enum("CPU", ch), -1);
  assert_int_equal(cfg_parse_enum("", ch), -1);
}

/* --- the table ----------------------------------------------------------------- */

/* Names are snake_case and unique; env names and short flags unique; every
 * default goes through the parser into the range (a load with nothing but a
 * model keeps every default). */
static void table_is_consistent(void **state) {
  (void)state;
  for (int i = 0; i < CFG_N_SETTINGS; i++) {
    const cfg_setting_t *s = &cfg_settings[i];
    assert_non_null(s->name);
    assert_non_null(s->help);
    assert_non_null(s->def);
    for (const char *p = s->name; *p; p++) assert_true((*p >= 'a' && *p <= 'z') || *p == '_');
    if (s->type == CFG_T_ENUM) assert_non_null(s->choices);
    for (int j = 0; j < i; j++) {
      assert_string_not_equal(s->name, cfg_settings[j].name);
      if (s->short_flag) assert_int_not_equal(s->short_flag, cfg_settings[j].short_flag);
    }
  }
  char a[64], b[64];
  assert_string_equal(cfg_env_name(CFG_MAX_BATCH_TOKENS, a, sizeof a), "TRAM_MAX_BATCH_TOKENS");
  assert_string_equal(cfg_flag_name(CFG_MAX_BATCH_TOKENS, b, sizeof b), "--max-batch-tokens");

  cfg_t cfg;
  char err[512];
  const char *args[] = {"--model", model, NULL};
  assert_int_equal(load(&cfg, err, args, NULL), 0);
  for (int i = 0; i < CFG_N_SETTINGS; i++)
    assert_int_equal(cfg.source[i], i == CFG_MODEL ? CFG_SRC_FLAG : CFG_SRC_DEFAULT);
  assert_int_equal(cfg.port, 8080);
  assert_string_equal(cfg.host, "127.0.0.1");
  assert_int_equal(cfg.block_size, 32);
  assert_true(cfg.kv_cache_bytes == 512LL << 20);
  assert_int_equal(cfg.kv_cache_blocks, 0);
  assert_int_equal(cfg.device, CFG_DEVICE_CPU);
  assert_true(cfg.metrics);
  assert_true(cfg.drain_timeout_ms == 30000);
  assert_null(cfg.unix_socket);
  assert_null(cfg.config);
  assert_int_equal(cfg.api_keys.n, 0);
  assert_string_equal(cfg.served_model_name, "m"); /* m.gguf */
  cfg_free(&cfg);
  cfg_free(&cfg); /* a freed cfg is zeroed: freeing again is fine */
}

/* --- sources and precedence -------------------------------------------------------- */

static void precedence(void **state) {
  (void)state;
  char file[160], err[512];
  snprintf(file, sizeof file, "%s/p.json", dir);
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": \"%s\", \"port\": 1111, \"threads\": 3, \"max_seqs\": 4,"
           " \"drain_timeout\": 7, \"api_keys\": [\"f1\", \"f2\"], \"metrics\": false}",
           model);
  write_file(file, json);
  const char *env[] = {"TRAM_PORT=2222", "TRAM_THREADS=5", "TRAM_API_KEYS=e1", "HOME=/x", NULL};
  const char *args[] = {"-c", file, "--port=3333", "--drain-timeout", "500ms", NULL};
  cfg_t cfg;
  assert_int_equal(load(&cfg, err, args, env), 0);
  assert_int_equal(cfg.port, 3333);
  assert_int_equal(cfg.source[CFG_PORT], CFG_SRC_FLAG);
  assert_int_equal(cfg.threads, 5);
  assert_int_equal(cfg.source[CFG_THREADS], CFG_SRC_ENV);
  assert_int_equal(cfg.max_seqs, 4);
  assert_int_equal(cfg.source[CFG_MAX_SEQS], CFG_SRC_FILE);
  assert_true(cfg.drain_timeout_ms == 500);
  assert_false(cfg.metrics);
  assert_int_equal(cfg.api_keys.n, 1); /* the environment's list replaces the file's */
  assert_string_equal(cfg.api_keys.items[0], "e1");
  assert_int_equal(cfg.block_size, 32);
  assert_int_equal(cfg.source[CFG_BLOCK_SIZE], CFG_SRC_DEFAULT);
  char src[256];
  snprintf(json, sizeof json, "config file %s", file);
  assert_string_equal(cfg_source_describe(&cfg, CFG_MAX_SEQS, src, sizeof src), json);
  assert_string_equal(cfg_source_describe(&cfg, CFG_THREADS, src, sizeof src), "environment TRAM_THREADS");
  assert_string_equal(cfg_source_describe(&cfg, CFG_PORT, src, sizeof src), "flag --port");
  assert_string_equal(cfg_source_describe(&cfg, CFG_HOST, src, sizeof src), "default");
  cfg_free(&cfg);

  /* TRAM_CONFIG names the file when no flag does; a list flag repeated appends. */
  const char *env2[] = {"TRAM_CONFIG=", NULL};
  char cenv[200];
  snprintf(cenv, sizeof cenv, "TRAM_CONFIG=%s", file);
  env2[0] = cenv;
  const char *args2[] = {"--api-keys", "a,b", "--api-keys", "c", "--metrics", NULL};
  assert_int_equal(load(&cfg, err, args2, env2), 0);
  assert_int_equal(cfg.port, 1111);
  assert_int_equal(cfg.source[CFG_CONFIG], CFG_SRC_ENV);
  assert_int_equal(cfg.api_keys.n, 3);
  assert_string_equal(cfg.api_keys.items[2], "c");
  assert_true(cfg.metrics);
  cfg_free(&cfg);
}

/* Values written as strings in the file (sizes, durations) and the file's
 * typed forms. */
static void file_value_forms(void **state) {
  (void)state;
  char file[160], json[512], err[512];
  snprintf(file, sizeof file, "%s/f.json", dir);
  snprintf(json, sizeof json,
           "{\"model\": \"%s\", \"kv_cache_bytes\": \"2G\", \"max_body_size\": 4096,"
           " \"request_timeout\": \"500ms\", \"idle_timeout\": 5, \"device\": \"cpu\","
           " \"unix_socket\": \"%s/s.sock\", \"served_model_name\": \"x\"}",
           model, dir);
  write_file(file, json);
  const char *args[] = {"--config", file, NULL};
  cfg_t cfg;
  assert_int_equal(load(&cfg, err, args, NULL), 0);
  assert_true(cfg.kv_cache_bytes == 2LL << 30);
  assert_true(cfg.max_body_size == 4096);
  assert_true(cfg.request_timeout_ms == 500);
  assert_true(cfg.idle_timeout_ms == 5000);
  assert_non_null(cfg.unix_socket);
  assert_string_equal(cfg.served_model_name, "x");
  char *text = cfg_to_json(&cfg);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"kv_cache_bytes\""));
  free(text);
  cfg_free(&cfg);
}

/* kv cache: blocks replace bytes; both set is an error naming both. */
static void kv_cache_exclusive(void **state) {
  (void)state;
  cfg_t cfg;
  char err[512];
  const char *args[] = {"-m", model, "--kv-cache-blocks", "100", NULL};
  assert_int_equal(load(&cfg, err, args, NULL), 0);
  assert_int_equal(cfg.kv_cache_blocks, 100);
  assert_true(cfg.kv_cache_bytes == 0);
  cfg_free(&cfg);
  const char *both[] = {"-m", model, "--kv-cache-blocks", "100", NULL};
  const char *env[] = {"TRAM_KV_CACHE_BYTES=1G", NULL};
  load_fails(both, env, "environment TRAM_KV_CACHE_BYTES", "flag --kv-cache-blocks");
  load_fails(both, env, "exclusive", NULL);
}

/* Every kind of error, with its source and key in the message. */
static void errors_name_key_and_source(void **state) {
  (void)state;
  const char *m = model;
  load_fails(ARGS("-m", m, "--port", "abc"), NULL, "flag --port: expected an integer 0..65535, got \"abc\"", NULL);
  load_fails(ARGS("-m", m, "--port", "65536"), NULL, "flag --port", "65536");
  load_fails(ARGS("-m", m), ARGS("TRAM_PORT=abc"), "environment TRAM_PORT: expected an integer", NULL);
  load_fails(ARGS("-m", m, "--block-size", "48"), NULL, "flag --block-size", "power of two 8..256");
  load_fails(ARGS("-m", m, "--block-size", "512"), NULL, "flag --block-size", "512");
  load_fails(ARGS("-m", m, "--block-size", "4"), NULL, "flag --block-size", "\"4\"");
  load_fails(ARGS("-m", m, "--kv-cache-bytes", "12X"), NULL, "flag --kv-cache-bytes", "got \"12X\"");
  load_fails(ARGS("-m", m, "--kv-cache-bytes", "1K"), NULL, "flag --kv-cache-bytes", "size 1M..64T");
  load_fails(ARGS("-m", m, "--idle-timeout", "5x"), NULL, "flag --idle-timeout", "duration");
  load_fails(ARGS("-m", m, "--idle-timeout", "0"), NULL, "flag --idle-timeout", "duration 1s..24h");
  load_fails(ARGS("-m", m, "--metrics=maybe"), NULL, "flag --metrics: expected true or false", NULL);
  load_fails(ARGS("-m", m, "--no-metrics=1"), NULL, "flag --no-metrics: takes no value", NULL);
  load_fails(ARGS("-m", m, "--no-port"), NULL, "flag --no-port: unknown flag", NULL);
  load_fails(ARGS("-m", m, "--device", "tpu"), NULL, "flag --device: expected one of cpu, cuda", NULL);
  load_fails(ARGS("-m", m, "--log-level", "verbose"), NULL, "one of error, warn, info, debug", NULL);
  load_fails(ARGS("-m", m, "--bogus", "1"), NULL, "flag --bogus: unknown flag", NULL);
  load_fails(ARGS("-m", m, "-z"), NULL, "flag -z: unknown flag", NULL);
  load_fails(ARGS("-m", m, "--port"), NULL, "flag --port: missing value", NULL);
  load_fails(ARGS("-m", m, "stray"), NULL, "unexpected argument \"stray\"", NULL);
  load_fails(ARGS("-m", m, "--api-keys", "a,,b"), NULL, "flag --api-keys: empty item", NULL);
  load_fails(ARGS("-m", m, "--api-keys", "a b"), NULL, "flag --api-keys", "API key 1 of 1");
  load_fails(ARGS("-m", m, "--host", ""), NULL, "flag --host: must not be empty", NULL);
  load_fails(ARGS("-m", m, "--host", "a b"), NULL, "flag --host", "host name");
  load_fails(ARGS("-m", m, "--max-seqs", "300"), NULL, "flag --max-seqs", "max_batch_tokens (256, default)");
  load_fails(ARGS("--port", "1"), NULL, "model: no model file given", NULL);
  load_fails(ARGS("-m", "/nonexistent/x.gguf"), NULL, "flag --model: cannot open model file", "No such file");
  load_fails(ARGS("-m", dir), NULL, "flag --model", "not a regular file");
  load_fails(NULL, ARGS("TRAM_MODEL=/nonexistent/y"), "environment TRAM_MODEL: cannot open", NULL);
  load_fails(ARGS("-m", m, "--log-file", "/nonexistent/dir/x.log"), NULL, "flag --log-file", "cannot create");
  load_fails(ARGS("-m", m, "--log-file", dir), NULL, "flag --log-file", "is a directory");
  load_fails(ARGS("-m", m, "--unix-socket",
                  "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
             NULL, "flag --unix-socket", "at most 107 bytes");
  load_fails(ARGS("-m", m, "-c", "/nonexistent.json"), NULL, "config file /nonexistent.json: cannot open", NULL);
#ifndef TRAM_CUDA
  load_fails(ARGS("-m", m, "--device", "cuda"), NULL, "flag --device", "without CUDA");
#endif
}

/* Errors in the config file: syntax, shape, keys, types. */
static void file_errors(void **state) {
  (void)state;
  struct { const char *json; const char *want; } cases[] = {
      {"{\"port\": \"abc\"}", "key \"port\": expected an integer 0..65535, got \"abc\""},
      {"{\"port\": 1.5}", "key \"port\": expected an integer 0..65535, got 1.5"},
      {"{\"port\": 70000}", "key \"port\": expected an integer 0..65535, got 70000"},
      {"{\"port\": null}", "key \"port\": expected an integer 0..65535, got null"},
      {"{\"metrics\": \"yes\"}", "key \"metrics\": expected true or false, got \"yes\""},
      {"{\"kv_cache_bytes\": \"1Q\"}", "key \"kv_cache_bytes\": expected a size"},
      {"{\"kv_cache_bytes\": -5}", "key \"kv_cache_bytes\": expected a size"},
      {"{\"idle_timeout\": 1.5}", "key \"idle_timeout\": expected a duration"},
      {"{\"idle_timeout\": true}", "key \"idle_timeout\": expected a duration"},
      {"{\"api_keys\": \"k\"}", "key \"api_keys\": expected a list of strings, got \"k\""},
      {"{\"api_keys\": [\"k\", 3]}", "key \"api_keys\": expected a list of strings"},
      {"{\"host\": 5}", "key \"host\": expected a string, got 5"},
      {"{\"device\": \"gpu\"}", "key \"device\": expected one of cpu, cuda, got \"gpu\""},
      {"{\"prot\": 8080}", "unknown key \"prot\""},
      {"{\"config\": \"/x\"}", "key \"config\" cannot be set in a config file"},
      {"{\"port\": 1, \"port\": 2}", "key \"port\" appears twice"},
      {"[1, 2]", "expected a JSON object of settings"},
      {"{\"port\": 1,\n \"host\": }", "invalid JSON at line 2, column 10"},
      {"", "invalid JSON at line 1, column 1"},
  };
  char file[160];
  snprintf(file, sizeof file, "%s/e.json", dir);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    write_file(file, cases[i].json);
    char prefix[200];
    snprintf(prefix, sizeof prefix, "config file %s: ", file);
    load_fails(ARGS("-m", model, "-c", file), NULL, prefix, cases[i].want);
  }
}

/* The API key file: keys added to the inline ones; comments and blank lines
 * skipped; an empty or unreadable file is an error. */
static void api_key_file(void **state) {
  (void)state;
  char file[160], err[512];
  snprintf(file, sizeof file, "%s/keys", dir);
  write_file(file, "# keys\n\n  SECRET-ONE-q9  \r\nSECRET-TWO-q9\n# k3\n");
  cfg_t cfg;
  assert_int_equal(load(&cfg, err, ARGS("-m", model, "--api-keys", "INLINE-KEY-q9", "--api-key-file", file), NULL), 0);
  assert_int_equal(cfg.api_keys.n, 3);
  assert_string_equal(cfg.api_keys.items[0], "INLINE-KEY-q9");
  assert_string_equal(cfg.api_keys.items[1], "SECRET-ONE-q9");
  assert_string_equal(cfg.api_keys.items[2], "SECRET-TWO-q9");
  char *text = cfg_to_json(&cfg);
  assert_non_null(text);
  assert_null(strstr(text, "SECRET-")); /* secrets are not printed (the temp dir name is random: */
  /* a distinctive key cannot occur in it by chance) */
  assert_null(strstr(text, "INLINE-KEY"));
  free(text);
  cfg_free(&cfg);
  write_file(file, "# nothing\n\n");
  load_fails(ARGS("-m", model, "--api-key-file", file), NULL, "flag --api-key-file: API key file", "holds no API key");
  write_file(file, "good\nbad key\n");
  load_fails(ARGS("-m", model, "--api-key-file", file), NULL, "line 2", "without spaces");
  load_fails(ARGS("-m", model), ARGS("TRAM_API_KEY_FILE=/nonexistent/keys"), "environment TRAM_API_KEY_FILE", "cannot open");
}

/* An unknown TRAM_* variable is a warning, not an error. */
static void unknown_env_is_ignored(void **state) {
  (void)state;
  cfg_t cfg;
  char err[512];
  const char *args[] = {"-m", model, NULL};
  const char *env[] = {"TRAM_BUILD=build", "TRAM_NOT_A_SETTING=1", NULL};
  assert_int_equal(load(&cfg, err, args, env), 0);
  cfg_free(&cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ints),
      cmocka_unit_test(sizes),
      cmocka_unit_test(durations),
      cmocka_unit_test(bools_and_enums),
      cmocka_unit_test(table_is_consistent),
      cmocka_unit_test(precedence),
      cmocka_unit_test(file_value_forms),
      cmocka_unit_test(kv_cache_exclusive),
      cmocka_unit_test(errors_name_key_and_source),
      cmocka_unit_test(file_errors),
      cmocka_unit_test(api_key_file),
      cmocka_unit_test(unknown_env_is_ignored),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
