/* The round trip with PyTorch (python/lookback_torch.py), for every family:
 *
 *  - a checkpoint trained by lookback, loaded in PyTorch with lookback_torch.load, gives
 *    the outputs of lookback's own forward and of `lookback predict` on the test split
 *    (to 1e-5);
 *  - a model initialised by PyTorch and written with lookback_torch.save, trained one
 *    step by `lookback train --init-from`, equals the same step taken in PyTorch with
 *    the same torch.optim optimizer (to 1e-5).
 *
 * The PyTorch side is tests/torch_roundtrip.py. It needs Debian's python3-torch and
 * python3-h5py; without them the test reports that it is skipped and why (exit code
 * 77, which ctest shows as "Skipped"). LOOKBACK_PYTHON names another interpreter;
 * LB_KEEP=1 keeps the scratch folder (/tmp/lookback_test_torch_roundtrip_<pid>). */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"
#include "layers/model.h"
#include "train/trainer.h"

#ifndef LB_SOURCE_DIR
#error "tests/CMakeLists.txt must define LB_SOURCE_DIR"
#endif

enum { SKIPPED = 77, N_TRAIN = 48 };

static const char *python;
static const char *const script = LB_SOURCE_DIR "/tests/torch_roundtrip.py";

/* One model family and configuration, trained on one data file. */
typedef struct rt_case {
    const char *name;
    const char *data;      /* spike (last position, lengths), recall (every position), adding (features) */
    const char *optim;     /* sgd (momentum 0.9) | adam | adamw, for the one-step check */
    const char *args[24];  /* model options for `lookback train`, NULL-terminated */
} rt_case;

#define SMALL "--layers", "2", "--d-model", "16", "--heads", "2", "--d-ff", "24"
static const rt_case cases[] = {
    {"transformer-none", "spike", "adamw", {"--model", "transformer", SMALL, "--pos", "none"}},
    {"transformer-sinusoidal", "recall", "adam", {"--model", "transformer", SMALL, "--pos", "sinusoidal"}},
    {"transformer-learned", "spike", "sgd", {"--model", "transformer", SMALL, "--pos", "learned"}},
    {"transformer-rotary", "recall", "adamw", {"--model", "transformer", SMALL, "--pos", "rotary"}},
    {"transformer-bidirectional", "spike", "adam", {"--model", "transformer", SMALL, "--pos", "rotary", "--causal", "0"}},
    {"transformer-features", "adding", "adamw", {"--model", "transformer", SMALL, "--pos", "sinusoidal"}},
    {"transformer-scalable", "recall", "adamw", {"--model", "transformer", SMALL, "--length-scale", "scalable"}},
    {"local-rotary", "recall", "adamw", {"--model", "local", SMALL, "--pos", "rotary", "--window", "4"}},
    {"transformer-gqa-alibi", "recall", "adamw", {"--model", "transformer", "--layers", "2", "--d-model", "16", "--heads",
                                                  "4", "--d-ff", "24", "--kv-heads", "2", "--pos", "alibi"}},
    {"transformer-mqa-alibi-bidirectional", "spike", "sgd",
     {"--model", "transformer", SMALL, "--kv-heads", "1", "--pos", "alibi", "--causal", "0"}},
    {"local-mqa-alibi", "spike", "adam", {"--model", "local", "--layers", "2", "--d-model", "24", "--heads", "6",
                                          "--d-ff", "24", "--kv-heads", "1", "--pos", "alibi", "--window", "4"}},
    {"local-log-n", "spike", "adam", {"--model", "local", SMALL, "--window", "5", "--length-scale", "log-n"}},
    {"local-learned", "adding", "sgd", {"--model", "local", SMALL, "--pos", "learned", "--window", "3"}},
    {"transformer-llama-tied", "local", "sgd", {"--model", "transformer", SMALL, "--norm", "rmsnorm", "--ffn", "swiglu",
                                                  "--pos", "rotary", "--bias", "0", "--tie-embeddings", "1"}},
    {"transformer-post-geglu", "spike", "adam", {"--model", "transformer", SMALL, "--norm-position", "post", "--ffn",
                                                 "geglu", "--pos", "learned"}},
    {"local-rmsnorm-post-nobias", "adding", "sgd", {"--model", "local", SMALL, "--norm", "rmsnorm", "--norm-position",
                                                    "post", "--bias", "0", "--window", "4"}},
    {"transformer-layernorm-nobias", "recall", "adam", {"--model", "transformer", SMALL, "--bias", "0", "--ffn",
                                                        "swiglu"}},
    {"lstm", "spike", "adamw", {"--model", "lstm", "--layers", "2", "--d-model", "8", "--hidden", "12",
                                "--forget-bias", "1"}},
    {"lstm-every", "recall", "adam", {"--model", "lstm", "--layers", "1", "--d-model", "8", "--hidden", "10"}},
    {"conv", "recall", "sgd", {"--model", "conv", "--layers", "3", "--d-model", "12", "--kernel", "3"}},
    {"linear", "recall", "adamw", {"--model", "linear", SMALL}},
    {"linear-decay-features", "adding", "adam", {"--model", "linear", SMALL, "--decay", "1"}},
    {"conv-features", "adding", "adamw", {"--model", "conv", "--layers", "2", "--d-model", "8", "--kernel", "2"}},
    {"mamba", "recall", "adam", {"--model", "mamba", "--layers", "2", "--d-model", "8", "--d-state", "4"}},
    {"mamba-spike", "spike", "adamw", {"--model", "mamba", "--layers", "1", "--d-model", "12", "--d-state", "3",
                                       "--d-conv", "3", "--expand", "3", "--dt-rank", "2"}},
    {"mamba-features", "adding", "sgd", {"--model", "mamba", "--layers", "2", "--d-model", "6", "--d-state", "5"}},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Data files: T = 20, variable lengths for spike and recall; local with as many classes
 * as token ids (vocab 9: a head tied to the embedding can predict them). */
static const char *data_file(const char *task)
{
    static char paths[4][512];
    int i = strcmp(task, "spike") == 0 ? 0 : strcmp(task, "recall") == 0 ? 1 : strcmp(task, "adding") == 0 ? 2 : 3;
    if (i == 3 && !paths[3][0]) {
        snprintf(paths[3], sizeof paths[3], "%s", path_in("local.h5"));
        const char *local[] = {"data", "--task", "local", "--seq-len", "20", "--classes", "9", "--train", "48", "--val",
                               "8", "--test", "16", "-o", paths[3], "--quiet", NULL};
        run_result r = run(local);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    if (!paths[i][0]) {
        snprintf(paths[i], sizeof paths[i], "%s", path_in(i == 0 ? "spike.h5" : i == 1 ? "recall.h5" : "adding.h5"));
        const char *spike[] = {"data", "--task", "spike", "--seq-len", "20", "--variable-length", "1", "--min-length", "8",
                               "--max-distance", "7", "--train", "48", "--val", "8", "--test", "16", "-o", paths[0],
                               "--quiet", NULL};
        const char *recall[] = {"data", "--task", "recall", "--seq-len", "20", "--variable-length", "1", "--pairs", "3",
                                "--train", "48", "--val", "8", "--test", "16", "-o", paths[1], "--quiet", NULL};
        const char *adding[] = {"data", "--task", "adding", "--seq-len", "12", "--train", "48", "--val", "8", "--test",
                                "16", "-o", paths[2], "--quiet", NULL};
        run_result r = run(i == 0 ? spike : i == 1 ? recall : adding);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    return paths[i];
}

static const char *case_path(int c, const char *what)
{
    static char buf[4][600];
    static int slot;
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/%s-%s", work_dir, cases[c].name, what);
    return buf[slot];
}

/* lookback's own forward of a checkpoint on the test split, as float64 [B, ...]. */
static lb_tensor *lookback_outputs(const char *checkpoint, const char *data_path)
{
    lb_model_config cfg;
    lb_model *m = NULL;
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_batch b;
    memset(&b, 0, sizeof b);
    lb_tensor *out = NULL;
    lb_graph *g = lb_graph_new();
    if (ds && g && lb_checkpoint_read_model_config(checkpoint, &cfg) == LB_OK && (m = lb_model_new(&cfg)) &&
        lb_checkpoint_load_params(checkpoint, m) == LB_OK &&
        lb_dataset_slice(ds, "test", 0, lb_dataset_split_size(ds, "test"), &b) == LB_OK) {
        lb_graph_set_grad_enabled(g, 0);
        lb_model_input in = {b.batch_size, b.seq_len, b.tokens, NULL, b.lengths};
        lb_tensor *features = b.features ? lb_tensor_copy(b.features, cfg.dtype) : NULL;
        in.features = features;
        lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL);
        if (y)
            out = lb_tensor_copy(y->value, LB_FLOAT64);
        lb_tensor_free(features);
    }
    if (!out)
        fprintf(stderr, "\n  lookback forward of %s failed: %s\n", checkpoint, lb_last_error());
    lb_batch_free(&b);
    lb_graph_free(g);
    lb_model_free(m);
    lb_dataset_close(ds);
    return out;
}

static int run_python(const char *const *args)
{
    run_result r = run_program(python, args);
    EXPECT(r.code == 0, r);
    int ok = r.code == 0;
    run_free(&r);
    return ok;
}

static int train(const rt_case *c, const char *const *extra, const char *out)
{
    const char *args[64] = {"train", "--data", data_file(c->data)};
    int n = 3;
    for (int i = 0; c->args[i]; i++)
        args[n++] = c->args[i];
    for (int i = 0; extra[i]; i++)
        args[n++] = extra[i];
    args[n++] = "--out";
    args[n++] = out;
    args[n++] = "--quiet";
    args[n] = NULL;
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    int ok = r.code == 0;
    run_free(&r);
    return ok;
}

/* Trains every case a few steps in lookback; PyTorch loads each checkpoint. */
static void test_forward_matches(void)
{
    const char *py[2 + 3 * N_CASES + 1] = {script, "forward"};
    int n = 2;
    static const char *const steps[] = {"--steps", "4", "--batch", "16", "--eval-every", "0", "--lr", "3e-3", NULL};
    for (int c = 0; c < N_CASES; c++) {
        if (!train(&cases[c], steps, case_path(c, "run")))
            return;
        static char ck[N_CASES][600], out[N_CASES][600];
        snprintf(ck[c], sizeof ck[c], "%s/checkpoint.h5", case_path(c, "run"));
        snprintf(out[c], sizeof out[c], "%s", case_path(c, "torch.h5"));
        py[n++] = ck[c];
        py[n++] = data_file(cases[c].data);
        py[n++] = out[c];
    }
    py[n] = NULL;
    if (!run_python(py))
        return;
    for (int c = 0; c < N_CASES; c++) {
        char ck[600];
        snprintf(ck, sizeof ck, "%s/checkpoint.h5", case_path(c, "run"));
        lb_tensor *ours = lookback_outputs(ck, data_file(cases[c].data));
        lb_tensor *theirs = lb_test_h5_read_path(case_path(c, "torch.h5"), "logits", LB_FLOAT64);
        CU_ASSERT_PTR_NOT_NULL(ours);
        CU_ASSERT_PTR_NOT_NULL(theirs);
        if (ours && theirs) {
            double worst = 0;
            for (int64_t k = 0; k < lb_tensor_numel(ours) && k < lb_tensor_numel(theirs); k++)
                worst = fmax(worst, fabs(lb_tensor_flat(ours, k) - lb_tensor_flat(theirs, k)));
            fprintf(stderr, "\n  %-26s outputs %-14s max |lookback - torch| %.3g", cases[c].name,
                    lb_shape_str(ours->ndim, ours->shape, (char[64]){0}, 64), worst);
            CU_ASSERT_TRUE(lb_check_tensors_close(ours, theirs, 1e-5, 1e-5, cases[c].name));
            /* Not all equal: a model that ignored its input would pass too easily. */
            CU_ASSERT_TRUE(lb_tensor_flat(ours, 0) != lb_tensor_flat(ours, lb_tensor_numel(ours) - 1));
        }
        /* `lookback predict` writes the same numbers (NaN past a sequence's length). */
        const char *pred = case_path(c, "predict.h5");
        const char *args[] = {"predict", "--checkpoint", ck, "--data", data_file(cases[c].data), "-o", pred, NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
        lb_tensor *predicted =
            lb_test_h5_read_path(pred, strcmp(cases[c].data, "adding") == 0 ? "output" : "logits", LB_FLOAT64);
        CU_ASSERT_TRUE(predicted && theirs && lb_tensor_numel(predicted) == lb_tensor_numel(theirs));
        int64_t compared = 0, off = 0;
        for (int64_t k = 0; predicted && theirs && k < lb_tensor_numel(predicted) && k < lb_tensor_numel(theirs); k++) {
            double a = lb_tensor_flat(predicted, k), b = lb_tensor_flat(theirs, k);
            if (isnan(a))
                continue;
            compared++;
            off += !(fabs(a - b) <= 1e-5 + 1e-5 * fabs(b));
        }
        CU_ASSERT_TRUE(compared > 0 && off == 0);
        if (off)
            fprintf(stderr, "\n  %s: lookback predict differs from PyTorch at %lld of %lld numbers", cases[c].name,
                    (long long)off, (long long)compared);
        lb_tensor_free(predicted);
        lb_tensor_free(ours);
        lb_tensor_free(theirs);
    }
}

/* Largest |a - b| over the parameters of the model in checkpoints a and b; -1 on error. */
/* The largest |a - b| over every parameter element, divided by that element's tolerance
 * atol + rtol * |b - base| (b's move from base); with base NULL, the plain largest |a - b|.
 * Adam's first step is lr * g / (|g| + eps): where |g| is near eps (an embedding row that
 * the batch barely touches) float32 rounding of g moves the step by a fraction of a
 * percent, hence a tolerance that grows with the step. Returns -1 when a parameter is missing. */
static double max_param_difference(const char *a, const char *b, const char *base, double atol, double rtol,
                                   const char *who)
{
    lb_model_config cfg;
    if (lb_checkpoint_read_model_config(a, &cfg) != LB_OK)
        return -1;
    lb_model *m = lb_model_new(&cfg);
    if (!m)
        return -1;
    lb_params *ps = lb_model_params(m);
    double worst = 0;
    for (int i = 0; i < ps->count && worst >= 0; i++) {
        char name[300];
        snprintf(name, sizeof name, "params/%s", ps->items[i]->name);
        lb_tensor *ta = lb_test_h5_read_path(a, name, LB_FLOAT64), *tb = lb_test_h5_read_path(b, name, LB_FLOAT64);
        lb_tensor *t0 = base ? lb_test_h5_read_path(base, name, LB_FLOAT64) : NULL;
        if (!ta || !tb || lb_tensor_numel(ta) != lb_tensor_numel(tb) ||
            (base && (!t0 || lb_tensor_numel(t0) != lb_tensor_numel(tb)))) {
            fprintf(stderr, "\n  %s: parameter %s missing or of another size\n", who, ps->items[i]->name);
            worst = -1;
        }
        for (int64_t k = 0; worst >= 0 && k < lb_tensor_numel(ta); k++) {
            double d = fabs(lb_tensor_flat(ta, k) - lb_tensor_flat(tb, k));
            if (t0)
                d /= atol + rtol * fabs(lb_tensor_flat(tb, k) - lb_tensor_flat(t0, k));
            if (d > worst)
                worst = d;
        }
        lb_tensor_free(ta);
        lb_tensor_free(tb);
        lb_tensor_free(t0);
    }
    lb_model_free(m);
    return worst;
}

/* PyTorch initialises and steps; lookback starts from PyTorch's weights and steps. */
static void test_one_step_matches(void)
{
    static const char lr[] = "0.01", wd[] = "0.05";
    const char *py[2 + 7 * N_CASES + 1] = {script, "step"};
    int n = 2;
    static char src[N_CASES][600], init[N_CASES][600], stepped[N_CASES][600];
    for (int c = 0; c < N_CASES; c++) {
        snprintf(src[c], sizeof src[c], "%s/checkpoint.h5", case_path(c, "run"));
        snprintf(init[c], sizeof init[c], "%s", case_path(c, "init.h5"));
        snprintf(stepped[c], sizeof stepped[c], "%s", case_path(c, "stepped.h5"));
        const char *row[7] = {src[c], data_file(cases[c].data), cases[c].optim, lr, wd, init[c], stepped[c]};
        for (int i = 0; i < 7; i++)
            py[n++] = row[i];
    }
    py[n] = NULL;
    if (!run_python(py))
        return;
    for (int c = 0; c < N_CASES; c++) {
        const char *extra[] = {"--init-from", init[c], "--steps", "1", "--batch", "48", "--optim", cases[c].optim,
                               "--lr", lr, "--weight-decay", wd, "--schedule", "constant", "--warmup", "0",
                               "--clip", "0", "--eval-every", "0", "--momentum", "0.9", NULL};
        if (strcmp(cases[c].optim, "sgd") != 0)
            extra[20] = NULL; /* --momentum is SGD's */
        rt_case model_from_checkpoint = cases[c];
        memset(model_from_checkpoint.args, 0, sizeof model_from_checkpoint.args);
        if (!train(&model_from_checkpoint, extra, case_path(c, "step")))
            continue;
        char ck[600];
        snprintf(ck, sizeof ck, "%s/checkpoint.h5", case_path(c, "step"));
        double moved = max_param_difference(init[c], stepped[c], NULL, 0, 0, cases[c].name);
        double diff = max_param_difference(ck, stepped[c], NULL, 0, 0, cases[c].name);
        /* |lookback - torch| <= 1e-5 + 2e-3 |torch's step| for every element */
        double scaled = max_param_difference(ck, stepped[c], init[c], 1e-5, 2e-3, cases[c].name);
        fprintf(stderr, "\n  %-26s %-5s step moved parameters by up to %.3g; lookback - torch: %.3g (%.2f of the tolerance)",
                cases[c].name, cases[c].optim, moved, diff, scaled);
        CU_ASSERT_TRUE(moved > 1e-3);
        CU_ASSERT_TRUE(diff >= 0 && scaled >= 0 && scaled <= 1);
    }
}

/* lookback_torch.save refuses what it cannot write faithfully (see torch_roundtrip.py
 * refusals): a config that is not the module's (before: n_heads = 4 saved for a 2-head
 * module evaluated silently as another model), a data file or /dev/null as the target
 * (before: overwritten), strings and out-of-range numbers, rotary with an odd head width,
 * lengths of 0. The data file is untouched; a checkpoint loaded and saved again keeps
 * its data_task, so `lookback eval` still refuses data of another task. */
static void test_save_refusals(void)
{
    int c = 3; /* transformer-rotary on recall: 2 heads of width 8 */
    CU_ASSERT_STRING_EQUAL_FATAL(cases[c].name, "transformer-rotary");
    char ck[600], data_copy[600], folder[600], saved[700], twice[700];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", case_path(c, "run"));
    snprintf(data_copy, sizeof data_copy, "%s", path_in("data-copy.h5"));
    snprintf(folder, sizeof folder, "%s", path_in("refusals"));
    mkdir(folder, 0777);
    size_t size = 0, size_after = 0;
    char *before = read_all(data_file("recall"), &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);
    CU_ASSERT_TRUE_FATAL(write_all(data_copy, before, size));
    const char *args[] = {script, "refusals", ck, data_copy, folder, NULL};
    run_result r = run_program(python, args);
    static const char *const refused[] = {"refused n_heads: save: config n_heads = 4, but the module was built with "
                                          "n_heads = 2",
                                          "refused n_layers:", "refused d_model:", "refused causal:",
                                          "refused attention heads:", "refused existing file:", "already exists",
                                          "refused device: save: /dev/null is not a regular file",
                                          "refused folder:", "refused string number:", "refused bool number:",
                                          "refused fraction:", "refused range:", "refused dropout range:",
                                          "refused odd head width: lookback_torch: rotary positions need an even "
                                          "head width",
                                          "refused length 0: LookbackModel: lengths[1] = 0 is outside [1, seq_len = 5]",
                                          "refused length past T:", "data_task recall (loaded: recall)",
                                          "refused second save:", "overwrite=True: saved"};
    int all = r.code == 0 && !contains(r.out, "ACCEPTED");
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        all = all && contains(r.out, refused[i]);
    EXPECT(all, r);
    run_free(&r);
    char *after = read_all(data_copy, &size_after);
    CU_ASSERT_TRUE(after && size_after == size && memcmp(before, after, size) == 0);
    free(before);
    free(after);
    struct stat sb;
    CU_ASSERT_TRUE(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    CU_ASSERT_NOT_EQUAL(access(path_in("refusals/refused.h5"), F_OK), 0);
    /* The saved checkpoint evaluates as the original; its task is kept. */
    snprintf(saved, sizeof saved, "%s/saved.h5", folder);
    snprintf(twice, sizeof twice, "%s/overwritten.h5", folder);
    const char *eval_saved[] = {"eval", "--checkpoint", saved, "--data", data_file("recall"), NULL};
    const char *eval_original[] = {"eval", "--checkpoint", ck, "--data", data_file("recall"), NULL};
    run_result a = run(eval_saved), b = run(eval_original);
    EXPECT(a.code == 0 && b.code == 0 && strchr(a.out, '\n') && strcmp(strchr(a.out, '\n'), strchr(b.out, '\n')) == 0, a);
    run_free(&a);
    run_free(&b);
    const char *other_task[] = {"eval", "--checkpoint", twice, "--data", data_file("spike"), NULL};
    r = run(other_task);
    EXPECT(r.code == 1 && contains(r.err, "holds the spike task but the model was trained on the recall task"), r);
    run_free(&r);
}

/* lookback_torch.FIELD_RANGES is the library's field list's ranges (lb_model_fields). */
static void test_ranges_match_the_field_list(void)
{
    const char *args[] = {script, "ranges", NULL};
    run_result r = run_program(python, args);
    EXPECT(r.code == 0, r);
    int n_fields, checked = 0;
    const lb_model_field *fields = lb_model_fields(&n_fields);
    for (int i = 0; i < n_fields; i++) {
        if (fields[i].type != LB_FIELD_INT64 && fields[i].type != LB_FIELD_INT && fields[i].type != LB_FIELD_U64 &&
            fields[i].type != LB_FIELD_REAL)
            continue;
        char key[96];
        snprintf(key, sizeof key, "\n%s ", fields[i].member);
        char *text = NULL;
        if (asprintf(&text, "\n%s", r.out ? r.out : "") < 0)
            break;
        const char *line = strstr(text, key);
        double lo = NAN, hi = NAN;
        if (line)
            sscanf(line + strlen(key), "%lf %lf", &lo, &hi);
        if (!(lo == fields[i].min && hi == fields[i].max))
            fprintf(stderr, "\n  %s: lookback_torch has [%g, %g], the field list [%g, %g]", fields[i].member, lo, hi,
                    fields[i].min, fields[i].max);
        CU_ASSERT_TRUE(lo == fields[i].min && hi == fields[i].max);
        checked++;
        free(text);
    }
    CU_ASSERT_TRUE(checked >= 10);
    run_free(&r);
}

/* Finds a python3 that imports torch and h5py: $LOOKBACK_PYTHON, Debian's /usr/bin/python3,
 * then python3 on PATH. */
static const char *find_python(void)
{
    const char *env = getenv("LOOKBACK_PYTHON");
    const char *candidates[] = {env && env[0] ? env : NULL, "/usr/bin/python3", "python3"};
    for (int i = 0; i < 3; i++) {
        if (!candidates[i])
            continue;
        const char *args[] = {"-c", "import torch, h5py, numpy", NULL};
        run_result r = run_program(candidates[i], args);
        int ok = r.code == 0;
        run_free(&r);
        if (ok)
            return candidates[i];
    }
    return NULL;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_torch_roundtrip_%d", (int)getpid());
    mkdir(work_dir, 0777);
    python = find_python();
    int rc;
    if (!python) {
        fprintf(stderr, "test_torch_roundtrip: SKIPPED: no python3 imports torch, h5py and numpy (tried "
                        "$LOOKBACK_PYTHON, /usr/bin/python3, python3). Install Debian's: "
                        "apt-get install python3-torch python3-h5py python3-numpy\n");
        rc = SKIPPED;
    } else {
        fprintf(stderr, "test_torch_roundtrip: PyTorch side run by %s\n", python);
        const lb_test_case tests[] = {
            {"every family: PyTorch's load() gives lookback's outputs", test_forward_matches},
            {"every family: one step from PyTorch's init, lookback = torch.optim", test_one_step_matches},
            {"save refuses a config that is not the module's, existing and special files", test_save_refusals},
            {"lookback_torch's ranges are the field list's", test_ranges_match_the_field_list},
            {NULL, NULL},
        };
        rc = lb_test_main("torch_roundtrip", tests);
    }
    if (!getenv("LB_KEEP"))
        nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
