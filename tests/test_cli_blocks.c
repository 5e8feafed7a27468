/* The block options of the attention families from the command line: --norm,
 * --norm-position, --ffn and --preset as `lookback train` resolves them into config.json
 * (a preset expands, options beside it override it, a gated --ffn without --d-ff takes
 * Llama's width), `lookback gradcheck` of every option for both attention families, the
 * one-line refusals of options a family does not use, and checkpoints written before the
 * options existed reading as the block they were. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"
#include "layers/ffn.h"
#include "train/trainer.h"

/* Trains 2 steps on the small spike file with `extra` options into a new folder and
 * returns its config.json (caller frees), or NULL when the run failed. */
static char *trained_config(const char *folder, const char *const *extra)
{
    const char *args[40] = {"train", "--data", small_data(), "--d-model", "24", "--heads", "2", "--steps", "2",
                            "--batch", "4", "--eval-every", "0", "--quiet"};
    int n = 14;
    for (int i = 0; extra[i] && n < 36; i++)
        args[n++] = extra[i];
    const char *dir = path_in(folder);
    args[n++] = "--out";
    args[n++] = dir;
    args[n] = NULL;
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    int ok = r.code == 0;
    run_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    return ok ? read_all(path, NULL) : NULL;
}

/* --preset llama expands into config.json; d-ff by Llama's rule (24 -> 64). */
static void test_preset_llama_expands(void)
{
    CU_ASSERT_EQUAL(lb_ffn_gated_width(24), 64);
    CU_ASSERT_EQUAL(lb_ffn_gated_width(64), 176);
    CU_ASSERT_EQUAL(lb_ffn_gated_width(128), 344);
    const char *extra[] = {"--preset", "llama", NULL};
    char *text = trained_config("llama", extra);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(contains(text, "\"preset\": \"llama\""));
    CU_ASSERT_TRUE(contains(text, "\"norm\": \"rmsnorm\""));
    CU_ASSERT_TRUE(contains(text, "\"norm-position\": \"pre\""));
    CU_ASSERT_TRUE(contains(text, "\"ffn\": \"swiglu\""));
    CU_ASSERT_TRUE(contains(text, "\"pos\": \"rotary\""));
    CU_ASSERT_TRUE(contains(text, "\"bias\": 0"));
    CU_ASSERT_TRUE(contains(text, "\"d-ff\": 64"));
    free(text);
    /* the checkpoint's block: 2 norms with weights only, fc1 [24, 128], no biases */
    lb_model_config cfg;
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", path_in("llama"));
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(ck, &cfg), LB_OK);
    CU_ASSERT_EQUAL(cfg.norm, LB_NORM_RMSNORM);
    CU_ASSERT_EQUAL(cfg.ffn, LB_FFN_SWIGLU);
    CU_ASSERT_EQUAL(cfg.d_ff, 64);
    CU_ASSERT_EQUAL(cfg.bias, 0);
}

/* Options beside a preset override it, whatever their order; gpt2 is today's block with
 * learned positions; an explicit --d-ff wins over the rule. */
static void test_options_override_preset(void)
{
    const char *before[] = {"--norm", "layernorm", "--preset", "llama", "--ffn", "geglu", "--d-ff", "40", NULL};
    char *text = trained_config("override", before);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(contains(text, "\"norm\": \"layernorm\""));
    CU_ASSERT_TRUE(contains(text, "\"ffn\": \"geglu\""));
    CU_ASSERT_TRUE(contains(text, "\"d-ff\": 40"));
    CU_ASSERT_TRUE(contains(text, "\"pos\": \"rotary\""));
    free(text);
    const char *gpt2[] = {"--preset", "gpt2", "--norm-position", "post", NULL};
    text = trained_config("gpt2", gpt2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(contains(text, "\"preset\": \"gpt2\""));
    CU_ASSERT_TRUE(contains(text, "\"norm\": \"layernorm\""));
    CU_ASSERT_TRUE(contains(text, "\"norm-position\": \"post\""));
    CU_ASSERT_TRUE(contains(text, "\"ffn\": \"gelu\""));
    CU_ASSERT_TRUE(contains(text, "\"pos\": \"learned\""));
    CU_ASSERT_TRUE(contains(text, "\"bias\": 1"));
    CU_ASSERT_TRUE(contains(text, "\"d-ff\": 128")); /* the default: the rule is for gated layers only */
    free(text);
    /* a gated --ffn alone takes the rule too; no preset in config.json then */
    const char *swiglu[] = {"--ffn", "swiglu", NULL};
    text = trained_config("swiglu", swiglu);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(contains(text, "\"d-ff\": 64"));
    CU_ASSERT_FALSE(contains(text, "preset"));
    free(text);
}

/* A run resumed from its config.json keeps the resolved block. */
static void test_resume_keeps_block(void)
{
    const char *extra[] = {"--preset", "llama", "--ffn", "geglu", NULL};
    char *text = trained_config("resume", extra);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    free(text);
    const char *args[] = {"train", "--resume", path_in("resume"), "--steps", "3", "--quiet", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", path_in("resume"));
    text = read_all(path, NULL);
    CU_ASSERT_TRUE(text && contains(text, "\"ffn\": \"geglu\"") && contains(text, "\"d-ff\": 64") &&
                   contains(text, "\"norm\": \"rmsnorm\""));
    free(text);
}

/* Bad values and options a family does not use: exit 2, one line naming both options. */
static void test_refusals(void)
{
    static const struct {
        const char *args[8], *message;
    } cases[] = {
        {{"--model", "lstm", "--preset", "llama"}, "--preset does not apply to --model lstm"},
        {{"--model", "conv", "--norm", "rmsnorm"}, "--norm does not apply to --model conv"},
        {{"--model", "lstm", "--ffn", "swiglu"}, "--ffn does not apply to --model lstm"},
        {{"--model", "lstm", "--norm-position", "post"}, "--norm-position does not apply to --model lstm"},
        {{"--preset", "mistral"}, "--preset: 'mistral' is not one of gpt2, llama"},
        {{"--norm", "batchnorm"}, "--norm"},
        {{"--ffn", "relu"}, "--ffn"},
        {{"--norm-position", "middle"}, "--norm-position"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[20] = {"train", "--data", small_data(), "--steps", "1", "--out", path_in("refused")};
        int n = 7;
        for (int k = 0; cases[i].args[k]; k++)
            args[n++] = cases[i].args[k];
        args[n] = NULL;
        run_result r = run(args);
        EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, cases[i].message), r);
        run_free(&r);
        struct stat st;
        CU_ASSERT_NOT_EQUAL(stat(path_in("refused"), &st), 0); /* nothing created */
    }
}

/* `lookback gradcheck` passes for every block option, full and local attention. */
static void test_gradcheck_every_option(void)
{
    static const char *const options[][12] = {
        {"--norm", "rmsnorm"},
        {"--norm-position", "post"},
        {"--ffn", "swiglu"},
        {"--ffn", "geglu", "--bias", "0"},
        {"--norm", "rmsnorm", "--ffn", "swiglu", "--pos", "rotary", "--bias", "0", "--norm-position", "post"},
        {"--norm", "rmsnorm", "--ffn", "geglu", "--norm-position", "post", "--pos", "learned"},
    };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        for (int local = 0; local < 2; local++) {
            const char *args[20] = {"gradcheck", "--model", local ? "local" : "transformer"};
            int n = 3;
            for (int k = 0; options[i][k]; k++)
                args[n++] = options[i][k];
            args[n] = NULL;
            run_result r = run(args);
            EXPECT(r.code == 0 && contains(r.out, "parameters passed") && !contains(r.out, "FAIL"), r);
            run_free(&r);
        }
    /* the header names the options checked */
    const char *args[] = {"gradcheck", "--model", "transformer", "--norm", "rmsnorm", "--ffn", "swiglu", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && contains(r.out, "norm rmsnorm, norm-position pre, ffn swiglu") &&
               contains(r.out, "blocks.0.ffn.fc1.weight          [8, 32]") && !contains(r.out, "ln1.bias"), r);
    run_free(&r);
}

/* A checkpoint written before the block options existed reads as LayerNorm, pre-norm,
 * GELU (the fields' defaults). */
static void test_old_checkpoint_reads_as_before(void)
{
    lb_model_config cfg;
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(lb_fixture_path("checkpoint_v1_transformer.h5"), &cfg), LB_OK);
    CU_ASSERT_EQUAL(cfg.norm, LB_NORM_LAYERNORM);
    CU_ASSERT_EQUAL(cfg.norm_position, LB_NORM_PRE);
    CU_ASSERT_EQUAL(cfg.ffn, LB_FFN_GELU);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_blocks_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"--preset llama expands into config.json and the checkpoint", test_preset_llama_expands},
        {"options beside a preset override it; gpt2; a gated --ffn takes Llama's d-ff", test_options_override_preset},
        {"a resumed run keeps the resolved block", test_resume_keeps_block},
        {"bad values and options a family does not use: one line naming both", test_refusals},
        {"gradcheck passes for every block option, full and local attention", test_gradcheck_every_option},
        {"a checkpoint from before the block options reads as layernorm, pre, gelu", test_old_checkpoint_reads_as_before},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_blocks", cases);
    remove_tree(work_dir);
    return rc;
}
