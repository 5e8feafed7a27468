/* Files and folders of runs, studies and reports: the few file-system steps the
 * experiment engine shares. Outputs go through data/output.h's checks (never a device,
 * FIFO, folder or symbolic link; written to a temporary file and renamed). */
#ifndef LB_LAB_FILES_H
#define LB_LAB_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/api.h"
#include "tensor/error.h"

LB_API_BEGIN

/* 1 if `path` exists (file or folder, links followed), 0 if not. */
int lb_files_exists(const char *path);
/* Creates folder `path` and its parents where missing. Errors: LB_ERR_VALUE (a path
 * over 4,095 bytes), LB_ERR_IO naming the folder that could not be made, or `path`
 * when it exists and is not a folder. */
lb_status lb_files_mkdir(const char *path);
/* "dir/name" into buf (size bytes, truncated to fit); returns buf. */
char *lb_files_join(char *buf, size_t size, const char *dir, const char *name);
/* Writes JSON object `root` (its reference is dropped) to `path` through PATH.tmp:
 * the path is checked first (lb_output_check), every write is checked, and the
 * finished file is renamed into place. LB_ERR_IO naming the file (`what` says what it
 * is) on failure; a previous file stays untouched. */
struct json_object;
lb_status lb_files_write_json(struct json_object *root, const char *path, const char *what);
/* The CRC-32 (zlib's crc32) and size in bytes of a whole file. Errors: LB_ERR_IO naming it. */
lb_status lb_files_crc32(const char *path, uint32_t *crc, int64_t *bytes);
/* The whole of the file `path` (a regular file, a pipe, a terminal) into a new buffer
 * *data (caller frees) of *size bytes, with a NUL after them. Errors: LB_ERR_IO "PATH:
 * cannot open: <why>", "PATH: is a folder, not a text file", "PATH: read error after N
 * bytes: <why>"; LB_ERR_MEMORY "PATH: out of memory (while reading it)"; LB_ERR_VALUE for
 * a NULL argument. */
lb_status lb_files_read(const char *path, char **data, size_t *size);
/* Removes folder `dir` and everything in it: symbolic links are removed, never
 * followed, and other file systems mounted inside it are not entered (nftw with
 * FTW_PHYS | FTW_MOUNT). A `dir` that is not a folder (or a link to one) is left alone.
 * Best effort: what cannot be removed stays. */
void lb_files_remove_tree(const char *dir);

LB_API_END

#endif
