/* The command line, run as a user runs it: the built `lookback` executable
 * (LB_LOOKBACK_BIN) is started with posix_spawn and its exit code, standard output
 * and standard error are checked. Covers `data` (generate, info, no overwrite,
 * unknown options and bad values, bad files) and `gradcheck` (every family passes,
 * a wrong gradient fails, an unknown model is a usage error).
 *
 * With LB_TEST_PLOTS, cli/plot.c is compiled into this program and its plots
 * are drawn directly: PNG signature and size, the SVG fallback, and bad arguments.
 */
#include "cli_support.h"
#include "data/tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef LB_TEST_PLOTS
#include "lab/plot.h"
#endif


/* LeakSanitizer: HDF5 1.10 leaks a few KB after failing to open a corrupted file (see
 * test_data_reader.c), and PLplot's drivers leak what they allocate through
 * fontconfig, cairo and libltdl (every allocation in those reports is made inside
 * those libraries, none in lookback). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\nleak:libfontconfig\nleak:libcairo\nleak:libltdl\nleak:libplplot\nleak:libQt5\n";
}

/* The small file every data test starts from: spike, T = 64, 32 / 8 / 8. */
static const char *small_file(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", path_in("small.h5"));
        const char *args[] = {"data", "--task", "spike", "--seq-len", "64", "--train", "32", "--val", "8", "--test", "8",
                              "--sensors", "4", "--seed", "7", "-o", path, NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    return path;
}

/* ---- data ---- */

static void test_data_generate_and_info(void)
{
    const char *path = small_file();
    run_result r;
    const char *args[] = {"data", "--task", "spike", "--seq-len", "64", "--train", "32", "--val", "8", "--test", "8",
                          "--sensors", "4", "--seed", "7", "-o", path_in("again.h5"), NULL};
    r = run(args);
    EXPECT(r.code == 0, r);
    EXPECT(contains(r.out, "wrote ") && contains(r.out, "task spike, seq_len 64, train 32, val 8, test 8"), r);
    EXPECT(r.err[0] == '\0', r); /* a small file shows no progress */
    run_free(&r);

    /* The same options give the same file, byte for byte. */
    size_t n1 = 0, n2 = 0;
    char *a = read_all(path, &n1), *b = read_all(path_in("again.h5"), &n2);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_TRUE(a && b && n1 == n2 && n1 > 0 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);

    const char *info[] = {"data", "info", path, NULL};
    r = run(info);
    EXPECT(r.code == 0, r);
    EXPECT(contains(r.out, "task      spike"), r);
    EXPECT(contains(r.out, "seq_len=64"), r);
    EXPECT(contains(r.out, "sensors=4"), r);
    EXPECT(contains(r.out, "seed=7"), r);
    EXPECT(contains(r.out, "n_train=32 n_val=8 n_test=8"), r);
    EXPECT(contains(r.out, "int32 [N, 64]"), r);
    /* split rows: name and size */
    char *train = strstr(r.out, "  train ");
    CU_ASSERT_TRUE(train && strtol(train + 8, NULL, 10) == 32);
    char *val = strstr(r.out, "  val ");
    CU_ASSERT_TRUE(val && strtol(val + 6, NULL, 10) == 8);
    EXPECT(r.err[0] == '\0', r);
    run_free(&r);
}

static void test_data_variants(void)
{
    /* Another task, --name=value spelling, a flag without a value. */
    const char *args[] = {"data", "--task=recall", "--seq-len=48", "--pairs", "4", "--variable-length", "--n-train", "6",
                          "--val", "2", "--test", "2", "-o", path_in("recall.h5"), "--quiet", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    EXPECT(contains(r.out, "task recall, seq_len 48, train 6, val 2, test 2"), r);
    EXPECT(contains(r.out, "variable_length=1") && contains(r.out, "pairs=4"), r);
    run_free(&r);
    const char *info[] = {"data", "info", path_in("recall.h5"), NULL};
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "task      recall") && contains(r.out, "pairs=4"), r);
    run_free(&r);
    const char *modsum[] = {"data", "--task", "modsum", "--modulus", "7", "--seq-len", "20", "--variable-length",
                            "--min-length", "2", "--train", "6", "--val", "2", "--test", "2", "-o",
                            path_in("modsum.h5"), "--quiet", NULL};
    r = run(modsum);
    EXPECT(r.code == 0 && contains(r.out, "task modsum, seq_len 20, train 6, val 2, test 2"), r);
    run_free(&r);
    const char *modsum_info[] = {"data", "info", path_in("modsum.h5"), NULL};
    r = run(modsum_info);
    EXPECT(r.code == 0 && contains(r.out, "task      modsum") && contains(r.out, "modulus=7"), r);
    EXPECT(contains(r.out, "vocab_size 9, num_classes 7 (chance accuracy 0.1429)"), r);
    run_free(&r);
    /* --min-length does nothing without --variable-length: a usage error naming both, no file */
    const char *idle[] = {"data", "--seq-len", "20", "--min-length", "5", "--train", "6", "--val", "2", "--test", "2",
                          "-o", path_in("idle.h5"), "--quiet", NULL};
    r = run(idle);
    EXPECT(r.code == 2 && one_error_line(&r, "data") && contains(r.err, "--min-length 5 applies to variable-length") &&
               contains(r.err, "--variable-length"),
           r);
    run_free(&r);
    CU_ASSERT_NOT_EQUAL(access(path_in("idle.h5"), F_OK), 0);
}

static void test_data_no_overwrite(void)
{
    const char *path = small_file();
    size_t n_before = 0, n_after = 0;
    char *before = read_all(path, &n_before);
    const char *args[] = {"data", "--seq-len", "32", "--train", "4", "--val", "2", "--test", "2", "-o", path, NULL};
    run_result r = run(args);
    EXPECT(r.code == 1, r);
    EXPECT(one_error_line(&r, "data") && contains(r.err, path) && contains(r.err, "--force"), r);
    run_free(&r);
    char *after = read_all(path, &n_after);
    CU_ASSERT_TRUE(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
    free(after);

    /* --force replaces it (on a copy, so the shared small file stays). */
    const char *copy = path_in("forced.h5");
    CU_ASSERT_TRUE(write_all(copy, before, n_before));
    const char *forced[] = {"data", "--seq-len", "32", "--train", "4", "--val", "2", "--test", "2", "-o", copy, "--force",
                            NULL};
    r = run(forced);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *info[] = {"data", "info", copy, NULL};
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "seq_len=32") && contains(r.out, "n_train=4"), r);
    run_free(&r);
    free(before);
}

static void test_data_usage_errors(void)
{
    struct {
        const char *args[12];
        const char *named; /* what the one error line must name */
    } cases[] = {
        {{"data", "--bogus", "3", "-o", NULL}, "--bogus"},
        {{"data", "--seq-len", "abc", "-o", NULL}, "--seq-len"},
        {{"data", "--seq-len", "1", "-o", NULL}, "--seq-len"},
        {{"data", "--sensors", "99999999", "-o", NULL}, "sensors"},
        {{"data", "--pairs", "4", "-o", NULL}, "pairs"},             /* an option of another task */
        {{"data", "--task", "sorting", "-o", NULL}, "sorting"},
        {{"data", "--seq-len", "-o", NULL}, "--seq-len"},            /* missing value */
        {{"data", "--seq-len", "64", "--max-distance", "500", "-o", NULL}, "--max-distance"}, /* combination */
        {{"data", "-x", "-o", NULL}, "-x"},
        {{"data", "--seq-len", "64", NULL}, "-o"},                   /* no output file */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16];
        int n = 0;
        for (; cases[i].args[n]; n++)
            args[n] = cases[i].args[n];
        const char *out = path_in("never.h5");
        if (n > 0 && strcmp(args[n - 1], "-o") == 0)
            args[n++] = out;
        args[n] = NULL;
        run_result r = run(args);
        EXPECT(r.code == 2, r);
        EXPECT(one_error_line(&r, "data") && contains(r.err, cases[i].named), r);
        EXPECT(r.out[0] == '\0', r);
        CU_ASSERT_FALSE(access(out, F_OK) == 0);
        run_free(&r);
    }
}

static void test_data_help(void)
{
    const char *args[] = {"data", "--help", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    /* every task and option, with defaults */
    const char *expected[] = {"spike", "recall", "copy", "adding", "local", "modsum", "--modulus", "--seq-len", "--min-distance",
                              "--max-distance", "--sensors", "--n-train", "--seed", "--force", "default: spike 1024"};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        EXPECT(contains(r.out, expected[i]), r);
    /* The --task line names every task the generator knows, and so does the error for a
     * --task without a value. */
    const char *line = strstr(r.out, "\n  --task TASK");
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    const char *end = strchr(line + 1, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    const char *bare[] = {"data", "--task", NULL};
    run_result missing = run(bare);
    EXPECT(missing.code == 2 && one_error_line(&missing, "data"), missing);
    for (int k = 0; k < LB_TASK_COUNT; k++) {
        const char *name = lb_task_name((lb_task_kind)k);
        const char *at = strstr(line, name);
        EXPECT(at && at < end, r);
        EXPECT(contains(missing.err, name), missing);
    }
    run_free(&missing);
    run_free(&r);
}

static void test_data_info_bad_files(void)
{
    const char *good = small_file();
    size_t n = 0;
    char *bytes = read_all(good, &n);
    CU_ASSERT_TRUE_FATAL(bytes && n > 2048);
    const char *text = path_in("text.h5"), *truncated = path_in("truncated.h5"), *empty = path_in("empty.h5");
    CU_ASSERT_TRUE(write_all(text, "this is not HDF5\n", 17));
    CU_ASSERT_TRUE(write_all(truncated, bytes, n / 2));
    CU_ASSERT_TRUE(write_all(empty, "", 0));
    free(bytes);
    const char *files[] = {path_in("missing.h5"), text, truncated, empty, work_dir};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *args[] = {"data", "info", files[i], NULL};
        run_result r = run(args);
        EXPECT(r.code == 1, r);
        EXPECT(one_error_line(&r, "data info") && contains(r.err, strrchr(files[i], '/') + 1), r);
        EXPECT(r.out[0] == '\0', r);
        run_free(&r);
    }
    const char *none[] = {"data", "info", NULL};
    run_result r = run(none);
    EXPECT(r.code == 2 && one_error_line(&r, "data info"), r);
    run_free(&r);
}

/* ---- data: messages, size guard, interruption ---- */

/* An option spelled with an underscore after "--" (users type hyphens). */
static int has_underscored_option(const char *text)
{
    for (const char *p = strstr(text, "--"); p; p = strstr(p + 2, "--")) {
        size_t n = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz_-");
        if (memchr(p + 2, '_', n))
            return 1;
    }
    return 0;
}

/* No C function name of the library in a message. */
static int names_a_function(const char *text)
{
    const char *names[] = {"lb_task", "lb_dataset", "lb_loader", "lb_split", "lb_batch", "lb_option", NULL};
    for (int i = 0; names[i]; i++)
        if (strstr(text, names[i]))
            return 1;
    return 0;
}

static void test_data_messages_for_users(void)
{
    struct {
        const char *args[10];
        const char *line; /* the whole error line after "lookback data: " */
    } cases[] = {
        {{"data", "--seq-len", "abc", "-o", NULL}, "option --seq-len: 'abc' is not a whole number"},
        {{"data", "--seq_len", "abc", "-o", NULL}, "option --seq-len: 'abc' is not a whole number"},
        {{"data", "--seq_len=1", "-o", NULL}, "option --seq-len: 1 is outside [2, 1048576]"},
        {{"data", "--train", "many", "-o", NULL}, "option --train: 'many' is not a whole number"},
        {{"data", "--task", "recall", "--power-a", "nan", "-o", NULL},
         "option --power-a: 'nan' is not a finite number: it must be in [1e-06, 16]"},
        {{"data", "--task", "recall", "--power_a", "0", "-o", NULL}, "option --power-a: 0 is outside [1e-06, 16]"},
        {{"data", "--seq-len", "64", "--max_distance", "500", "-o", NULL}, "--max-distance 500 exceeds --seq-len - 1 = 63"},
        {{"data", "--readings", "-o", NULL}, "option --readings needs a value"},
        {{"data", "--task", "modsum", "--modulus", "1", "-o", NULL}, "option --modulus: 1 is outside [2, 65536]"},
        {{"data", "--task", "modsum", "--alphabet", "4", "-o", NULL},
         "option --alphabet does not apply to task modsum (only to copy, local, parity)"},
        {{"data", "--task", "parity", "--modulus", "3", "-o", NULL},
         "option --modulus does not apply to task parity (only to modsum)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16];
        int n = 0;
        for (; cases[i].args[n]; n++)
            args[n] = cases[i].args[n];
        args[n++] = path_in("never.h5");
        args[n] = NULL;
        run_result r = run(args);
        char expected[256];
        snprintf(expected, sizeof expected, "lookback data: %s\n", cases[i].line);
        EXPECT(r.code == 2 && strcmp(r.err, expected) == 0, r);
        EXPECT(!has_underscored_option(r.err) && !names_a_function(r.err), r);
        run_free(&r);
    }
    /* data info: the file first */
    const char *missing = path_in("missing.h5");
    const char *info[] = {"data", "info", missing, NULL};
    run_result r = run(info);
    char expected[600];
    snprintf(expected, sizeof expected, "lookback data info: %s: cannot open: ", missing);
    EXPECT(r.code == 1 && strncmp(r.err, expected, strlen(expected)) == 0 && !names_a_function(r.err), r);
    run_free(&r);
    /* help: hyphens only, reals with %g, the size guard documented */
    const char *help[] = {"data", "--help", NULL};
    r = run(help);
    EXPECT(r.code == 0 && !has_underscored_option(r.out), r);
    EXPECT(contains(r.out, "[1e-06..16]") && !contains(r.out, "e-07"), r);
    EXPECT(contains(r.out, "--allow-large") && contains(r.out, "--train, --n-train"), r);
    run_free(&r);
}

/* More than 16 GiB before compression is refused with the estimate, before any file
 * is written; --allow-large lifts the limit. */
static void test_data_size_guard(void)
{
    const char *out = path_in("huge.h5");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    const char *args[] = {"data", "--seq-len", "1048576", "--train", "1000000", "-o", out, NULL};
    run_result r = run(args);
    EXPECT(r.code == 2 && one_error_line(&r, "data"), r);
    /* 1,002,000 sequences x (1,048,576 tokens + target + distance) x 4 bytes = 3.8 TiB */
    EXPECT(contains(r.err, "1002000 sequences of 1048576 positions hold 3.8 TiB before compression"), r);
    EXPECT(contains(r.err, "16 GiB") && contains(r.err, "--allow-large"), r);
    EXPECT(r.out[0] == '\0', r);
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    run_free(&r);
    /* adding: F = 2 features count: 5,002,000 x (16384 x 2 + 2) x 4 bytes = 610.6 GiB */
    const char *adding[] = {"data", "--task", "adding", "--seq-len", "16384", "--train", "5000000", "-o", out, NULL};
    r = run(adding);
    EXPECT(r.code == 2 && contains(r.err, "5002000 sequences of 16384 positions hold 610.6 GiB"), r);
    run_free(&r);
    /* With --allow-large the guard passes: here the folder does not exist, so the
     * generator fails at once, having written nothing. */
    const char *nowhere = path_in("no_such_folder/huge.h5");
    const char *allowed[] = {"data", "--seq-len", "1048576", "--train", "1000000", "--allow-large", "-o", nowhere,
                             "--quiet", NULL};
    r = run(allowed);
    EXPECT(r.code == 1 && one_error_line(&r, "data") && contains(r.err, "no_such_folder does not exist"), r);
    EXPECT(!contains(r.err, "--allow-large"), r);
    run_free(&r);
}

static long size_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Starts a long `lookback data` run, waits until its FILE.h5.tmp holds data, sends
 * `sig` and checks that the process ended by that signal and left no file behind. */
static void interrupt_generation(int sig, const char *name)
{
    char out[512], tmp[600];
    snprintf(out, sizeof out, "%s", path_in(name));
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    /* spike, T = 4096, 400,000 sequences: 6.5 GB raw, tens of seconds; interrupted early */
    const char *argv[] = {LB_LOOKBACK_BIN, "data", "--seq-len", "4096", "--train", "400000", "--val", "0", "--test",
                          "0", "-o", out, "--quiet", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, path_in("interrupt_out.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, path_in("interrupt_err.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawnattr_t attr; /* default actions in the child, even if our caller ignores SIGINT */
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, LB_LOOKBACK_BIN, &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    /* up to 60 s (scaled: LOOKBACK_TEST_TIME_SCALE) for the temporary file to hold 1 MB of data */
    int status = 0, ended = 0;
    double limit = lb_test_limit(60);
    for (double waited = 0; waited < limit && size_of(tmp) < (1L << 20); waited += 0.01) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            ended = 1;
            break;
        }
        usleep(10000);
    }
    CU_ASSERT_FALSE(ended);
    CU_ASSERT_TRUE(size_of(tmp) >= (1L << 20));
    if (!ended) {
        kill(pid, sig);
        double end_limit = lb_test_limit(30);
        for (double waited = 0; waited < end_limit; waited += 0.01) { /* 30 s (scaled), then SIGKILL */
            pid_t got = waitpid(pid, &status, WNOHANG);
            if (got == pid) {
                ended = 1;
                break;
            }
            usleep(10000);
        }
        if (!ended) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            CU_FAIL("lookback data did not end after the signal");
        }
    }
    CU_ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig); /* a shell shows 128 + sig: 130 for Ctrl-C */
    if (access(tmp, F_OK) == 0)
        fprintf(stderr, "\n  %s left behind (%ld bytes)\n", tmp, size_of(tmp));
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    char lock[600];
    snprintf(lock, sizeof lock, "%s.lock", out);
    CU_ASSERT_NOT_EQUAL(access(lock, F_OK), 0); /* the writer's lock file goes too */
    remove(lock);
    remove(tmp);
    remove(out);
}

static void test_data_interrupt_removes_tmp(void)
{
    interrupt_generation(SIGINT, "interrupted_int.h5");
    interrupt_generation(SIGTERM, "interrupted_term.h5");
}

/* ---- gradcheck ---- */

/* Counts the parameter lines (ending PASS or FAIL) of gradcheck's output. */
static void count_results(const char *out, int *pass, int *fail)
{
    *pass = *fail = 0;
    for (const char *line = out; line && *line;) {
        const char *end = strchr(line + 1, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len >= 4 && strncmp(line + len - 4, "PASS", 4) == 0)
            ++*pass;
        if (len >= 4 && strncmp(line + len - 4, "FAIL", 4) == 0)
            ++*fail;
        line = end ? end + 1 : NULL;
    }
}

static void test_gradcheck_families(void)
{
    /* Parameter tensors of each family at the default sizes (2 layers, learned positions). */
    struct {
        const char *model;
        int params;
        const char *first_param;
    } families[] = {
        {"transformer", 31, "blocks.1.attn.w_q"},
        {"local", 31, "blocks.0.attn.w_k"},
        {"lstm", 12, "lstm.weight_hh_l1"},
        {"conv", 8, "conv.1.weight"},
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const char *args[] = {"gradcheck", "--model", families[i].model, NULL};
        run_result r = run(args);
        int pass = 0, fail = 0;
        count_results(r.out, &pass, &fail);
        EXPECT(r.code == 0, r);
        EXPECT(pass == families[i].params && fail == 0, r);
        EXPECT(contains(r.out, families[i].first_param) && contains(r.out, "input.weight") &&
                   contains(r.out, "head.weight"),
               r);
        char final[64];
        snprintf(final, sizeof final, "gradcheck: %d parameters passed\n", families[i].params);
        EXPECT(contains(r.out, final), r);
        EXPECT(r.err[0] == '\0', r);
        run_free(&r);
    }
    /* Other options reach the model: per-position head, sinusoidal positions, 3 sequences. */
    const char *args[] = {"gradcheck", "--model", "transformer", "--head", "every", "--pos", "sinusoidal", "--batch", "3",
                          "--layers", "1", NULL};
    run_result r = run(args);
    int pass = 0, fail = 0;
    count_results(r.out, &pass, &fail);
    EXPECT(r.code == 0 && pass == 18 && fail == 0 && !contains(r.out, "pos_embedding"), r);
    EXPECT(contains(r.out, "lengths [7, 5, 3]") && contains(r.out, "head every"), r);
    run_free(&r);
}

/* Grouped-query attention and ALiBi through gradcheck (float64), both attention
 * families: w_k and w_v have n_kv_heads heads' columns; a --kv-heads that does not divide
 * --heads and ALiBi on an LSTM are refused in one line naming both options. */
static void test_gradcheck_grouped_alibi(void)
{
    const char *models[2] = {"transformer", "local"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"gradcheck", "--model", models[i], "--heads", "4", "--kv-heads", "2", "--pos", "alibi",
                              "--d-model", "8", "--layers", "1", NULL};
        run_result r = run(args);
        int pass = 0, fail = 0;
        count_results(r.out, &pass, &fail);
        EXPECT(r.code == 0 && pass == 18 && fail == 0, r);
        EXPECT(contains(r.out, "kv-heads 2") && contains(r.out, "pos alibi"), r);
        EXPECT(contains(r.out, "blocks.0.attn.w_k                [8, 4]") &&
                   contains(r.out, "blocks.0.attn.w_q                [8, 8]"),
               r);
        run_free(&r);
    }
    const char *bad[] = {"gradcheck", "--model", "transformer", "--heads", "4", "--kv-heads", "3", NULL};
    run_result r = run(bad);
    EXPECT(r.code == 2 && one_error_line(&r, "gradcheck") && contains(r.err, "--kv-heads 3") &&
               contains(r.err, "--heads 4"),
           r);
    run_free(&r);
    const char *lstm[] = {"gradcheck", "--model", "lstm", "--pos", "alibi", NULL};
    r = run(lstm);
    EXPECT(r.code == 2 && one_error_line(&r, "gradcheck") && contains(r.err, "--pos") && contains(r.err, "--model lstm"),
           r);
    run_free(&r);
}

static void test_gradcheck_wrong_gradient_fails(void)
{
    const char *args[] = {"gradcheck", "--model", "lstm", "--break-gradient", NULL};
    run_result r = run(args);
    int pass = 0, fail = 0;
    count_results(r.out, &pass, &fail);
    EXPECT(r.code == 1, r);
    EXPECT(fail > 0 && contains(r.out, "gradcheck: FAILED"), r);
    EXPECT(one_error_line(&r, "gradcheck") && contains(r.err, "analytic") && contains(r.err, "numeric"), r);
    run_free(&r);
}

static void test_gradcheck_usage_errors(void)
{
    struct {
        const char *args[8];
        const char *named;
    } cases[] = {
        {{"gradcheck", "--model", "gru", NULL}, "gru"},
        {{"gradcheck", NULL}, "--model"},
        {{"gradcheck", "--model", "lstm", "--layers", "x", NULL}, "--layers"},
        {{"gradcheck", "--model", "lstm", "--layers", NULL}, "--layers"},
        {{"gradcheck", "--model", "lstm", "--colour", "red", NULL}, "--colour"},
        {{"gradcheck", "--model", "transformer", "--heads", "3", NULL}, "--d-model 8 is not divisible by --heads 3"},
        {{"gradcheck", "--model", "transformer", "--pos", "wavy", NULL}, "wavy"},
        {{"gradcheck", "--model", "conv", "--atol", "-1", NULL}, "--atol"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run(cases[i].args);
        EXPECT(r.code == 2, r);
        EXPECT(one_error_line(&r, "gradcheck") && contains(r.err, cases[i].named), r);
        run_free(&r);
    }
}

/* ---- plots ---- */

#ifdef LB_TEST_PLOTS
static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The file a plot wrote: a PNG of 1000 x 600 pixels, or an SVG (svg device). */
static int is_plot(const char *path)
{
    size_t n = 0;
    unsigned char *b = (unsigned char *)read_all(path, &n);
    int ok = 0;
    if (b && ends_with(path, ".svg"))
        ok = n > 100 && strstr((char *)b, "<svg") != NULL && strstr((char *)b, "</svg>") != NULL;
    else if (b)
        ok = n > 1000 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0 &&
             be32(b + 16) == 1000 && be32(b + 20) == 600;
    if (!ok)
        fprintf(stderr, "\n  %s is not a complete plot (%zu bytes)\n", path, n);
    free(b);
    return ok;
}

/* Draws all four plots into files named <prefix>_*.png; returns how many worked. */
static int draw_all(const char *prefix)
{
    char path[512];
    int ok = 0;
    const char *names[3] = {"transformer", "lstm", "a single point"};
    double x0[5] = {0, 10, 20, 30, 40}, y0[5] = {0.12, 0.3, NAN, 0.9, 0.99};
    double x1[4] = {0, 15, 30, 45}, y1[4] = {0.12, 0.13, 0.12, 0.14}, x2[1] = {5}, y2[1] = {0.5};
    const double *xs[3] = {x0, x1, x2}, *ys[3] = {y0, y1, y2};
    int counts[3] = {5, 4, 1};
    snprintf(path, sizeof path, "%s_curves.png", prefix);
    if (lb_plot_curves(path, "Validation accuracy", "time (s)", "accuracy", 3, names, counts, xs, ys) == LB_OK)
        ok += is_plot(lb_plot_last_path());

    double distances[4] = {100, 1000, 3000, 7000}, a0[4] = {1, 0.98, 0.97, 0.95}, a1[4] = {0.5, 0.13, NAN, 0.12};
    const double *acc[2] = {a0, a1};
    snprintf(path, sizeof path, "%s_distance.png", prefix);
    if (lb_plot_accuracy_by_distance(path, 2, names, 4, distances, acc, 0.125) == LB_OK)
        ok += is_plot(lb_plot_last_path());

    enum { T = 7000 };
    static float w[T];
    for (int k = 0; k < T; k++)
        w[k] = (float)(0.2 / T * (1 + 0.5 * sin(k)));
    w[1234] = 0.8f;
    snprintf(path, sizeof path, "%s_attention.png", prefix);
    if (lb_plot_attention(path, "Where the alarm looked", w, T, 1234) == LB_OK)
        ok += is_plot(lb_plot_last_path());

    enum { TQ = 24, TK = 40 };
    static float m[TQ * TK];
    for (int q = 0; q < TQ; q++)
        for (int k = 0; k <= q + 16 && k < TK; k++)
            m[q * TK + k] = (float)(1.0 / (q + 17));
    snprintf(path, sizeof path, "%s_matrix.png", prefix);
    if (lb_plot_attention_matrix(path, "Attention", m, TQ, TK) == LB_OK)
        ok += is_plot(lb_plot_last_path());
    if (ok != 4)
        fprintf(stderr, "\n  plots: %s\n", lb_last_error());
    return ok;
}

/* `text` as PLplot's SVG device writes it: each character a hexadecimal reference. */
static int svg_has_text(const char *svg, const char *text)
{
    char coded[512] = "";
    for (size_t i = 0; text[i] && strlen(coded) + 8 < sizeof coded; i++)
        snprintf(coded + strlen(coded), sizeof coded - strlen(coded), "&#x%x;", (unsigned char)text[i]);
    return contains(svg, coded) || contains(svg, text);
}

/* The attention plot's dashed line at the marked key is named in a legend (the demo's
 * "clue position"), not left unlabelled; the SVG device keeps the text. */
static void test_attention_plot_mark_labelled(void)
{
    setenv("LOOKBACK_PLOT_DEVICE", "svg", 1);
    if (!lb_plot_device()) {
        unsetenv("LOOKBACK_PLOT_DEVICE");
        return;
    }
    float w[64];
    for (int k = 0; k < 64; k++)
        w[k] = 0.2f / 64;
    w[17] = 0.8f;
    CU_ASSERT_EQUAL_FATAL(lb_plot_attention_marked(path_in("marked.png"), "t", w, 64, 17, "clue position"), LB_OK);
    char *svg = read_all(lb_plot_last_path(), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
    CU_ASSERT_TRUE(svg_has_text(svg, "clue position"));
    free(svg);
    CU_ASSERT_EQUAL_FATAL(lb_plot_attention(path_in("plain.png"), "t", w, 64, 17), LB_OK);
    svg = read_all(lb_plot_last_path(), NULL);
    CU_ASSERT_TRUE(svg && svg_has_text(svg, "marked key"));
    free(svg);
    unsetenv("LOOKBACK_PLOT_DEVICE");
}

static void test_plots(void)
{
    unsetenv("LOOKBACK_PLOT_DEVICE");
    const char *device = lb_plot_device();
    CU_ASSERT_PTR_NOT_NULL_FATAL(device);
    CU_ASSERT_EQUAL(draw_all(path_in("default")), 4);
    if (strcmp(device, "svg") != 0) /* a PNG device: the requested names were used */
        CU_ASSERT_TRUE(access(path_in("default_attention.png"), F_OK) == 0);

    /* The fallback device writes SVG next to the requested .png name. */
    setenv("LOOKBACK_PLOT_DEVICE", "svg", 1);
    CU_ASSERT_STRING_EQUAL(lb_plot_device(), "svg");
    CU_ASSERT_EQUAL(draw_all(path_in("fallback")), 4);
    CU_ASSERT_STRING_EQUAL(lb_plot_last_path(), path_in("fallback_matrix.svg"));
    CU_ASSERT_FALSE(access(path_in("fallback_matrix.png"), F_OK) == 0);
    /* The Qt device, when installed, needs no display. */
    setenv("LOOKBACK_PLOT_DEVICE", "pngqt", 1);
    if (lb_plot_device()) {
        CU_ASSERT_EQUAL(draw_all(path_in("qt")), 4);
        CU_ASSERT_STRING_EQUAL(lb_plot_last_path(), path_in("qt_matrix.png"));
    }
    setenv("LOOKBACK_PLOT_DEVICE", "gif", 1);
    CU_ASSERT_PTR_NULL(lb_plot_device());
    CU_ASSERT_TRUE(contains(lb_last_error(), "LOOKBACK_PLOT_DEVICE=gif"));
    unsetenv("LOOKBACK_PLOT_DEVICE");
}

static void test_plot_errors(void)
{
    unsetenv("LOOKBACK_PLOT_DEVICE");
    const char *names[1] = {"model"};
    double x[2] = {1, 2}, y[2] = {3, 4}, nan2[2] = {NAN, NAN};
    const double *xs[1] = {x}, *ys[1] = {y}, *nans[1] = {nan2};
    int counts[1] = {2};
    const char *target = path_in("kept.png");
    CU_ASSERT_TRUE(write_all(target, "keep me", 7));

    CU_ASSERT_EQUAL(lb_plot_curves(target, "t", "x", "y", 0, names, counts, xs, ys), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_plot_curves(target, "t", "x", "y", 1, names, counts, xs, nans), LB_ERR_VALUE);
    CU_ASSERT_TRUE(contains(lb_last_error(), "no finite point"));
    double bad_distance[2] = {0, 100};
    CU_ASSERT_EQUAL(lb_plot_accuracy_by_distance(target, 1, names, 2, bad_distance, ys, 0.1), LB_ERR_VALUE);
    CU_ASSERT_TRUE(contains(lb_last_error(), "distance 0"));
    CU_ASSERT_EQUAL(lb_plot_log_x(target, "t", "x", "y", 1, names, 2, bad_distance, ys, 0, 1, NAN, NULL), LB_ERR_VALUE);
    CU_ASSERT_TRUE(contains(lb_last_error(), "x 0 is 0"));
    CU_ASSERT_EQUAL(lb_plot_log_x(target, "t", "x", "y", 1, names, 2, x, nans, NAN, NAN, NAN, NULL), LB_ERR_VALUE);
    CU_ASSERT_TRUE(contains(lb_last_error(), "nothing finite"));
    float w[4] = {0.25f, NAN, 0.25f, 0.5f};
    CU_ASSERT_EQUAL(lb_plot_attention(target, "t", w, 4, 1), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(contains(lb_last_error(), "key 1"));
    w[1] = 0.25f;
    CU_ASSERT_EQUAL(lb_plot_attention(target, "t", w, 4, 4), LB_ERR_VALUE); /* mark outside [0, 4) */
    CU_ASSERT_EQUAL(lb_plot_attention_matrix(target, "t", w, 0, 4), LB_ERR_VALUE);
    /* Nothing was written over the existing file. */
    size_t n = 0;
    char *kept = read_all(target, &n);
    CU_ASSERT_TRUE(kept && n == 7 && memcmp(kept, "keep me", 7) == 0);
    free(kept);

    /* A folder that does not exist: an error naming the file, no crash, no exit. */
    lb_status st = lb_plot_attention("/nonexistent-lookback-dir/attention.png", "t", w, 4, 2);
    CU_ASSERT_EQUAL(st, LB_ERR_IO);
    CU_ASSERT_TRUE(contains(lb_last_error(), "/nonexistent-lookback-dir/attention"));
    /* and plotting still works afterwards */
    CU_ASSERT_EQUAL(lb_plot_attention(path_in("after_error.png"), "t", w, 4, 2), LB_OK);
    CU_ASSERT_TRUE(is_plot(lb_plot_last_path()));

    /* The current directory removed while the command runs: one error, not PLplot's exit
     * of the whole process ("get_tmpdir_list: getcwd error"). */
    int here = open(".", O_RDONLY | O_DIRECTORY);
    char gone[4096], out[4096];
    snprintf(gone, sizeof gone, "%s", path_in("gone-cwd"));
    snprintf(out, sizeof out, "%s", path_in("cwd_gone.png"));
    CU_ASSERT_TRUE_FATAL(here >= 0 && mkdir(gone, 0700) == 0 && chdir(gone) == 0 && rmdir(gone) == 0);
    st = lb_plot_attention(out, "t", w, 4, 2);
    CU_ASSERT_EQUAL(fchdir(here), 0);
    close(here);
    CU_ASSERT_EQUAL(st, LB_ERR_IO);
    CU_ASSERT_TRUE(contains(lb_last_error(), "current directory no longer exists"));
    CU_ASSERT_EQUAL(access(out, F_OK), -1);
}
#endif

/* ---- setup ---- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(work_dir, sizeof work_dir, "%s/lb_test_cli_XXXXXX", tmp);
    if (!mkdtemp(work_dir)) {
        fprintf(stderr, "test_cli: cannot create a folder under %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    static const lb_test_case cases[] = {
        {"data: generate, then info describes the file", test_data_generate_and_info},
        {"data: other tasks, --key=value, flags", test_data_variants},
        {"data: an existing file is kept without --force", test_data_no_overwrite},
        {"data: usage errors name the option (exit 2)", test_data_usage_errors},
        {"data --help lists every task and option", test_data_help},
        {"data info: bad files give one line (exit 1)", test_data_info_bad_files},
        {"data: messages name the option as typed, reals with %g", test_data_messages_for_users},
        {"data: more than 16 GiB needs --allow-large", test_data_size_guard},
        {"data: SIGINT/SIGTERM remove FILE.h5.tmp and FILE.h5.lock", test_data_interrupt_removes_tmp},
        {"gradcheck: every family passes", test_gradcheck_families},
        {"gradcheck: a wrong gradient fails (exit 1)", test_gradcheck_wrong_gradient_fails},
        {"gradcheck: grouped-query attention and ALiBi pass (transformer, local); bad combinations refused in one line",
         test_gradcheck_grouped_alibi},
        {"gradcheck: usage errors (exit 2)", test_gradcheck_usage_errors},
#ifdef LB_TEST_PLOTS
        {"plots: PNG files, SVG fallback", test_plots},
        {"plots: the attention plot names its marked line in a legend", test_attention_plot_mark_labelled},
        {"plots: bad input is an error, files kept", test_plot_errors},
#endif
        {NULL, NULL},
    };
    int rc = lb_test_main("cli", cases);
    nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
