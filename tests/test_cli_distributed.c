/* `lookback train` under mpirun as a user runs it: two processes give the run of one,
 * an error or a killed process on one rank ends every rank with a message naming it,
 * Ctrl-C saves one checkpoint that resumes with another number of processes.
 * In a build without MPI: `lookback train` started by mpirun says so and fails. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_support.h"
#include "train/distributed.h"

/* A small recall file: T = 24, 512 / 32 / 16 sequences. */
static const char *recall_file(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", path_in("recall.h5"));
        const char *args[] = {"data", "--task", "recall", "--seq-len", "24", "--pairs", "4", "--key-vocab", "16",
                              "--value-vocab", "16", "--train", "512", "--val", "32", "--test", "16", "-o", path,
                              "--quiet", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    return path;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* `lookback train` options of every run here (steps and folder added by the caller). */
#define TRAIN_OPTIONS                                                                                            \
    "train", "--data", recall_file(), "--layers", "1", "--d-model", "16", "--heads", "2", "--d-ff", "32", "--batch", \
        "8", "--lr", "3e-3", "--schedule", "constant", "--warmup", "2", "--threads", "1", "--eval-every", "3", "--eval-examples", "0", "--quiet"

#ifdef LB_MPIEXEC
#define MPIRUN LB_MPIEXEC, "--allow-run-as-root", "--oversubscribe"

static int count_occurrences(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}


/* The metrics rows of two run folders: same steps and splits, values within 1e-6. */
static int same_metrics(const char *dir_a, const char *dir_b, int expect_rows)
{
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/metrics.csv", dir_a);
    snprintf(pb, sizeof pb, "%s/metrics.csv", dir_b);
    return lb_test_metrics_match(pa, pb, expect_rows, 1e-6);
}

static void test_two_processes_equal_one(void)
{
    char one[512], two[512];
    snprintf(one, sizeof one, "%s", path_in("one"));
    snprintf(two, sizeof two, "%s", path_in("two"));
    const char *single[] = {TRAIN_OPTIONS, "--steps", "6", "--out", one, NULL};
    run_result r = run(single);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *pair[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", "6", "--out", two, NULL};
    r = finish_program(start_program(pair), 120);
    EXPECT(r.code == 0, r);
    run_free(&r);
    CU_ASSERT_TRUE(same_metrics(one, two, 4));
    char path[600];
    snprintf(path, sizeof path, "%s/checkpoint.h5", two);
    CU_ASSERT_TRUE(exists(path));
    snprintf(path, sizeof path, "%s/checkpoint.h5.tmp", two);
    CU_ASSERT_FALSE(exists(path));
    /* A batch the ranks cannot share is refused with the reason. */
    const char *odd[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", "2", "--micro-batches", "3",
                         "--out", path_in("odd"), NULL};
    r = finish_program(start_program(odd), 120);
    EXPECT(r.code != 0 && contains(r.err, "not divisible by 2 ranks x --micro-batches 3"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("odd/config.json")));
}

/* An error on one rank (its data file is missing) ends the job, naming the rank. */
static void test_error_on_one_rank_ends_all(void)
{
    const char *args[] = {MPIRUN,       "-np",  "1", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", "100000", "--out",
                          path_in("e"), ":",    "-np", "1",             LB_LOOKBACK_BIN, "train", "--data",
                          path_in("missing.h5"), "--batch", "8", "--steps", "100000", "--out", path_in("e"), NULL};
    run_result r = finish_program(start_program(args), 60); /* a hang is killed: code -2 */
    EXPECT(r.code > 0 && contains(r.err, "rank 1") && contains(r.err, "missing.h5"), r);
    run_free(&r);
}

/* Ranks reading different data (another seed; another seq_len) are refused before any
 * step, naming the ranks and what differs; the run folder is left empty. Before, they
 * trained together and exited 0, and config.json recorded rank 0's checksum only. */
static void test_ranks_must_read_the_same_data(void)
{
    static const char *const seq_len[2] = {"24", "32"};
    for (int k = 0; k < 2; k++) {
        char other[512], dir[512];
        snprintf(other, sizeof other, "%s", path_in(k == 0 ? "recall-seed2.h5" : "recall-t32.h5"));
        const char *data[] = {"data", "--task", "recall", "--seq-len", seq_len[k], "--pairs", "4", "--key-vocab", "16",
                              "--value-vocab", "16", "--train", "512", "--val", "32", "--test", "16", "--seed",
                              k == 0 ? "2" : "1", "-o", other, "--quiet", NULL};
        run_result r = run(data);
        EXPECT(r.code == 0, r);
        run_free(&r);
        snprintf(dir, sizeof dir, "%s", path_in(k == 0 ? "differ-seed" : "differ-len"));
        const char *args[] = {MPIRUN, "-np", "1", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", "4", "--out", dir, ":",
                              "-np", "1", LB_LOOKBACK_BIN, "train", "--data", other, "--layers", "1", "--d-model", "16",
                              "--heads", "2", "--d-ff", "32", "--batch", "8", "--lr", "3e-3", "--schedule", "constant",
                              "--warmup", "2", "--threads", "1", "--eval-every", "3", "--eval-examples", "0", "--quiet",
                              "--steps", "4", "--out", dir, NULL};
        r = finish_program(start_program(args), 120);
        EXPECT(r.code != 0 && contains(r.err, "the ranks disagree on the data file's") && contains(r.err, "rank 1 has") &&
                   contains(r.err, "every rank must read the same data file"),
               r);
        run_free(&r);
        char path[600];
        snprintf(path, sizeof path, "%s/checkpoint.h5", dir);
        CU_ASSERT_FALSE(exists(path));
        snprintf(path, sizeof path, "%s/config.json", dir);
        CU_ASSERT_FALSE(exists(path));
    }
}

/* Under mpirun a usage error is one line and exit 2, without MPI_Abort's banner (before:
 * exit 1 or 2 with the banner); the commands that are not distributed run on rank 0
 * only: one table from eval, one file from data and predict, one JSON from gradcheck. */
static void test_usage_errors_and_rank0_commands(void)
{
    const char *bogus[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", "2", "--bogus", "1",
                           "--out", path_in("bogus"), NULL};
    run_result r = finish_program(start_program(bogus), 120);
    EXPECT(r.code == 2 && count_occurrences(r.err, "lookback train:") == 1 && contains(r.err, "unknown option '--bogus'") &&
               !contains(r.err, "MPI_ABORT"),
           r);
    run_free(&r);
    const char *empty[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "study", "--tasks", "", NULL};
    r = finish_program(start_program(empty), 120);
    EXPECT(r.code == 2 && count_occurrences(r.err, "lookback study:") == 1 && !contains(r.err, "MPI_ABORT"), r);
    run_free(&r);
    /* refused by rank 0 when it makes the study (an unknown task), while the others wait */
    const char *task[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "study", "--tasks", "nosuch", "--out",
                          path_in("no-task-study"), NULL};
    r = finish_program(start_program(task), 120);
    EXPECT(r.code == 2 && count_occurrences(r.err, "lookback study:") == 1 && contains(r.err, "unknown task 'nosuch'") &&
               !contains(r.err, "MPI_ABORT"),
           r);
    run_free(&r);
    const char *usage_eval[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "eval", "--bins", "99", NULL};
    r = finish_program(start_program(usage_eval), 120);
    EXPECT(r.code == 2 && count_occurrences(r.err, "lookback eval:") == 1, r);
    run_free(&r);
    /* Found after start-up (the batch does not split over the ranks): still one line from
     * rank 0, exit 2, no MPI_ABORT banner (mpirun's own note on a non-zero exit stays), and
     * no run folder left. */
    char odd_dir[512];
    snprintf(odd_dir, sizeof odd_dir, "%s", path_in("odd-batch"));
    const char *odd[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "train", "--data", recall_file(), "--layers", "1",
                         "--d-model", "16", "--heads", "2", "--d-ff", "32", "--batch", "7", "--threads", "1",
                         "--steps", "2", "--quiet", "--out", odd_dir, NULL};
    r = finish_program(start_program(odd), 120);
    EXPECT(r.code == 2 && count_occurrences(r.err, "lookback train:") == 1 && contains(r.err, "not divisible") &&
               !contains(r.err, "MPI_ABORT") && !contains(r.err, "rank 1:"),
           r);
    CU_ASSERT_FALSE(exists(odd_dir));
    run_free(&r);

    char dir[512], ck[600], out[512], data[512];
    snprintf(dir, sizeof dir, "%s", path_in("rank0"));
    const char *train[] = {TRAIN_OPTIONS, "--steps", "2", "--out", dir, NULL};
    r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    const char *eval[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "eval", "--checkpoint", ck, "--data", recall_file(),
                          "--threads", "1", NULL};
    r = finish_program(start_program(eval), 120);
    EXPECT(r.code == 0 && count_occurrences(r.out, "loss ") == 1 && count_occurrences(r.out, "(test split") == 1, r);
    run_free(&r);
    snprintf(out, sizeof out, "%s", path_in("rank0-pred.h5"));
    const char *predict[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "predict", "--checkpoint", ck, "--data",
                             recall_file(), "--threads", "1", "-o", out, NULL};
    r = finish_program(start_program(predict), 120);
    EXPECT(r.code == 0 && r.err && !contains(r.err, "exists") && exists(out), r);
    run_free(&r);
    snprintf(data, sizeof data, "%s", path_in("rank0-data.h5"));
    const char *gen[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "data", "--task", "spike", "--seq-len", "16", "--train",
                         "8", "--val", "4", "--test", "4", "-o", data, NULL};
    r = finish_program(start_program(gen), 120);
    EXPECT(r.code == 0 && count_occurrences(r.err, "wrote ") + count_occurrences(r.out, "wrote ") == 1 && exists(data), r);
    run_free(&r);
}

/* The pid of rank `rank` among mpirun's children (Open MPI starts local ranks itself). */
static pid_t find_rank(pid_t mpirun, int rank)
{
    char want[64];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = -1;
    while (d && found < 0 && (e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], stat[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        int ppid = -1;
        if (f) {
            if (fgets(stat, sizeof stat, f)) {
                char *close = strrchr(stat, ')');
                if (close)
                    sscanf(close + 2, "%*c %d", &ppid);
            }
            fclose(f);
        }
        if (ppid != mpirun)
            continue;
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        size_t n = 0;
        char *env = read_all(path, &n);
        for (size_t at = 0; env && at < n; at += strlen(env + at) + 1)
            if (strcmp(env + at, want) == 0)
                found = pid;
        free(env);
    }
    if (d)
        closedir(d);
    return found;
}

/* kill -9 of one rank mid-training: every rank ends (a hang is killed after 60 s, scaled)
 * and the rank is named. */
static void test_killed_rank_ends_all(void)
{
    char dir[512], ckpt[600];
    snprintf(dir, sizeof dir, "%s", path_in("killed"));
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.h5", dir);
    const char *args[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", "100000", "--out", dir, NULL};
    pid_t mpirun = start_program(args);
    CU_ASSERT_TRUE_FATAL(mpirun > 0);
    CU_ASSERT_TRUE(wait_for_file(ckpt, 60)); /* training has reached its first evaluation */
    pid_t victim = find_rank(mpirun, 1);
    CU_ASSERT_TRUE(victim > 0);
    if (victim > 0)
        kill(victim, SIGKILL);
    run_result r = finish_program(mpirun, 60);
    EXPECT(r.code > 0 && contains(r.err, "rank 1") && contains(r.err, "signal 9"), r);
    run_free(&r);
}

/* Ctrl-C on mpirun: one checkpoint, saved by rank 0 after a step all ranks finished;
 * resuming with 2 processes continues with the global batches of one process. */
static void test_interrupt_saves_one_checkpoint(void)
{
    char dir[512], ckpt[600], metrics[600];
    snprintf(dir, sizeof dir, "%s", path_in("interrupted"));
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.h5", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    /* On Ctrl-C mpirun sends SIGCONT, then SIGTERM, then SIGKILL, odls_base_sigkill_timeout
     * seconds apart (default 1): 3 s leaves the ranks time to finish the step and save. */
    const char *args[] = {MPIRUN, "--mca", "odls_base_sigkill_timeout", "3", "-np", "2", LB_LOOKBACK_BIN, TRAIN_OPTIONS,
                          "--steps", "100000", "--out", dir, NULL};
    pid_t mpirun = start_program(args);
    CU_ASSERT_TRUE_FATAL(mpirun > 0);
    CU_ASSERT_TRUE(wait_for_file(ckpt, 60));
    kill(mpirun, SIGINT);
    run_result r = finish_program(mpirun, 60);
    EXPECT(r.code != 0 && contains(r.err, "interrupted at step"), r);
    const char *at = strstr(r.err, "interrupted at step ");
    long long step = at ? atoll(at + strlen("interrupted at step ")) : 0;
    CU_ASSERT_EQUAL(count_occurrences(r.err, "interrupted at step"), 1); /* rank 0 alone reports and saves */
    run_free(&r);
    CU_ASSERT_TRUE_FATAL(step >= 3);
    /* Continue to step + 3 with 2 processes; compare with 2 processes trained straight there
     * (the same global batches in the same reduction order: the same bits, however many steps
     * ran before the interrupt; one process against two is compared above, over 6 steps). */
    char total[32], ref[512];
    snprintf(total, sizeof total, "%lld", step + 3);
    snprintf(ref, sizeof ref, "%s", path_in("straight"));
    const char *resume[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, "train", "--resume", dir, "--steps", total, "--quiet",
                            NULL};
    r = finish_program(start_program(resume), 120);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *straight[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, TRAIN_OPTIONS, "--steps", total, "--out", ref, NULL};
    r = finish_program(start_program(straight), 120);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* Rows at every third step and at the end, train and val each. */
    int rows = 2 * (int)((step + 3) / 3 + ((step + 3) % 3 != 0));
    CU_ASSERT_TRUE(same_metrics(ref, dir, rows));
}

/* Whether line [line, next) of summary.json holds a timing or a measured cost (seconds,
 * rates per second, MFU, peak memory). */
static int timing_line(const char *line, const char *next)
{
    static const char *const keys[] = {"seconds", "per_second", "\"mfu\"", "peak_memory"};
    for (int k = 0; k < 4; k++) {
        const char *at = strstr(line, keys[k]);
        if (at && at < next)
            return 1;
    }
    return 0;
}

/* summary.json without its timing lines. */
static char *summary_without_timing(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    char *text = read_all(path, NULL);
    if (!text)
        return NULL;
    char *out = text;
    for (char *line = text, *next; *line; line = next) {
        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        if (!timing_line(line, next)) {
            memmove(out, line, (size_t)(next - line));
            out += next - line;
        }
    }
    *out = '\0';
    return text;
}

/* compare under mpirun: whole models per rank, the report of one process on rank 0. */
static void test_compare_spreads_models(void)
{
    char one[512], two[512];
    snprintf(one, sizeof one, "%s", path_in("cmp-one"));
    snprintf(two, sizeof two, "%s", path_in("cmp-two"));
#define COMPARE_OPTIONS                                                                                             \
    "compare", "--train", recall_file(), "--models", "a=transformer,b=conv,c=transformer", "--eval", recall_file(), \
        "--budget", "0", "--steps", "3", "--layers", "1", "--d-model", "16", "--heads", "2", "--batch", "8",        \
        "--threads", "1", "--quiet"
    const char *single[] = {COMPARE_OPTIONS, "--out", one, NULL};
    run_result r = run(single);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *pair[] = {MPIRUN, "-np", "2", LB_LOOKBACK_BIN, COMPARE_OPTIONS, "--out", two, NULL};
    r = finish_program(start_program(pair), 120);
    EXPECT(r.code == 0 && count_occurrences(r.out, "report:") == 1, r);
    run_free(&r);
    char *a = summary_without_timing(one), *b = summary_without_timing(two);
    CU_ASSERT_TRUE(a && b && strstr(a, "\"name\": \"c\"") && strcmp(a, b) == 0);
    free(a);
    free(b);
    char path[600];
    snprintf(path, sizeof path, "%s/b/checkpoint.h5", two); /* trained by rank 1 */
    CU_ASSERT_TRUE(exists(path));
    snprintf(path, sizeof path, "%s/attention.png", two);   /* weights from rank 0's model a */
    CU_ASSERT_TRUE(exists(path));
}

/* study under mpirun: the jobs of each phase spread over the ranks, one report. */
static void test_study_spreads_jobs(void)
{
    char out[512], path[700];
    snprintf(out, sizeof out, "%s", path_in("study"));
    const char *args[] = {MPIRUN,    "-np",   "2",     LB_LOOKBACK_BIN, "study",           "--tasks", "local",
                          "--methods", "conv,lstm", "--seeds", "1",           "--budget", "0.3", "--eval-examples",
                          "8",       "--threads", "1", "--out",        out,               NULL};
    run_result r = finish_program(start_program(args), 120);
    EXPECT(r.code == 0 && count_occurrences(r.err, "study done") == 1 && contains(r.err, "2 of 2 cells"), r);
    /* both ranks ran jobs: the cells are jobs 0 and 1 of their phase */
    EXPECT(contains(r.err, "local.conv.seed-1:") && contains(r.err, "local.lstm.seed-1:"), r);
    run_free(&r);
    snprintf(path, sizeof path, "%s/study.md", out);
    CU_ASSERT_TRUE(exists(path));
    snprintf(path, sizeof path, "%s/jobs/local.conv.seed-1.json", out);
    CU_ASSERT_TRUE(exists(path));
    snprintf(path, sizeof path, "%s/jobs/local.lstm.seed-1.json", out);
    CU_ASSERT_TRUE(exists(path));
}
#endif

/* A build without MPI started by mpirun says so and fails. */
static void test_without_mpi_says_so(void)
{
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    const char *args[] = {TRAIN_OPTIONS, "--steps", "2", "--out", path_in("nompi"), NULL};
    run_result r = run(args);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    EXPECT(r.code == 1 && contains(r.err, "built without MPI") && one_error_line(&r, "train"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("nompi")));
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_distributed_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case with_mpi[] = {
#ifdef LB_MPIEXEC
        {"mpirun -np 2 lookback train equals one process", test_two_processes_equal_one},
        {"an error on one rank ends every rank, naming it", test_error_on_one_rank_ends_all},
        {"ranks reading different data are refused, naming the ranks", test_ranks_must_read_the_same_data},
        {"under mpirun: usage errors exit 2 in one line; eval, predict, data on rank 0 only",
         test_usage_errors_and_rank0_commands},
        {"kill -9 of one rank ends every rank, naming it", test_killed_rank_ends_all},
        {"Ctrl-C saves one checkpoint; resume continues the global batches", test_interrupt_saves_one_checkpoint},
        {"compare under mpirun: models spread over ranks, one report", test_compare_spreads_models},
        {"study under mpirun: jobs spread over ranks, one report", test_study_spreads_jobs},
#endif
        {NULL, NULL},
    };
    const lb_test_case without_mpi[] = {
        {"started by mpirun without MPI: says so", test_without_mpi_says_so},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_distributed", lb_dist_compiled() ? with_mpi : without_mpi);
    remove_tree(work_dir);
    return rc;
}
