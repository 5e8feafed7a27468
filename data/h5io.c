#include "data/h5io_internal.h"
#include "tensor/clock.h"
#include "data/output.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    CHUNK_BYTES = 1 << 20,      /* target size of one chunk */
    CHUNK_MAX_ROWS = 1 << 16,   /* keeps [N] chunks small enough for the chunk cache */
    DEFLATE_LEVEL = 1,          /* fast; the byte shuffle filter does most of the work */
    MAX_STRING_ATTR = 4096 /* the longest string attribute: a checkpoint's model_fields list */
};

void lb_h5_quiet_begin(lb_h5_quiet *saved)
{
    LB_CHECK_ARG(saved);
    saved->func = NULL;
    saved->data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &saved->func, &saved->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void lb_h5_quiet_end(const lb_h5_quiet *saved)
{
    LB_CHECK_ARG(saved);
    H5Eset_auto2(H5E_DEFAULT, saved->func, saved->data);
}

void lb_h5_close(hid_t id)
{
    if (id < 0)
        return;
    switch (H5Iget_type(id)) {
    case H5I_FILE: H5Fclose(id); break;
    case H5I_GROUP: H5Gclose(id); break;
    case H5I_DATASET: H5Dclose(id); break;
    case H5I_ATTR: H5Aclose(id); break;
    case H5I_DATATYPE: H5Tclose(id); break;
    case H5I_DATASPACE: H5Sclose(id); break;
    case H5I_GENPROP_LST: H5Pclose(id); break;
    default: break;
    }
}

/* ---- containment ---- */

enum { MESSAGE_BYTES = 1024 };

/* What the child sends back: its status and message. */
typedef struct child_report {
    int status;
    char message[MESSAGE_BYTES];
} child_report;

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Reads the report; 1 when complete, 0 when the child ended without one, -1 on timeout. */
static int read_report(int fd, child_report *r, double deadline)
{
    size_t got = 0;
    while (got < sizeof *r) {
        int wait_ms = -1;
        if (deadline > 0) {
            double left = deadline - lb_clock_wall();
            if (left <= 0)
                return -1;
            wait_ms = (int)(left * 1000) + 1;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int rc = poll(&pfd, 1, wait_ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            return -1;
        ssize_t n = read(fd, (char *)r + got, sizeof *r - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    return 1;
}

/* The accepted range of LOOKBACK_HDF5_TIMEOUT, in seconds: below a second a good file
 * of any size could be taken for a hanging one. */
#define TIMEOUT_MIN 1.0
#define TIMEOUT_MAX 86400.0

/* LOOKBACK_HDF5_TIMEOUT when set to a valid value; 0 when unset or invalid. */
static double timeout_from_environment(void)
{
    const char *env = getenv("LOOKBACK_HDF5_TIMEOUT");
    char *end = NULL;
    errno = 0;
    double v = env ? strtod(env, &end) : 0;
    if (!env || end == env || *end != '\0' || errno == ERANGE || strpbrk(env, "xXnN") || !(v >= TIMEOUT_MIN) ||
        !(v <= TIMEOUT_MAX) || isspace((unsigned char)env[0]))
        return 0;
    return v;
}

lb_status lb_h5_isolated(lb_h5_job job, lb_h5_job feed, void *ctx, double timeout_seconds, int writing,
                         const char *file)
{
    int fds[2];
    if (pipe(fds) != 0)
        return lb_error(LB_ERR_IO, "%s: cannot create a pipe for the HDF5 child process: %s", file, lb_system_error(errno));
    /* With a standard descriptor closed (a job started without stdin or stderr), the pipe
     * would land on 0, 1 or 2, where the child's redirection of its stderr would cut it:
     * move each end above 2. */
    for (int k = 0; k < 2; k++)
        if (fds[k] <= STDERR_FILENO) {
            int moved = fcntl(fds[k], F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
            if (moved < 0) {
                int err = errno;
                close(fds[0]);
                close(fds[1]);
                return lb_error(LB_ERR_IO, "%s: cannot set up the pipe to the HDF5 child process: %s", file,
                                lb_system_error(err));
            }
            close(fds[k]);
            fds[k] = moved;
        }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return lb_error(LB_ERR_IO, "%s: cannot start the HDF5 child process: %s", file, lb_system_error(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        /* A child never outlives this process: killed with it (kill -9 included), it
         * cannot go on writing a file that another process may create next. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        /* The child says nothing itself: what libhdf5 (or a sanitizer) would print about
         * a hostile file is dropped, unless LOOKBACK_HDF5_DEBUG is set. */
        int null_fd = getenv("LOOKBACK_HDF5_DEBUG") ? -1 : open("/dev/null", O_WRONLY);
        if (null_fd >= 0) {
            dup2(null_fd, STDERR_FILENO);
            close(null_fd);
        }
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        /* Over a file-size limit (ulimit -f) a write then fails with EFBIG, which the
         * message names, instead of SIGXFSZ ending the child. */
        signal(SIGXFSZ, SIG_IGN);
        child_report r;
        memset(&r, 0, sizeof r);
        lb_clear_error();
        r.status = (int)job(ctx);
        snprintf(r.message, sizeof r.message, "%s", lb_last_error());
        write_all(fds[1], &r, sizeof r);
        _exit(0); /* no exit handlers: HDF5's own cleanup may be what crashes */
    }
    close(fds[1]);
    double start = lb_clock_wall();
    lb_status fed = feed ? feed(ctx) : LB_OK;
    char fed_message[MESSAGE_BYTES];
    snprintf(fed_message, sizeof fed_message, "%s", lb_last_error());
    child_report r;
    int got = read_report(fds[0], &r, timeout_seconds > 0 ? start + timeout_seconds : 0);
    close(fds[0]);
    if (got < 0)
        kill(pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    if (got < 0)
        return writing ? lb_error(LB_ERR_IO, "%s: writing did not finish within %.0f s; stopped", file, timeout_seconds)
                       : timeout_from_environment() == timeout_seconds
                       /* a limit the user chose may simply be too short for this file */
                       ? lb_error(LB_ERR_FORMAT,
                                  "%s: reading it did not finish within %g s, the limit LOOKBACK_HDF5_TIMEOUT sets: "
                                  "the limit was reached (raise it for a large file), or the file is damaged or "
                                  "hostile (the HDF5 library hangs on it); nothing was read",
                                  file, timeout_seconds)
                       : lb_error(LB_ERR_FORMAT,
                                  "%s: damaged or hostile HDF5 file: reading it did not finish within %.0f s (the "
                                  "HDF5 library hangs on it); nothing was read",
                                  file, timeout_seconds);
    if (got == 0) {
        char how[64];
        if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGXFSZ)
            return lb_error(LB_ERR_IO, "%s: %s; the file is not kept", file, lb_system_error(EFBIG));
        if (WIFSIGNALED(wstatus))
            snprintf(how, sizeof how, "crashed (signal %d, %s)", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
        else
            snprintf(how, sizeof how, "ended without an answer (exit status %d)", WEXITSTATUS(wstatus));
        return writing ? lb_error(LB_ERR_IO, "%s: the HDF5 library %s while writing it; the file is not kept", file, how)
                       : lb_error(LB_ERR_FORMAT,
                                  "%s: damaged or hostile HDF5 file: the HDF5 library %s reading it; nothing was read",
                                  file, how);
    }
    r.message[MESSAGE_BYTES - 1] = '\0';
    if (fed != LB_OK && fed != LB_ERR_STATE) /* this side failed first (the child then lacked input) */
        return lb_error(fed, "%s", fed_message);
    if (r.status != LB_OK)
        return lb_error((lb_status)r.status, "%s", r.message);
    if (fed != LB_OK)
        return lb_error(fed, "%s", fed_message);
    return LB_OK;
}

/* H5Ewalk2 callback: the first (innermost) "errno = N" of the stack's descriptions. */
static herr_t find_errno(unsigned n, const H5E_error2_t *e, void *ctx)
{
    (void)n;
    int *err = ctx;
    const char *at = e && e->desc ? strstr(e->desc, "errno = ") : NULL;
    if (at && *err == 0)
        *err = atoi(at + strlen("errno = "));
    return 0;
}

const char *lb_h5_cause(void)
{
    int err = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, find_errno, &err);
    return err > 0 ? lb_system_error(err) : "the HDF5 library gives no reason";
}

lb_status lb_h5_timeout_check(void)
{
    const char *env = getenv("LOOKBACK_HDF5_TIMEOUT");
    if (env && timeout_from_environment() == 0)
        return lb_error(LB_ERR_VALUE,
                        "LOOKBACK_HDF5_TIMEOUT='%.64s' is not a number of seconds in [%g, %g] (unset it for the "
                        "default: 20 s plus 1 s per 20 MB of the file)",
                        env, TIMEOUT_MIN, TIMEOUT_MAX);
    return LB_OK;
}

double lb_h5_read_timeout(int64_t bytes)
{
    double v = timeout_from_environment();
    return v > 0 ? v : 20.0 + (double)(bytes > 0 ? bytes : 0) / 20e6;
}

/* 1 when another process holds an exclusive lock on the file (a writer, with HDF5's
 * file locking), 0 otherwise. */
static int locked_by_writer(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (!locked)
        flock(fd, LOCK_UN);
    close(fd);
    return locked;
}

/* ---- containment of what a file may point at ----
 * A file lookback reads must hold its data itself: HDF5 lets a dataset keep its raw
 * bytes in other files (external storage), map other files' datasets (virtual
 * datasets), and lets a name lead elsewhere (soft links, external links, user-defined
 * links). Reading through any of these would read files the user did not name, so a
 * file that has one is refused before anything is read from it. */

enum { MAX_OBJECTS = 100000 }; /* links visited at most: lookback's files have dozens */

typedef struct contained {
    const char *path, *what;
    int64_t links;
    lb_status st;
} contained;

static herr_t check_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    contained *c = data;
    if (++c->links > MAX_OBJECTS) {
        c->st = lb_error(LB_ERR_FORMAT, "%s: the %s holds more than %d links (lookback's files hold dozens): refused",
                         c->path, c->what, MAX_OBJECTS);
        return 1;
    }
    if (info->type != H5L_TYPE_HARD) {
        const char *kind = info->type == H5L_TYPE_SOFT       ? "a soft link"
                           : info->type == H5L_TYPE_EXTERNAL ? "an external link (to another file)"
                                                             : "a user-defined link";
        c->st = lb_error(LB_ERR_FORMAT,
                         "%s: /%s is %s; lookback reads only objects stored in the %s itself (hard links)", c->path,
                         name, kind, c->what);
        return 1;
    }
    H5O_info_t oi;
    if (H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        c->st = lb_error(LB_ERR_FORMAT, "%s: /%s cannot be inspected (damaged %s?)", c->path, name, c->what);
        return 1;
    }
    if (oi.type != H5O_TYPE_DATASET)
        return 0;
    hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
    hid_t dcpl = dset < 0 ? -1 : H5Dget_create_plist(dset);
    H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    int external = dcpl < 0 ? -1 : H5Pget_external_count(dcpl);
    lb_h5_close(dcpl);
    lb_h5_close(dset);
    if (layout == H5D_LAYOUT_ERROR || external < 0)
        c->st = lb_error(LB_ERR_FORMAT, "%s: dataset /%s cannot be opened (damaged %s?)", c->path, name, c->what);
    else if (layout == H5D_VIRTUAL)
        c->st = lb_error(LB_ERR_FORMAT,
                         "%s: dataset /%s is a virtual dataset (its data mapped from other files); lookback reads "
                         "only data stored in the %s itself",
                         c->path, name, c->what);
    else if (external > 0)
        c->st = lb_error(LB_ERR_FORMAT,
                         "%s: dataset /%s keeps its data in %d external file%s (HDF5 external storage); lookback "
                         "reads only data stored in the %s itself",
                         c->path, name, external, external == 1 ? "" : "s", c->what);
    return c->st == LB_OK ? 0 : 1;
}

lb_status lb_h5_check_contained(hid_t file, const char *path, const char *what)
{
    LB_CHECK_ARG(path, LB_ERR_VALUE);
    contained c = {path, what ? what : "file", 0, LB_OK};
    herr_t rc = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, check_link, &c);
    if (c.st != LB_OK)
        return c.st;
    if (rc < 0)
        return lb_error(LB_ERR_FORMAT, "%s: the %s's groups cannot be listed (damaged or truncated)", path, c.what);
    return LB_OK;
}

lb_status lb_h5_open_read(const char *path, const char *what, hid_t *out)
{
    LB_CHECK_ARG(path, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    *out = -1;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return lb_error(LB_ERR_IO, "%s: cannot open the %s: %s", path, what, lb_system_error(errno));
    if (!S_ISREG(sb.st_mode))
        return lb_error(LB_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a folder)" : "");
    int probe = open(path, O_RDONLY | O_CLOEXEC);
    if (probe < 0) /* e.g. EACCES: "permission denied", not "not an HDF5 file" */
        return lb_error(LB_ERR_IO, "%s: cannot read the %s: %s", path, what, lb_system_error(errno));
    close(probe);
    if (locked_by_writer(path))
        return lb_error(LB_ERR_IO,
                        "%s: the %s is locked by another process that has it open for writing (HDF5 file "
                        "locking); wait until it finishes, or close it there",
                        path, what);
    htri_t is_hdf5 = H5Fis_hdf5(path);
    if (is_hdf5 <= 0)
        return lb_error(LB_ERR_FORMAT, "%s: not an HDF5 file (no HDF5 signature; %lld bytes)", path,
                        (long long)sb.st_size);
    *out = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*out < 0) {
        if (locked_by_writer(path))
            return lb_error(LB_ERR_IO, "%s: the %s is locked by another process that has it open for writing", path,
                            what);
        return lb_error(LB_ERR_FORMAT, "%s: the %s is damaged or truncated (HDF5 cannot open it)", path, what);
    }
    lb_status st = lb_h5_check_contained(*out, path, what);
    if (st != LB_OK) {
        H5Fclose(*out);
        *out = -1;
    }
    return st;
}

/* ---- writing ---- */

/* One scalar attribute of file type `ftype` written from memory type `mtype`. */
static lb_status write_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *value, const char *file)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = space < 0 ? -1 : H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, mtype, value);
    lb_status st = rc < 0 ? lb_error(LB_ERR_IO, "%s: cannot write attribute '%s': %s", file, name, lb_h5_cause()) : LB_OK;
    lb_h5_close(attr);
    lb_h5_close(space);
    return st;
}

lb_status lb_h5_write_attr_int(hid_t loc, const char *name, int64_t value, const char *file)
{
    return write_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, file);
}

lb_status lb_h5_write_attr_uint(hid_t loc, const char *name, uint64_t value, const char *file)
{
    return write_attr(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value, file);
}

lb_status lb_h5_write_attr_real(hid_t loc, const char *name, double value, const char *file)
{
    return write_attr(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, file);
}

lb_status lb_h5_write_attr_string(hid_t loc, const char *name, const char *value, const char *file)
{
    LB_CHECK_ARG(value, LB_ERR_VALUE);
    size_t len = strlen(value);
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0 || H5Tset_size(type, len > 0 ? len : 1) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(type, H5T_CSET_UTF8) < 0) {
        lb_h5_close(type);
        return lb_error(LB_ERR_IO, "%s: cannot make the string type of attribute '%s'", file, name);
    }
    char one[1] = {0};
    lb_status st = write_attr(loc, name, type, type, len > 0 ? value : one, file);
    lb_h5_close(type);
    return st;
}

/* Examples per chunk: about CHUNK_BYTES, at most CHUNK_MAX_ROWS, and no more than
 * the split holds (small splits stay small on disk and fast to read). */
static int64_t chunk_rows(const lb_layout *layout, lb_field field, int64_t n)
{
    int64_t row_bytes = lb_layout_row_elems(layout, field) * 4;
    int64_t rows = CHUNK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    rows = rows > CHUNK_MAX_ROWS ? CHUNK_MAX_ROWS : rows;
    rows = rows > n ? n : rows;
    return rows < 1 ? 1 : rows;
}

/* Dataset creation properties: chunks of whole examples, byte shuffle, deflate, a
 * Fletcher-32 checksum per chunk (corruption is detected on reading), and no
 * timestamps (same options => same bytes). */
static hid_t field_create_plist(const lb_layout *layout, lb_field field, int64_t n)
{
    hsize_t chunk[3];
    int64_t dims[3];
    int rank = lb_layout_dims(layout, field, chunk_rows(layout, field, n), dims);
    for (int i = 0; i < rank; i++)
        chunk[i] = (hsize_t)dims[i];
    hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    if (plist < 0 || H5Pset_chunk(plist, rank, chunk) < 0 || H5Pset_shuffle(plist) < 0 ||
        H5Pset_deflate(plist, DEFLATE_LEVEL) < 0 || H5Pset_fletcher32(plist) < 0 ||
        H5Pset_obj_track_times(plist, 0) < 0) {
        lb_h5_close(plist);
        return -1;
    }
    return plist;
}

lb_status lb_h5_create_field(hid_t group, const char *group_name, const lb_layout *layout, lb_field field, int64_t n,
                             hid_t *out, const char *file)
{
    int64_t dims[3];
    hsize_t cur[3], max[3];
    int rank = lb_layout_dims(layout, field, n, dims);
    for (int i = 0; i < rank; i++)
        cur[i] = max[i] = (hsize_t)dims[i];
    max[0] = H5S_UNLIMITED; /* lets an empty split (N = 0) be chunked too */
    hid_t space = H5Screate_simple(rank, cur, max);
    hid_t plist = field_create_plist(layout, field, n);
    hid_t ftype = lb_layout_is_float(layout, field) ? H5T_IEEE_F32LE : H5T_STD_I32LE;
    *out = (space < 0 || plist < 0)
               ? -1
               : H5Dcreate2(group, lb_field_name(field), ftype, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    lb_status st = *out < 0 ? lb_error(LB_ERR_IO, "%s: cannot create dataset /%s/%s: %s", file, group_name,
                                       lb_field_name(field), lb_h5_cause())
                            : LB_OK;
    lb_h5_close(plist);
    lb_h5_close(space);
    return st;
}

/* Writes count examples of one field at example offset start. */
static lb_status write_field(hid_t dset, const lb_layout *layout, lb_field field, const void *data, int64_t start,
                             int64_t count, const char *file)
{
    int64_t dims[3];
    hsize_t off[3] = {(hsize_t)start, 0, 0}, cnt[3];
    int rank = lb_layout_dims(layout, field, count, dims);
    for (int i = 0; i < rank; i++)
        cnt[i] = (hsize_t)dims[i];
    hid_t fspace = H5Dget_space(dset);
    hid_t mspace = H5Screate_simple(rank, cnt, NULL);
    hid_t mtype = lb_layout_is_float(layout, field) ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32;
    herr_t rc = (fspace < 0 || mspace < 0) ? -1 : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (rc >= 0)
        rc = H5Dwrite(dset, mtype, mspace, fspace, H5P_DEFAULT, data);
    lb_status st = rc < 0 ? lb_error(LB_ERR_IO, "%s: cannot write %s of examples [%lld, %lld): %s", file,
                                     lb_field_name(field), (long long)start, (long long)(start + count), lb_h5_cause())
                          : LB_OK;
    lb_h5_close(mspace);
    lb_h5_close(fspace);
    return st;
}

lb_status lb_h5_write_rows(const hid_t *dsets, const lb_layout *layout, const lb_rows *rows, int64_t start,
                           const char *file)
{
    if (rows->n == 0)
        return LB_OK;
    for (int f = 0; f < LB_FIELD_COUNT; f++) {
        if (!lb_layout_has(layout, (lb_field)f))
            continue;
        lb_status st = write_field(dsets[f], layout, (lb_field)f, rows->data[f], start, rows->n, file);
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

hid_t lb_h5_create_group(hid_t loc, const char *name)
{
    LB_CHECK_ARG(name, -1);
    hid_t plist = H5Pcreate(H5P_GROUP_CREATE);
    hid_t group = (plist < 0 || H5Pset_obj_track_times(plist, 0) < 0)
                      ? -1
                      : H5Gcreate2(loc, name, H5P_DEFAULT, plist, H5P_DEFAULT);
    lb_h5_close(plist);
    return group;
}

/* ---- reading ---- */

int lb_h5_has_attr(hid_t loc, const char *name)
{
    LB_CHECK_ARG(name, 0);
    return H5Aexists(loc, name) > 0;
}

int lb_h5_has_link(hid_t loc, const char *name)
{
    LB_CHECK_ARG(name, 0);
    return H5Lexists(loc, name, H5P_DEFAULT) > 0;
}

static void type_name(H5T_class_t cls, size_t size, int is_signed, char *buf, size_t bufsize)
{
    switch (cls) {
    case H5T_INTEGER: snprintf(buf, bufsize, "%sint%zu", is_signed ? "" : "u", size * 8); break;
    case H5T_FLOAT: snprintf(buf, bufsize, "float%zu", size * 8); break;
    case H5T_STRING: snprintf(buf, bufsize, "string"); break;
    case H5T_COMPOUND: snprintf(buf, bufsize, "compound"); break;
    case H5T_ENUM: snprintf(buf, bufsize, "enum"); break;
    case H5T_ARRAY: snprintf(buf, bufsize, "array"); break;
    default: snprintf(buf, bufsize, "type class %d", (int)cls); break;
    }
}

/* "uint64", "float32", "string" ...: what `want` accepts. */
static const char *want_name(lb_h5_want want)
{
    switch (want) {
    case LB_H5_I64: return "int64";
    case LB_H5_U64: return "uint64";
    case LB_H5_F32: return "float32";
    case LB_H5_F64: return "float64";
    case LB_H5_STRING: return "a string";
    case LB_H5_INT: return "an integer (int8..int64 or uint8..uint32)";
    case LB_H5_ANY_INT: return "an integer";
    case LB_H5_NONNEG: return "a non-negative integer";
    case LB_H5_REAL: return "a number (float32, float64 or an integer)";
    case LB_H5_FLOAT: return "float32 or float64";
    }
    return "?";
}

lb_status lb_h5_check_type(hid_t type, lb_h5_want want, const char *where, const char *file)
{
    H5T_class_t cls = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
    size_t size = type < 0 ? 0 : H5Tget_size(type);
    int is_int = cls == H5T_INTEGER && size >= 1 && size <= 8;
    int is_signed = is_int && H5Tget_sign(type) == H5T_SGN_2;
    int is_float = cls == H5T_FLOAT && (size == 4 || size == 8);
    int lossless_int = is_int && (is_signed || size < 8);
    int ok = 0;
    switch (want) {
    case LB_H5_I64: ok = is_int && is_signed && size == 8; break;
    case LB_H5_U64: ok = is_int && !is_signed && size == 8; break;
    case LB_H5_F32: ok = is_float && size == 4; break;
    case LB_H5_F64: ok = is_float && size == 8; break;
    case LB_H5_STRING: ok = cls == H5T_STRING; break;
    case LB_H5_INT: ok = lossless_int; break;
    case LB_H5_ANY_INT: ok = is_int; break;
    case LB_H5_NONNEG: ok = is_int; break;
    case LB_H5_REAL: ok = is_float || lossless_int; break;
    case LB_H5_FLOAT: ok = is_float; break;
    }
    if (ok)
        return LB_OK;
    char found[32];
    if (type < 0)
        snprintf(found, sizeof found, "an unreadable type");
    else
        type_name(cls, size, is_signed, found, sizeof found);
    return lb_error(LB_ERR_FORMAT, "%s: %s: expected %s, found %s", file, where, want_name(want), found);
}

lb_status lb_h5_read(hid_t obj, lb_h5_want want, hid_t mtype, int64_t start, int64_t count, void *buf,
                     const char *where, const char *file)
{
    int is_attr = H5Iget_type(obj) == H5I_ATTR;
    hid_t type = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    lb_status st = lb_h5_check_type(type, want, where, file);
    lb_h5_close(type);
    if (st != LB_OK)
        return st;
    herr_t rc;
    if (is_attr) {
        rc = H5Aread(obj, mtype, buf);
    } else if (count < 0) {
        rc = H5Dread(obj, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    } else {
        hsize_t dims[H5S_MAX_RANK], off[H5S_MAX_RANK] = {0};
        hid_t fspace = H5Dget_space(obj), mspace = -1;
        int rank = fspace < 0 ? -1 : H5Sget_simple_extent_dims(fspace, dims, NULL);
        rc = rank < 1 ? -1 : 0;
        if (rc >= 0) {
            off[0] = (hsize_t)start;
            dims[0] = (hsize_t)count;
            mspace = H5Screate_simple(rank, dims, NULL);
            rc = mspace < 0 ? -1 : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, dims, NULL);
        }
        if (rc >= 0)
            rc = H5Dread(obj, mtype, mspace, fspace, H5P_DEFAULT, buf);
        lb_h5_close(mspace);
        lb_h5_close(fspace);
    }
    if (rc >= 0)
        return LB_OK;
    if (count >= 0)
        return lb_error(LB_ERR_FORMAT,
                        "%s: %s: reading examples [%lld, %lld) failed (truncated or corrupted file, or a checksum "
                        "mismatch?)",
                        file, where, (long long)start, (long long)(start + count));
    return lb_error(LB_ERR_FORMAT, "%s: %s: read failed (truncated or corrupted file, or a checksum mismatch?)", file,
                    where);
}

/* Opens attribute `name` and checks it holds one element. */
static lb_status open_scalar_attr(hid_t loc, const char *name, hid_t *attr, const char *file)
{
    *attr = -1;
    if (!lb_h5_has_attr(loc, name))
        return lb_error(LB_ERR_FORMAT, "%s: missing root attribute '%s' (is it a lookback file?)", file, name);
    *attr = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t space = *attr < 0 ? -1 : H5Aget_space(*attr);
    hssize_t npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    lb_h5_close(space);
    if (npoints != 1) {
        lb_h5_close(*attr);
        *attr = -1;
        return lb_error(LB_ERR_FORMAT, "%s: attribute '%s' is unreadable or not a single value (found %lld values)",
                        file, name, (long long)npoints);
    }
    return LB_OK;
}

/* Reads scalar attribute `name` checked against `want`, converted to `mtype`. */
static lb_status read_attr(hid_t loc, const char *name, lb_h5_want want, hid_t mtype, void *out, const char *file)
{
    hid_t attr;
    lb_status st = open_scalar_attr(loc, name, &attr, file);
    if (st != LB_OK)
        return st;
    char where[96];
    snprintf(where, sizeof where, "attribute '%s'", name);
    st = lb_h5_read(attr, want, mtype, 0, -1, out, where, file);
    lb_h5_close(attr);
    return st;
}

lb_status lb_h5_read_attr_int(hid_t loc, const char *name, lb_h5_want want, int64_t *out, const char *file)
{
    return read_attr(loc, name, want, H5T_NATIVE_INT64, out, file);
}

lb_status lb_h5_read_attr_uint(hid_t loc, const char *name, lb_h5_want want, uint64_t *out, const char *file)
{
    if (want != LB_H5_NONNEG)
        return read_attr(loc, name, want, H5T_NATIVE_UINT64, out, file);
    /* A signed integer (as h5py writes a Python int) is read as such and must be >= 0. */
    hid_t attr;
    lb_status st = open_scalar_attr(loc, name, &attr, file);
    if (st != LB_OK)
        return st;
    hid_t type = H5Aget_type(attr);
    int is_signed = type >= 0 && H5Tget_sign(type) == H5T_SGN_2;
    lb_h5_close(type);
    char where[96];
    snprintf(where, sizeof where, "attribute '%s'", name);
    int64_t v = 0;
    if (!is_signed)
        st = lb_h5_read(attr, want, H5T_NATIVE_UINT64, 0, -1, out, where, file);
    else if ((st = lb_h5_read(attr, want, H5T_NATIVE_INT64, 0, -1, &v, where, file)) == LB_OK && v < 0)
        st = lb_error(LB_ERR_FORMAT, "%s: %s = %lld: expected a non-negative integer", file, where, (long long)v);
    else
        *out = (uint64_t)v;
    lb_h5_close(attr);
    return st;
}

lb_status lb_h5_read_attr_real(hid_t loc, const char *name, lb_h5_want want, double *out, const char *file)
{
    return read_attr(loc, name, want, H5T_NATIVE_DOUBLE, out, file);
}

static lb_status read_string(hid_t attr, hid_t type, char *buf, size_t size)
{
    hid_t mtype = H5Tcopy(H5T_C_S1);
    H5T_cset_t cset = H5Tget_cset(type);
    herr_t rc = (mtype < 0 || cset < 0) ? -1 : H5Tset_cset(mtype, cset);
    if (H5Tis_variable_str(type) > 0) {
        char *value = NULL;
        if (rc >= 0)
            rc = H5Tset_size(mtype, H5T_VARIABLE);
        if (rc >= 0)
            rc = H5Aread(attr, mtype, &value);
        if (rc >= 0)
            snprintf(buf, size, "%s", value ? value : "");
        if (value)
            H5free_memory(value);
    } else {
        size_t len = H5Tget_size(type);
        char tmp[MAX_STRING_ATTR + 1];
        if (len == 0 || len > MAX_STRING_ATTR)
            rc = -1;
        if (rc >= 0)
            rc = H5Tset_size(mtype, len + 1);
        if (rc >= 0)
            rc = H5Tset_strpad(mtype, H5T_STR_NULLTERM);
        if (rc >= 0)
            rc = H5Aread(attr, mtype, tmp);
        if (rc >= 0) {
            tmp[len] = '\0';
            snprintf(buf, size, "%s", tmp);
        }
    }
    lb_h5_close(mtype);
    return rc < 0 ? LB_ERR_FORMAT : LB_OK;
}

lb_status lb_h5_read_attr_string(hid_t loc, const char *name, char *buf, size_t size, const char *file)
{
    hid_t attr;
    lb_status st = open_scalar_attr(loc, name, &attr, file);
    if (st != LB_OK)
        return st;
    char where[96];
    snprintf(where, sizeof where, "attribute '%s'", name);
    hid_t type = H5Aget_type(attr);
    st = lb_h5_check_type(type, LB_H5_STRING, where, file);
    if (st == LB_OK && read_string(attr, type, buf, size) != LB_OK)
        st = lb_error(LB_ERR_FORMAT, "%s: %s: unreadable string (longer than %d bytes or corrupted)", file, where,
                      MAX_STRING_ATTR);
    lb_h5_close(type);
    lb_h5_close(attr);
    return st;
}

lb_status lb_h5_dataset_info(hid_t dset, const char *where, lb_h5_info *out, const char *file)
{
    LB_CHECK_ARG(where, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    LB_CHECK_ARG(file, LB_ERR_VALUE);
    memset(out, 0, sizeof *out);
    hid_t type = H5Dget_type(dset);
    hid_t space = H5Dget_space(dset);
    hsize_t dims[H5S_MAX_RANK];
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, dims, NULL);
    lb_status st = LB_OK;
    if (type < 0 || rank < 0) {
        st = lb_error(LB_ERR_FORMAT, "%s: dataset %s: unreadable type or shape (corrupted file?)", file, where);
    } else {
        out->type_class = H5Tget_class(type);
        out->type_size = H5Tget_size(type);
        out->is_signed = H5Tget_sign(type) == H5T_SGN_2;
        out->rank = rank;
        for (int i = 0; i < rank; i++)
            out->dims[i] = dims[i] > (hsize_t)INT64_MAX ? INT64_MAX : (int64_t)dims[i];
        type_name(out->type_class, out->type_size, out->is_signed, out->type_name, sizeof out->type_name);
    }
    lb_h5_close(space);
    lb_h5_close(type);
    return st;
}

char *lb_h5_info_str(const lb_h5_info *info, char *buf, size_t size)
{
    LB_CHECK_ARG(info, NULL);
    LB_CHECK_ARG(buf, NULL);
    char shape[128];
    snprintf(buf, size, "%s %s", info->type_name, lb_shape_str(info->rank, info->dims, shape, sizeof shape));
    return buf;
}

/* ---- byte blobs (the events schema's JSON text) ---- */

lb_status lb_h5_write_bytes(hid_t loc, const char *name, const void *data, size_t n, const char *file)
{
    LB_CHECK_ARG(name, LB_ERR_VALUE);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    if (plist >= 0)
        H5Pset_obj_track_times(plist, 0);
    hid_t dset = space >= 0 && plist >= 0 ? H5Dcreate2(loc, name, H5T_STD_U8LE, space, H5P_DEFAULT, plist, H5P_DEFAULT)
                                          : -1;
    herr_t rc = dset >= 0 ? (n ? H5Dwrite(dset, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : 0) : -1;
    lb_status st = rc < 0 ? lb_error(LB_ERR_IO, "%s: cannot write dataset %s: %s", file, name, lb_h5_cause()) : LB_OK;
    lb_h5_close(dset);
    lb_h5_close(plist);
    lb_h5_close(space);
    return st;
}

lb_status lb_h5_read_bytes(hid_t loc, const char *name, size_t max_bytes, char **out, size_t *len, const char *file)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    *out = NULL;
    if (len)
        *len = 0;
    if (!lb_h5_has_link(loc, name))
        return lb_error(LB_ERR_FORMAT, "%s: missing dataset %s", file, name);
    hid_t dset = H5Dopen2(loc, name, H5P_DEFAULT);
    lb_h5_info info = {0};
    lb_status st = dset < 0 ? lb_error(LB_ERR_FORMAT, "%s: cannot open dataset %s", file, name)
                            : lb_h5_dataset_info(dset, name, &info, file);
    if (st == LB_OK && (info.type_class != H5T_INTEGER || info.type_size != 1 || info.rank != 1)) {
        char found[160];
        st = lb_error(LB_ERR_FORMAT, "%s: dataset %s: expected uint8 [bytes], found %s", file, name,
                      lb_h5_info_str(&info, found, sizeof found));
    }
    if (st == LB_OK && (uint64_t)info.dims[0] > (uint64_t)max_bytes)
        st = lb_error(LB_ERR_FORMAT, "%s: dataset %s holds %lld bytes, more than the %zu expected at most", file, name,
                      (long long)info.dims[0], max_bytes);
    char *buf = st == LB_OK ? malloc((size_t)info.dims[0] + 1) : NULL;
    if (st == LB_OK && !buf)
        st = lb_error(LB_ERR_MEMORY, "%s: out of memory reading %s", file, name);
    if (st == LB_OK && info.dims[0] > 0)
        st = lb_h5_read(dset, LB_H5_ANY_INT, H5T_NATIVE_UINT8, 0, -1, buf, name, file);
    lb_h5_close(dset);
    if (st != LB_OK) {
        free(buf);
        return st;
    }
    buf[info.dims[0]] = '\0';
    *out = buf;
    if (len)
        *len = (size_t)info.dims[0];
    return LB_OK;
}

lb_status lb_h5_write_new(const char *path, const char *what, int replace, lb_h5_job job, lb_h5_job feed, void *ctx,
                          const char **tmp_slot)
{
    LB_CHECK_ARG(path && what && job && tmp_slot, LB_ERR_VALUE);
    int lock = -1; /* two writers of one file: the second is refused, naming it */
    lb_status st = lb_output_lock(path, what, &lock);
    if (st != LB_OK)
        return st;
    size_t size = strlen(path) + 5;
    char *tmp = malloc(size);
    if (!tmp) {
        lb_output_unlock(path, lock);
        return lb_error(LB_ERR_MEMORY, "%s: out of memory", path);
    }
    snprintf(tmp, size, "%s.tmp", path);
    *tmp_slot = tmp;
    lb_h5_quiet quiet;
    lb_h5_quiet_begin(&quiet);
    st = lb_h5_isolated(job, feed, ctx, 0, 1, tmp);
    lb_h5_quiet_end(&quiet);
    if (st == LB_OK)
        st = lb_output_finish(tmp, path, what, replace);
    if (st != LB_OK)
        remove(tmp);
    *tmp_slot = NULL;
    free(tmp);
    lb_output_unlock(path, lock);
    return st;
}

lb_status lb_h5_finish_temporary(hid_t fid, const char *tmp, const char *file, lb_status st)
{
    if (H5Fclose(fid) < 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s: writing the temporary file %s failed at its end: %s", file, tmp, lb_h5_cause());
    if (st != LB_OK)
        return st;
    int fd = open(tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0)
        st = lb_error(LB_ERR_IO, "%s: cannot flush %s to disk: %s", file, tmp, lb_system_error(errno));
    if (fd >= 0)
        close(fd);
    return st;
}
