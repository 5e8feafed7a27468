#include "lab/files.h"

#include <errno.h>
#include <ftw.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/output.h"

int lb_files_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

lb_status lb_files_mkdir(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return lb_error(LB_ERR_VALUE, "path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return lb_error(LB_ERR_IO, "cannot create folder %s: %s", buf, lb_system_error(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return lb_error(LB_ERR_IO, "cannot create folder %s: %s", buf, lb_system_error(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return lb_error(LB_ERR_IO, "%s exists and is not a folder", buf);
    return LB_OK;
}

char *lb_files_join(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

lb_status lb_files_write_json(struct json_object *root, const char *path, const char *what)
{
    char tmp[4200];
    lb_status st = lb_output_check(path, what);
    int replace = lb_output_present(path);
    if (st == LB_OK && snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        st = lb_error(LB_ERR_VALUE, "%s: path too long", path);
    if (st == LB_OK && json_object_to_file_ext(tmp, root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE) != 0) {
        st = lb_error(LB_ERR_IO, "%s: cannot write the %s: %s", path, what, lb_system_error(errno));
        remove(tmp);
    }
    json_object_put(root);
    return st == LB_OK ? lb_output_finish(tmp, path, what, replace) : st;
}

lb_status lb_files_crc32(const char *path, uint32_t *crc, int64_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return lb_error(LB_ERR_IO, "%s: cannot read: %s", path, lb_system_error(errno));
    unsigned char buf[1 << 16];
    uLong c = crc32(0L, Z_NULL, 0);
    int64_t total = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        c = crc32(c, buf, (uInt)n);
        total += (int64_t)n;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return lb_error(LB_ERR_IO, "%s: read error", path);
    *crc = (uint32_t)c;
    *bytes = total;
    return LB_OK;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else if (flag == FTW_F || flag == FTW_SL || flag == FTW_SLN)
        unlink(path);
    return 0;
}

void lb_files_remove_tree(const char *dir)
{
    struct stat sb;
    if (dir && lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

lb_status lb_files_read(const char *path, char **data, size_t *size)
{
    LB_CHECK_ARG(path && data && size, LB_ERR_VALUE);
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f)
        return lb_error(LB_ERR_IO, "%s: cannot open: %s", path, lb_system_error(errno));
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return lb_error(LB_ERR_IO, "%s: is a folder, not a text file", path);
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            char *bigger = cap < SIZE_MAX / 4 ? realloc(buf, 2 * cap + 1) : NULL;
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f), err = errno;
    fclose(f);
    if (!buf)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory (while reading it)", path);
    if (failed) {
        free(buf);
        return lb_error(LB_ERR_IO, "%s: read error after %zu bytes: %s", path, n,
                        err ? lb_system_error(err) : "unknown error");
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return LB_OK;
}
