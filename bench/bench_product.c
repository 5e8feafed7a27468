/* The product path: one training step of each study recipe, through the trainer's
 * step (lb_trainer_step: batch from the HDF5 file, forward, loss, backward, clipping,
 * AdamW), the code `lookback train` runs.
 *
 *   bench_product RECIPE|all|list --dir DIR [--threads N] [--warmup N] [--reps N] [--quick] [--budget S]
 *
 * For each recipe it writes, in DIR, the task's training file (made once, 512 training
 * and 64 validation sequences) and the model's initial checkpoint <recipe>.h5, which
 * bench/torch_product.py builds the same model from (python/lookback_torch.py) and
 * `lookback train --init-from` starts from (bench/run times the whole command against
 * this step). Prints one JSON line per recipe (impl "lookback", workload "PRODUCT").
 * --threads N is lb_set_num_threads(N), what `lookback train --threads N` does; nothing
 * else is set (no environment variable: the library chooses OpenBLAS's kernels and
 * keeps it single-threaded).
 *
 * The recipes are the study's (cli/study.c, recipe() and define_tasks(), default scale):
 * every task with transformer, local attention, LSTM and conv, and spike16's
 * length-robustness variants; batch 32, d_model 64, 4 heads, d_ff 128, AdamW, clip 1. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/tasks.h"
#include "harness.h"
#include "layers/conv.h"
#include "layers/model.h"
#include "optim/schedule.h"
#include "tensor/blas.h"
#include "tensor/threads.h"
#include "train/trainer.h"

typedef enum { TASK_SPIKE16, TASK_RECALL, TASK_LOCAL, TASK_PARITY, TASK_COPY, TASK_MODSUM } task_id;
typedef enum { M_TRANSFORMER, M_LOCAL, M_LSTM, M_CONV, M_SSMAX, M_MIXED, M_LOGN } method_id;

/* The one table: every recipe the study trains (task x method). */
static const struct {
    const char *name;
    task_id task;
    method_id method;
} RECIPES[] = {
    {"spike16.transformer", TASK_SPIKE16, M_TRANSFORMER}, {"spike16.local", TASK_SPIKE16, M_LOCAL},
    {"spike16.lstm", TASK_SPIKE16, M_LSTM},               {"spike16.conv", TASK_SPIKE16, M_CONV},
    {"spike16.ssmax", TASK_SPIKE16, M_SSMAX},             {"spike16.mixed", TASK_SPIKE16, M_MIXED},
    {"spike16.logn", TASK_SPIKE16, M_LOGN},               {"recall.transformer", TASK_RECALL, M_TRANSFORMER},
    {"recall.local", TASK_RECALL, M_LOCAL},               {"recall.lstm", TASK_RECALL, M_LSTM},
    {"recall.conv", TASK_RECALL, M_CONV},                 {"local.transformer", TASK_LOCAL, M_TRANSFORMER},
    {"local.local", TASK_LOCAL, M_LOCAL},                 {"local.lstm", TASK_LOCAL, M_LSTM},
    {"local.conv", TASK_LOCAL, M_CONV},                   {"parity.transformer", TASK_PARITY, M_TRANSFORMER},
    {"parity.local", TASK_PARITY, M_LOCAL},               {"parity.lstm", TASK_PARITY, M_LSTM},
    {"parity.conv", TASK_PARITY, M_CONV},                 {"copy.transformer", TASK_COPY, M_TRANSFORMER},
    {"copy.local", TASK_COPY, M_LOCAL},                   {"copy.lstm", TASK_COPY, M_LSTM},
    {"copy.conv", TASK_COPY, M_CONV},                     {"modsum.transformer", TASK_MODSUM, M_TRANSFORMER},
    {"modsum.local", TASK_MODSUM, M_LOCAL},               {"modsum.lstm", TASK_MODSUM, M_LSTM},
    {"modsum.conv", TASK_MODSUM, M_CONV},
};
enum { N_RECIPES = sizeof RECIPES / sizeof RECIPES[0], CONV_KERNEL = 3, BATCH = 32 };

/* The study's training file options of a task (define_tasks), small splits; `mixed`:
 * spike16 at lengths 64..256. */
static lb_task_options task_options(task_id t, int mixed, const char **file)
{
    lb_task_options o;
    switch (t) {
    case TASK_SPIKE16:
        lb_task_options_default(LB_TASK_SPIKE, &o);
        o.sensors = 16;
        o.seq_len = 256;
        if (mixed) {
            o.variable_length = 1;
            o.min_length = 64;
        }
        *file = mixed ? "spike16-mixed.h5" : "spike16.h5";
        break;
    case TASK_RECALL:
        lb_task_options_default(LB_TASK_RECALL, &o);
        o.seq_len = 128;
        *file = "recall.h5";
        break;
    case TASK_LOCAL:
        lb_task_options_default(LB_TASK_LOCAL, &o);
        *file = "local.h5";
        break;
    case TASK_PARITY:
        lb_task_options_default(LB_TASK_PARITY, &o);
        o.variable_length = 1;
        o.min_length = 2;
        *file = "parity.h5";
        break;
    case TASK_COPY:
        lb_task_options_default(LB_TASK_COPY, &o);
        o.seq_len = 1000 + 20;
        o.blank_targets = 1;
        *file = "copy.h5";
        break;
    default:
        lb_task_options_default(LB_TASK_MODSUM, &o);
        o.seq_len = 16;
        o.variable_length = 1;
        o.min_length = 2;
        *file = "modsum.h5";
        break;
    }
    o.n_train = 512;
    o.n_val = 64;
    o.n_test = 0;
    o.seed = 100 + (uint64_t)t;
    return o;
}

/* The study's model of (task, method) (cli/study.c recipe()), fitted to the data. */
static void model_config(task_id t, method_id m, const lb_dataset *data, int64_t seq_len, lb_model_config *mc)
{
    lb_model_kind kind = m == M_LSTM ? LB_MODEL_LSTM : m == M_CONV ? LB_MODEL_CONV
                         : m == M_LOCAL                            ? LB_MODEL_LOCAL
                                                                   : LB_MODEL_TRANSFORMER;
    lb_model_config_default(kind, mc);
    mc->d_model = 64;
    if (kind == LB_MODEL_TRANSFORMER || kind == LB_MODEL_LOCAL) {
        mc->n_heads = 4;
        mc->d_ff = 128;
        mc->pos = t == TASK_SPIKE16 ? LB_POS_NONE : t == TASK_COPY ? LB_POS_LEARNED : LB_POS_ROTARY;
        mc->n_layers = t == TASK_SPIKE16 && kind == LB_MODEL_TRANSFORMER ? 1 : 2;
        if (kind == LB_MODEL_LOCAL)
            mc->window = 16;
        if (m == M_LOGN)
            mc->length_scale = LB_LENGTH_SCALE_LOG_N;
        if (m == M_SSMAX)
            mc->length_scale = LB_LENGTH_SCALE_SCALABLE;
    } else if (kind == LB_MODEL_LSTM) {
        mc->n_layers = 1;
        mc->hidden_size = 128;
        mc->forget_bias = 1.0;
    } else {
        mc->kernel_size = CONV_KERNEL;
        mc->n_layers = lb_conv_layers_for(seq_len, CONV_KERNEL);
    }
    /* the data-derived fields, as lookback train fills them */
    mc->vocab_size = lb_dataset_vocab_size(data);
    mc->input_features = mc->vocab_size > 0 ? 0 : lb_dataset_num_features(data);
    mc->num_classes = lb_dataset_num_classes(data);
    mc->head = lb_dataset_per_position(data) ? LB_HEAD_EVERY : LB_HEAD_LAST;
    if (mc->max_seq_len < lb_dataset_seq_len(data))
        mc->max_seq_len = lb_dataset_seq_len(data);
}

static int step_once(void *ctx)
{
    lb_step_stats st;
    if (lb_trainer_step(ctx, &st) != LB_OK) {
        fprintf(stderr, "bench_product: step failed: %s\n", lb_last_error());
        return 1;
    }
    return 0;
}

static int run_recipe(int r, const char *dir, const bench_opts *o)
{
    const char *file;
    lb_task_options to = task_options(RECIPES[r].task, RECIPES[r].method == M_MIXED || RECIPES[r].method == M_LOGN,
                                      &file);
    char data_path[4096], ck_path[4096];
    snprintf(data_path, sizeof data_path, "%s/%s", dir, file);
    snprintf(ck_path, sizeof ck_path, "%s/%s.h5", dir, RECIPES[r].name);
    struct stat sb;
    if (stat(data_path, &sb) != 0 && lb_task_generate(&to, data_path, NULL, NULL) != LB_OK) {
        fprintf(stderr, "bench_product: %s: %s\n", data_path, lb_last_error());
        return 1;
    }
    lb_dataset *data = lb_dataset_open(data_path);
    if (!data) {
        fprintf(stderr, "bench_product: %s\n", lb_last_error());
        return 1;
    }
    lb_model_config mc;
    model_config(RECIPES[r].task, RECIPES[r].method, data, to.seq_len, &mc);
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 100000000;
    tc.batch_size = BATCH;
    tc.schedule = lb_schedule_constant(tc.optim.lr);
    tc.schedule.warmup_steps = 50;
    tc.eval_every = 0;
    tc.threads = o->threads;
    lb_model *model = lb_model_new(&mc);
    lb_trainer *tr = model ? lb_trainer_new(model, data, &tc) : NULL;
    int rc = 1;
    if (!tr) {
        fprintf(stderr, "bench_product: %s: %s\n", RECIPES[r].name, lb_last_error());
    } else if (lb_trainer_save(tr, ck_path) != LB_OK) {
        fprintf(stderr, "bench_product: %s: %s\n", ck_path, lb_last_error());
    } else {
        double base = bench_current_rss_mib();
        bench_result res;
        if (bench_time(step_once, tr, bench_warmup(o, 2), bench_reps(o, 10), o->budget_s, &res) == 0) {
            char extra[9000];
            snprintf(extra, sizeof extra,
                     "\"recipe\":\"%s\",\"shape\":\"%s B=%d T=%lld\",\"data\":\"%s\",\"checkpoint\":\"%s\","
                     "\"seq_len\":%lld,\"batch\":%d",
                     RECIPES[r].name, lb_model_kind_name(mc.kind), BATCH, (long long)to.seq_len, data_path, ck_path,
                     (long long)to.seq_len, BATCH);
            bench_print_json("lookback", "PRODUCT", o->threads, &res, base, extra);
            rc = 0;
        }
    }
    lb_trainer_free(tr);
    lb_model_free(model);
    lb_dataset_close(data);
    return rc;
}

int main(int argc, char **argv)
{
    if (lb_omp_wait_defaults()) /* the lookback command's libgomp spin setting (tensor/threads.h) */
        execv("/proc/self/exe", argv);
    const char *dir = NULL;
    /* --dir DIR is ours; the rest is the harness's (bench_parse) */
    char *rest[64];
    int n = 0;
    for (int i = 0; i < argc && n < 63; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
            continue;
        }
        rest[n++] = argv[i];
    }
    rest[n] = NULL;
    bench_opts o;
    if (bench_parse(n, rest, &o) != 0 || (!dir && strcmp(o.workload, "list") != 0)) {
        fprintf(stderr, "usage: bench_product RECIPE|all|list --dir DIR [--threads N] [--warmup N] [--reps N] "
                        "[--quick] [--budget SECONDS]\n");
        return 2;
    }
    if (strcmp(o.workload, "list") == 0) {
        for (int r = 0; r < N_RECIPES; r++)
            printf("%s\n", RECIPES[r].name);
        return 0;
    }
    lb_set_num_threads(o.threads);
    int failed = 0, found = 0;
    for (int r = 0; r < N_RECIPES; r++)
        if (strcmp(o.workload, "all") == 0 || strcmp(o.workload, RECIPES[r].name) == 0) {
            found = 1;
            failed |= run_recipe(r, dir, &o);
        }
    if (!found) {
        fprintf(stderr, "bench_product: unknown recipe '%s' (bench_product list prints them)\n", o.workload);
        return 2;
    }
    return failed;
}
