#include "data/output.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- inputs of this process, which no output may replace ---- */

enum { MAX_INPUTS = 64 };
static struct {
    dev_t dev;
    ino_t ino;
    char what[64];
} inputs[MAX_INPUTS];
static int n_inputs;

lb_status lb_output_protect(const char *path, const char *what)
{
    if (!path || !what)
        return lb_error(LB_ERR_VALUE, "lb_output_protect: path and what must not be NULL");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return LB_OK;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i].dev == sb.st_dev && inputs[i].ino == sb.st_ino)
            return LB_OK;
    if (n_inputs == MAX_INPUTS)
        return lb_error(LB_ERR_VALUE, "lb_output_protect: more than %d inputs", MAX_INPUTS);
    inputs[n_inputs].dev = sb.st_dev;
    inputs[n_inputs].ino = sb.st_ino;
    snprintf(inputs[n_inputs].what, sizeof inputs[n_inputs].what, "%s", what);
    n_inputs++;
    return LB_OK;
}

void lb_output_protect_clear(void) { n_inputs = 0; }

int lb_output_is_input(const char *path)
{
    struct stat sb;
    LB_CHECK_ARG(path, 0);
    if (stat(path, &sb) != 0)
        return 0;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i].dev == sb.st_dev && inputs[i].ino == sb.st_ino)
            return 1;
    return 0;
}

/* LB_OK unless the file at `path` (which exists, status sb) is a registered input. */
static lb_status not_an_input(const char *path, const struct stat *sb, const char *what)
{
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i].dev == sb->st_dev && inputs[i].ino == sb->st_ino)
            return lb_error(LB_ERR_IO,
                            "%s: is %s, an input of this command; lookback never writes the %s over one of its "
                            "inputs (choose another path)",
                            path, inputs[i].what, what);
    return LB_OK;
}

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

/* LB_OK when nothing or a regular file is at `path`. A symbolic link (dangling or
 * not) is refused: the rename that finishes a write would replace the link by a regular
 * file and leave its target as it was, which is neither of the things a user means. */
static lb_status check_one(const char *path, const char *what)
{
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        struct stat to; /* a link to one of the inputs: that is the graver mistake, said first */
        if (stat(path, &to) == 0 && S_ISREG(to.st_mode) && not_an_input(path, &to, what) != LB_OK)
            return lb_last_status();
        char target[512];
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        return lb_error(LB_ERR_IO, "%s: is a symbolic link (to %s%s); lookback does not write the %s through a link "
                        "(give the path of the file itself, or remove the link)",
                        path, n > 0 ? target : "?", n == (ssize_t)sizeof target - 1 ? "..." : "", what);
    }
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return LB_OK;
        return lb_error(LB_ERR_IO, "%s: cannot write the %s here: %s", path, what, lb_system_error(errno));
    }
    if (S_ISREG(sb.st_mode))
        return not_an_input(path, &sb, what);
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
                      lb_system_error(errno));
    if (st != LB_OK)
        remove(tmp);
    return st;
}

lb_status lb_output_commit_new(const char *tmp, const char *path, const char *what)
{
    lb_status st = (!path || !*path) ? lb_error(LB_ERR_VALUE, "the path of the %s is empty", what)
                                     : check_one(path, what);
    if (st == LB_OK && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
        int err = errno;
        if (err == EINVAL || err == ENOSYS || err == ENOTSUP) { /* a file system without it: link + unlink */
            err = link(tmp, path) == 0 ? 0 : errno;
            if (err == 0)
                unlink(tmp);
        }
        if (err == EEXIST)
            st = lb_error(LB_ERR_IO,
                          "%s: a file appeared there while the %s was being written; lookback leaves it alone and has "
                          "not written the %s (remove it, or choose another path)",
                          path, what, what);
        else if (err != 0)
            st = lb_error(LB_ERR_IO, "%s: cannot move the finished %s %s into place: %s", path, what, tmp,
                          lb_system_error(err));
    }
    if (st != LB_OK)
        remove(tmp);
    return st;
}

lb_status lb_output_finish(const char *tmp, const char *path, const char *what, int replace)
{
    return replace ? lb_output_commit(tmp, path, what) : lb_output_commit_new(tmp, path, what);
}

int lb_output_present(const char *path)
{
    LB_CHECK_ARG(path, 0);
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* LB_ERR_IO naming why nothing can be created in the folder of `path`. */
static lb_status folder_error(const char *path, const char *what, int err)
{
    char copy[4200];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return lb_error(LB_ERR_IO, "%s: cannot write the %s: the folder %s does not exist", path, what, dir);
    if (!S_ISDIR(sb.st_mode))
        return lb_error(LB_ERR_IO, "%s: cannot write the %s: %s is not a folder", path, what, dir);
    return lb_error(LB_ERR_IO, "%s: cannot write the %s in the folder %s: %s", path, what, dir, lb_system_error(err));
}

lb_status lb_output_lock(const char *path, const char *what, int *fd)
{
    LB_CHECK_ARG(fd, LB_ERR_VALUE);
    *fd = -1;
    LB_CHECK_ARG(what, LB_ERR_VALUE);
    char lock[4200];
    if (!path || !*path || snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock)
        return lb_error(LB_ERR_VALUE, "the path of the %s is empty or too long", what);
    for (int attempt = 0; attempt < 100; attempt++) {
        int f = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (f < 0)
            return folder_error(path, what, errno);
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            close(f);
            if (err == EWOULDBLOCK)
                return lb_error(LB_ERR_IO, "another lookback process is writing %s; wait until it finishes or "
                                "choose another path", path);
            return lb_error(LB_ERR_IO, "%s: cannot lock %s: %s", path, lock, lb_system_error(err));
        }
        /* The holder before us may have removed the lock file after we opened it: the lock
         * counts only when the name still leads to the file we locked. */
        struct stat a, b;
        if (fstat(f, &a) == 0 && stat(lock, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *fd = f;
            return LB_OK;
        }
        close(f);
    }
    return lb_error(LB_ERR_IO, "another lookback process is writing %s (its lock file keeps changing)", path);
}

void lb_output_unlock(const char *path, int fd)
{
    if (fd < 0)
        return;
    char lock[4200];
    if (path && snprintf(lock, sizeof lock, "%s.lock", path) < (int)sizeof lock)
        unlink(lock);
    close(fd);
}

/* ---- removing PATH.tmp and PATH.lock when interrupted ---- */

static char interrupted_tmp[4096];       /* the temporary file being written */
static char interrupted_lock[4096];      /* the writer's lock file (lb_output_lock) */
static volatile sig_atomic_t tmp_armed;  /* 1 while it may exist */
static volatile sig_atomic_t lock_armed; /* 1 once this process holds the lock */
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { CLEANUP_SIGNALS = (int)(sizeof cleanup_signals / sizeof cleanup_signals[0]) };
static struct sigaction cleanup_old[CLEANUP_SIGNALS];

/* Only async-signal-safe calls: unlink, raise. SA_RESETHAND has restored the default
 * action, so raising the signal again ends the process as the sender expects. */
static void on_cleanup_signal(int sig)
{
    if (tmp_armed)
        unlink(interrupted_tmp);
    if (tmp_armed && lock_armed)
        unlink(interrupted_lock);
    raise(sig);
}

void lb_output_cleanup_arm(const char *path)
{
    if (!path || tmp_armed)
        return;
    if (snprintf(interrupted_tmp, sizeof interrupted_tmp, "%s.tmp", path) >= (int)sizeof interrupted_tmp ||
        snprintf(interrupted_lock, sizeof interrupted_lock, "%s.lock", path) >= (int)sizeof interrupted_lock)
        return; /* cannot name them: then no handler */
    lock_armed = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_cleanup_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    tmp_armed = 1;
    for (int i = 0; i < CLEANUP_SIGNALS; i++) {
        sigaction(cleanup_signals[i], NULL, &cleanup_old[i]);
        if (cleanup_old[i].sa_handler != SIG_IGN) /* e.g. nohup: keep ignoring */
            sigaction(cleanup_signals[i], &sa, NULL);
    }
}

void lb_output_cleanup_locked(void)
{
    lock_armed = 1;
}

void lb_output_cleanup_disarm(void)
{
    if (!tmp_armed)
        return;
    for (int i = 0; i < CLEANUP_SIGNALS; i++)
        sigaction(cleanup_signals[i], &cleanup_old[i], NULL);
    tmp_armed = 0;
    lock_armed = 0;
}
