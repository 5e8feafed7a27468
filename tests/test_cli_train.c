/* `lookback train`, `eval` and `compare` as a user runs them: run folders are never
 * overwritten, failed starts leave nothing behind, resumes are checked, Ctrl-C saves
 * a checkpoint, and metrics stay consistent across a resume. */
#include <ftw.h>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_support.h"

extern char **environ;

/* A small spike file: T = 48, clue 1..40 back, 256 / 32 / 32 sequences. */
static const char *spike_file(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", path_in("spike.h5"));
        const char *args[] = {"data", "--task", "spike", "--seq-len", "48", "--max-distance", "40", "--train", "256",
                              "--val", "32", "--test", "32", "-o", path, NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    return path;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static void test_failed_start_leaves_nothing(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("run-fail"));
    const char *args[] = {"train", "--data", spike_file(), "--model", "transformer", "--batch", "100000", "--out", dir, NULL};
    run_result r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "larger than the train split"), r);
    CU_ASSERT_FALSE(exists(dir)); /* the same --out can be used again */
    run_free(&r);
}

static void test_run_folder_rules(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("run-a")); /* path_in's buffers rotate */
    const char *train[] = {"train", "--data", spike_file(), "--model", "transformer", "--layers", "1", "--d-model", "16",
                           "--heads", "2", "--steps", "20", "--eval-every", "10", "--out", dir, "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char ck[600], cfg[600], metrics[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    CU_ASSERT_TRUE(exists(ck) && exists(cfg) && exists(metrics));
    size_t before_size;
    char *before = read_all(ck, &before_size);
    /* A second run into the same folder is refused and changes nothing. */
    r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "already holds a run"), r);
    run_free(&r);
    size_t after_size;
    char *after = read_all(ck, &after_size);
    CU_ASSERT_TRUE(before && after && before_size == after_size && memcmp(before, after, before_size) == 0);
    free(before);
    free(after);
    /* The data path is stored absolute. */
    char *json = read_all(cfg, NULL);
    CU_ASSERT_TRUE(contains(json, "\"data\": \"/"));
    free(json);
    /* --steps below the checkpoint, or a changed option, are errors. */
    const char *below[] = {"train", "--resume", dir, "--steps", "5", NULL};
    r = run(below);
    EXPECT(r.code == 1 && contains(r.err, "below the checkpoint's step 20"), r);
    run_free(&r);
    const char *changed[] = {"train", "--resume", dir, "--lr", "0.1", "--steps", "30", NULL};
    r = run(changed);
    EXPECT(r.code == 2 && contains(r.err, "--lr cannot change"), r);
    run_free(&r);
    /* Rows past the checkpoint's step (a run killed after an evaluation) are dropped on resume. */
    FILE *f = fopen(metrics, "a");
    fputs("25,train,9,9,9,9,9,9\n", f);
    fclose(f);
    const char *resume[] = {"train", "--resume", dir, "--steps", "30", "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char *rows = read_all(metrics, NULL);
    CU_ASSERT_FALSE(contains(rows, "25,train"));
    CU_ASSERT_TRUE(contains(rows, "20,val") && contains(rows, "30,val"));
    CU_ASSERT_TRUE(strncmp(rows, "step,split,", 11) == 0);
    free(rows);
    /* eval of the result, in JSON. */
    const char *eval[] = {"eval", "--checkpoint", ck, "--data", spike_file(), "--json", NULL};
    r = run(eval);
    EXPECT(r.code == 0 && contains(r.out, "\"accuracy\"") && contains(r.out, "\"distance_bins\""), r);
    run_free(&r);
    /* eval of an empty split is an error, not a zero. */
    char empty_file[512];
    snprintf(empty_file, sizeof empty_file, "%s", path_in("test-only.h5"));
    const char *gen[] = {"data", "--task", "spike", "--seq-len", "48", "--max-distance", "40", "--train", "0", "--val",
                         "0", "--test", "8", "-o", empty_file, NULL};
    r = run(gen);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *eval_empty[] = {"eval", "--checkpoint", ck, "--data", empty_file, "--split", "train", NULL};
    r = run(eval_empty);
    EXPECT(r.code == 1 && contains(r.err, "empty"), r);
    run_free(&r);
}

static void test_interrupt_saves_checkpoint(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("run-int"));
    const char *argv[] = {LB_LOOKBACK_BIN, "train", "--data", spike_file(), "--model", "lstm", "--hidden", "16",
                          "--steps", "1000000", "--checkpoint-every", "5", "--threads", "1", "--out", dir, "--quiet",
                          NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, path_in("int-stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    CU_ASSERT_EQUAL_FATAL(posix_spawn(&pid, LB_LOOKBACK_BIN, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    for (int i = 0; i < 3000 && !exists(ck); i++)
        usleep(10000);
    usleep(200000);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130);
    char *err = read_all(path_in("int-stderr.txt"), NULL);
    CU_ASSERT_TRUE(contains(err, "interrupted at step") && contains(err, "--resume"));
    free(err);
    /* The checkpoint is complete and the run continues from it. */
    const char *resume[] = {"train", "--resume", dir, "--steps", "1", "--quiet", NULL};
    run_result r = run(resume);
    EXPECT(r.code == 1 && contains(r.err, "below the checkpoint's step"), r); /* it did train some steps */
    run_free(&r);
    const char *eval[] = {"eval", "--checkpoint", ck, "--data", spike_file(), NULL};
    r = run(eval);
    EXPECT(r.code == 0 && contains(r.out, "accuracy"), r);
    run_free(&r);
}

static void test_compare_never_overwrites(void)
{
    char out[512];
    snprintf(out, sizeof out, "%s", path_in("report"));
    mkdir(out, 0777);
    char existing[600];
    snprintf(existing, sizeof existing, "%s/att", out);
    mkdir(existing, 0777);
    const char *args[] = {"compare", "--train", spike_file(), "--models", "att=transformer", "--eval", spike_file(),
                          "--out", out, "--budget", "1", NULL};
    run_result r = run(args);
    EXPECT(r.code == 1 && contains(r.err, "already exists"), r);
    run_free(&r);
    /* Names become folders: no path tricks, no empty names. */
    const char *escape[] = {"compare", "--train", spike_file(), "--models", "../x=transformer", "--eval", spike_file(),
                            "--out", path_in("r2"), NULL};
    r = run(escape);
    EXPECT(r.code == 2 && contains(r.err, "'../x'"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("r2")));
    const char *trailing[] = {"compare", "--train", spike_file(), "--models", "transformer,", "--eval", spike_file(),
                              "--out", path_in("r3"), NULL};
    r = run(trailing);
    EXPECT(r.code == 2 && contains(r.err, "empty name"), r);
    run_free(&r);
    /* An evaluation file the models cannot read is refused before any training. */
    char adding[512], r4[512];
    snprintf(adding, sizeof adding, "%s", path_in("adding.h5"));
    snprintf(r4, sizeof r4, "%s", path_in("r4"));
    const char *gen[] = {"data", "--task", "adding", "--seq-len", "32", "--train", "8", "--val", "8", "--test", "8",
                         "-o", adding, NULL};
    r = run(gen);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *mismatch[] = {"compare", "--train", spike_file(), "--models", "transformer", "--eval", adding, "--out",
                              r4, "--budget", "30", NULL};
    r = run(mismatch);
    EXPECT(r.code == 1 && contains(r.err, "adding.h5") && contains(r.err, "classes"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(r4)); /* refused before anything was trained or written */
}

static void test_config_file_is_strict(void)
{
    char cfg[512], r5[512];
    snprintf(cfg, sizeof cfg, "%s", path_in("bad.json"));
    snprintf(r5, sizeof r5, "%s", path_in("r5"));
    const char *text = "{\"model\": \"lstm\", \"hidden\": 8} trailing";
    write_all(cfg, text, strlen(text));
    const char *args[] = {"train", "--data", spike_file(), "--config", cfg, "--out", r5, NULL};
    run_result r = run(args);
    EXPECT(r.code != 0 && one_error_line(&r, "train") && contains(r.err, "bad.json"), r);
    run_free(&r);
    const char *text2 = "{\"model\": \"lstm\", \"hiden\": 8}";
    write_all(cfg, text2, strlen(text2));
    r = run(args);
    EXPECT(r.code != 0 && contains(r.err, "unknown key 'hiden'"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(r5));
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_train_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"a failed start leaves no files behind", test_failed_start_leaves_nothing},
        {"run folders: no overwrite, resume checks, metrics after resume, eval", test_run_folder_rules},
        {"SIGINT stops training with a checkpoint (exit 130)", test_interrupt_saves_checkpoint},
        {"compare never overwrites and checks its inputs first", test_compare_never_overwrites},
        {"config files are strict JSON with known keys", test_config_file_is_strict},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_train", cases);
    nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
