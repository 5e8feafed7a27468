/* The command line against file faults, as a user meets them: output paths that are
 * devices, FIFOs or folders; a disk that fills during data generation, checkpointing
 * and metrics writing (a small tmpfs when mounting is allowed, a file-size limit
 * otherwise); a damaged file that crashes libhdf5. Each gives one error line and
 * exit 1, no crash, and what was on disk before stays. */
#include <errno.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lab/plot.h"
#include "cli_support.h"

static int exists(const char *path) { return access(path, F_OK) == 0; }

static mode_t mode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_mode & S_IFMT : 0;
}


/* ---- output paths ---- */

static void test_outputs_that_are_not_files(void)
{
    char fifo[512], plot_fifo[512];
    snprintf(fifo, sizeof fifo, "%s", path_in("out.fifo"));
    snprintf(plot_fifo, sizeof plot_fifo, "%s", path_in("plot.svg"));
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0644), 0);
    CU_ASSERT_EQUAL_FATAL(mkfifo(plot_fifo, 0644), 0);
    /* data -o DEVICE --force: refused, the device stays a device. */
    const char *targets[] = {"/dev/null", fifo, work_dir};
    for (int i = 0; i < 3; i++) {
        mode_t before = mode_of(targets[i]);
        const char *args[] = {"data", "--seq-len", "16", "--train", "4", "--val", "2", "--test", "2", "-o",
                              targets[i], "--force", "--quiet", NULL};
        run_result r = run(args);
        EXPECT(r.code == 1 && one_error_line(&r, "data") && contains(r.err, "not a regular file") &&
                   contains(r.err, targets[i]),
               r);
        CU_ASSERT_EQUAL(mode_of(targets[i]), before);
        run_free(&r);
    }
    /* An empty path is a usage error for every command and option. */
    const char *const empties[][8] = {
        {"data", "-o", "", NULL},
        {"data", "info", "", NULL},
        {"train", "--data", small_data(), "--model", "lstm", "--out", "", NULL},
        {"train", "--resume", "", NULL},
        {"eval", "--checkpoint=", "--data", small_data(), NULL},
        {"compare", "--train", small_data(), "--models", "lstm", "--out", "", NULL},
        {"demo", "--out", "", NULL},
    };
    run_result r;
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        r = run(empties[i]);
        EXPECT(r.code == 2 && one_error_line(&r, empties[i][0]) && contains(r.err, "empty string"), r);
        run_free(&r);
    }
    /* train: a FIFO where metrics.csv goes is refused and left there. */
    char dir[512], metrics[600];
    snprintf(dir, sizeof dir, "%s", path_in("run-fifo"));
    mkdir(dir, 0755);
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(metrics, 0644), 0);
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                           "--d-model", "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "metrics.csv") &&
               contains(r.err, "FIFO"),
           r);
    CU_ASSERT_EQUAL(mode_of(metrics), S_IFIFO);
    run_free(&r);
    /* eval --attention-out and plots: the same rule. */
    const double x[2] = {0, 1}, y[2] = {0.5, 0.7};
    const double *xs[1] = {x}, *ys[1] = {y};
    const int n[1] = {2};
    const char *names[1] = {"a"};
    CU_ASSERT_EQUAL(lb_plot_curves(plot_fifo, "t", "x", "y", 1, names, n, xs, ys), LB_ERR_IO);
    CU_ASSERT_EQUAL(mode_of(plot_fifo), S_IFIFO);
    CU_ASSERT_EQUAL(mode_of(fifo), S_IFIFO);
    unlink(metrics);
    unlink(fifo);
    unlink(plot_fifo);
}

/* A symbolic link as an output, dangling or not, is refused with one line and left as it
 * was; its target is not touched and no file appears where a dangling link points. */
static void test_outputs_that_are_links(void)
{
    char target[512], link_ok[512], dangling[512], nowhere[512], readback[512];
    snprintf(target, sizeof target, "%s", path_in("target.h5"));
    snprintf(link_ok, sizeof link_ok, "%s", path_in("link.h5"));
    snprintf(dangling, sizeof dangling, "%s", path_in("dangling.h5"));
    snprintf(nowhere, sizeof nowhere, "%s", path_in("nowhere.h5"));
    CU_ASSERT_TRUE_FATAL(write_all(target, "old", 3));
    CU_ASSERT_EQUAL_FATAL(symlink(target, link_ok), 0);
    CU_ASSERT_EQUAL_FATAL(symlink(nowhere, dangling), 0);
    const char *links[] = {link_ok, dangling};
    for (int i = 0; i < 2; i++)
        for (int force = 0; force < 2; force++) {
            const char *args[] = {"data", "--seq-len", "16", "--train", "4", "--val", "2", "--test", "2", "-o",
                                  links[i], "--quiet", force ? "--force" : NULL, NULL};
            run_result r = run(args);
            EXPECT(r.code == 1 && one_error_line(&r, "data") && contains(r.err, "symbolic link") &&
                       contains(r.err, links[i]),
                   r);
            run_free(&r);
            struct stat sb;
            CU_ASSERT_TRUE(lstat(links[i], &sb) == 0 && S_ISLNK(sb.st_mode));
            ssize_t n = readlink(links[i], readback, sizeof readback - 1);
            CU_ASSERT_TRUE(n > 0);
            readback[n > 0 ? n : 0] = '\0';
            CU_ASSERT_STRING_EQUAL(readback, i == 0 ? target : nowhere);
        }
    size_t size = 0;
    char *text = read_all(target, &size);
    CU_ASSERT_TRUE(text && size == 3 && memcmp(text, "old", 3) == 0);
    free(text);
    CU_ASSERT_FALSE(exists(nowhere));
    /* The run folder's files too: a link where metrics.csv goes. */
    char dir[512], metrics[600];
    snprintf(dir, sizeof dir, "%s", path_in("run-link"));
    mkdir(dir, 0755);
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    CU_ASSERT_EQUAL_FATAL(symlink(target, metrics), 0);
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                           "--d-model", "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "metrics.csv") &&
               contains(r.err, "symbolic link"),
           r);
    run_free(&r);
    text = read_all(target, &size);
    CU_ASSERT_TRUE(text && size == 3);
    free(text);
    unlink(metrics);
    unlink(link_ok);
    unlink(dangling);
}

/* eval --split test reads that split alone: a file whose train split holds a bad token
 * id (refused by `data info` and training) still evaluates its test split, and the
 * split it reads is checked as ever. */
static void test_eval_reads_one_split(void)
{
    char data[512], dir[512], ck[600];
    snprintf(data, sizeof data, "%s", path_in("bad-train.h5"));
    snprintf(dir, sizeof dir, "%s", path_in("run-one-split"));
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                           "--d-model", "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    size_t size = 0;
    char *bytes = read_all(small_data(), &size);
    CU_ASSERT_TRUE_FATAL(bytes && write_all(data, bytes, size));
    free(bytes);
    const char *splits[] = {"/train/inputs", NULL};
    hid_t f = H5Fopen(data, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(f >= 0);
    hid_t d = H5Dopen2(f, splits[0], H5P_DEFAULT), space = H5Dget_space(d);
    hsize_t start[2] = {1, 2}, count[2] = {1, 1}, one = 1;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t mem = H5Screate_simple(1, &one, NULL);
    int32_t bad = 100000;
    CU_ASSERT_TRUE(H5Dwrite(d, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, &bad) >= 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
    const char *info[] = {"data", "info", data, NULL};
    r = run(info);
    EXPECT(r.code == 1 && contains(r.err, "/train/inputs"), r);
    run_free(&r);
    const char *eval_test[] = {"eval", "--checkpoint", ck, "--data", data, "--split", "test", NULL};
    r = run(eval_test);
    EXPECT(r.code == 0 && contains(r.out, "(test split, 16 examples)"), r);
    run_free(&r);
    const char *eval_train[] = {"eval", "--checkpoint", ck, "--data", data, "--split", "train", NULL};
    r = run(eval_train);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") && contains(r.err, "/train/inputs"), r);
    run_free(&r);
}

/* ---- full disks ---- */

/* Mounts a tmpfs of `kib` KiB at path; 0 when not permitted (then the caller skips). */
static int mount_small_disk(const char *path, int kib)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%dk", kib);
    mkdir(path, 0755);
    if (mount("tmpfs", path, "tmpfs", 0, opts) == 0)
        return 1;
    fprintf(stderr, "\n  SKIPPED: cannot mount a %d KiB tmpfs at %s (%s); full-disk cases need root\n", kib, path,
            strerror(errno));
    rmdir(path);
    return 0;
}

static void unmount_small_disk(const char *path)
{
    CU_ASSERT_EQUAL(umount2(path, MNT_DETACH), 0);
    CU_ASSERT_EQUAL(rmdir(path), 0);
}

/* Writes a file of zeros at path until the disk is full, less `keep` bytes. */
static void fill_disk(const char *path, long keep)
{
    FILE *f = fopen(path, "wb");
    static char block[4096];
    long written = 0;
    while (f && fwrite(block, 1, sizeof block, f) == sizeof block && fflush(f) == 0)
        written += (long)sizeof block;
    if (f)
        fclose(f);
    if (keep > 0)
        CU_ASSERT_EQUAL(truncate(path, written > keep ? written - keep : 0), 0);
}

static void test_data_on_a_full_disk(void)
{
    char disk[512]; /* path_in's buffers rotate: keep a copy */
    snprintf(disk, sizeof disk, "%s", path_in("disk-data"));
    if (!mount_small_disk(disk, 256))
        return;
    char out[600], tmp[700];
    snprintf(out, sizeof out, "%s/big.h5", disk);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    const char *args[] = {"data", "--seq-len", "256", "--train", "2000", "--val", "100", "--test", "100", "-o", out,
                          "--quiet", NULL};
    run_result r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "data") && contains(r.err, out) && contains(r.err, "No space left on device (the disk is full)"), r);
    CU_ASSERT_FALSE(exists(out));
    CU_ASSERT_FALSE(exists(tmp));
    run_free(&r);
    unmount_small_disk(disk);
}

static int64_t checkpoint_step(const char *path)
{
    int64_t step = -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = f >= 0 ? H5Aopen(f, "step", H5P_DEFAULT) : -1;
    if (a >= 0)
        H5Aread(a, H5T_NATIVE_INT64, &step);
    if (a >= 0)
        H5Aclose(a);
    if (f >= 0)
        H5Fclose(f);
    return step;
}

static void test_training_on_a_full_disk(void)
{
    char disk[512];
    snprintf(disk, sizeof disk, "%s", path_in("disk-train"));
    if (!mount_small_disk(disk, 1024))
        return;
    char dir[600], ck[700], metrics[700], filler[700], steps[16];
    snprintf(dir, sizeof dir, "%s/run", disk);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    snprintf(filler, sizeof filler, "%s/filler", disk);
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "4",
                           "--d-model", "4", "--steps", "4", "--batch", "4", "--eval-every", "2", "--out", dir,
                           "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    CU_ASSERT_EQUAL(checkpoint_step(ck), 4);
    char *rows = read_all(metrics, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rows);

    /* 1. The disk is full when a resumed run rewrites metrics.csv. */
    fill_disk(filler, 0);
    snprintf(steps, sizeof steps, "8");
    const char *resume[] = {"train", "--resume", dir, "--steps", steps, "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "metrics.csv"), r);
    run_free(&r);
    char *now = read_all(metrics, NULL);
    CU_ASSERT_TRUE(now && strcmp(now, rows) == 0);
    free(now);
    CU_ASSERT_EQUAL(checkpoint_step(ck), 4);

    /* 2. Room for the metrics but not for a checkpoint. */
    fill_disk(filler, 8192);
    r = run(resume);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "checkpoint") &&
               contains(r.err, "previous checkpoint") && !contains(r.err, "Segmentation"),
           r);
    run_free(&r);
    CU_ASSERT_EQUAL(checkpoint_step(ck), 4); /* the last good checkpoint */
    now = read_all(metrics, NULL);
    CU_ASSERT_TRUE(now && strncmp(now, rows, strlen(rows)) == 0); /* earlier rows kept */
    free(now);
    char ck_tmp[720];
    snprintf(ck_tmp, sizeof ck_tmp, "%s.tmp", ck);
    CU_ASSERT_FALSE(exists(ck_tmp));

    /* 3. With room again, the run resumes from the last good checkpoint. */
    unlink(filler);
    r = run(resume);
    EXPECT(r.code == 0, r);
    run_free(&r);
    CU_ASSERT_EQUAL(checkpoint_step(ck), 8);
    free(rows);
    unmount_small_disk(disk);
}

/* A file-size limit (RLIMIT_FSIZE, no root needed) makes a metrics row fail midway
 * through a run: the run stops with one line naming metrics.csv, and the file holds
 * whole rows only. */
static void test_metrics_write_fails_mid_run(void)
{
    char dir[512], metrics[600], script[2048];
    snprintf(dir, sizeof dir, "%s", path_in("run-limit"));
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    snprintf(script, sizeof script,
             "trap '' XFSZ; ulimit -f 4; exec '%s' train --data '%s' --model lstm --layers 1 --hidden 4 --d-model 4 "
             "--steps 200 --batch 4 --eval-every 1 --eval-examples 4 --checkpoint-every 1000 --out '%s' --quiet",
             LB_LOOKBACK_BIN, small_data(), dir);
    char command[2200];
    snprintf(command, sizeof command, "sh -c \"%s\" 2>'%s'", script, path_in("limit.err"));
    int status = system(command);
    char *err = read_all(path_in("limit.err"), NULL);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CU_ASSERT_TRUE(err && contains(err, "metrics.csv") && contains(err, "File too large") && count_lines(err) == 1);
    if (!err || !contains(err, "metrics.csv"))
        fprintf(stderr, "\n  status %d, stderr: %s\n", status, err ? err : "(none)");
    size_t size = 0;
    char *text = read_all(metrics, &size);
    if (!text || size <= 1000 || size > 2048)
        fprintf(stderr, "\n  metrics.csv: %zu bytes\n%s\n", size, text ? text : "(missing)");
    CU_ASSERT_TRUE_FATAL(text != NULL && size > 1000 && size <= 2048);
    CU_ASSERT_EQUAL(text[size - 1], '\n');
    int rows = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), rows++) {
        int commas = 0;
        for (char *c = line; *c; c++)
            commas += *c == ',';
        CU_ASSERT_EQUAL(commas, 16); /* lb_metrics_header: 17 columns */
    }
    CU_ASSERT_TRUE(rows > 10);
    free(text);
    free(err);
}

/* ---- a file that crashes libhdf5 ---- */

static void test_hostile_file(void)
{
    /* The earlier-format fixture with one byte changed (found by mutation): libhdf5
     * 1.10 crashes with SIGSEGV reading it. */
    size_t size = 0;
    char *bytes = read_all(lb_fixture_path("v1_data.h5"), &size);
    CU_ASSERT_TRUE_FATAL(bytes && size > 2073);
    bytes[2073] = (char)0xDA;
    const char *path = path_in("hostile.h5");
    CU_ASSERT_TRUE_FATAL(write_all(path, bytes, size));
    free(bytes);
    const char *info[] = {"data", "info", path, NULL};
    run_result r = run(info);
    EXPECT(r.code == 1 && one_error_line(&r, "data info") && contains(r.err, "damaged or hostile HDF5 file") &&
               contains(r.err, path),
           r);
    run_free(&r);
    const char *train[] = {"train", "--data", path, "--model", "lstm", "--out", path_in("run-hostile"), NULL};
    r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "damaged or hostile"), r);
    run_free(&r);
}

/* The earlier-format checkpoint fixture with a few bytes changed, as found by
 * mutation: offsets as `cmp -l` prints them (1-based) and the new byte values. */
typedef struct byte_edit {
    long offset;
    unsigned char value;
} byte_edit;

static const char *edited_checkpoint(const char *name, const byte_edit *edits, int n)
{
    size_t size = 0;
    char *bytes = read_all(lb_fixture_path("v1_checkpoint.h5"), &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    for (int i = 0; i < n; i++)
        if ((size_t)edits[i].offset <= size)
            bytes[edits[i].offset - 1] = (char)edits[i].value;
    const char *path = path_in(name);
    CU_ASSERT_TRUE(write_all(path, bytes, size));
    free(bytes);
    return path;
}

static void test_hostile_checkpoints(void)
{
    /* libhdf5 1.10 crashes (SIGSEGV) on the first and never returns on the second. */
    static const byte_edit crash[] = {{1781, 0244}, {2205, 0102}, {4609, 0177}, {6262, 031},
                                      {19511, 0154}, {19644, 0245}, {23055, 0256}};
    static const byte_edit hang[] = {{1003, 0275}, {2225, 025},   {2245, 0257},  {5513, 050},
                                     {10614, 073}, {11827, 0127}, {21583, 0174}, {22856, 012}};
    char crash_path[512], hang_path[512];
    snprintf(crash_path, sizeof crash_path, "%s", edited_checkpoint("crash.h5", crash, 7));
    snprintf(hang_path, sizeof hang_path, "%s", edited_checkpoint("hang.h5", hang, 8));
    setenv("LOOKBACK_HDF5_TIMEOUT", "2", 1);
    const char *eval_crash[] = {"eval", "--checkpoint", crash_path, "--data", lb_fixture_path("v1_data.h5"), NULL};
    run_result r = run(eval_crash);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") && contains(r.err, crash_path) &&
               contains(r.err, "damaged or hostile HDF5 file"),
           r);
    run_free(&r);
    const char *eval_hang[] = {LB_LOOKBACK_BIN, "eval", "--checkpoint", hang_path, "--data",
                               lb_fixture_path("v1_data.h5"), NULL};
    r = finish_program(start_program(eval_hang), 60); /* without the watchdog it would hang: killed, code -2 */
    EXPECT(r.code == 1 && one_error_line(&r, "eval") && contains(r.err, "did not finish within 2 s"), r);
    run_free(&r);
    unsetenv("LOOKBACK_HDF5_TIMEOUT");
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_files_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"outputs that are devices, FIFOs or folders are refused and left alone", test_outputs_that_are_not_files},
        {"outputs that are symbolic links are refused and left alone", test_outputs_that_are_links},
        {"eval --split reads that split alone", test_eval_reads_one_split},
        {"data generation on a full disk: one line, exit 1, no partial file", test_data_on_a_full_disk},
        {"training on a full disk keeps the last checkpoint and the metrics rows", test_training_on_a_full_disk},
        {"a metrics row that cannot be written stops the run, whole rows kept", test_metrics_write_fails_mid_run},
        {"a file that crashes libhdf5 gives one error line", test_hostile_file},
        {"checkpoints that crash or hang libhdf5 give one error line in time", test_hostile_checkpoints},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_files", cases);
    remove_tree(work_dir);
    return rc;
}
