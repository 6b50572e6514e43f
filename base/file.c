/* base/file.c — whole files (see file.h). */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"

/* Writes "what: strerror(err)" and returns -err. */
static int fail(int err, char *why, size_t why_len, const char *what) {
  if (why_len) snprintf(why, why_len, "%s: %s", what, strerror(err));
  return -err;
}

/* Opens path read-only and checks it is a regular file: the descriptor, or
 * a negative errno with the reason written. */
static int open_regular(const char *path, struct stat *st, char *why, size_t why_len) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno, why, why_len, "cannot open");
  if (fstat(fd, st) != 0) {
    const int err = errno;
    close(fd);
    return fail(err, why, why_len, "cannot stat");
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    if (why_len) snprintf(why, why_len, "not a regular file");
    return -EINVAL;
  }
  return fd;
}

int file_read(const char *path, size_t max, char **out, size_t *len, char *why, size_t why_len) {
  *out = NULL;
  *len = 0;
  struct stat st;
  const int fd = open_regular(path, &st, why, why_len);
  if (fd < 0) return fd;
  if ((uint64_t)st.st_size > max) {
    close(fd);
    if (why_len) snprintf(why, why_len, "larger than %zu bytes", max);
    return -EFBIG;
  }
  const size_t size = (size_t)st.st_size;
  char *buf = xmalloc(size + 1);
  size_t got = 0;
  while (got < size) {
    const ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = r < 0 ? errno : EIO;
      free(buf);
      close(fd);
      return fail(err, why, why_len, "cannot read");
    }
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  *out = buf;
  *len = got;
  return 0;
}

int file_map(const char *path, const void **map, size_t *size, char *why, size_t why_len) {
  *map = NULL;
  *size = 0;
  struct stat st;
  const int fd = open_regular(path, &st, why, why_len);
  if (fd < 0) return fd;
  void *addr = NULL;
  if (st.st_size > 0) {
    addr = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      close(fd);
      return fail(err, why, why_len, "cannot map");
    }
  }
  close(fd); /* the mapping keeps the file */
  *map = addr;
  *size = (size_t)st.st_size;
  return 0;
}

void file_unmap(const void *map, size_t size) {
  if (map && size) munmap((void *)map, size);
}
