/* The command line under hostile process conditions, as cron jobs, batch schedulers and
 * shell pipelines create them: an address-space limit (ulimit -v), closed standard
 * descriptors, a standard output that cannot be written, files the user may not read,
 * outputs that name one of the command's own inputs, two writers of one file, a writer
 * killed with SIGKILL, a disk that fills and a folder that does not exist. Each answers
 * in time with success or one error line and exit 1, and no file is lost. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_support.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* How the child is started (zero: stdin /dev/null, outputs captured, no limit). */
typedef struct child_setup {
    long as_mb;            /* RLIMIT_AS in MB; 0: none */
    long fsize_bytes;      /* RLIMIT_FSIZE (SIGXFSZ ignored, as a shell's ulimit -f with trap); 0: none */
    int close_stdin, close_stderr;
    const char *stdout_to; /* a path (e.g. /dev/full); NULL: captured */
    int broken_pipe;       /* stdout is a pipe whose reader is gone */
    int as_nobody;         /* run as uid/gid 65534 when the test runs as root */
    int fsize_signal;      /* with fsize_bytes: SIGXFSZ left at its default (a plain ulimit -f) */
    const char *full_disk; /* writes to files whose path holds this fail with ENOSPC (tests/fail_writes.c) */
    long long full_after;  /* ... once this many bytes went to such files in one process */
    const char *tag;       /* names the capture files; NULL: "child" */
} child_setup;

typedef struct child {
    pid_t pid;
    char out[600], err[600];
} child;

static child start_child(const child_setup *s, const char *const *args)
{
    child c = {-1, "", ""};
    const char *tag = s->tag ? s->tag : "child";
    char name[128];
    snprintf(name, sizeof name, "%s.out", tag);
    snprintf(c.out, sizeof c.out, "%s", path_in(name));
    snprintf(name, sizeof name, "%s.err", tag);
    snprintf(c.err, sizeof c.err, "%s", path_in(name));
    const char *argv[64];
    int n = 0;
    argv[n++] = LB_LOOKBACK_BIN;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int pfd[2] = {-1, -1};
    if (s->broken_pipe && pipe(pfd) != 0)
        return c;
    fflush(NULL);
    c.pid = fork();
    if (c.pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int out = s->broken_pipe ? pfd[1]
                                 : open(s->stdout_to ? s->stdout_to : c.out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(c.err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        for (int fd = 3; fd < 64; fd++)
            close(fd);
        if (s->close_stdin)
            close(0);
        if (s->close_stderr)
            close(2);
        signal(SIGPIPE, SIG_DFL);
        /* The workers OpenBLAS would start at load: what a user's shell gives it. */
        unsetenv("OPENBLAS_NUM_THREADS");
        setenv("OMP_NUM_THREADS", "2", 1);
        if (s->as_mb > 0) {
            struct rlimit lim = {(rlim_t)s->as_mb << 20, (rlim_t)s->as_mb << 20};
            setrlimit(RLIMIT_AS, &lim);
        }
        if (s->full_disk) {
            char after[32];
            snprintf(after, sizeof after, "%lld", s->full_after);
            setenv("LD_PRELOAD", LB_FAIL_WRITES_LIB, 1);
            setenv("LB_FAIL_WRITES", s->full_disk, 1);
            setenv("LB_FAIL_WRITES_AFTER", after, 1);
            /* an AddressSanitizer build accepts a preloaded library before its runtime */
            const char *asan = getenv("ASAN_OPTIONS");
            char opts[1024];
            snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "", asan && *asan ? ":" : "");
            setenv("ASAN_OPTIONS", opts, 1);
        }
        if (s->fsize_bytes > 0) {
            signal(SIGXFSZ, s->fsize_signal ? SIG_DFL : SIG_IGN);
            struct rlimit lim = {(rlim_t)s->fsize_bytes, (rlim_t)s->fsize_bytes};
            setrlimit(RLIMIT_FSIZE, &lim);
        }
        if (s->as_nobody && getuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
            _exit(125);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (s->broken_pipe) {
        close(pfd[0]);
        close(pfd[1]);
    }
    return c;
}

/* Waits for the child at most lb_test_limit(timeout) seconds (then kills it: code -2). */
static run_result finish_child(child *c, double timeout)
{
    run_result r = {-1, NULL, NULL};
    int status = 0;
    timeout = lb_test_limit(timeout);
    double start = now_seconds();
    for (;;) {
        pid_t got = waitpid(c->pid, &status, WNOHANG);
        if (got == c->pid)
            break;
        if (got < 0 && errno != EINTR)
            break;
        if (now_seconds() - start > timeout) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            r.code = -2;
            break;
        }
        usleep(20000);
    }
    if (r.code != -2)
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    r.out = read_all(c->out, NULL);
    r.err = read_all(c->err, NULL);
    if (!r.out)
        r.out = calloc(1, 1);
    if (!r.err)
        r.err = calloc(1, 1);
    return r;
}

static run_result run_with(const child_setup *s, const char *const *args, double timeout)
{
    child c = start_child(s, args);
    return finish_child(&c, timeout);
}

/* ---- fixtures ---- */


/* A small LSTM trained for 2 steps on small_data(): its checkpoint. */
static const char *small_checkpoint(void)
{
    static char path[600];
    if (!path[0]) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s", path_in("base-run"));
        const char *args[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                              "--d-model", "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
        snprintf(path, sizeof path, "%s/checkpoint.h5", dir);
    }
    return path;
}

static const char *ids_file(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", path_in("ids.txt"));
        write_all(path, "1 2 3 1 2\n", 10);
    }
    return path;
}

/* ---- memory limits ---- */

/* Every command that reads a file, under 150, 200 and 400 MB of address space: an answer
 * within seconds (success, or one line and exit 1 naming the memory), never a hang. */
static void test_memory_limits(void)
{
#if defined(__SANITIZE_ADDRESS__)
    fprintf(stderr, "\n  skipped: AddressSanitizer reserves terabytes of address space");
    return;
#else
    const char *data = small_data(), *ck = small_checkpoint();
    static const long limits[] = {150, 200, 400};
    for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
        char predicted[512], run_dir[512], compare_dir[512], generated[512];
        char tag[32];
        snprintf(tag, sizeof tag, "mem%ld", limits[l]);
        snprintf(predicted, sizeof predicted, "%s", path_in(tag));
        strcat(predicted, "-predicted.h5");
        snprintf(run_dir, sizeof run_dir, "%s-run", path_in(tag));
        snprintf(compare_dir, sizeof compare_dir, "%s-compare", path_in(tag));
        snprintf(generated, sizeof generated, "%s-data.h5", path_in(tag));
        const char *info[] = {"data", "info", data, NULL};
        const char *eval[] = {"eval", "--checkpoint", ck, "--data", data, NULL};
        const char *predict[] = {"predict", "--checkpoint", ck, "--data", data, "-o", predicted, NULL};
        const char *stream[] = {"stream", "--checkpoint", ck, "--input", ids_file(), NULL};
        const char *train[] = {"train", "--data", data, "--model", "lstm", "--layers", "1", "--hidden", "4",
                               "--d-model", "4", "--steps", "2", "--batch", "4", "--out", run_dir, "--quiet", NULL};
        const char *resume[] = {"train", "--resume", run_dir, "--steps", "4", "--quiet", NULL};
        const char *compare[] = {"compare", "--train", data, "--eval", data, "--models", "lstm", "--steps", "2",
                                 "--batch", "4", "--out", compare_dir, "--quiet", NULL};
        const char *gradcheck[] = {"gradcheck", "--model", "lstm", NULL};
        const char *generate[] = {"data", "--seq-len", "16", "--train", "8", "--val", "4", "--test", "4", "-o",
                                  generated, "--quiet", NULL};
        const char *const *commands[] = {info, eval, predict, stream, train, resume, compare, gradcheck, generate};
        int trained = 0;
        for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
            child_setup s = {.as_mb = limits[l], .tag = tag};
            double start = now_seconds();
            run_result r = run_with(&s, commands[k], 60);
            double took = now_seconds() - start;
            const char *name = commands[k] == info ? "data info" : commands[k][0];
            /* a resume of a run that never started is a usage error (exit 2) */
            int usage = r.code == 2 && commands[k] == resume && !trained;
            int answered = r.code == 0 || ((r.code == 1 || usage) && one_error_line(&r, name));
            EXPECT(answered, r);
            if (commands[k] == train)
                trained = r.code == 0;
            if (r.code == 1 && (commands[k] != resume || trained)) /* a resume of a run that never started says so */
                EXPECT(contains(r.err, "out of memory"), r);
            if (!answered || took > 30)
                fprintf(stderr, "\n  %ld MB: lookback %s %s: exit %d after %.1f s", limits[l], name, commands[k][1],
                        r.code, took);
            if (limits[l] >= 400)
                EXPECT(r.code == 0, r); /* 400 MB hold every command on these small files */
            run_free(&r);
        }
    }
#endif
}

/* A model whose parameters do not fit in 400 MB of address space: out of memory while
 * building it is one line naming the memory, exit 1 (not a usage error), for train and
 * gradcheck and for the LSTM and the transformer; gradcheck prints no FAILED summary for
 * parameters it never checked. */
static void test_model_too_large_for_memory(void)
{
#if defined(__SANITIZE_ADDRESS__)
    fprintf(stderr, "\n  skipped: AddressSanitizer reserves terabytes of address space");
    return;
#else
    const char *data = small_data();
    char lstm_dir[512], tf_dir[512];
    snprintf(lstm_dir, sizeof lstm_dir, "%s", path_in("big-lstm"));
    snprintf(tf_dir, sizeof tf_dir, "%s", path_in("big-transformer"));
    const char *lstm[] = {"train", "--data", data, "--model", "lstm", "--hidden", "3000", "--steps", "2", "--batch",
                          "4", "--out", lstm_dir, "--quiet", NULL};
    const char *tf[] = {"train", "--data", data, "--model", "transformer", "--d-model", "4000", "--heads", "5",
                        "--steps", "2", "--batch", "4", "--out", tf_dir, "--quiet", NULL};
    const char *gc_lstm[] = {"gradcheck", "--model", "lstm", "--hidden", "3000", NULL};
    const char *gc_tf[] = {"gradcheck", "--model", "transformer", "--d-model", "4000", "--heads", "4", NULL};
    const char *const *commands[] = {lstm, tf, gc_lstm, gc_tf};
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        child_setup s = {.as_mb = 400, .tag = "big"};
        run_result r = run_with(&s, commands[k], 60);
        EXPECT(r.code == 1 && one_error_line(&r, commands[k][0]), r);
        EXPECT(contains(r.err, "out of memory") && contains(r.err, "cannot allocate"), r);
        EXPECT(!contains(r.out, "FAILED"), r);
        /* The model is named by the option the user typed, not by the config's field. */
        EXPECT(!contains(r.err, "model (") && !contains(r.err, "kind ="), r);
        if (k < 2)
            EXPECT(contains(r.err, k == 0 ? "(while building a model with --model lstm): "
                                          : "(while building a model with --model transformer): "),
                   r);
        run_free(&r);
    }
#endif
}

/* demo --quick where the address space runs out mid-way (training or evaluating a model on
 * the 7,200-event file): one line "out of memory (while <doing what>): ...", exit 1, and no
 * half-made report folder, so the same --out is taken again. */
static void test_demo_out_of_memory(void)
{
#if defined(__SANITIZE_ADDRESS__)
    fprintf(stderr, "\n  skipped: AddressSanitizer reserves terabytes of address space");
    return;
#else
    char cache[512];
    snprintf(cache, sizeof cache, "%s", path_in("demo-cache"));
    static const long limits[] = {320, 335, 350, 365};
    int failed_mid_way = 0;
    for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
        char out[512], tag[32];
        snprintf(tag, sizeof tag, "demo%ld", limits[l]);
        snprintf(out, sizeof out, "%s-report", path_in(tag));
        const char *demo[] = {"demo", "--quick", "--budget", "1", "--threads", "1", "--data-dir", cache, "--out", out,
                              "--quiet", NULL};
        child_setup s = {.as_mb = limits[l], .tag = tag};
        for (int attempt = 0; attempt < 2; attempt++) { /* the second: the same --out again */
            run_result r = run_with(&s, demo, 120);
            EXPECT(r.code == 0 || (r.code == 1 && one_error_line(&r, "demo") &&
                                   contains(r.err, "out of memory (while ") && !exists(out)),
                   r);
            if (r.code == 1 && (contains(r.err, "(while evaluating ") || contains(r.err, "(while training ")))
                failed_mid_way++;
            CU_ASSERT_FALSE(contains(r.err, "already exists"));
            run_free(&r);
            if (r.code == 0)
                break;
        }
    }
    CU_ASSERT_TRUE(failed_mid_way >= 2); /* at least one limit failed after training had begun, twice */
#endif
}

/* ---- standard descriptors ---- */

/* A job started with stdin and stderr closed reads a good file as good. */
static void test_closed_standard_streams(void)
{
    const char *info[] = {"data", "info", small_data(), NULL};
    const char *eval[] = {"eval", "--checkpoint", small_checkpoint(), "--data", small_data(), NULL};
    const char *const *commands[] = {info, eval};
    for (int k = 0; k < 2; k++) {
        child_setup s = {.close_stdin = 1, .close_stderr = 1};
        run_result r = run_with(&s, commands[k], 120);
        EXPECT(r.code == 0 && r.out[0] != '\0', r);
        run_free(&r);
    }
    child_setup s = {.close_stdin = 1, .close_stderr = 1};
    run_result r = run_with(&s, info, 120);
    EXPECT(contains(r.out, "spike"), r);
    run_free(&r);
}

/* Output that cannot be written is an error (exit 1, one line); a closed pipe keeps SIGPIPE's 141. */
static void test_standard_output_errors(void)
{
    const char *info[] = {"data", "info", small_data(), NULL};
    const char *eval[] = {"eval", "--checkpoint", small_checkpoint(), "--data", small_data(), "--json", NULL};
    const char *stream[] = {"stream", "--checkpoint", small_checkpoint(), "--input", ids_file(), NULL};
    const char *gradcheck[] = {"gradcheck", "--model", "lstm", NULL};
    const char *version[] = {"--version", NULL};
    const char *const *commands[] = {info, eval, stream, gradcheck, version};
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        child_setup s = {.stdout_to = "/dev/full"};
        run_result r = run_with(&s, commands[k], 120);
        /* (stream's own summary line may come first) */
        const char *said = strstr(r.err, "cannot write to standard output");
        EXPECT(r.code == 1 && said && !strstr(said + 1, "cannot write to standard output") &&
                   contains(r.err, "No space left on device"),
               r);
        run_free(&r);
    }
    child_setup s = {.broken_pipe = 1};
    run_result r = run_with(&s, info, 120);
    EXPECT(r.code == 128 + SIGPIPE, r);
    run_free(&r);
}

/* ---- permissions ---- */

static void test_permission_denied(void)
{
    char locked[512];
    snprintf(locked, sizeof locked, "%s", path_in("unreadable.h5"));
    size_t size = 0;
    char *bytes = read_all(small_data(), &size);
    CU_ASSERT_FATAL(bytes != NULL && write_all(locked, bytes, size));
    free(bytes);
    chmod(work_dir, 0755);
    CU_ASSERT_EQUAL(chmod(locked, 0), 0);
    const char *info[] = {"data", "info", locked, NULL};
    const char *eval[] = {"eval", "--checkpoint", small_checkpoint(), "--data", locked, NULL};
    const char *const *commands[] = {info, eval};
    const char *names[] = {"data info", "eval"};
    for (int k = 0; k < 2; k++) {
        child_setup s = {.as_nobody = 1, .tag = "perm"};
        run_result r = run_with(&s, commands[k], 120);
        EXPECT(r.code == 1 && one_error_line(&r, names[k]) && contains(r.err, "Permission denied") &&
                   !contains(r.err, "not an HDF5 file"),
               r);
        run_free(&r);
    }
    chmod(locked, 0644);
}

/* ---- outputs that are inputs ---- */

static int same_bytes(const char *path, const char *before, size_t before_size)
{
    size_t size = 0;
    char *now = read_all(path, &size);
    int same = now && size == before_size && memcmp(now, before, size) == 0;
    free(now);
    return same;
}

/* predict -o onto its --data or --checkpoint, in any spelling, even with --force; a run
 * folder file that is the --data file: refused, and the input stays byte for byte. */
static void test_outputs_never_replace_inputs(void)
{
    char data[512], ck[512], dotted[600], sym[512], hard[512];
    snprintf(data, sizeof data, "%s", path_in("mine.h5"));
    snprintf(ck, sizeof ck, "%s", path_in("mine-ck.h5"));
    size_t data_size = 0, ck_size = 0;
    char *data_bytes = read_all(small_data(), &data_size), *ck_bytes = read_all(small_checkpoint(), &ck_size);
    CU_ASSERT_FATAL(data_bytes && ck_bytes && write_all(data, data_bytes, data_size) && write_all(ck, ck_bytes, ck_size));
    snprintf(dotted, sizeof dotted, "%s/./../%s/mine.h5", work_dir, strrchr(work_dir, '/') + 1);
    snprintf(sym, sizeof sym, "%s", path_in("ck-link.h5"));
    snprintf(hard, sizeof hard, "%s", path_in("data-hard.h5"));
    CU_ASSERT_EQUAL(symlink(ck, sym), 0);
    CU_ASSERT_EQUAL(link(data, hard), 0);
    const char *targets[] = {dotted, sym, hard, data, ck};
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        const char *args[] = {"predict", "--checkpoint", ck, "--data", data, "-o", targets[k], "--force", NULL};
        run_result r = run(args);
        EXPECT(r.code == 1 && one_error_line(&r, "predict") && contains(r.err, "an input of this command"), r);
        run_free(&r);
        CU_ASSERT_TRUE(same_bytes(data, data_bytes, data_size));
        CU_ASSERT_TRUE(same_bytes(ck, ck_bytes, ck_size));
    }
    /* train: the run folder's metrics.csv is (a hard link to) the --data file */
    char dir[512], config[600];
    snprintf(dir, sizeof dir, "%s", path_in("run-onto-data"));
    mkdir(dir, 0755);
    snprintf(config, sizeof config, "%s/metrics.csv", dir);
    CU_ASSERT_EQUAL(link(data, config), 0);
    const char *train[] = {"train", "--data", data, "--model", "lstm", "--layers", "1", "--hidden", "4", "--d-model",
                           "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "an input of this command"), r);
    run_free(&r);
    CU_ASSERT_TRUE(same_bytes(config, data_bytes, data_size));
    CU_ASSERT_TRUE(same_bytes(data, data_bytes, data_size));
    free(data_bytes);
    free(ck_bytes);
}

/* ---- concurrent writers ---- */

static long size_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}


/* Two `data` runs on one file: the second is refused naming the first, which finishes
 * with a good file. A `data` run killed with SIGKILL leaves no writer behind, and the
 * next run on that file succeeds. */
static void test_two_writers_of_one_file(void)
{
    char target[512], lock[600], tmp[600];
    snprintf(target, sizeof target, "%s", path_in("shared.h5"));
    snprintf(lock, sizeof lock, "%s.lock", target);
    snprintf(tmp, sizeof tmp, "%s.tmp", target);
    const char *big[] = {"data", "--seq-len", "512", "--train", "30000", "--val", "10", "--test", "10", "-o", target,
                         "--force", "--quiet", NULL};
    child_setup first_setup = {.tag = "writer1"};
    child first = start_child(&first_setup, big);
    CU_ASSERT_TRUE_FATAL(wait_for_file(lock, 60));
    child_setup second_setup = {.tag = "writer2"};
    run_result r = run_with(&second_setup, big, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "data") && contains(r.err, "another lookback process is writing") &&
               contains(r.err, "shared.h5"),
           r);
    run_free(&r);
    r = finish_child(&first, 300);
    EXPECT(r.code == 0, r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(lock));
    CU_ASSERT_FALSE(exists(tmp));
    const char *info[] = {"data", "info", target, NULL};
    r = run(info);
    EXPECT(r.code == 0, r);
    run_free(&r);

    /* kill -9 while its writer child writes */
    first = start_child(&first_setup, big);
    CU_ASSERT_TRUE_FATAL(wait_for_file(tmp, 60));
    usleep(300000);
    kill(first.pid, SIGKILL);
    r = finish_child(&first, 60);
    run_free(&r);
    usleep(300000);
    long a = size_of(tmp);
    usleep(700000);
    long b = size_of(tmp);
    CU_ASSERT_EQUAL(a, b); /* nobody writes the temporary file any more */
    const char *small[] = {"data", "--seq-len", "16", "--train", "8", "--val", "4", "--test", "4", "-o", target,
                           "--force", "--quiet", NULL};
    r = run(small);
    EXPECT(r.code == 0, r);
    run_free(&r);
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "n_train=8"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(lock));
    CU_ASSERT_FALSE(exists(tmp));
}

/* ---- run folder lock ---- */

static void test_run_lock_removed(void)
{
    char dir[512], lock[600];
    snprintf(dir, sizeof dir, "%s", path_in("locked-run"));
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                           "--d-model", "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(lock));
    /* a lock file left by a killed run (a dead process id, no lock held) does not stop a resume */
    CU_ASSERT_TRUE(write_all(lock, "999999999\n", 10));
    const char *resume[] = {"train", "--resume", dir, "--steps", "3", "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 0, r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(lock));
}

/* ---- full disks and missing folders ---- */

static void test_predict_write_failures(void)
{
    char data[512], out[512], missing[512];
    snprintf(data, sizeof data, "%s", path_in("many.h5"));
    snprintf(out, sizeof out, "%s", path_in("predicted.h5"));
    snprintf(missing, sizeof missing, "%s", path_in("no-such-folder/predicted.h5"));
    const char *gen[] = {"data", "--seq-len", "16", "--readings", "4", "--train", "8", "--val", "4", "--test", "4000",
                         "-o", data, "--quiet", NULL};
    run_result r = run(gen);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* a file-size limit of 64 KB: the predictions (4000 rows of logits) do not fit */
    const char *predict[] = {"predict", "--checkpoint", small_checkpoint(), "--data", data, "-o", out, NULL};
    child_setup s = {.fsize_bytes = 64 << 10, .tag = "fsize"};
    r = run_with(&s, predict, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "predict") && contains(r.err, "File too large") &&
               !contains(r.err, "HDF5:") && strlen(r.err) < 300,
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(out));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CU_ASSERT_FALSE(exists(tmp));
    const char *nowhere[] = {"predict", "--checkpoint", small_checkpoint(), "--data", data, "-o", missing, NULL};
    r = run(nowhere);
    EXPECT(r.code == 1 && one_error_line(&r, "predict") && contains(r.err, "no-such-folder does not exist") &&
               !contains(r.err, "writable"),
           r);
    run_free(&r);
}

/* A disk that fills while `train` writes its checkpoint, and a file-size limit (ulimit -f,
 * SIGXFSZ at its default) under train and data: the error line names the cause (ENOSPC,
 * EFBIG) and says what is on disk; nothing half-written is left; a resume on a disk with
 * room again goes on from the checkpoint that was kept. */
static void test_train_disk_full(void)
{
    char dir[512], tmp[600], ckpt[600];
    snprintf(dir, sizeof dir, "%s", path_in("full-disk-run"));
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.h5", dir);
    snprintf(tmp, sizeof tmp, "%s/checkpoint.h5.tmp", dir);
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                           "--d-model", "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    child_setup full = {.full_disk = "checkpoint.h5.tmp", .tag = "full"};
    run_result r = run_with(&full, train, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "No space left on device (the disk is full)") &&
               contains(r.err, "no checkpoint was written") && !contains(r.err, "writable") &&
               !contains(r.err, "crashed"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(ckpt));
    CU_ASSERT_FALSE(exists(tmp));
    remove_tree(dir);
    /* A checkpoint at step 2, then the disk fills while step 4's is written. */
    r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *more[] = {"train", "--resume", dir, "--steps", "4", "--quiet", NULL};
    full.full_after = 4096; /* the first bytes of the new checkpoint are written */
    r = run_with(&full, more, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "No space left on device") &&
               contains(r.err, "checkpoint.h5 is kept"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(tmp));
    r = run(more);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char metrics[600];
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    char *rows = read_all(metrics, NULL);
    CU_ASSERT_TRUE(rows && strstr(rows, "\n2,train,") && strstr(rows, "\n4,train,"));
    free(rows);
    /* ulimit -f of 64 KB with SIGXFSZ at its default: train's checkpoint and a data file. */
    remove_tree(dir);
    const char *big[] = {"train", "--data", small_data(), "--model", "lstm", "--hidden", "64", "--steps", "2",
                         "--batch", "4", "--out", dir, "--quiet", NULL};
    child_setup fsize = {.fsize_bytes = 64 << 10, .fsize_signal = 1, .tag = "fsize-train"};
    r = run_with(&fsize, big, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "File too large (over the file-size limit") &&
               !contains(r.err, "crashed"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(tmp));
    char data[512];
    snprintf(data, sizeof data, "%s", path_in("too-large.h5"));
    const char *gen[] = {"data", "--seq-len", "256", "--train", "2000", "--val", "10", "--test", "10", "-o", data,
                         "--quiet", NULL};
    fsize.tag = "fsize-data";
    r = run_with(&fsize, gen, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "data") && contains(r.err, "File too large (over the file-size limit") &&
               !contains(r.err, "crashed"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(data));
}

/* A step whose logits cannot fit any machine's memory ([256, 4096, 2^20] in float32 and
 * their gradient: 8.8 PB), and one beyond ulimit -v: refused before the first step, with
 * the figures and the options that lower them, and no metrics row. */
static void test_step_memory_checked_first(void)
{
    char data[512], dir[512], metrics[600];
    snprintf(data, sizeof data, "%s", path_in("wide.h5"));
    snprintf(dir, sizeof dir, "%s", path_in("wide-run"));
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    const char *gen[] = {"data", "--task", "copy", "--alphabet", "1048576", "--seq-len", "4096", "--train", "256",
                         "--val", "4", "--test", "4", "-o", data, "--quiet", NULL};
    run_result r = run(gen);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *train[] = {"train", "--data", data, "--model", "transformer", "--d-model", "8", "--heads", "2",
                           "--layers", "1", "--batch", "256", "--steps", "2", "--out", dir, "--quiet", NULL};
    r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "before the first step") &&
               contains(r.err, "256 sequences of 4096 positions") && contains(r.err, "lower --batch") &&
               contains(r.err, "--micro-batches"),
           r);
    run_free(&r);
    char *rows = read_all(metrics, NULL);
    CU_ASSERT_TRUE(!rows || !strstr(rows, "\n1,"));
    free(rows);
#if !defined(__SANITIZE_ADDRESS__)
    remove_tree(dir);
    const char *small[] = {"train", "--data", data, "--model", "lstm", "--hidden", "8", "--batch", "16", "--steps",
                           "2", "--out", dir, "--quiet", NULL};
    child_setup s = {.as_mb = 1200, .tag = "wide"};
    r = run_with(&s, small, 120);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "before the first step") &&
               contains(r.err, "ulimit -v"),
           r);
    run_free(&r);
#endif
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_limits_%d", (int)getpid());
    mkdir(work_dir, 0755);
    const lb_test_case cases[] = {
        {"every command that reads a file answers in time under 150, 200 and 400 MB", test_memory_limits},
        {"a model too large for the memory: out of memory, exit 1", test_model_too_large_for_memory},
        {"demo out of memory mid-way: one line, no half-made report", test_demo_out_of_memory},
        {"stdin and stderr closed: good files read as good", test_closed_standard_streams},
        {"standard output that cannot be written: exit 1; a closed pipe: 141", test_standard_output_errors},
        {"a file the user may not read: permission denied", test_permission_denied},
        {"no output replaces one of the command's inputs, whatever the spelling", test_outputs_never_replace_inputs},
        {"two writers of one file; a writer killed with SIGKILL", test_two_writers_of_one_file},
        {"the run folder's .lock is removed at the end; a stale one is taken", test_run_lock_removed},
        {"predict: a file-size limit and a missing folder give the true reason", test_predict_write_failures},
        {"train and data: a full disk and ulimit -f are named as such", test_train_disk_full},
        {"a step that cannot fit the memory is refused before the first step", test_step_memory_checked_first},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_limits", cases);
    remove_tree(work_dir);
    return rc;
}
