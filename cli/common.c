#include <ctype.h>
#include <json-c/json.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/output.h"
#include "layers/model.h"
#include "tensor/blas.h"
#include "tensor/threads.h"
#include "train/distributed.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "train/trainer.h"

/* Library messages may start with the C function that raised them ("lb_dataset_open: ");
 * the command line shows users the rest. */
static const char *user_message(const char *m)
{
    while (strncmp(m, "lb_", 3) == 0) {
        const char *p = m;
        while (*p && (isalnum((unsigned char)*p) || *p == '_'))
            p++;
        if (p[0] != ':' || p[1] != ' ')
            break;
        m = p + 2;
    }
    return m;
}

/* One error line; under mpirun it names the rank, and usage errors (the same on every
 * rank) are printed by rank 0 only, also before the job is joined. */
/* Length of the valid UTF-8 sequence at p (1 to 4 bytes), 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

void lb_cli_printable(const char *message, char *out, size_t size)
{
    const unsigned char *p = (const unsigned char *)message;
    size_t used = 0;
    while (*p && used + 5 < size) {
        size_t n = *p >= 0x80 ? utf8_sequence(p) : 1;
        if (n > 1 && used + n < size) {
            memcpy(out + used, p, n);
            used += n;
            p += n;
        } else if (*p < 0x20 || *p == 0x7f || *p >= 0x80) {
            used += (size_t)snprintf(out + used, size - used, "\\x%02x", *p++);
        } else {
            out[used++] = (char)*p++;
        }
    }
    out[used] = '\0';
}

static void print_error(const char *command, int code, const char *raw)
{
    char message[4096];
    lb_cli_printable(raw, message, sizeof message);
    if (code == 2 && (lb_dist_size() > 1 ? lb_dist_rank() : lb_dist_launch_rank()) != 0)
        return;
    if (lb_dist_size() > 1 && code != 2)
        fprintf(stderr, "lookback %s: rank %d: %s\n", command, lb_dist_rank(), message);
    else
        fprintf(stderr, "lookback %s: %s\n", command, message);
}

int lb_cli_fail(const char *command)
{
    char message[2048];
    snprintf(message, sizeof message, "%s", lb_last_error()[0] ? user_message(lb_last_error()) : "failed");
    lb_cli_name_options(message, sizeof message);
    lb_cli_memory_message(command, message, sizeof message);
    print_error(command, 1, message);
    return 1;
}

int lb_cli_error(const char *command, int code, const char *fmt, ...)
{
    va_list ap;
    char message[2048];
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char named[2048];
    snprintf(named, sizeof named, "%s", user_message(message));
    lb_cli_name_options(named, sizeof named);
    print_error(command, code, named);
    return code;
}

int lb_cli_bad_option(const char *command, int c, char *const *argv)
{
    if (c == ':')
        return lb_cli_error(command, 2, "option %s needs a value", argv[optind - 1]);
    return lb_cli_error(command, 2, "unknown option '%s' (see lookback %s --help)", argv[optind - 1], command);
}

lb_status lb_cli_int(const char *option, const char *text, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || isspace((unsigned char)*text) || *end || errno == ERANGE)
        return lb_error(LB_ERR_VALUE, "%s expects a whole number, got '%s'", option, text ? text : "");
    if (v < min || v > max)
        return lb_error(LB_ERR_VALUE, "%s must be in [%lld, %lld], got %lld", option, (long long)min, (long long)max, v);
    *out = v;
    return LB_OK;
}

lb_status lb_cli_split(const char *option, const char *text, const char **out)
{
    static const char *const names[] = {"train", "val", "test"};
    for (size_t k = 0; text && k < sizeof names / sizeof names[0]; k++) {
        if (strcmp(text, names[k]) == 0) {
            *out = text;
            return LB_OK;
        }
    }
    return lb_error(LB_ERR_VALUE, "%s: unknown split '%s' (expected train, val or test)", option, text ? text : "");
}

lb_status lb_cli_real(const char *option, const char *text, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = text ? strtod(text, &end) : 0;
    /* decimal only: strtod also reads hexadecimal ("0x10" = 16) */
    if (!text || !*text || isspace((unsigned char)*text) || *end || errno == ERANGE || !isfinite(v) ||
        strpbrk(text, "xX"))
        return lb_error(LB_ERR_VALUE, "%s expects a decimal number, got '%s'", option, text ? text : "");
    if (v < min || v > max)
        return lb_error(LB_ERR_VALUE, "%s must be in [%g, %g], got %g", option, min, max, v);
    *out = v;
    return LB_OK;
}

int lb_cli_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

lb_status lb_cli_mkdir(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return lb_error(LB_ERR_VALUE, "path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return lb_error(LB_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return lb_error(LB_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return lb_error(LB_ERR_IO, "%s exists and is not a folder", buf);
    return LB_OK;
}

char *lb_cli_path(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

/* OpenBLAS gives each thread that runs a matrix product (the calling one and every
 * worker) a buffer of 128 MiB of address space (BUFFER_SIZE of its x86-64 builds, plus
 * guard pages), allocated the first time the thread runs; when that allocation fails it
 * retries forever. So the buffers are reserved here, where a shortage can still be said. */
enum { BLAS_BUFFER_BYTES = (128 << 20) + (1 << 20), BLAS_HEADROOM_BYTES = 32 << 20 };

int lb_cli_address_space_free(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, bytes);
    return 1;
}

int lb_cli_set_threads(int n)
{
    if (n <= 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        /* under mpirun the processors are shared by the ranks on this host */
        n = env && atoi(env) > 0 ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN) / lb_dist_local_size();
        if (n < 1)
            n = 1;
    }
    static int reserved = 0; /* buffers already in place (a second call) */
    int want = n;
    while (n > reserved && !lb_cli_address_space_free((size_t)n * BLAS_BUFFER_BYTES + BLAS_HEADROOM_BYTES)) {
        if (n == 1) {
            struct rlimit lim;
            char limit[64] = "";
            if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
                snprintf(limit, sizeof limit, " (the address-space limit, ulimit -v, is %llu MB)",
                         (unsigned long long)(lim.rlim_cur >> 20));
            lb_error(LB_ERR_MEMORY,
                     "out of memory (while reserving the %d MB buffer of the linear-algebra library, OpenBLAS)%s",
                     BLAS_BUFFER_BYTES >> 20, limit);
            return -1;
        }
        n = n > 1 ? n - 1 : 1;
    }
    if (n < want)
        fprintf(stderr, "lookback: %d thread%s instead of %d: the address space left (ulimit -v) holds the "
                "linear-algebra buffers of %d\n", n, n == 1 ? "" : "s", want, n);
    lb_set_num_threads(n);
    if (n > reserved) {
        lb_blas_reserve_buffers();
        reserved = n;
    }
    return n;
}

double lb_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double lb_cli_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / lb_get_num_threads();
}

void lb_progress_begin(lb_progress *p, const char *label, int64_t total)
{
    p->label = label;
    p->total = total;
    p->tty = isatty(STDERR_FILENO);
    p->budget = 0;
    p->first = 0;
    p->budget_spent = 0;
    p->start = lb_cli_now();
    p->last_print = 0;
}

void lb_progress_update(lb_progress *p, int64_t done, const char *fmt, ...)
{
    double now = lb_cli_now();
    int final = done >= p->total;
    /* A live bar redraws 10 times a second; plain lines every 10 seconds. */
    if (!final && now - p->last_print < (p->tty ? 0.1 : 10.0))
        return;
    p->last_print = now;
    /* Only this process's steps and time: a resumed run's earlier steps took other time. */
    double elapsed = now - p->start, rate = elapsed > 0 ? (double)(done - p->first) / elapsed : 0;
    double eta = rate > 0 ? (double)(p->total - done) / rate : 0;
    double fraction = p->total > 0 ? (double)done / (double)p->total : 1.0;
    double spent = p->budget_spent + elapsed;
    if (p->budget > 0 && spent / p->budget > fraction) {
        fraction = spent < p->budget ? spent / p->budget : 1.0;
        eta = p->budget - spent > 0 ? p->budget - spent : 0;
    }
    char extra[256] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(extra, sizeof extra, fmt, ap);
        va_end(ap);
    }
    if (p->tty) {
        int width = 24, filled = (int)(width * fraction);
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r%-12s [%s] step %lld %.1f/s ETA %.0fs %s\033[K", p->label, bar, (long long)done, rate,
                eta, extra);
    } else {
        fprintf(stderr, "%s: step %lld (%.0f%%, %.1f/s, ETA %.0fs) %s\n", p->label, (long long)done, 100 * fraction, rate,
                eta, extra);
    }
    fflush(stderr);
}

void lb_progress_end(lb_progress *p)
{
    if (p->tty)
        fputc('\n', stderr);
}

lb_status lb_cli_write_json(struct json_object *root, const char *path, const char *what)
{
    char tmp[4200];
    lb_status st = lb_output_check(path, what);
    if (st == LB_OK && snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        st = lb_error(LB_ERR_VALUE, "%s: path too long", path);
    if (st == LB_OK && json_object_to_file_ext(tmp, root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE) != 0) {
        st = lb_error(LB_ERR_IO, "%s: cannot write the %s: %s", path, what, strerror(errno));
        remove(tmp);
    }
    json_object_put(root);
    return st == LB_OK ? lb_output_commit(tmp, path, what) : st;
}

double lb_cli_mean_predictor_mse(const lb_dataset *data, const char *split, int64_t n)
{
    lb_batch b;
    double sum = 0, sq = 0;
    if (n < 1 || lb_dataset_slice(data, split, 0, n, &b) != LB_OK)
        return NAN;
    if (!b.target_values) {
        lb_batch_free(&b);
        return NAN;
    }
    for (int64_t i = 0; i < n; i++)
        sum += b.target_values[i];
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++)
        sq += (b.target_values[i] - mean) * (b.target_values[i] - mean);
    lb_batch_free(&b);
    return sq / (double)n;
}

lb_model *lb_cli_load_model(const char *checkpoint)
{
    lb_model_config mc;
    if (lb_checkpoint_read_model_config(checkpoint, &mc) != LB_OK)
        return NULL;
    lb_model *model = lb_model_new(&mc);
    if (model && lb_checkpoint_load_params(checkpoint, model) != LB_OK) {
        lb_model_free(model);
        return NULL;
    }
    return model;
}

int lb_cli_has_attention(const struct lb_model_config *mc)
{
    return mc->kind == LB_MODEL_TRANSFORMER || mc->kind == LB_MODEL_LOCAL;
}

lb_status lb_cli_check_max_context(const char *checkpoint, const struct lb_model_config *mc, int64_t max_context)
{
    if (max_context > 0 && !lb_cli_has_attention(mc))
        return lb_error(LB_ERR_VALUE,
                        "--max-context: %s holds a %s model, which keeps no attention cache to bound (drop the option)",
                        checkpoint, lb_model_kind_name(mc->kind));
    return LB_OK;
}
