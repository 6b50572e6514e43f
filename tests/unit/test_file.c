/* tests/unit/test_file.c — base/file.h: whole files read and mapped, and
 * each reason one cannot be (missing, a folder, too large), with the
 * contents compared to what the test wrote. */
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

#include "base/file.h"
#include "tests/unit/testutil.h"

static char dir[64];

/* dir/name holding data[n]; returns the path (static). */
static const char *write_file(const char *name, const void *data, size_t n) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
  return path;
}

static void reads_whole_files(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  static const size_t sizes[] = {0, 1, 4095, 4096, 65537};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    const size_t n = sizes[k];
    unsigned char *want = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) want[i] = (unsigned char)tu_next(&r); /* NUL bytes included */
    const char *path = write_file("f.bin", want, n);
    char *got, why[160];
    size_t len;
    assert_int_equal(file_read(path, n, &got, &len, why, sizeof why), 0); /* exactly at the limit */
    assert_int_equal(len, n);
    if (n) assert_memory_equal(got, want, n);
    assert_int_equal(got[n], '\0');
    free(got);
    const void *map;
    size_t size;
    assert_int_equal(file_map(path, &map, &size, why, sizeof why), 0);
    assert_int_equal(size, n);
    if (n) assert_memory_equal(map, want, n);
    else assert_null(map);
    file_unmap(map, size);
    if (n) { /* one byte over the limit */
      assert_int_equal(file_read(path, n - 1, &got, &len, why, sizeof why), -EFBIG);
      assert_null(got);
      char want_why[64];
      snprintf(want_why, sizeof want_why, "larger than %zu bytes", n - 1);
      assert_string_equal(why, want_why);
    }
    free(want);
  }
}

static void says_why_not(void **state) {
  (void)state;
  char path[128], *got, why[160];
  size_t len;
  const void *map;
  snprintf(path, sizeof path, "%s/none", dir);
  assert_int_equal(file_read(path, 100, &got, &len, why, sizeof why), -ENOENT);
  assert_string_equal(why, "cannot open: No such file or directory");
  assert_null(got);
  assert_int_equal(file_map(path, &map, &len, why, sizeof why), -ENOENT);
  assert_string_equal(why, "cannot open: No such file or directory");
  assert_int_equal(file_read(dir, 100, &got, &len, why, sizeof why), -EINVAL);
  assert_string_equal(why, "not a regular file");
  assert_int_equal(file_map(dir, &map, &len, why, sizeof why), -EINVAL);
  assert_string_equal(why, "not a regular file");
  assert_null(map);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/tram-test-file-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/f.bin", dir);
  unlink(path);
  return rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_whole_files),
      cmocka_unit_test(says_why_not),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
