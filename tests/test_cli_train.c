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
    /* The data file where the run would write best.h5: refused before any work, and the
     * folder holds only what it held before (no config.json, no metrics.csv). */
    char folder[512], data[600], cfg[600], metrics[600];
    snprintf(folder, sizeof folder, "%s", path_in("run-own-data"));
    mkdir(folder, 0755);
    snprintf(data, sizeof data, "%s/best.h5", folder);
    snprintf(cfg, sizeof cfg, "%s/config.json", folder);
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", folder);
    size_t size = 0;
    char *bytes = read_all(spike_file(), &size);
    CU_ASSERT_TRUE_FATAL(bytes && write_all(data, bytes, size));
    free(bytes);
    const char *own[] = {"train", "--data", data, "--model", "lstm", "--layers", "1", "--hidden", "4", "--d-model",
                         "4", "--steps", "2", "--batch", "4", "--out", folder, "--quiet", NULL};
    r = run(own);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "an input of this command"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(cfg));
    CU_ASSERT_FALSE(exists(metrics));
    CU_ASSERT_TRUE(exists(data));
}

/* A resume on a data file that changed since the run started (regenerated with another
 * seed: same shapes, other bytes; or another size) is refused in one line naming the file
 * and what changed, unless --accept-data-change says to go on. */
static void test_resume_notices_changed_data(void)
{
    char data[512], dir[512];
    snprintf(data, sizeof data, "%s", path_in("changing.h5"));
    snprintf(dir, sizeof dir, "%s", path_in("run-changing"));
    const char *gen1[] = {"data", "--seq-len", "16", "--train", "32", "--val", "8", "--test", "8", "--seed", "1",
                          "-o", data, "--quiet", NULL};
    run_result r = run(gen1);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *train[] = {"train", "--data", data, "--model", "lstm", "--layers", "1", "--hidden", "4", "--d-model",
                           "4", "--steps", "2", "--batch", "4", "--out", dir, "--quiet", NULL};
    r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* The same file again: resumes. */
    const char *resume3[] = {"train", "--resume", dir, "--steps", "3", "--quiet", NULL};
    r = run(resume3);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *gen2[] = {"data", "--seq-len", "16", "--train", "32", "--val", "8", "--test", "8", "--seed", "2",
                          "-o", data, "--quiet", "--force", NULL};
    r = run(gen2);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *resume4[] = {"train", "--resume", dir, "--steps", "4", "--quiet", NULL};
    r = run(resume4);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, data) &&
               contains(r.err, "changed since the run started") && contains(r.err, "CRC-32") &&
               contains(r.err, "--accept-data-change"),
           r);
    run_free(&r);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    CU_ASSERT_TRUE(exists(ck));
    /* Another size: said so. */
    const char *gen3[] = {"data", "--seq-len", "16", "--train", "400", "--val", "8", "--test", "8", "--seed", "1",
                          "-o", data, "--quiet", "--force", NULL};
    r = run(gen3);
    EXPECT(r.code == 0, r);
    run_free(&r);
    r = run(resume4);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "its size is"), r);
    run_free(&r);
    /* Accepted explicitly: continues, and config.json now records the new file. */
    const char *accept[] = {"train", "--resume", dir, "--steps", "4", "--accept-data-change", "--quiet", NULL};
    r = run(accept);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *resume5[] = {"train", "--resume", dir, "--steps", "5", "--quiet", NULL};
    r = run(resume5);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* Only with --resume. */
    const char *misplaced[] = {"train", "--data", data, "--accept-data-change", "--out", path_in("x"), NULL};
    r = run(misplaced);
    EXPECT(r.code == 2 && one_error_line(&r, "train"), r);
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
    /* A usage error is one whatever --out holds: exit 2, naming the option. */
    const char *bad_kind[] = {"train", "--data", spike_file(), "--model", "rnn", "--out", dir, NULL};
    const char *bad_batch[] = {"train", "--data", spike_file(), "--model", "lstm", "--batch", "0", "--out", dir, NULL};
    r = run(bad_kind);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--model"), r);
    run_free(&r);
    r = run(bad_batch);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--batch"), r);
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
    EXPECT(r.code == 2 && contains(r.err, "below the checkpoint's step 20"), r);
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
    /* A model without learned positions is evaluated on longer sequences than it saw. */
    char long_file[512];
    snprintf(long_file, sizeof long_file, "%s", path_in("long.h5"));
    const char *gen_long[] = {"data", "--task", "spike", "--seq-len", "2000", "--train", "0", "--val", "0", "--test",
                              "4", "-o", long_file, NULL};
    r = run(gen_long);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *eval_long[] = {"eval", "--checkpoint", ck, "--data", long_file, NULL};
    r = run(eval_long);
    EXPECT(r.code == 0 && contains(r.out, "4 examples") && contains(r.out, "accuracy"), r);
    run_free(&r);
}

/* 1 when dataset params/<name> holds the same values in both checkpoints. */
static int same_param(const char *a, const char *b, const char *name)
{
    char path[200];
    snprintf(path, sizeof path, "params/%s", name);
    lb_tensor *ta = lb_test_h5_read_path(a, path, LB_FLOAT64), *tb = lb_test_h5_read_path(b, path, LB_FLOAT64);
    int same = ta && tb && lb_tensor_numel(ta) == lb_tensor_numel(tb);
    for (int64_t i = 0; same && i < lb_tensor_numel(ta); i++)
        same = lb_tensor_flat(ta, i) == lb_tensor_flat(tb, i);
    lb_tensor_free(ta);
    lb_tensor_free(tb);
    return same;
}

static void test_init_from(void)
{
    char src[512], dir[512], ck_src[600], ck[600], cfg[600];
    snprintf(src, sizeof src, "%s", path_in("run-src"));
    snprintf(dir, sizeof dir, "%s", path_in("run-init"));
    snprintf(ck_src, sizeof ck_src, "%s/checkpoint.h5", src);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    const char *train[] = {"train", "--data", spike_file(), "--model", "transformer", "--layers", "1", "--d-model", "16",
                           "--heads", "2", "--pos", "learned", "--steps", "3", "--out", src, "--quiet", NULL};
    run_result r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* With lr 0 the new run's weights stay the checkpoint's; the model options come from it. */
    const char *init[] = {"train", "--data", spike_file(), "--init-from", ck_src, "--steps", "2", "--lr", "0",
                          "--schedule", "constant", "--warmup", "0", "--model-seed", "7", "--out", dir, NULL};
    r = run(init);
    EXPECT(r.code == 0 && contains(r.err, "from ") && contains(r.err, "run-src/checkpoint.h5"), r);
    run_free(&r);
    CU_ASSERT_TRUE(same_param(ck, ck_src, "embedding.weight"));
    CU_ASSERT_TRUE(same_param(ck, ck_src, "pos_embedding"));
    CU_ASSERT_TRUE(same_param(ck, ck_src, "blocks.0.attn.w_q"));
    CU_ASSERT_TRUE(same_param(ck, ck_src, "head.weight"));
    char *json = read_all(cfg, NULL);
    CU_ASSERT_TRUE(contains(json, "\"d-model\": 16") && contains(json, "\"pos\": \"learned\""));
    free(json);
    /* A run started this way resumes like any other. */
    const char *resume[] = {"train", "--resume", dir, "--steps", "4", "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* Errors: with --resume; another family; a missing file; options that change the shapes; other data. */
    const char *both[] = {"train", "--resume", dir, "--init-from", ck_src, NULL};
    r = run(both);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--init-from starts a new run"), r);
    run_free(&r);
    const char *family[] = {"train", "--data", spike_file(), "--init-from", ck_src, "--model", "lstm", "--out",
                            path_in("run-bad1"), NULL};
    r = run(family);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--model lstm differs"), r);
    run_free(&r);
    const char *missing[] = {"train", "--data", spike_file(), "--init-from", path_in("nothing.h5"), "--out",
                             path_in("run-bad2"), NULL};
    r = run(missing);
    EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "nothing.h5"), r);
    run_free(&r);
    const char *shape[] = {"train", "--data", spike_file(), "--init-from", ck_src, "--d-model", "32", "--out",
                           path_in("run-bad3"), NULL};
    r = run(shape);
    /* the model comes from the checkpoint: a model option beside it is a usage error */
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--d-model cannot be given with --init-from") &&
               contains(r.err, ck_src),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("run-bad3")));
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
    int saved = wait_for_file(ck, 30); /* its first checkpoint: some steps are done */
    CU_ASSERT_TRUE(saved);
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
    EXPECT(r.code == 2 && contains(r.err, "below the checkpoint's step"), r); /* it did train some steps */
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
    EXPECT(r.code == 1 && contains(r.err, "adding.h5") && contains(r.err, "holds the adding task but the model was trained on the spike task"), r);
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

/* --budget-clock cpu: the run trains for its budget of CPU seconds, records the clock
 * in config.json and the spent budget in its checkpoint; an unknown clock is a usage
 * error that leaves nothing behind. */
static void test_budget_clock(void)
{
    char dir[512], bad[512], cfg[600];
    snprintf(dir, sizeof dir, "%s", path_in("run-cpu"));
    snprintf(bad, sizeof bad, "%s", path_in("run-gpu"));
    const char *wrong[] = {"train", "--data", spike_file(), "--time-budget", "1", "--budget-clock", "gpu", "--out", bad,
                           NULL};
    run_result r = run(wrong);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--budget-clock") && contains(r.err, "'gpu'"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(bad));
    const char *args[] = {"train", "--data", spike_file(), "--model", "lstm", "--hidden", "8", "--steps", "1000000",
                          "--time-budget", "0.5", "--budget-clock", "cpu", "--threads", "1", "--out", dir, "--quiet",
                          NULL};
    r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    char *text = read_all(cfg, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(contains(text, "\"budget-clock\": \"cpu\"") || contains(text, "\"budget-clock\":\"cpu\""));
    free(text);
    /* The whole budget is spent: resuming with the same budget is refused, with a larger one it trains on. */
    const char *again[] = {"train", "--resume", dir, "--quiet", NULL};
    r = run(again);
    EXPECT(r.code == 2 && contains(r.err, "--time-budget"), r);
    run_free(&r);
    const char *more[] = {"train", "--resume", dir, "--time-budget", "0.8", "--quiet", NULL};
    r = run(more);
    EXPECT(r.code == 0, r);
    run_free(&r);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* eval and predict refuse a split name that is not train, val or test as a usage
 * error (exit 2) before reading any file; eval refuses --attention-out of a model
 * without attention before evaluating, naming the checkpoint. Nothing is written. */
static void test_eval_option_errors(void)
{
    const char *missing_ck = path_in("no-such-checkpoint.h5");
    const char *split[] = {"eval", "--checkpoint", missing_ck, "--data", spike_file(), "--split", "dev", NULL};
    run_result r = run(split);
    EXPECT(r.code == 2 && one_error_line(&r, "eval") && contains(r.err, "--split") && contains(r.err, "'dev'") &&
               contains(r.err, "train, val or test"),
           r);
    run_free(&r);
    /* predict reads the same option the same way, and writes nothing. */
    const char *pred_out = path_in("pred.h5");
    const char *predict[] = {"predict", "--checkpoint", missing_ck, "--data", spike_file(), "-o", pred_out,
                             "--split", "validation", NULL};
    r = run(predict);
    EXPECT(r.code == 2 && one_error_line(&r, "predict") && contains(r.err, "--split") &&
               contains(r.err, "'validation'") && contains(r.err, "train, val or test"),
           r);
    CU_ASSERT_FALSE(exists(pred_out));
    run_free(&r);

    const char *dir = path_in("lstm-run");
    const char *train[] = {"train", "--data", spike_file(), "--model", "lstm", "--hidden", "8", "--layers", "1",
                           "--steps", "1", "--batch", "8", "--eval-examples", "8", "--out", dir, "--quiet", NULL};
    r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char ck[512], att[512];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    snprintf(att, sizeof att, "%s", path_in("lstm-attention.h5"));
    const char *eval[] = {"eval", "--checkpoint", ck, "--data", spike_file(), "--attention-out", att, NULL};
    r = run(eval);
    EXPECT(r.code == 2 && one_error_line(&r, "eval") && contains(r.err, ck) && contains(r.err, "lstm") &&
               contains(r.err, "no attention weights"),
           r);
    EXPECT(r.out[0] == '\0', r); /* refused before any evaluation is printed */
    CU_ASSERT_FALSE(exists(att));
    run_free(&r);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_train_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"--budget-clock cpu: trained, recorded, resumed; a bad clock refused", test_budget_clock},
        {"a failed start leaves no files behind", test_failed_start_leaves_nothing},
        {"resume refuses a data file changed since the run started", test_resume_notices_changed_data},
        {"run folders: no overwrite, resume checks, metrics after resume, eval", test_run_folder_rules},
        {"SIGINT stops training with a checkpoint (exit 130)", test_interrupt_saves_checkpoint},
        {"--init-from starts a new run from a checkpoint's weights", test_init_from},
        {"compare never overwrites and checks its inputs first", test_compare_never_overwrites},
        {"config files are strict JSON with known keys", test_config_file_is_strict},
        {"eval, predict: unknown split is a usage error; --attention-out needs an attention model", test_eval_option_errors},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_train", cases);
    nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
