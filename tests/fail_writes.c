/* A disk that fills, for the tests, on any machine and without privileges: loaded with
 * LD_PRELOAD, this library makes write, pwrite and their variants fail with ENOSPC on
 * every file whose path contains LB_FAIL_WRITES (a substring, e.g. "checkpoint.h5.tmp"),
 * once LB_FAIL_WRITES_AFTER bytes (default 0) have been written to such files by the
 * process. LB_FAIL_WRITES_ERRNO chooses another errno (a number). Writes through stdio
 * go through glibc's internal calls and are not affected. */

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long written; /* bytes written to matching files by this process */

/* 1 when a write of n bytes to fd must fail (errno set). */
static int must_fail(int fd, size_t n)
{
    const char *match = getenv("LB_FAIL_WRITES");
    if (!match || !*match)
        return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0)
        return 0;
    path[len] = '\0';
    if (!strstr(path, match))
        return 0;
    const char *after = getenv("LB_FAIL_WRITES_AFTER");
    if (written + (long long)n <= (after ? atoll(after) : 0)) {
        written += (long long)n;
        return 0;
    }
    const char *code = getenv("LB_FAIL_WRITES_ERRNO");
    errno = code ? atoi(code) : ENOSPC;
    return 1;
}

#define NEXT(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void *buf, size_t n)
{
    if (must_fail(fd, n))
        return -1;
    return NEXT("write", ssize_t (*)(int, const void *, size_t))(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (must_fail(fd, n))
        return -1;
    return NEXT("pwrite", ssize_t (*)(int, const void *, size_t, off_t))(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    if (must_fail(fd, n))
        return -1;
    return NEXT("pwrite64", ssize_t (*)(int, const void *, size_t, off_t))(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int count)
{
    size_t n = 0;
    for (int i = 0; i < count; i++)
        n += iov[i].iov_len;
    if (must_fail(fd, n))
        return -1;
    return NEXT("writev", ssize_t (*)(int, const struct iovec *, int))(fd, iov, count);
}
