/* The command line's model options come from one field list: --help, config.json,
 * gradcheck and checkpoints agree with it, checkpoints written before still load, and
 * a model without a position table reads sequences of any length. */
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"

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
    EXPECT(contains(r.out, "--layers             transformer blocks, LSTM layers or conv layers (default 2; conv 4)"), r);
    EXPECT(contains(r.out, "--window             keys each query sees, itself included [local] (default 16)"), r);
    EXPECT(contains(r.out, "--hidden             LSTM hidden_size [lstm] (default 128)"), r);
    EXPECT(contains(r.out, "--heads              attention heads (d-model must divide by it) [transformer, local] (default 4)"), r);
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
    EXPECT(r.code == 0 && contains(r.out, "gradcheck lstm: layers 1, d-model 8, hidden 3, forget-bias 1") &&
               contains(r.out, "parameters passed"), r);
    run_free(&r);
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
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_options_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"checkpoints written by 0.1.0 evaluate as before", test_old_checkpoints_evaluate_as_before},
        {"train short, test long: no length limit without a position table", test_train_short_test_long},
        {"--help comes from the field list (families, per-family defaults)", test_help_from_the_field_list},
        {"config.json holds only the options the model uses", test_config_json_has_only_used_options},
        {"gradcheck's model options come from the field list", test_gradcheck_options_from_the_list},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_options", cases);
    nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
