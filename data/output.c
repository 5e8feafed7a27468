#include "data/output.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* "a device", "a FIFO", ...: what is at a path that is not a regular file. */
static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a folder";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* LB_OK when nothing or a regular file is at `path`. */
static lb_status check_one(const char *path, const char *what)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return LB_OK;
        return lb_error(LB_ERR_IO, "%s: cannot write the %s here: %s", path, what, strerror(errno));
    }
    if (S_ISREG(sb.st_mode))
        return LB_OK;
    return lb_error(LB_ERR_IO, "%s: is %s, not a regular file; lookback writes the %s only as a regular file and "
                    "leaves this one alone (choose another path)",
                    path, kind_of(sb.st_mode), what);
}

lb_status lb_output_check(const char *path, const char *what)
{
    LB_CHECK_ARG(what, LB_ERR_VALUE);
    if (!path || !*path)
        return lb_error(LB_ERR_VALUE, "the path of the %s is empty: give a file name", what);
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return lb_error(LB_ERR_VALUE, "the path of the %s is too long: %s", what, path);
    lb_status st = check_one(path, what);
    return st == LB_OK ? check_one(tmp, what) : st;
}

lb_status lb_output_commit(const char *tmp, const char *path, const char *what)
{
    lb_status st = (!path || !*path) ? lb_error(LB_ERR_VALUE, "the path of the %s is empty", what)
                                     : check_one(path, what);
    if (st == LB_OK && rename(tmp, path) != 0)
        st = lb_error(LB_ERR_IO, "%s: cannot move the finished %s %s into place: %s", path, what, tmp,
                      strerror(errno));
    if (st != LB_OK)
        remove(tmp);
    return st;
}
