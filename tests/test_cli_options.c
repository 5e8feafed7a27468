/* The command line's model options come from one field list: --help, config.json,
 * gradcheck and checkpoints agree with it, checkpoints written before still load, and
 * a model without a position table reads sequences of any length. */
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "tensor/blas.h"
#include "cli_support.h"

extern char **environ;

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* `lookback data` into the work folder; returns the path (static per name). */
static const char *make_data(const char *name, const char *const *options)
{
    static char paths[8][512];
    static int used;
    char *path = paths[used++ % 8];
    snprintf(path, 512, "%s", path_in(name));
    const char *args[32] = {"data"};
    int n = 1;
    while (options[n - 1] && n < 28) {
        args[n] = options[n - 1];
        n++;
    }
    args[n++] = "-o";
    args[n++] = path;
    args[n++] = "--quiet";
    args[n] = NULL;
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    return path;
}

/* The file the 0.1.0 checkpoints in tests/fixtures were trained on. */
static const char *spike64(void)
{
    static const char *path;
    static const char *const options[] = {"--task", "spike", "--seq-len", "64", "--train", "64", "--val", "16",
                                          "--test", "16", NULL};
    if (!path)
        path = make_data("spike64.h5", options);
    return path;
}

/* Checkpoints written by lookback 0.1.0 evaluate to the figures 0.1.0 printed. */
static void test_old_checkpoints_evaluate_as_before(void)
{
    static const struct {
        const char *fixture, *line;
    } cases[] = {
        {"checkpoint_v1_transformer.h5", "loss 2.5396  accuracy 0.0000  (chance 0.1250)"},
        {"checkpoint_v1_lstm.h5", "loss 2.1038  accuracy 0.0625  (chance 0.1250)"},
    };
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"eval", "--checkpoint", lb_fixture_path(cases[i].fixture), "--data", spike64(), NULL};
        run_result r = run(args);
        EXPECT(r.code == 0 && contains(r.out, cases[i].line), r);
        run_free(&r);
    }
}

/* Train short, test long: the 0.1.0 transformer (no positions, max_seq_len 1024 in its
 * attributes) and LSTM evaluate on 1,500-event sequences. */
static void test_train_short_test_long(void)
{
    static const char *const options[] = {"--task", "spike", "--seq-len", "1500", "--train", "4", "--val", "4",
                                          "--test", "4", NULL};
    const char *long_file = make_data("spike1500.h5", options);
    const char *fixtures[] = {"checkpoint_v1_transformer.h5", "checkpoint_v1_lstm.h5"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"eval", "--checkpoint", lb_fixture_path(fixtures[i]), "--data", long_file, "--json", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0 && contains(r.out, "\"examples\":4"), r);
        run_free(&r);
    }
}

/* --help lists each model option with the families that use it and each family's default. */
static void test_help_from_the_field_list(void)
{
    const char *args[] = {"train", "--help", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    EXPECT(contains(r.out, "--layers             transformer blocks, LSTM layers, conv layers or Mamba blocks (default 2; conv 4)"), r);
    EXPECT(contains(r.out, "--window             keys each query sees, itself included [local] (default 16)"), r);
    EXPECT(contains(r.out, "--hidden             LSTM hidden_size [lstm] (default 128)"), r);
    EXPECT(contains(r.out, "--heads              attention heads (d-model must divide by it) [transformer, local, linear] (default 4)"), r);
    EXPECT(!contains(r.out, "Defaults shown are the transformer's"), r);
    run_free(&r);
    const char *gc[] = {"gradcheck", "--help", NULL};
    r = run(gc);
    EXPECT(r.code == 0 && contains(r.out, "--hidden") && contains(r.out, "(default 6)") && contains(r.out, "[conv]"), r);
    EXPECT(!contains(r.out, "--dropout"), r); /* the checked forward pass has no dropout */
    run_free(&r);
}

/* config.json holds the options the model uses, not the other families' fields. */
static void test_config_json_has_only_used_options(void)
{
    static const struct {
        const char *model, *has, *lacks[3];
    } cases[] = {
        {"transformer", "\"heads\"", {"\"window\"", "\"hidden\"", "\"kernel\""}},
        {"lstm", "\"hidden\"", {"\"heads\"", "\"window\"", "\"pos\""}},
    };
    for (int i = 0; i < 2; i++) {
        char dir[512], cfg[600];
        snprintf(dir, sizeof dir, "%s-%s", path_in("cfg"), cases[i].model);
        const char *args[] = {"train", "--data", spike64(), "--model", cases[i].model, "--d-model", "8", "--steps", "1",
                              "--batch", "4", "--eval-examples", "4", "--out", dir, "--quiet", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        char *text = read_all(cfg, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        CU_ASSERT_TRUE(contains(text, cases[i].has));
        CU_ASSERT_TRUE(contains(text, "\"d-model\": 8"));
        for (int k = 0; k < 3; k++)
            CU_ASSERT_FALSE(contains(text, cases[i].lacks[k]));
        free(text);
    }
}

/* gradcheck takes the same model options, with the same ranges and families. */
static void test_gradcheck_options_from_the_list(void)
{
    const char *wrong_family[] = {"gradcheck", "--model", "lstm", "--window", "3", NULL};
    run_result r = run(wrong_family);
    EXPECT(r.code == 2 && one_error_line(&r, "gradcheck") && contains(r.err, "--window does not apply to --model lstm"), r);
    run_free(&r);
    const char *range[] = {"gradcheck", "--model", "conv", "--kernel", "0", NULL};
    r = run(range);
    EXPECT(r.code == 2 && contains(r.err, "--kernel must be in [1, 1024], got 0"), r);
    run_free(&r);
    const char *ok[] = {"gradcheck", "--model", "lstm", "--hidden", "3", "--layers", "1", "--forget-bias", "1", NULL};
    r = run(ok);
    EXPECT(r.code == 0 && contains(r.out, "gradcheck lstm: layers 1, d-model 8, tie-embeddings 0, hidden 3, forget-bias 1") &&
               contains(r.out, "parameters passed"), r);
    run_free(&r);
}

/* Runs `lookback train` on spike64 with extra arguments (NULL-terminated) into dir. */
static run_result train_into(const char *dir, const char *const *extra)
{
    const char *args[48] = {"train", "--data", spike64(), "--d-model", "8", "--batch", "4", "--eval-examples", "4"};
    int n = 9;
    for (int i = 0; extra[i] && n < 44; i++)
        args[n++] = extra[i];
    args[n++] = "--out";
    args[n++] = dir;
    args[n] = NULL;
    return run(args);
}

/* An option the chosen model, optimizer or schedule does not use is refused, naming it
 * as typed and who uses it; nothing is created. */
static void test_unused_options_refused(void)
{
    static const struct {
        const char *args[8], *message;
    } cases[] = {
        {{"--model", "transformer", "--window", "8", NULL},
         "--window does not apply to --model transformer (only --model local uses it); drop it"},
        {{"--window", "8", NULL}, "--window does not apply to --model transformer"},
        {{"--model", "lstm", "--heads", "2", NULL},
         "--heads does not apply to --model lstm (only --model transformer, --model local and --model linear use it)"},
        {{"--model", "conv", "--hidden", "8", NULL}, "--hidden does not apply to --model conv (only --model lstm"},
        {{"--momentum", "0.9", NULL}, "--momentum does not apply to --optim adamw (only --optim sgd uses it)"},
        {{"--beta1", "0.5", "--optim", "sgd", NULL},
         "--beta1 does not apply to --optim sgd (only --optim adam and adamw use it)"},
        {{"--optim", "sgd", "--beta2", "0.9", NULL}, "--beta2 does not apply to --optim sgd"},
        {{"--schedule", "constant", "--min-lr-ratio", "0.5", NULL}, "--min-lr-ratio does not apply to --schedule constant"},
        {{"--gamma", "0.5", NULL}, "--gamma does not apply to --schedule cosine (only --schedule step uses it)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s-%zu", path_in("unused"), i);
        run_result r = train_into(dir, cases[i].args);
        EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, cases[i].message), r);
        run_free(&r);
        CU_ASSERT_FALSE(exists(dir));
    }
    /* Where the option is used, it is accepted. */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("used"));
    const char *ok[] = {"--model", "local", "--window", "8", "--optim", "sgd", "--momentum", "0.9", "--steps", "1", "--quiet", NULL};
    run_result r = train_into(dir, ok);
    EXPECT(r.code == 0, r);
    run_free(&r);
}

/* Ranges are printed with their true ends (INT64_MAX, not the double 2^63 one past it);
 * an empty value says the option is empty, and names no file only for a path option;
 * an option that does not apply without another is refused, not ignored. */
static void test_usage_messages(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("messages"));
    const char *seed[] = {"--model-seed", "-3", NULL};
    run_result r = train_into(dir, seed);
    EXPECT(r.code == 2 && one_error_line(&r, "train") &&
               contains(r.err, "--model-seed must be in [0, 9223372036854775807], got -3"),
           r);
    run_free(&r);
    const char *big[] = {"--layers", "65", NULL};
    r = train_into(dir, big);
    EXPECT(r.code == 2 && contains(r.err, "--layers must be in [1, 64], got 65"), r);
    run_free(&r);
    const char *tasks[] = {"study", "--tasks", "", NULL};
    r = run(tasks);
    EXPECT(r.code == 2 && one_error_line(&r, "study") && contains(r.err, "--tasks needs a value, got an empty string") &&
               !contains(r.err, "path"),
           r);
    run_free(&r);
    const char *out[] = {"train", "--data", spike64(), "--out", "", NULL};
    r = run(out);
    EXPECT(r.code == 2 && contains(r.err, "--out needs a value, got an empty string (an empty path names no file)"), r);
    run_free(&r);
    /* A checkpoint to evaluate. */
    const char *steps[] = {"--steps", "1", "--quiet", NULL};
    r = train_into(dir, steps);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    const char *examples[] = {"eval", "--checkpoint", ck, "--data", spike64(), "--attention-examples", "3", NULL};
    r = run(examples);
    EXPECT(r.code == 2 && one_error_line(&r, "eval") &&
               contains(r.err, "--attention-examples does not apply without --attention-out") && r.out[0] == '\0',
           r);
    run_free(&r);
}

/* A file without validation examples: the run says at its start that it will not
 * validate nor write best.h5 (before: silence, then "done" without them). */
static void test_empty_validation_split_said(void)
{
    static const char *const options[] = {"--task", "spike", "--seq-len", "32", "--train", "16", "--val", "0",
                                          "--test", "4", NULL};
    const char *data = make_data("noval.h5", options);
    char dir[512], best[600];
    snprintf(dir, sizeof dir, "%s", path_in("noval-run"));
    const char *args[] = {"train", "--data", data, "--d-model", "8", "--batch", "4", "--steps", "2", "--warmup", "0",
                          "--out", dir, NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && count_lines(r.err) >= 2 &&
               contains(r.err, "has no validation examples (its val split is empty): the run will not validate and "
                               "writes no best.h5") &&
               strstr(r.err, "no validation examples") < strstr(r.err, "training transformer"),
           r);
    run_free(&r);
    snprintf(best, sizeof best, "%s/best.h5", dir);
    CU_ASSERT_FALSE(exists(best));
}

/* Two options that set the same thing: refused, whichever way they are given. */
static void test_duplicate_options_refused(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("dup"));
    const char *twice[] = {"--lr", "1e-3", "--lr", "3e-3", NULL};
    run_result r = train_into(dir, twice);
    EXPECT(r.code == 2 && contains(r.err, "--lr is given twice ('1e-3', then '3e-3'); give it once"), r);
    run_free(&r);
    /* strtod reads hexadecimal; options take decimal numbers only */
    const char *hex[] = {"--lr", "0x10", NULL};
    r = train_into(dir, hex);
    EXPECT(r.code == 2 && contains(r.err, "--lr expects a decimal number, got '0x10'"), r);
    run_free(&r);
    const char *hex_field[] = {"--dropout", "0x0.1p1", NULL};
    r = train_into(dir, hex_field);
    EXPECT(r.code == 2 && contains(r.err, "--dropout expects a decimal number"), r);
    run_free(&r);
    const char *out_twice[] = {"--out", path_in("elsewhere"), NULL};
    r = train_into(dir, out_twice);
    EXPECT(r.code == 2 && contains(r.err, "--out is given twice"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(dir));
    const char *budgets[] = {"compare", "--train", spike64(), "--models", "lstm", "--eval", spike64(), "--out",
                             path_in("cmp-dup"), "--budget", "5", "--time-budget", "5", NULL};
    r = run(budgets);
    EXPECT(r.code == 2 && contains(r.err, "--budget and --time-budget set the same thing"), r);
    run_free(&r);
    const char *unused[] = {"compare", "--train", spike64(), "--models", "transformer,lstm", "--eval", spike64(), "--out",
                            path_in("cmp-unused"), "--kernel", "5", NULL};
    r = run(unused);
    EXPECT(r.code == 2 && contains(r.err, "--kernel does not apply"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("cmp-dup")) || exists(path_in("cmp-unused")));
}

/* Library field names in messages become the options a user types; contradicting
 * options are usage errors (exit 2). */
static void test_messages_name_options(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("msg"));
    const char *bad[] = {"--heads", "3", NULL};
    run_result r = train_into(dir, bad);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--d-model 8 is not divisible by --heads 3") &&
               !contains(r.err, "d_model") && !contains(r.err, "n_heads"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(dir));
}

/* --config follows the command line's rules: on --resume only the resumable options
 * may change, and an unused option is refused unless it holds the default. */
static void test_config_file_same_rules(void)
{
    char dir[512], cfg[512], cfg_path[600];
    snprintf(dir, sizeof dir, "%s", path_in("cfgrun"));
    snprintf(cfg, sizeof cfg, "%s", path_in("change.json"));
    const char *first[] = {"--model", "lstm", "--hidden", "8", "--steps", "2", "--quiet", NULL};
    run_result r = train_into(dir, first);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *lr_change = "{\"lr\": 0.1}";
    write_all(cfg, lr_change, strlen(lr_change));
    const char *resume[] = {"train", "--resume", dir, "--config", cfg, "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 2 && contains(r.err, "change.json: key lr cannot change when resuming"), r);
    run_free(&r);
    const char *more_steps = "{\"steps\": 3}";
    write_all(cfg, more_steps, strlen(more_steps));
    r = run(resume);
    EXPECT(r.code == 0, r);
    run_free(&r);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    char *json = read_all(cfg_path, NULL);
    CU_ASSERT_TRUE(contains(json, "\"steps\": 3"));
    free(json);
    /* A file carrying another family's field at its default changes nothing: accepted. */
    const char *template = "{\"model\": \"transformer\", \"window\": 0, \"steps\": 1}";
    write_all(cfg, template, strlen(template));
    char dir2[512];
    snprintf(dir2, sizeof dir2, "%s", path_in("cfgrun2"));
    const char *from_file[] = {"--config", cfg, "--quiet", NULL};
    r = train_into(dir2, from_file);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *set = "{\"model\": \"transformer\", \"window\": 8, \"steps\": 1}";
    write_all(cfg, set, strlen(set));
    snprintf(dir2, sizeof dir2, "%s", path_in("cfgrun3"));
    r = train_into(dir2, from_file);
    EXPECT(r.code == 2 && contains(r.err, "'window' in ") && contains(r.err, "does not apply to --model transformer"), r);
    run_free(&r);
    /* The same family named again keeps what the file set. */
    const char *hidden = "{\"model\": \"lstm\", \"hidden\": 12, \"steps\": 1}";
    write_all(cfg, hidden, strlen(hidden));
    snprintf(dir2, sizeof dir2, "%s", path_in("cfgrun4"));
    const char *again[] = {"--config", cfg, "--model", "lstm", "--quiet", NULL};
    r = train_into(dir2, again);
    EXPECT(r.code == 0, r);
    run_free(&r);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir2);
    json = read_all(cfg_path, NULL);
    CU_ASSERT_TRUE(contains(json, "\"hidden\": 12"));
    free(json);
}

/* A warm-up longer than the run and a time budget already spent are said. */
static void test_warmup_and_spent_budget(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("warm"));
    const char *args[] = {"--model", "lstm", "--steps", "3", "--warmup", "10", "--time-budget", "1000", NULL};
    run_result r = train_into(dir, args);
    EXPECT(r.code == 0 && contains(r.err, "--warmup 10 is not shorter than --steps 3"), r);
    run_free(&r);
    const char *resume[] = {"train", "--resume", dir, "--steps", "5", "--time-budget", "0.000001", "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 2 && contains(r.err, "its whole --time-budget of 1e-06 s"), r);
    run_free(&r);
}

/* A run killed before its first checkpoint left config.json only: --resume starts it
 * from step 0, and a new run may take the folder over; a folder in use says so. */
static void test_folder_left_by_a_kill(void)
{
    char dir[512], ck[600], lock[600];
    snprintf(dir, sizeof dir, "%s", path_in("killed"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    const char *args[] = {"--model", "lstm", "--steps", "2", "--quiet", NULL};
    run_result r = train_into(dir, args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    unlink(ck); /* as a kill before the first checkpoint leaves it */
    const char *resume[] = {"train", "--resume", dir, NULL};
    r = run(resume);
    EXPECT(r.code == 0 && contains(r.err, "stopped before its first checkpoint") && contains(r.err, "from step 0") &&
               contains(r.err, "steps 0..2"),
           r);
    run_free(&r);
    CU_ASSERT_TRUE(exists(ck));
    unlink(ck);
    r = train_into(dir, args);
    EXPECT(r.code == 0 && contains(r.err, "a new run takes the folder over"), r);
    run_free(&r);
    /* Another process holds the folder: in use, naming it, not "no checkpoint". */
    unlink(ck);
    CU_ASSERT_FALSE(exists(lock)); /* a finished run removes its lock file */
    int fd = open(lock, O_RDWR | O_CREAT, 0644);
    CU_ASSERT_TRUE_FATAL(fd >= 0 && flock(fd, LOCK_EX) == 0);
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    CU_ASSERT_TRUE(ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)len, 0) == len);
    r = run(resume);
    pid[len - 1] = '\0';
    EXPECT(r.code == 1 && contains(r.err, "in use by a running lookback process (pid ") && contains(r.err, pid), r);
    run_free(&r);
    close(fd);
}

/* SIGTERM stops a run with a checkpoint and exit status 128 + 15. */
static void test_sigterm_exit_status(void)
{
    char dir[512], ck[600];
    snprintf(dir, sizeof dir, "%s", path_in("term"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    const char *argv[] = {LB_LOOKBACK_BIN, "train", "--data", spike64(), "--model", "lstm", "--hidden", "8",
                          "--d-model", "8", "--batch", "4", "--steps", "1000000", "--checkpoint-every", "2",
                          "--threads", "1", "--out", dir, "--quiet", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    CU_ASSERT_EQUAL_FATAL(posix_spawn(&pid, LB_LOOKBACK_BIN, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    CU_ASSERT_TRUE(wait_for_file(ck, 30)); /* the run has checkpointed */
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143);
}

/* compare stopped by SIGTERM keeps its model folders and says how to go on; the same
 * command again continues the run (its budget counted across both) and writes the report. */
static void test_compare_sigterm_resumes(void)
{
    char out[512], ck[600], summary[600];
    snprintf(out, sizeof out, "%s", path_in("cmp-term"));
    snprintf(ck, sizeof ck, "%s/lstm/checkpoint.h5", out);
    snprintf(summary, sizeof summary, "%s/summary.json", out);
    const char *argv[] = {LB_LOOKBACK_BIN, "compare", "--train", spike64(), "--models", "lstm", "--eval", spike64(),
                          "--hidden", "8", "--d-model", "8", "--batch", "4", "--steps", "1000000", "--budget", "3",
                          "--checkpoint-every", "2", "--threads", "1", "--out", out, "--quiet", NULL};
    pid_t pid = start_program(argv);
    CU_ASSERT_TRUE_FATAL(pid > 0);
    CU_ASSERT_TRUE(wait_for_file(ck, 60)); /* the run has checkpointed */
    kill(pid, SIGTERM);
    run_result r = finish_program(pid, 60);
    EXPECT(r.code == 143, r);
    EXPECT(one_error_line(&r, "compare") && contains(r.err, "run the same lookback compare command again"), r);
    EXPECT(!contains(r.err, "lookback train --resume"), r);
    run_free(&r);
    CU_ASSERT_TRUE(wait_for_file(ck, 1)); /* kept */
    CU_ASSERT_FALSE(wait_for_file(summary, 0));
    r = run(argv + 1);
    EXPECT(r.code == 0 && contains(r.out, "lstm"), r);
    run_free(&r);
    CU_ASSERT_TRUE(wait_for_file(summary, 1));
    /* a finished comparison is not run again */
    r = run(argv + 1);
    EXPECT(r.code == 1 && contains(r.err, "already holds a report"), r);
    run_free(&r);
}

/* A run folder written by 0.1.0 (config.json with every option, checkpoint.h5)
 * resumes: the other families' fields it records hold their defaults. */
static void test_old_run_folder_resumes(void)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s", path_in("old-run"));
    mkdir(dir, 0777);
    size_t size;
    char *ck = read_all(lb_fixture_path("checkpoint_v1_lstm.h5"), &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
    snprintf(path, sizeof path, "%s/checkpoint.h5", dir);
    write_all(path, ck, size);
    free(ck);
    char *cfg = read_all(lb_fixture_path("config_v1_lstm.json"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    char *at = strstr(cfg, "\"DATA\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    char text[4096];
    snprintf(text, sizeof text, "%.*s\"%s\"%s", (int)(at - cfg), cfg, spike64(), at + 6);
    free(cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_all(path, text, strlen(text));
    const char *resume[] = {"train", "--resume", dir, "--steps", "4", "--eval-every", "2", NULL};
    run_result r = run(resume);
    EXPECT(r.code == 0 && contains(r.err, "steps 2..4"), r);
    run_free(&r);
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    char *metrics = read_all(path, NULL);
    CU_ASSERT_TRUE(contains(metrics, "\n4,val,"));
    free(metrics);
}

/* One check decides whether a checkpoint fits a data file, before any work, in eval
 * and compare alike: the task, inputs, regression vs classification, and the length
 * only for learned positions. */
static void test_checkpoint_data_compatibility(void)
{
    char dir[512], ck[600];
    snprintf(dir, sizeof dir, "%s", path_in("compat"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    const char *args[] = {"--model", "transformer", "--heads", "2", "--pos", "learned", "--steps", "1", "--quiet", NULL};
    run_result r = train_into(dir, args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* Same vocabulary size and classes, another task: refused, naming both. */
    static const char *const local_opts[] = {"--task", "local", "--seq-len", "64", "--train", "8", "--val", "8",
                                             "--test", "8", NULL};
    const char *local = make_data("local64.h5", local_opts);
    const char *eval_local[] = {"eval", "--checkpoint", ck, "--data", local, NULL};
    r = run(eval_local);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") &&
               contains(r.err, "holds the local task but the model was trained on the spike task"),
           r);
    run_free(&r);
    /* Learned positions: a table of max(1024, 64) rows; longer files are refused by name. */
    static const char *const long_opts[] = {"--task", "spike", "--seq-len", "1500", "--train", "4", "--val", "4",
                                            "--test", "4", NULL};
    const char *long_file = make_data("spike1500b.h5", long_opts);
    const char *eval_long[] = {"eval", "--checkpoint", ck, "--data", long_file, NULL};
    r = run(eval_long);
    EXPECT(r.code == 1 && contains(r.err, "sequences of 1500 positions are longer than the model's --pos learned "
                                          "table of 1024 positions"),
           r);
    run_free(&r);
    /* compare refuses the same before training anything. */
    char out[512];
    snprintf(out, sizeof out, "%s", path_in("compat-cmp"));
    const char *cmp[] = {"compare", "--train", spike64(), "--models", "transformer", "--pos", "learned", "--eval",
                         long_file, "--out", out, "--budget", "30", NULL};
    r = run(cmp);
    EXPECT(r.code == 1 && contains(r.err, "--pos learned table of 1024 positions") && !contains(r.err, "training"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(out));
    /* Regression vs classification, inputs: a 0.1.0 checkpoint (no task recorded) on the adding task. */
    static const char *const adding_opts[] = {"--task", "adding", "--seq-len", "32", "--train", "8", "--val", "8",
                                              "--test", "8", NULL};
    const char *adding = make_data("adding32.h5", adding_opts);
    const char *eval_adding[] = {"eval", "--checkpoint", lb_fixture_path("checkpoint_v1_lstm.h5"), "--data", adding, NULL};
    r = run(eval_adding);
    EXPECT(r.code == 1 && contains(r.err, "real-valued features but the model reads tokens"), r);
    run_free(&r);
}

/* The rate in the last progress line ("step N (P%, R/s, ...") of stderr, or -1. */
static double last_rate(const char *err)
{
    double rate = -1;
    for (const char *p = err ? strstr(err, ": step ") : NULL; p; p = strstr(p + 1, ": step ")) {
        const char *comma = strstr(p, "%, ");
        if (comma)
            rate = strtod(comma + 3, NULL);
    }
    return rate;
}

/* After --resume the rate counts only this process's steps: resuming 200 steps for one
 * more step must not report 201 steps' worth of speed. */
static void test_rate_after_resume(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("rate"));
    const char *args[] = {"--model", "lstm", "--hidden", "8", "--steps", "200", "--eval-every", "200", "--threads", "1",
                          NULL};
    run_result r = train_into(dir, args);
    double first = last_rate(r.err);
    EXPECT(r.code == 0 && first > 0, r);
    run_free(&r);
    const char *resume[] = {"train", "--resume", dir, "--steps", "201", NULL};
    r = run(resume);
    double again = last_rate(r.err);
    EXPECT(r.code == 0 && again > 0 && again < 20 * first, r);
    if (again >= 20 * first)
        fprintf(stderr, "\n  rate %.1f/s before, %.1f/s after resuming one step\n", first, again);
    run_free(&r);
}

/* config.json records what the run resolved: the thread count, version, commit, and the
 * data file's task and checksum; the run resumes with it. */
static void test_config_records_resolved_values(void)
{
    char dir[512], cfg[600];
    snprintf(dir, sizeof dir, "%s", path_in("record"));
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    const char *args[] = {"--model", "lstm", "--steps", "1", "--threads", "0", "--quiet", NULL};
    run_result r = train_into(dir, args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    size_t size;
    unsigned char *bytes = (unsigned char *)read_all(spike64(), &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    char crc[64], length[64];
    snprintf(crc, sizeof crc, "\"data_crc32\": \"%08lx\"", (unsigned long)crc32(crc32(0L, Z_NULL, 0), bytes, (uInt)size));
    snprintf(length, sizeof length, "\"data_bytes\": %zu", size);
    free(bytes);
    char *json = read_all(cfg, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    CU_ASSERT_TRUE(contains(json, "\"threads\": 0")); /* the option as given */
    CU_ASSERT_TRUE(contains(json, "\"run\": {"));
    CU_ASSERT_TRUE(contains(json, "\"threads\": 2")); /* resolved: OMP_NUM_THREADS of the test */
    CU_ASSERT_TRUE(contains(json, "\"version\": \"0.1.0\""));
    CU_ASSERT_TRUE(contains(json, "\"commit\": \""));
    CU_ASSERT_TRUE(contains(json, "\"data_task\": \"spike\""));
    CU_ASSERT_TRUE(contains(json, crc));
    CU_ASSERT_TRUE(contains(json, length));
    /* the BLAS it computed with: the kernels this process gets too, one BLAS thread */
    lb_blas_report blas;
    lb_blas_info(&blas);
    char core[96];
    snprintf(core, sizeof core, "\"core\": \"%s\"", blas.core);
    CU_ASSERT_TRUE(contains(json, "\"blas\": {"));
    CU_ASSERT_TRUE(contains(json, core));
    CU_ASSERT_TRUE(contains(json, "\"blas_threads\": 1"));
    CU_ASSERT_TRUE(contains(json, "\"attention_isa\": \""));
    free(json);
    /* lookback --version says the same */
    const char *version[] = {"--version", NULL};
    r = run(version);
    EXPECT(r.code == 0 && contains(r.out, "lookback 0.1.0") && contains(r.out, blas.core) &&
               contains(r.out, "1 BLAS thread") && contains(r.out, "fused attention"),
           r);
    run_free(&r);
    const char *resume[] = {"train", "--resume", dir, "--steps", "2", "--quiet", NULL};
    r = run(resume);
    EXPECT(r.code == 0, r);
    run_free(&r);
}

/* The number after `key` in text (e.g. "\"baseline_mse\":"), or NAN. */
static double number_after(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* Regression reports show the mean-predictor baseline where chance would be, and
 * eval --json carries every figure the text prints (baseline and chance included). */
static void test_reports_carry_baselines(void)
{
    static const char *const adding_opts[] = {"--task", "adding", "--seq-len", "24", "--train", "64", "--val", "16",
                                              "--test", "64", NULL};
    const char *adding = make_data("adding24.h5", adding_opts);
    char out[512], ck[600];
    snprintf(out, sizeof out, "%s", path_in("cmp-add"));
    snprintf(ck, sizeof ck, "%s/lstm/checkpoint.h5", out);
    const char *cmp[] = {"compare", "--train", adding, "--models", "lstm", "--eval", adding, "--out", out, "--budget",
                         "0", "--steps", "2", "--batch", "4", "--hidden", "8", "--d-model", "8", "--quiet", NULL};
    run_result r = run(cmp);
    EXPECT(r.code == 0 && contains(r.out, "predict mean"), r);
    run_free(&r);
    const char *text[] = {"eval", "--checkpoint", ck, "--data", adding, NULL};
    r = run(text);
    double printed = number_after(r.out, "(predicting the mean of these targets: ");
    EXPECT(r.code == 0 && printed > 0.1 && printed < 0.25, r); /* about 1/6 */
    run_free(&r);
    const char *json[] = {"eval", "--checkpoint", ck, "--data", adding, "--json", NULL};
    r = run(json);
    double in_json = number_after(r.out, "\"baseline_mse\":");
    EXPECT(r.code == 0 && fabs(in_json - printed) < 1e-6, r);
    run_free(&r);
    char summary[600];
    snprintf(summary, sizeof summary, "%s/summary.json", out);
    char *sum = read_all(summary, NULL);
    CU_ASSERT_TRUE(fabs(number_after(sum, "\"baseline_mse\": ") - printed) < 1e-4);
    free(sum);
    /* The two clocks of every table, in seconds, explained under it: the training's wall
     * time and the time on the clock --budget counts (here CPU seconds per thread). */
    char out2[512];
    snprintf(out2, sizeof out2, "%s", path_in("cmp-clocks"));
    const char *clocks[] = {"compare", "--train", adding, "--models", "lstm", "--eval", adding, "--out", out2,
                            "--budget", "600", "--budget-clock", "cpu", "--steps", "2", "--batch", "4", "--hidden", "8",
                            "--quiet", NULL};
    r = run(clocks);
    EXPECT(r.code == 0 && contains(r.out, "train wall budget used  time/step") && !contains(r.out, "train time") &&
               contains(r.out, "train wall: wall-clock seconds of training") &&
               contains(r.out, "budget used: seconds on the clock --budget counts, CPU seconds per thread") &&
               contains(r.out, "of a --budget of 600 s per model"),
           r);
    run_free(&r);
    snprintf(summary, sizeof summary, "%s/summary.json", out2);
    sum = read_all(summary, NULL);
    CU_ASSERT_TRUE(sum && contains(sum, "\"budget_clock\": \"cpu\"") && number_after(sum, "\"budget_seconds\": ") > 0);
    free(sum);
    /* Classification: the chance level printed is in the JSON too. */
    const char *cls[] = {"eval", "--checkpoint", lb_fixture_path("checkpoint_v1_lstm.h5"), "--data", spike64(),
                         "--json", NULL};
    r = run(cls);
    EXPECT(r.code == 0 && contains(r.out, "\"chance\":0.125"), r);
    run_free(&r);
}

/* Starts `lookback demo --quick --data-dir dir --out out` with stderr into err_path. */
static pid_t start_demo(const char *dir, const char *out, const char *err_path)
{
    const char *argv[] = {LB_LOOKBACK_BIN, "demo", "--quick", "--data-dir", dir, "--out", out, "--threads", "1", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    if (posix_spawn(&pid, LB_LOOKBACK_BIN, &fa, NULL, (char *const *)argv, environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* The demo's data cache: a cached file made with other options is regenerated (read
 * from the file's own attributes), and a second demo on the same cache waits. */
static void test_demo_cache(void)
{
    char dir[512], cached[600], err_a[512], err_b[512];
    snprintf(dir, sizeof dir, "%s", path_in("demo-cache"));
    mkdir(dir, 0777);
    snprintf(cached, sizeof cached, "%s/train.h5", dir);
    snprintf(err_a, sizeof err_a, "%s", path_in("demo-a.err"));
    snprintf(err_b, sizeof err_b, "%s", path_in("demo-b.err"));
    const char *other[] = {"data", "--task", "spike", "--seq-len", "64", "--train", "8", "--val", "8", "--test", "8",
                           "-o", cached, "--quiet", NULL};
    run_result r = run(other);
    EXPECT(r.code == 0, r);
    run_free(&r);
    pid_t a = start_demo(dir, path_in("demo-out-a"), err_a);
    CU_ASSERT_TRUE_FATAL(a > 0);
    char expect[700];
    snprintf(expect, sizeof expect, "regenerating %s: seq_len 64, not 256", cached);
    CU_ASSERT_TRUE(wait_for_text(err_a, expect, 30));
    pid_t b = start_demo(dir, path_in("demo-out-b"), err_b);
    CU_ASSERT_TRUE(b > 0);
    CU_ASSERT_TRUE(wait_for_text(err_b, "waiting for another lookback demo that is preparing the data in", 30));
    kill(a, SIGKILL);
    kill(b, SIGKILL);
    waitpid(a, NULL, 0);
    waitpid(b, NULL, 0);
    /* --quick and the full demo report into different folders by default. */
    const char *help[] = {"demo", "--help", NULL};
    r = run(help);
    EXPECT(r.code == 0 && contains(r.out, "lookback-demo-quick with") && contains(r.out, "--budget-clock"), r);
    run_free(&r);
    /* Each model trains for the same CPU time by default (a loaded machine tells the same
     * story), recorded in its config.json; --budget-clock wall is the other choice. */
    char out[512], cfg[600];
    snprintf(out, sizeof out, "%s", path_in("demo-cpu"));
    const char *demo[] = {"demo", "--quick", "--budget", "1", "--threads", "1", "--data-dir", dir, "--out", out,
                          "--quiet", NULL};
    r = run(demo);
    EXPECT(r.code == 0 && contains(r.out, "report: "), r);
    run_free(&r);
    const char *models[] = {"attention", "lstm", "lstm-short"};
    for (int m = 0; m < 3; m++) {
        snprintf(cfg, sizeof cfg, "%s/%s/config.json", out, models[m]);
        char *json = read_all(cfg, NULL);
        CU_ASSERT_TRUE(contains(json, "\"budget-clock\": \"cpu\""));
        CU_ASSERT_TRUE(contains(json, "\"time-budget\": 1"));
        free(json);
    }
    const char *bad[] = {"demo", "--budget-clock", "gpu", NULL};
    r = run(bad);
    EXPECT(r.code == 2 && one_error_line(&r, "demo") && contains(r.err, "expected wall or cpu"), r);
    run_free(&r);
}

/* Every command refuses an option given twice, however spelled (--x=v, -o and --out, an
 * option and its alias, hyphens or underscores): one line naming it, exit 2, nothing
 * written; values such as "-5" are not options. */
static void test_every_command_refuses_repeats(void)
{
    char q1[512], q2[512];
    snprintf(q1, sizeof q1, "%s", path_in("q1.h5"));
    snprintf(q2, sizeof q2, "%s", path_in("q2.h5"));
    const struct {
        const char *args[16], *command, *message;
    } cases[] = {
        {{"eval", "--checkpoint", "ck.h5", "--split", "val", "--split", "test", NULL}, "eval",
         "--split is given twice ('val', then 'test'); give it once"},
        {{"predict", "--checkpoint", "ck.h5", "--data", spike64(), "-o", q1, "-o", q2, NULL}, "predict",
         "-o is given twice"},
        {{"predict", "--checkpoint", "ck.h5", "--data", spike64(), "-o", q1, "--out", q2, NULL}, "predict",
         "-o and --out are the same option, given twice"},
        {{"stream", "--checkpoint", "ck.h5", "--every", "2", "--every=3", NULL}, "stream",
         "--every is given twice ('2', then '3')"},
        {{"stream", "--checkpoint", "ck.h5", "--json", "--json", NULL}, "stream", "--json is given twice; give it once"},
        {{"data", "--seq-len", "16", "--seq-len", "32", "-o", q1, NULL}, "data", "--seq-len is given twice"},
        {{"data", "--train", "2", "--n-train", "3", "-o", q1, NULL}, "data",
         "--train and --n-train are the same option, given twice"},
        {{"data", "--seq_len", "16", "--seq-len", "32", "-o", q1, NULL}, "data",
         "--seq_len and --seq-len are the same option"},
        {{"gradcheck", "--model", "lstm", "--model", "conv", NULL}, "gradcheck", "--model is given twice"},
        {{"compare", "--train", "a.h5", "--train", "b.h5", "--models", "lstm", "--eval", "a.h5", "--out", q1, NULL},
         "compare", "--train is given twice"},
        {{"demo", "--out", q1, "--out", q2, NULL}, "demo", "--out is given twice"},
        {{"study", "--seeds", "1", "--seeds", "2", "--out", q1, NULL}, "study", "--seeds is given twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run(cases[i].args);
        EXPECT(r.code == 2 && one_error_line(&r, cases[i].command) && contains(r.err, cases[i].message), r);
        run_free(&r);
    }
    CU_ASSERT_FALSE(exists(q1));
    CU_ASSERT_FALSE(exists(q2));
    /* the same value twice after different options, and a negative value, are not repeats */
    const char *fine[] = {"data", "--seq-len", "16", "--max-distance", "8", "--train", "8", "--val", "8", "--test", "8",
                          "--seed", "8", "--quiet", "-o", q1, NULL};
    run_result r = run(fine);
    EXPECT(r.code == 0, r);
    run_free(&r);
    unlink(q1);
}

/* A --config file holding one key twice is refused naming the key (the JSON library would
 * keep the last one); equal keys in different objects are fine. A FIFO or device named
 * by --config is refused at once, not read (it would wait for a writer). */
static void test_config_repeated_keys_and_fifos(void)
{
    char dir[512], config[512], fifo[512];
    snprintf(dir, sizeof dir, "%s", path_in("cfg-dup"));
    snprintf(config, sizeof config, "%s", path_in("dup.json"));
    snprintf(fifo, sizeof fifo, "%s", path_in("config.fifo"));
    static const char twice[] = "{\"steps\": 3, \"steps\": 4}";
    CU_ASSERT_TRUE(write_all(config, twice, sizeof twice - 1));
    const char *with_config[] = {"--config", config, NULL};
    run_result r = train_into(dir, with_config);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, config) &&
               contains(r.err, "key 'steps' is given twice"),
           r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(dir));
    /* the same key spelt with an escape, and a key cut by a NUL, are the same key to json-c */
    static const char escaped[] = "{\"steps\": 3, \"st\\u0065ps\": 4}";
    CU_ASSERT_TRUE(write_all(config, escaped, sizeof escaped - 1));
    r = train_into(dir, with_config);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "key 'steps' is given twice"), r);
    run_free(&r);
    static const char cut[] = "{\"steps\": 3, \"steps\\u0000x\": 4}";
    CU_ASSERT_TRUE(write_all(config, cut, sizeof cut - 1));
    r = train_into(dir, with_config);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "a key holds a NUL character"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(dir));
    static const char nested[] = "{\"steps\": 2, \"run\": {\"steps\": 5, \"blas\": {\"steps\": 1}}}";
    CU_ASSERT_TRUE(write_all(config, nested, sizeof nested - 1));
    const char *quiet_config[] = {"--config", config, "--quiet", NULL};
    r = train_into(dir, quiet_config);
    EXPECT(r.code == 0, r);
    run_free(&r);
    remove_tree(dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    const char *args[] = {LB_LOOKBACK_BIN, "train", "--data", spike64(), "--config", fifo, "--out", dir, NULL};
    r = finish_program(start_program(args), 10);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, fifo) && contains(r.err, "not a regular file"),
           r);
    run_free(&r);
    const char *device[] = {"--config", "/dev/zero", NULL};
    r = train_into(dir, device);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "/dev/zero: not a regular file"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(dir));
}

/* The command word itself: an unknown one is one line and a hint, 'help COMMAND' is that
 * command's help, and --version or --help take no argument. */
static void test_command_word(void)
{
    const char *bogus[] = {"bogus", NULL};
    run_result r = run(bogus);
    EXPECT(r.code == 2 && count_lines(r.err) == 1 && contains(r.err, "unknown command 'bogus'") &&
               contains(r.err, "see lookback --help") && !r.out[0],
           r);
    run_free(&r);
    /* bytes a terminal would act on (escape sequences, bell, newline) or that are not UTF-8
     * are shown as \xHH in every error line; UTF-8 names are kept */
    const char *escape_word[] = {"bo\x1bgus\xff", NULL};
    r = run(escape_word);
    EXPECT(r.code == 2 && count_lines(r.err) == 1 && contains(r.err, "'bo\\x1bgus\\xff'") && !strchr(r.err, 0x1b), r);
    run_free(&r);
    const char *escape_option[] = {"eval", "--split", "v\x1b[31m\nal", NULL};
    r = run(escape_option);
    EXPECT(r.code == 2 && count_lines(r.err) == 1 && contains(r.err, "'v\\x1b[31m\\x0aal'"), r);
    run_free(&r);
    const char *utf8_path[] = {"data", "info", "no-fil\xc3\xa9.h5", NULL};
    r = run(utf8_path);
    EXPECT(r.code != 0 && count_lines(r.err) == 1 && contains(r.err, "no-fil\xc3\xa9.h5"), r);
    run_free(&r);
    const char *help_train[] = {"help", "train", NULL};
    r = run(help_train);
    EXPECT(r.code == 0 && contains(r.out, "usage: lookback train") && contains(r.out, "--init-from"), r);
    run_free(&r);
    const char *help_bogus[] = {"help", "bogus", NULL};
    r = run(help_bogus);
    EXPECT(r.code == 2 && count_lines(r.err) == 1 && contains(r.err, "unknown command 'bogus'"), r);
    run_free(&r);
    const char *version[] = {"--version", "extra", NULL};
    r = run(version);
    EXPECT(r.code == 2 && count_lines(r.err) == 1 && contains(r.err, "--version takes no argument") && !r.out[0], r);
    run_free(&r);
}

/* LOOKBACK_HDF5_TIMEOUT is checked before any file is read: a value that is not a number
 * of seconds in [1, 86400] is one usage error naming the variable; a good one is used. */
static void test_hdf5_timeout_checked(void)
{
    static const char *const bad[] = {"abc", "0", "-1", "", "0.001", "1e9", "5s"};
    const char *info[] = {"data", "info", spike64(), NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("LOOKBACK_HDF5_TIMEOUT", bad[i], 1);
        run_result r = run(info);
        EXPECT(r.code == 2 && one_error_line(&r, "data") && contains(r.err, "LOOKBACK_HDF5_TIMEOUT") &&
                   contains(r.err, "[1, 86400]"),
               r);
        run_free(&r);
    }
    setenv("LOOKBACK_HDF5_TIMEOUT", "30", 1);
    run_result r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "spike"), r);
    run_free(&r);
    unsetenv("LOOKBACK_HDF5_TIMEOUT");
}

/* Usage errors found after a file is read still exit 2: a run to resume that is not there,
 * a model option beside --init-from (the model comes from the checkpoint). */
static void test_usage_errors_after_reading(void)
{
    const char *resume[] = {"train", "--resume", path_in("nope"), NULL};
    run_result r = run(resume);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "no run to resume"), r);
    run_free(&r);
    char dir[512], ck[600];
    snprintf(dir, sizeof dir, "%s", path_in("init-src"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    const char *small[] = {"--heads", "2", "--steps", "1", "--quiet", NULL};
    r = train_into(dir, small);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *init[] = {"train", "--data", spike64(), "--init-from", ck, "--heads", "4", "--out", path_in("init-dst"),
                          NULL};
    r = run(init);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--heads cannot be given with --init-from"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("init-dst")));
}

/* compare refuses an evaluation file named twice, however spelled. */
static void test_compare_eval_file_once(void)
{
    char twice[1200], spelled[1200];
    snprintf(twice, sizeof twice, "%s,%s", spike64(), spike64());
    snprintf(spelled, sizeof spelled, "%s,%s/./spike64.h5", spike64(), work_dir);
    const char *lists[] = {twice, spelled};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"compare", "--train", spike64(), "--models", "lstm", "--eval", lists[i], "--out",
                              path_in("cmp-twice"), NULL};
        run_result r = run(args);
        EXPECT(r.code == 2 && one_error_line(&r, "compare") && contains(r.err, "--eval names the file") &&
                   contains(r.err, "twice"),
               r);
        run_free(&r);
    }
    CU_ASSERT_FALSE(exists(path_in("cmp-twice")));
}


/* A number as docs/data.md writes it: "1,048,576", "2^20", "1e-6", "65536". */
static int doc_number(const char *text, size_t len, double *out)
{
    char buf[64];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < sizeof buf; i++)
        if (text[i] != ',')
            buf[n++] = text[i];
    buf[n] = '\0';
    char *end = NULL;
    double v = strtod(buf, &end);
    if (end == buf)
        return 0;
    if (*end == '^') {
        double e = strtod(end + 1, &end);
        v = pow(v, e);
    }
    while (*end == ' ')
        end++;
    *out = v;
    return *end == '\0';
}

/* The generator options' ranges in docs/data.md's table are the ones the code enforces
 * (as `lookback data --help` prints them from the option table), row by row. */
static void test_data_doc_ranges_match_the_code(void)
{
    char doc_path[1024];
    snprintf(doc_path, sizeof doc_path, "%s/docs/data.md", LB_SOURCE_DIR);
    char *doc = read_all(doc_path, NULL);
    const char *help_args[] = {"data", "--help", NULL};
    run_result help = run(help_args);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    EXPECT(help.code == 0, help);
    int compared = 0;
    for (const char *line = doc; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "| `", 3) != 0)
            continue;
        const char *name = line + 3, *name_end = strchr(name, '`');
        const char *eol = strchr(line, '\n');
        if (!name_end || (eol && name_end > eol) || name_end[1] != ' ')
            continue;
        /* the last cell: "a .. b" with two numbers */
        const char *cell_end = eol ? eol : line + strlen(line);
        while (cell_end > line && (cell_end[-1] == ' ' || cell_end[-1] == '|'))
            cell_end--;
        const char *cell = cell_end;
        while (cell > line && cell[-1] != '|')
            cell--;
        while (*cell == ' ')
            cell++;
        const char *dots = strstr(cell, " .. ");
        double lo, hi;
        if (!dots || dots > cell_end || !doc_number(cell, (size_t)(dots - cell), &lo))
            continue;
        const char *hi_text = dots + 4, *hi_end = hi_text;
        while (hi_end < cell_end && *hi_end != ' ' && *hi_end != '(' && *hi_end != ',')
            hi_end++;
        if (hi_end < cell_end && *hi_end == ',' && isdigit((unsigned char)hi_end[1])) /* 1,048,576 */
            while (hi_end < cell_end && (isdigit((unsigned char)*hi_end) || *hi_end == ','))
                hi_end++;
        if (!doc_number(hi_text, (size_t)(hi_end - hi_text), &hi))
            continue;
        /* the option's line in --help: "  --seq-len   ... [2..1048576" */
        char flag[80];
        snprintf(flag, sizeof flag, "  --%.*s ", (int)(name_end - name), name);
        for (char *c = flag; *c; c++)
            if (*c == '_')
                *c = '-';
        const char *at = help.out ? strstr(help.out, flag) : NULL;
        CU_ASSERT_PTR_NOT_NULL(at);
        if (!at) {
            fprintf(stderr, "\n  docs/data.md names %s, which data --help does not list", flag);
            continue;
        }
        const char *range = strchr(at, '[');
        const char *help_eol = strchr(at, '\n');
        while (range && help_eol && range < help_eol && !isdigit((unsigned char)range[1]))
            range = strchr(range + 1, '[');
        CU_ASSERT_TRUE(range && range < help_eol);
        if (!range || range >= help_eol)
            continue;
        double code_lo = strtod(range + 1, NULL), code_hi = strtod(strstr(range, "..") + 2, NULL);
        CU_ASSERT_DOUBLE_EQUAL(lo, code_lo, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(hi, code_hi, 1e-12);
        if (lo != code_lo || hi != code_hi)
            fprintf(stderr, "\n  docs/data.md gives %s as %g .. %g, the code as %g .. %g", flag, lo, hi, code_lo, code_hi);
        compared++;
    }
    CU_ASSERT_TRUE(compared >= 12);
    /* the reader's limit on a file's seq_len, as docs/data.md states it */
    CU_ASSERT_TRUE(contains(doc, "[2, 2^20] for a generated task") && contains(doc, "[1, 2^20] for a CSV event file"));
    run_free(&help);
    free(doc);
}

/* Every source file or page a --help text names exists in the source tree (a file that
 * moved is a help text to fix), and study's recipes are where its help says. */
static void test_help_names_existing_files(void)
{
    static const char *const commands[][3] = {
        {"--help", NULL, NULL},    {"demo", "--help", NULL},      {"compare", "--help", NULL},
        {"data", "--help", NULL},  {"data", "csv", "--help"},     {"data", "text", "--help"},
        {"data", "info", "--help"}, {"train", "--help", NULL},    {"eval", "--help", NULL},
        {"gradcheck", "--help", NULL}, {"study", "--help", NULL}, {"predict", "--help", NULL},
        {"stream", "--help", NULL}, {"generate", "--help", NULL},
    };
    static const char *const rooms[] = {"cli/", "lab/", "data/", "train/", "layers/", "tensor/", "autograd/",
                                        "optim/", "kernels/", "docs/", "examples/", "python/", "bench/", "tests/"};
    int named = 0;
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        const char *args[4] = {commands[c][0], commands[c][1], commands[c][2], NULL};
        run_result r = run(args);
        EXPECT(r.code == 0 && r.out && strlen(r.out) > 100, r);
        for (const char *p = r.out; p && *p; p++) {
            if (p != r.out && (isalnum((unsigned char)p[-1]) || p[-1] == '/' || p[-1] == '_'))
                continue;
            for (size_t k = 0; k < sizeof rooms / sizeof rooms[0]; k++) {
                size_t n = strlen(rooms[k]);
                if (strncmp(p, rooms[k], n) != 0)
                    continue;
                size_t len = n;
                while (isalnum((unsigned char)p[len]) || p[len] == '_' || p[len] == '-' || p[len] == '/' ||
                       (p[len] == '.' && isalpha((unsigned char)p[len + 1])))
                    len++;
                if (!memchr(p + n, '.', len - n))
                    continue; /* a folder or an HDF5 path such as train/inputs */
                char path[1024];
                snprintf(path, sizeof path, "%s/%.*s", LB_SOURCE_DIR, (int)len, p);
                named++;
                CU_ASSERT_TRUE(exists(path));
                if (!exists(path))
                    fprintf(stderr, "\n  lookback %s %s names %.*s, which is not in the source tree", args[0],
                            args[1] ? args[1] : "", (int)len, p);
            }
        }
        if (strcmp(commands[c][0], "study") == 0) {
            EXPECT(contains(r.out, "one table in lab/recipes.c") && !contains(r.out, "cli/study.c"), r);
            char recipes[1024];
            snprintf(recipes, sizeof recipes, "%s/lab/recipes.c", LB_SOURCE_DIR);
            char *text = read_all(recipes, NULL);
            CU_ASSERT_TRUE(text && contains(text, "lb_recipes[]"));
            free(text);
        }
        run_free(&r);
    }
    CU_ASSERT_TRUE(named >= 2);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_options_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"checkpoints written by 0.1.0 evaluate as before", test_old_checkpoints_evaluate_as_before},
        {"train short, test long: no length limit without a position table", test_train_short_test_long},
        {"--help comes from the field list (families, per-family defaults)", test_help_from_the_field_list},
        {"config.json holds only the options the model uses", test_config_json_has_only_used_options},
        {"gradcheck's model options come from the field list", test_gradcheck_options_from_the_list},
        {"options the model, optimizer or schedule do not use are refused", test_unused_options_refused},
        {"options given twice, or two setting one thing, are refused", test_duplicate_options_refused},
        {"ranges, empty values and options that do not apply: the messages", test_usage_messages},
        {"an empty validation split is said at the start", test_empty_validation_split_said},
        {"messages name options as typed; contradictions exit 2", test_messages_name_options},
        {"--config follows the command line's rules, also on --resume", test_config_file_same_rules},
        {"a warm-up longer than the run and a spent time budget are said", test_warmup_and_spent_budget},
        {"run folders a kill left behind: resume from 0, take over, in use", test_folder_left_by_a_kill},
        {"SIGTERM: checkpoint and exit status 143", test_sigterm_exit_status},
        {"compare: SIGTERM keeps the runs, the same command continues them", test_compare_sigterm_resumes},
        {"a run folder written by 0.1.0 resumes", test_old_run_folder_resumes},
        {"one check of checkpoint and data file, before any work", test_checkpoint_data_compatibility},
        {"after --resume the rate counts this process's steps only", test_rate_after_resume},
        {"config.json records threads, version, commit, data task and checksum", test_config_records_resolved_values},
        {"regression baselines in tables; eval --json carries every figure", test_reports_carry_baselines},
        {"the demo regenerates cached files made otherwise; a second demo waits", test_demo_cache},
        {"every command refuses an option given twice, however spelled", test_every_command_refuses_repeats},
        {"--config: a key twice is refused; FIFOs and devices refused at once", test_config_repeated_keys_and_fifos},
        {"unknown command, help COMMAND, --version with an argument", test_command_word},
        {"LOOKBACK_HDF5_TIMEOUT is checked, naming the variable and the range", test_hdf5_timeout_checked},
        {"usage errors found after reading a file exit 2", test_usage_errors_after_reading},
        {"compare: an evaluation file named twice is refused", test_compare_eval_file_once},
        {"every file a --help text names exists; study's recipes are in lab/recipes.c", test_help_names_existing_files},
        {"docs/data.md's option ranges and seq_len limits are the code's", test_data_doc_ranges_match_the_code},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_options", cases);
    remove_tree(work_dir);
    return rc;
}
