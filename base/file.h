/* base/file.h — a whole file, read or mapped, with the reasons it could not
 * be: the config file and API keys (config/), a checkpoint's JSON files and
 * chat template (hf/), a --chat-template file, the GGUF and safetensors
 * files (mapped).
 *
 * Failures return a negative errno and write a short reason without the
 * path into why[why_len] ("cannot open: No such file or directory", "not a
 * regular file", "larger than 1048576 bytes", "cannot read: ...", "cannot
 * map: ..."); the caller puts its own name for the file in front. */
#ifndef TRAM_BASE_FILE_H
#define TRAM_BASE_FILE_H

#include <stddef.h>

/* Reads the regular file at path, at most max bytes, into a malloc'd buffer
 * *out with a NUL after its *len bytes (the caller frees it). Returns 0;
 * -errno of open(2) or read(2) (a short read: -EIO); -EINVAL when it is not
 * a regular file; -EFBIG when it is larger than max. *out is NULL after a
 * failure. */
int file_read(const char *path, size_t max, char **out, size_t *len, char *why, size_t why_len);

/* Maps the regular file at path read-only and private: *map (NULL for an
 * empty file) and its *size, until file_unmap. Returns 0; -errno of open(2),
 * fstat(2) or mmap(2); -EINVAL when it is not a regular file. */
int file_map(const char *path, const void **map, size_t *size, char *why, size_t why_len);

/* Unmaps what file_map gave (map NULL: nothing). */
void file_unmap(const void *map, size_t size);

#endif
